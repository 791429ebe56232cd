package redisledger_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

const urlEnv = "MCP_CONFIRM_REDIS_URL"

// serverURL returns the Redis server the tests run against, or skips.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(urlEnv)
	if u == "" {
		t.Skipf("set %s (e.g. redis://127.0.0.1:6379/0) to run the Redis store tests", urlEnv)
	}
	return u
}

// newClient opens a client of its own on the test server.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// namespace returns a namespace no other test run uses, and deletes its
// keys when t ends.
func namespace(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	ns := "mcp-confirm-test:{" + hex.EncodeToString(b[:]) + "}:"
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	return ns
}

func deleteNamespace(t testing.TB, c *redis.Client, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, ns+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("cleanup of %s: %v", ns, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("cleanup of %s: %v", ns, err)
		}
	}
}

func newStore(t testing.TB, c redis.UniversalClient, opts redisledger.Options) *redisledger.Store {
	t.Helper()
	s, err := redisledger.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// factory makes stores over two independent clients: New uses the first,
// Replica the second with the same namespace, as two server replicas would.
func factory(t *testing.T) ledgertest.Factory {
	a, b := newClient(t), newClient(t)
	return ledgertest.Namespaced(
		func(t testing.TB) (ledger.Store, string) {
			ns := namespace(t, a)
			return newStore(t, a, redisledger.Options{Namespace: ns}), ns
		},
		func(t testing.TB, ns string) ledger.Store {
			return newStore(t, b, redisledger.Options{Namespace: ns})
		},
	)
}

func TestStore(t *testing.T) {
	rapidtest.OutOfTree(t) // the model test's fail files
	ledgertest.Run(t, factory(t))
}

// TestNamespaces checks that stores with different namespaces on one
// server are separate ledgers.
func TestNamespaces(t *testing.T) {
	ledgertest.Namespaces(t, factory(t))
}

// TestKeyExpiry checks that an entry's key expires at Expires+Grace on the
// server, and that an entry past Expires is expired, and past both
// forgotten.
func TestKeyExpiry(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	tests := []struct {
		name    string
		expires time.Duration // from now
		whole   bool          // Expires on a whole millisecond, else off one
		grace   time.Duration
		want    error
	}{
		{"pending", time.Hour, false, time.Minute, nil},
		{"pending, whole millisecond", time.Hour, true, time.Minute, nil},
		{"expired within grace", -time.Second, false, time.Minute, ledger.ErrExpired},
		{"expired past grace", -2 * time.Second, false, time.Second, ledger.ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := namespace(t, c)
			s := newStore(t, c, redisledger.Options{Namespace: ns, Grace: tt.grace})
			conf := ledgertest.Fresh(t)
			conf.Expires = time.Now().Add(tt.expires)
			if tt.whole {
				conf.Expires = conf.Expires.Truncate(time.Millisecond)
			} else if conf.Expires.Nanosecond()%int(time.Millisecond) == 0 {
				conf.Expires = conf.Expires.Add(time.Microsecond)
			}
			if err := s.Add(ctx, conf); err != nil {
				t.Fatal(err)
			}
			at, err := c.PExpireTime(ctx, ns+"c4:"+conf.ID.String()).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := conf.Expires.Add(tt.grace); tt.want != ledger.ErrUnknown {
				if at := time.UnixMilli(at.Milliseconds()); at.Before(want) || at.Sub(want) >= time.Millisecond {
					t.Fatalf("entry expires at %v, want %v rounded up to the millisecond", at, want)
				}
			} else if at != -2 {
				t.Fatalf("entry past its grace expires at %v, want no key", at)
			}
			got, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Spend = %v, want %v", err, tt.want)
			}
			// Expires round-trips to the nanosecond.
			if err == nil && !got.Expires.Equal(conf.Expires) {
				t.Fatalf("Expires = %v, want %v", got.Expires, conf.Expires)
			}
		})
	}
}

// TestMaxPending checks the namespace's cap: unexpired pending entries
// count, spent and expired ones do not.
func TestMaxPending(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	const max = 3
	s := newStore(t, c, redisledger.Options{Namespace: namespace(t, c), MaxPending: max})
	var pending []ledger.Confirmation
	for range max {
		conf := ledgertest.Fresh(t)
		if err := s.Add(ctx, conf); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, conf)
	}
	if err := s.Add(ctx, ledgertest.Fresh(t)); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("Add beyond the cap = %v, want ErrFull", err)
	}
	// An already expired confirmation is never pending: it fits.
	if err := s.Add(ctx, ledgertest.Expired(t)); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("Add of an expired entry when full = %v, want ErrFull", err)
	}
	if _, err := s.Spend(ctx, pending[0].ID, ledger.Cancelled, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, ledgertest.Expired(t)); err != nil {
		t.Fatalf("Add after a cancel: %v", err)
	}
	if err := s.Add(ctx, ledgertest.Fresh(t)); err != nil {
		t.Fatalf("Add after a cancel, expired entry not counted: %v", err)
	}
	if err := s.Add(ctx, ledgertest.Fresh(t)); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("Add beyond the cap again = %v, want ErrFull", err)
	}
	// A duplicate is reported as such even when full.
	if err := s.Add(ctx, pending[1]); !errors.Is(err, ledger.ErrExists) {
		t.Fatalf("duplicate Add when full = %v, want ErrExists", err)
	}
}

// TestMaxPendingPerPrincipal checks the principal's cap on what only Redis
// keeps: its set of ids, which Spend leaves alone, is trimmed to the
// pending ones when it reaches the cap, so it never holds more than the
// cap; expired confirmations do not count; and the set expires with its
// last-expiring member.
func TestMaxPendingPerPrincipal(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	ns := namespace(t, c)
	const max = 2
	s := newStore(t, c, redisledger.Options{Namespace: ns, MaxPendingPerPrincipal: max})
	h := sha256.Sum256([]byte("alice"))
	key := ns + "u:" + hex.EncodeToString(h[:])
	alice := func(expires time.Time) ledger.Confirmation {
		conf := ledgertest.Fresh(t)
		conf.Principal, conf.Expires = "alice", expires
		return conf
	}
	soon := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var pending []ledger.Confirmation
	for i := range max {
		conf := alice(soon.Add(time.Duration(i) * time.Minute))
		if err := s.Add(ctx, conf); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, conf)
	}
	if err := s.Add(ctx, alice(soon)); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("Add beyond alice's cap = %v, want ErrFull", err)
	}
	// Spent and expired ones make room; the set never outgrows the cap.
	for i := range 10 {
		if _, err := s.Spend(ctx, pending[0].ID, ledger.Acting, ledgertest.Long); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := s.Add(ctx, alice(time.Now().Add(-time.Second))); err != nil {
			t.Fatalf("round %d: an expired Add with room: %v", i, err)
		}
		pending[0] = alice(soon)
		if err := s.Add(ctx, pending[0]); err != nil {
			t.Fatalf("round %d: Add after a redeem: %v", i, err)
		}
		if n, err := c.ZCard(ctx, key).Result(); err != nil || n > max {
			t.Fatalf("round %d: alice's set holds %d (%v), cap %d", i, n, err, max)
		}
	}
	at, err := c.PExpireTime(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := pending[1].Expires; !time.UnixMilli(at.Milliseconds()).Equal(want) {
		t.Fatalf("alice's set expires at %v, want %v (its last member's expiry)", time.UnixMilli(at.Milliseconds()), want)
	}
}

// TestOptions checks that the constructors validate.
func TestOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	tests := []struct {
		name   string
		client redis.UniversalClient
		opts   redisledger.Options
		ok     bool
	}{
		{"zero", c, redisledger.Options{}, true},
		{"nil client", nil, redisledger.Options{}, false},
		{"negative grace", c, redisledger.Options{Grace: -1}, false},
		{"negative cap", c, redisledger.Options{MaxPending: -1}, false},
		{"negative principal cap", c, redisledger.Options{MaxPendingPerPrincipal: -1}, false},
	}
	for _, tt := range tests {
		_, err := redisledger.New(tt.client, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestGoneAway checks that a store whose server is unreachable, hangs, or
// was closed fails with an error that is not a ledger answer, within the
// caller's deadline.
func TestGoneAway(t *testing.T) {
	closed := func(t *testing.T) *redisledger.Store {
		s, err := redisledger.Open(context.Background(), serverURL(t), redisledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return s
	}
	at := func(t *testing.T, addr string) *redisledger.Store {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return newStore(t, c, redisledger.Options{})
	}
	ledgertest.GoneAway(t, closed, at, nil)
}

// TestOpenErrors checks that Open fails clearly, naming the server, and
// never echoes the password.
func TestOpenErrors(t *testing.T) {
	const pw = "s3cret"
	closed, silent := ledgertest.ClosedAddr(t), ledgertest.SilentAddr(t)
	tests := []ledgertest.OpenFailure{
		{Name: "nothing listening", URL: "redis://user:" + pw + "@" + closed + "/0", Want: closed},
		{Name: "server hangs", URL: "redis://:" + pw + "@" + silent + "/0", Want: silent},
		{Name: "unparsable", URL: "redis://user:" + pw + "@[::1/0", Want: "invalid URL"},
		{Name: "bad port", URL: "redis://user:" + pw + "@localhost:" + pw + "/0", Want: "invalid URL"},
		{Name: "bad database", URL: "redis://user:" + pw + "@127.0.0.1:6379/" + pw, Want: "invalid URL"},
		{Name: "bad scheme", URL: "http://user:" + pw + "@127.0.0.1:6379/0", Want: "invalid URL"},
		{Name: "bad replicas", URL: "redis://user:" + pw + "@127.0.0.1:6379/0?replicas=" + pw, Want: "replicas="},
		{Name: "negative replicas", URL: "redis://user:" + pw + "@127.0.0.1:6379/0?replicas=-1", Want: "replicas="},
		{Name: "bad wait", URL: "redis://user:" + pw + "@127.0.0.1:6379/0?replicas=1&wait=1", Want: "want a positive duration"},
		{Name: "wait without replicas", URL: "redis://user:" + pw + "@127.0.0.1:6379/0?wait=1s", Want: "without Replicas"},
		{Name: "wait under a millisecond", URL: "redis://user:" + pw + "@127.0.0.1:6379/0?replicas=1&wait=10us", Want: "WAIT counts in milliseconds"},
		{Name: "sentinels unreachable", URL: "redis-sentinel://user:" + pw + "@" + closed + "," + closed + "/mymaster?replicas=1", Want: "Sentinels " + closed + "," + closed},
		{Name: "sentinel without primary", URL: "redis-sentinel://user:" + pw + "@127.0.0.1:26379", Want: "the primary's name"},
		{Name: "sentinel bad address", URL: "redis-sentinel://user:" + pw + "@127.0.0.1/mymaster", Want: "want host:port"},
		{Name: "sentinel bad database", URL: "redis-sentinel://user:" + pw + "@127.0.0.1:26379/mymaster/" + pw, Want: "invalid URL"},
		{Name: "sentinel unknown option", URL: "redis-sentinel://user:" + pw + "@127.0.0.1:26379/mymaster?" + pw + "=1", Want: "unexpected option"},
		{Name: "sentinel password", URL: "redis-sentinel://127.0.0.1:26379,:/mymaster?sentinel_password=" + pw, Want: "want host:port"},
	}
	if u := os.Getenv(urlEnv); u != "" {
		// A password the server does not accept.
		pu, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, ledgertest.OpenFailure{
			Name: "wrong password", URL: "redis://nosuchuser:" + pw + "@" + pu.Addr + "/0", Want: pu.Addr,
		})
	}
	ledgertest.OpenErrors(t, pw, func(ctx context.Context, url string) error {
		s, err := redisledger.Open(ctx, url, redisledger.Options{})
		if err == nil {
			s.Close()
		}
		return err
	}, tests)
	// Negative control: the parser's own error does echo the password,
	// so the check above can fail.
	if _, err := redis.ParseURL("redis://user:" + pw + "@[::1/0"); err == nil || !strings.Contains(err.Error(), pw) {
		t.Fatalf("control: redis.ParseURL error %v does not contain the password", err)
	}
}

func TestOpen(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	s, err := redisledger.Open(context.Background(), serverURL(t), redisledger.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledgertest.RedeemOnce(t, s)
}

// TestPendingExpiry checks that the set of pending ids expires with its
// last-expiring member: an Add that expires later extends it, one that
// expires sooner never shortens it, and a set holding only expired ids
// is gone.
func TestPendingExpiry(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	ns := namespace(t, c)
	s := newStore(t, c, redisledger.Options{Namespace: ns})
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	tests := []struct {
		name    string
		expires time.Time
		want    time.Time // the set's expiry afterwards; zero: no set
	}{
		{"expired, empty namespace", time.Now().Add(-time.Second), time.Time{}},
		{"first", base, base},
		{"later", base.Add(time.Minute), base.Add(time.Minute)},
		{"sooner", base.Add(-time.Minute), base.Add(time.Minute)},
		{"expired", time.Now().Add(-time.Second), base.Add(time.Minute)},
		{"later, not a whole ms", base.Add(2*time.Minute + time.Microsecond), base.Add(2*time.Minute + time.Millisecond)},
	}
	for _, tt := range tests {
		conf := ledgertest.Fresh(t)
		conf.Expires = tt.expires
		if err := s.Add(ctx, conf); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		at, err := c.PExpireTime(ctx, ns+"pending").Result()
		if err != nil {
			t.Fatal(err)
		}
		if tt.want.IsZero() {
			if at != -2 { // no such key
				t.Fatalf("%s: set expires at %v, want no set", tt.name, at)
			}
			continue
		}
		if got := time.UnixMilli(at.Milliseconds()); !got.Equal(tt.want) {
			t.Fatalf("%s: set expires at %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestForeignKeys checks what the store makes of keys in its namespace
// that it did not write, or that were damaged: an entry of an earlier
// layout (a hash under "c:", a string under "c2:", a string and a token
// under "c3:" and "t3:") is unknown; a key of the wrong type, a mangled
// entry, or a record whose entry is gone is an error that is no ledger
// answer, and is left as it was.
func TestForeignKeys(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	expires := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	acting := "a" + strings.Repeat("\x00", 16) + fmt.Sprintf("%019d", time.Now().Add(time.Hour).UnixMicro()) + strings.Repeat("\x00", 16)
	tests := []struct {
		name  string
		key   string // under the namespace, %s for the id
		plant func(ctx context.Context, key string) error
		add   ledger.Result
		spend ledger.Result
	}{
		{"first layout", "c:%s", func(ctx context.Context, key string) error {
			return c.HSet(ctx, key, "state", "pending", "exp", expires).Err()
		}, ledger.ResultOK, ledger.ResultUnknown},
		{"second layout", "c2:%s", func(ctx context.Context, key string) error {
			return c.Set(ctx, key, "p"+strings.Repeat("\x00", 32)+strings.Repeat("0", 19-len(expires))+expires, 0).Err()
		}, ledger.ResultOK, ledger.ResultUnknown},
		{"third layout's token", "t3:%s", func(ctx context.Context, key string) error {
			return c.RPush(ctx, key, "p").Err()
		}, ledger.ResultOK, ledger.ResultUnknown},
		{"hash entry", "c4:%s", func(ctx context.Context, key string) error {
			return c.HSet(ctx, key, "state", "pending").Err()
		}, ledger.ResultError, ledger.ResultError},
		{"short entry", "c4:%s", func(ctx context.Context, key string) error {
			return c.Set(ctx, key, "p", 0).Err()
		}, ledger.ResultExists, ledger.ResultError},
		{"record not a string", "r4:%s", func(ctx context.Context, key string) error {
			return c.RPush(ctx, key, "a").Err()
		}, ledger.ResultError, ledger.ResultError},
		{"record, no entry", "r4:%s", func(ctx context.Context, key string) error {
			return c.Set(ctx, key, acting, 0).Err()
		}, ledger.ResultError, ledger.ResultError},
		{"pending set not a set", "pending", func(ctx context.Context, key string) error {
			return c.Set(ctx, key, "x", 0).Err()
		}, ledger.ResultError, ledger.ResultUnknown}, // a Spend of an unknown id never reads it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := namespace(t, c)
			s := newStore(t, c, redisledger.Options{Namespace: ns})
			conf := ledgertest.Fresh(t)
			key := ns + tt.key
			if strings.Contains(key, "%s") {
				key = fmt.Sprintf(key, conf.ID)
			}
			if err := tt.plant(ctx, key); err != nil {
				t.Fatal(err)
			}
			before, err := c.Dump(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long)
			if got := ledger.ResultOf(err); got != tt.spend {
				t.Fatalf("Spend = %v (%s), want %s", err, got, tt.spend)
			}
			t.Logf("Spend: %v", err)
			err = s.Add(ctx, conf)
			if got := ledger.ResultOf(err); got != tt.add {
				t.Fatalf("Add = %v (%s), want %s", err, got, tt.add)
			}
			t.Logf("Add: %v", err)
			if after, err := c.Dump(ctx, key).Result(); err != nil || after != before {
				t.Fatalf("the planted key is %q, %v; want %q", after, err, before)
			}
		})
	}
}

// TestExpiryOnServerClock checks expiry against Redis's own clock, around
// the instant itself. A confirmation is pending while the server's clock
// (TIME, in microseconds) is before its Expires (the cut). Of
// confirmations that all expire at one instant, spent one after another as
// the cut passes, each Spend that ends before it (by TIME read right
// after) must succeed, and each that begins at or after it (by TIME read
// right before) must be refused as expired. Instants on and off a whole
// millisecond are tried.
//
// The test's timing is measured, not assumed: a fixed second for the Adds
// and 100 ms of Spends before the cut failed on a loaded machine (400 Adds
// took up to 19 s, a sleep overslept the whole window). The cut is set
// after the Adds as long as they were measured to take, the Spends begin a
// window before it sized from the measured round trip of a Spend and
// lateness of a sleep, and an attempt that did not straddle the cut (the
// machine stalled longer than measured) is made again, on fresh
// confirmations, sized from what it measured. Every answer of every
// attempt is checked.
func TestExpiryOnServerClock(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	now := func() time.Time {
		t.Helper()
		at, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	const (
		afterCut    = 21 // Spends after the cut an attempt makes
		maxAttempts = 6
	)
	// fresh returns a store of its own holding expiryPool confirmations of one
	// principal expiring at expires, the confirmations, and how long their
	// Adds took.
	fresh := func(expires time.Time) (*redisledger.Store, []ledger.Confirmation, time.Duration) {
		s := newStore(t, c, redisledger.Options{Namespace: namespace(t, c), MaxPendingPerPrincipal: expiryPool})
		began := time.Now()
		confs := make([]ledger.Confirmation, expiryPool)
		for i := range confs {
			confs[i] = ledgertest.Fresh(t)
			confs[i].Expires = expires
			if err := s.Add(ctx, confs[i]); err != nil {
				t.Fatal(err)
			}
		}
		return s, confs, time.Since(began)
	}
	tm := measureSpends(t, c, now)
	t.Logf("measured: %v for %d Adds, %v a Spend's round, a sleep up to %v late", tm.adds, expiryPool, tm.round, tm.late)
	for _, offset := range []time.Duration{0, 500 * time.Microsecond, 999 * time.Microsecond} {
		for attempt := 1; ; attempt++ {
			w := tm.window()
			// Spends at most every w/100: a window sized for slow rounds
			// does not use up the confirmations before the cut when the
			// rounds are fast again.
			gap := max(200*time.Microsecond, w/100)
			expires := now().Truncate(time.Millisecond).Add(2*tm.adds + w + offset)
			s, confs, took := fresh(expires)
			tm.adds = max(tm.adds, took)
			cut := expires
			before, after := 0, 0
			if d := cut.Sub(now()); d >= w {
				time.Sleep(d - w)
				start := cut.Add(-w)
				for i, conf := range confs {
					t0 := now()
					if i == 0 {
						tm.late = max(tm.late, t0.Sub(start))
					}
					_, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long)
					t1 := now()
					switch {
					case t1.Before(cut) && err != nil:
						t.Fatalf("offset %v: Spend ending at %v, before %v: %v", offset, t1, cut, err)
					case !t0.Before(cut) && !errors.Is(err, ledger.ErrExpired):
						t.Fatalf("offset %v: Spend beginning at %v, not before %v (Expires %v): %v, want ErrExpired", offset, t0, cut, expires, err)
					case err != nil && !errors.Is(err, ledger.ErrExpired):
						t.Fatalf("offset %v: Spend = %v", offset, err)
					}
					tm.round = max(tm.round, t1.Sub(t0))
					if t1.Before(cut) {
						before++
					} else if !t0.Before(cut) {
						after++
					}
					if after >= afterCut {
						break
					}
					time.Sleep(gap)
				}
			}
			// Both sides were tried, or the check above proved nothing.
			if before > 0 && after > 0 {
				t.Logf("offset %v: %d spends before the cut, %d after (window %v, attempt %d)", offset, before, after, w, attempt)
				break
			}
			if attempt == maxAttempts {
				t.Fatalf("offset %v: %d spends before the cut and %d after in attempt %d (window %v; measured %+v): the instant was not straddled", offset, before, after, attempt, w, tm)
			}
			t.Logf("offset %v: attempt %d did not straddle the cut (%d before, %d after, window %v, Adds took %v): again, sized from what it measured", offset, attempt, before, after, w, took)
			// The machine is slower than measured: twice as much room for
			// each, on top of what this attempt saw.
			tm.adds, tm.round, tm.late = 2*tm.adds, 2*tm.round, 2*tm.late
		}
	}
}

// expiryPool is how many confirmations an attempt of
// TestExpiryOnServerClock adds, all expiring at its cut. Its Spends are at
// least w/100 apart and begin w before the cut, so at most 101 end before
// it; 21 begin after it.
const expiryPool = 150

// spendTiming is what TestExpiryOnServerClock measured of this machine and
// server, the longest of each seen.
type spendTiming struct {
	adds  time.Duration // the expiryPool Adds of an attempt
	round time.Duration // one Spend between two reads of TIME
	late  time.Duration // how late a short sleep wakes
}

// window is how long before the cut the Spends begin: room for the sleep
// before them to wake late and for several rounds, however fast the
// machine.
func (tm spendTiming) window() time.Duration {
	return max(20*time.Millisecond, 2*tm.late+10*tm.round)
}

// measureSpends measures 20 Adds, Spends and short sleeps in a namespace
// of its own, and sizes the first attempt's Adds from them.
func measureSpends(t *testing.T, c *redis.Client, now func() time.Time) spendTiming {
	ctx := context.Background()
	s := newStore(t, c, redisledger.Options{Namespace: namespace(t, c)})
	var tm spendTiming
	var adds time.Duration
	const n = 20
	for range n {
		conf := ledgertest.Fresh(t)
		began := time.Now()
		if err := s.Add(ctx, conf); err != nil {
			t.Fatal(err)
		}
		adds += time.Since(began)
		t0 := now()
		if _, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long); err != nil {
			t.Fatal(err)
		}
		tm.round = max(tm.round, now().Sub(t0))
		slept := time.Now()
		time.Sleep(time.Millisecond)
		tm.late = max(tm.late, time.Since(slept)-time.Millisecond)
	}
	tm.adds = adds * expiryPool / n
	return tm
}

// TestCaps runs the shared check of the caps over two clients, as two
// replicas would make their Adds.
func TestCaps(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ledgertest.Caps(t, func(t testing.TB, maxPending, perPrincipal int) (ledger.Store, ledger.Store) {
		opts := redisledger.Options{Namespace: namespace(t, a), MaxPending: maxPending, MaxPendingPerPrincipal: perPrincipal}
		return newStore(t, a, opts), newStore(t, b, opts)
	})
}
