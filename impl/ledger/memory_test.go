package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

func TestMemory(t *testing.T) {
	rapidtest.OutOfTree(t) // the model test's fail files
	ledgertest.Run(t, ledgertest.Factory{
		New: func(testing.TB) ledger.Store { return ledger.NewMemory(ledger.MemoryOptions{}) },
		NewAt: func(_ testing.TB, now func() time.Time) ledger.Store {
			return ledger.NewMemory(ledger.MemoryOptions{Now: now})
		},
	})
}

// fakeClock is a manually advanced clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func TestMemoryCaps(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: 5, MaxPendingPerPrincipal: 3, Now: clock.Now})
	l, err := ledger.New(m, ledger.Options{TTL: time.Minute, Lease: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(p string) (ledger.Confirmation, error) {
		return l.Issue(ctx, ledger.Confirmation{Tool: "t", Principal: p})
	}
	var alice []ledger.Confirmation
	for range 3 {
		c, err := issue("alice")
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, c)
	}
	if _, err := issue("alice"); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("4th pending for alice: %v, want ErrFull", err)
	}
	for range 2 {
		if _, err := issue("bob"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := issue("carol"); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("6th pending overall: %v, want ErrFull", err)
	}
	// Spending frees a slot for its principal and overall.
	if _, err := l.Redeem(ctx, alice[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := issue("alice"); err != nil {
		t.Fatalf("after a redeem, alice's slot should be free: %v", err)
	}
	// Expiry plus grace frees everything, without any goroutine.
	clock.Advance(time.Minute + ledger.DefaultGrace)
	if _, err := issue("carol"); err != nil {
		t.Fatalf("after expiry and grace: %v", err)
	}
	if remembered, pending := m.Len(); remembered != 1 || pending != 1 {
		t.Fatalf("after sweep: remembered %d, pending %d; want 1, 1", remembered, pending)
	}
}

// TestMemoryFullSweepsEveryShard fills the store's caps with
// confirmations of one shard (an id's first byte names its shard), lets
// them pass their expiry and grace, and adds to another shard: the Add
// sweeps only its own shard first, finds the caps reached, and must sweep
// the others before it refuses.
func TestMemoryFullSweepsEveryShard(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: 4, MaxPendingPerPrincipal: 4, Now: clock.Now})
	add := func(shard, n byte) error {
		return m.Add(ctx, ledger.Confirmation{ID: ledger.ID{shard, n}, Principal: "p", Expires: clock.t.Add(time.Minute)})
	}
	for n := range byte(4) {
		if err := add(0, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(1, 0); !errors.Is(err, ledger.ErrFull) {
		t.Fatalf("Add past the caps: %v, want ErrFull", err)
	}
	clock.Advance(time.Minute + ledger.DefaultGrace)
	if err := add(1, 1); err != nil {
		t.Fatalf("Add in another shard once the caps' holders are past grace: %v", err)
	}
	if remembered, pending := m.Len(); remembered != 1 || pending != 1 {
		t.Fatalf("remembered %d, pending %d; want 1, 1", remembered, pending)
	}
}

// TestMemoryFullSweepsEarlierExpiries is TestMemoryFullSweepsEveryShard
// with expiries before the store's clock started: their expiry offsets are
// negative, and the other shards must still find them due.
func TestMemoryFullSweepsEarlierExpiries(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: 4, Now: clock.Now})
	// One to a shard, so that no shard's own Add sweeps them.
	for shard := range byte(4) {
		c := ledger.Confirmation{ID: ledger.ID{shard}, Principal: "p", Expires: clock.t.Add(-time.Hour)}
		if err := m.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add(ctx, ledger.Confirmation{ID: ledger.ID{4}, Principal: "q", Expires: clock.t.Add(time.Minute)}); err != nil {
		t.Fatalf("Add once the caps' holders are past grace: %v", err)
	}
}

// TestMemoryExpiryAndGrace walks one store's clock past expiries, leases
// and grace: a pending confirmation expires; a done one is answered from
// its record after its expiry; everything is forgotten at its expiry or
// its lease's end, whichever is later, plus grace, never before.
func TestMemoryExpiryAndGrace(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{Grace: time.Minute, Now: clock.Now})
	l, _ := ledger.New(m, ledger.Options{TTL: time.Minute, Lease: 30 * time.Second, Now: clock.Now})
	at := func(d time.Duration) { clock.t = time.Unix(1_800_000_000, 0).Add(d) }
	redeem := func(id ledger.ID, want error) ledger.Record {
		t.Helper()
		rec, err := l.Redeem(ctx, id)
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("at %v: Redeem = %v, want %v", clock.t.Sub(time.Unix(1_800_000_000, 0)), err, want)
		}
		return rec
	}
	done, _ := l.Issue(ctx, ledger.Confirmation{}) // expires at 1m
	redeem(done.ID, nil)
	if err := l.Complete(ctx, done.ID, ledger.OutcomeDone, []byte("result")); err != nil {
		t.Fatal(err)
	}
	pending, _ := l.Issue(ctx, ledger.Confirmation{})
	at(50 * time.Second)
	late, _ := l.Issue(ctx, ledger.Confirmation{}) // expires at 1m50s

	at(time.Minute - time.Nanosecond)
	redeem(done.ID, ledger.ErrDone)
	at(time.Minute) // now == Expires: no longer redeemable, but answered
	redeem(pending.ID, ledger.ErrExpired)
	if rec := redeem(done.ID, ledger.ErrDone); string(rec.Outcome.Result) != "result" {
		t.Fatalf("replay after expiry: %q, want the result", rec.Outcome.Result)
	}
	at(time.Minute + 49*time.Second)
	redeem(late.ID, nil) // its lease ends at 2m19s, after its expiry
	at(2 * time.Minute)  // expiry + grace: forgotten, still refused
	redeem(done.ID, ledger.ErrUnknown)
	redeem(pending.ID, ledger.ErrUnknown)
	at(2*time.Minute + 50*time.Second) // late's expiry + grace: remembered
	redeem(late.ID, ledger.ErrInDoubt)
	at(3*time.Minute + 19*time.Second - time.Nanosecond)
	redeem(late.ID, ledger.ErrInDoubt)
	at(3*time.Minute + 19*time.Second) // its lease's end + grace
	redeem(late.ID, ledger.ErrUnknown)
	if remembered, _ := m.Len(); remembered != 0 {
		t.Fatalf("remembered %d entries after grace, want 0", remembered)
	}
}

// TestMemoryFlood issues far more never-answered questions than the cap,
// from many principals, and checks the store never holds more than the
// caps allow.
func TestMemoryFlood(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	const max = 1000
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: max, Now: clock.Now})
	l, _ := ledger.New(m, ledger.Options{TTL: time.Minute, Now: clock.Now})
	refused := 0
	for i := range 50 * max {
		if i%(10*max) == 0 {
			clock.Advance(30 * time.Second)
		}
		_, err := l.Issue(ctx, ledger.Confirmation{Principal: string(rune('a' + i%26))})
		if errors.Is(err, ledger.ErrFull) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
		if remembered, _ := m.Len(); remembered > max {
			t.Fatalf("store holds %d entries, cap is %d", remembered, max)
		}
	}
	if refused == 0 {
		t.Fatal("flood was never refused")
	}
}

func TestParseID(t *testing.T) {
	id := ledgertest.NewID(t)
	tests := []struct {
		in   string
		want error
	}{
		{id.String(), nil},
		{"", errors.New("short")},
		{id.String()[:31], errors.New("short")},
		{id.String() + "0", errors.New("long")},
		{"0123456789ABCDEF0123456789abcdef", errors.New("upper case")},
		{"0123456789abcdeg0123456789abcdef", errors.New("not hex")},
	}
	for _, tt := range tests {
		got, err := ledger.ParseID(tt.in)
		if (err == nil) != (tt.want == nil) {
			t.Errorf("ParseID(%q) error = %v, want error %v", tt.in, err, tt.want != nil)
		}
		if err == nil && got != id {
			t.Errorf("ParseID(%q) = %s", tt.in, got)
		}
	}
}

// TestMemoryExpiryRange checks that an expiry the store cannot represent
// (more than 100 years from its clock) is refused with a plain error, and
// leaves the store unchanged, while one just inside the range round-trips.
func TestMemoryExpiryRange(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{Now: clock.Now})
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		expires time.Time
		ok      bool
	}{
		{clock.t.Add(99 * year), true},
		{clock.t.Add(-99 * year), true},
		{clock.t.Add(101 * year), false},
		{clock.t.Add(-101 * year), false},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Time{}, false},
	} {
		c := ledgertest.Fresh(t)
		c.Expires = tc.expires
		err := m.Add(ctx, c)
		if (err == nil) != tc.ok {
			t.Fatalf("Add with expiry %v: %v, want ok=%v", tc.expires, err, tc.ok)
		}
		if !tc.ok {
			if errors.Is(err, ledger.ErrFull) || errors.Is(err, ledger.ErrExists) {
				t.Fatalf("Add with expiry %v: %v, want a plain error", tc.expires, err)
			}
			if _, err := m.Spend(ctx, c.ID, ledger.Acting, time.Minute); !errors.Is(err, ledger.ErrUnknown) {
				t.Fatalf("refused Add left something behind: Spend = %v", err)
			}
			continue
		}
		got, err := m.Spend(ctx, c.ID, ledger.Cancelled, 0)
		switch {
		case tc.expires.Before(clock.t):
			// Past its expiry plus grace: swept by the Spend itself.
			if !errors.Is(err, ledger.ErrUnknown) {
				t.Fatalf("Spend of a confirmation expired long ago: %v, want ErrUnknown", err)
			}
		case err != nil || !got.Expires.Equal(tc.expires):
			t.Fatalf("Spend = %v (expires %v), %v; want expires %v", got.ID, got.Expires, err, tc.expires)
		}
	}
}

// TestMemoryCapsConcurrent issues from many goroutines at once: exactly
// the caps' worth of questions must be accepted, never more, and a spent
// one frees its slot for the next.
func TestMemoryCapsConcurrent(t *testing.T) {
	ctx := context.Background()
	const maxPending, perPrincipal, goroutines = 100, 30, 16
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: maxPending, MaxPendingPerPrincipal: perPrincipal})
	l, err := ledger.New(m, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	principals := []string{"alice", "bob", "carol", "dave", "erin"} // 5 × 30 > 100
	var mu sync.Mutex
	accepted := map[string][]ledger.ID{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range 200 {
				p := principals[(g+i)%len(principals)]
				c, err := l.Issue(ctx, ledger.Confirmation{Principal: p})
				switch {
				case err == nil:
					mu.Lock()
					accepted[p] = append(accepted[p], c.ID)
					mu.Unlock()
				case !errors.Is(err, ledger.ErrFull):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for p, ids := range accepted {
		if len(ids) > perPrincipal {
			t.Errorf("%s: %d pending accepted, cap %d", p, len(ids), perPrincipal)
		}
		total += len(ids)
	}
	if total != maxPending {
		t.Fatalf("%d pending accepted, want exactly the cap %d", total, maxPending)
	}
	if _, pending := m.Len(); pending != maxPending {
		t.Fatalf("Len pending = %d, want %d", pending, maxPending)
	}
	// Spending any one frees one slot, for anyone under their own cap.
	for p, ids := range accepted {
		if _, err := l.Redeem(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Issue(ctx, ledger.Confirmation{Principal: p}); err != nil {
			t.Fatalf("after a redeem, %s: %v", p, err)
		}
		if _, err := l.Issue(ctx, ledger.Confirmation{Principal: p}); !errors.Is(err, ledger.ErrFull) {
			t.Fatalf("at the cap again, %s: %v, want ErrFull", p, err)
		}
		break
	}
}

// TestMemoryNewID checks the ids the store chooses for the ledger: distinct,
// one principal's all naming one shard (the low six bits of the first
// byte), and many principals spread over many shards.
func TestMemoryNewID(t *testing.T) {
	m := ledger.NewMemory(ledger.MemoryOptions{})
	seen := map[ledger.ID]bool{}
	shards := map[byte]bool{}
	for p := range 256 {
		principal := fmt.Sprintf("user-%d", p)
		first := m.NewID(principal)
		shards[first[0]&63] = true
		for range 16 {
			id := m.NewID(principal)
			if id[0]&63 != first[0]&63 {
				t.Fatalf("%s: ids %s and %s name different shards", principal, first, id)
			}
			if seen[id] {
				t.Fatalf("id %s twice", id)
			}
			seen[id] = true
		}
	}
	// 256 principals over 64 shards miss a given shard with probability
	// (63/64)^256 < 2 %: expect most of them.
	if len(shards) < 48 {
		t.Fatalf("256 principals landed in %d of 64 shards", len(shards))
	}
}
