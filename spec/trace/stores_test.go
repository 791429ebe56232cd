package trace

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// The traces of the shared stores run on their servers' clocks, in real
// time: a trace counts in microseconds (the clocks' resolution, so that
// every expiry and lease's end the stores compare is exact), and the TTL,
// lease and grace are short enough for expiry, leases ending and
// forgetting to happen within a run, and long enough that a retry at once
// finds the lease running on a loaded machine. realTick is how far a
// worker's random pause moves time.
const (
	realTick  = 50 * time.Millisecond
	realTTL   = time.Second
	realLease = 600 * time.Millisecond
	realGrace = 300 * time.Millisecond
)

// storeTimings are the timings of the shared stores' traces: Redis's
// scripts write "in doubt" when they find a lease ended, PostgreSQL reads
// the row so every time (pgledger's rowColumns).
var storeTimings = map[string]timing{
	"redis":    {tick: time.Microsecond, ttl: realTTL, lease: realLease, grace: realGrace, doubtWrites: "{TRUE}"},
	"postgres": {tick: time.Microsecond, ttl: realTTL, lease: realLease, grace: realGrace, doubtWrites: "{FALSE}"},
}

// storeEnv names the variable holding each shared store's URL.
var storeEnv = map[string]string{"redis": "MCP_CONFIRM_REDIS_URL", "postgres": "MCP_CONFIRM_POSTGRES_URL"}

// storeURL returns the URL of a shared store to trace, or skips t.
func storeURL(t *testing.T, kind string) string {
	u := os.Getenv(storeEnv[kind])
	if u == "" {
		t.Skipf("%s not set: the %s store's traces are NOT checked against the spec", storeEnv[kind], kind)
	}
	return u
}

// openStores opens, for each replica, a store of its own (its own client
// or connection pool) over one namespace of the shared store at u: the
// replicas share the store as server replicas behind a load balancer do.
// Each store's Observe hands its events to observe, labelled with its
// replica.
func openStores(t *testing.T, kind, u string, observe func(replica string, e ledger.Event)) map[string]ledger.Store {
	t.Helper()
	ctx := t.Context()
	var b [8]byte
	rand.Read(b[:])
	ns := "trace-" + hex.EncodeToString(b[:])
	stores := map[string]ledger.Store{}
	for _, r := range replicas {
		obs := func(_ context.Context, e ledger.Event) { observe(r, e) }
		switch kind {
		case "redis":
			s, err := redisledger.Open(ctx, u, redisledger.Options{Namespace: "mcp-confirm:{" + ns + "}:", Grace: realGrace, Observe: obs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			stores[r] = s
		case "postgres":
			s, err := pgledger.Open(ctx, u, pgledger.Options{Table: "mcp_confirm_trace", Namespace: ns, Grace: realGrace,
				SweepEvery: realTick, Observe: obs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			stores[r] = s
		default:
			t.Fatalf("no store %q", kind)
		}
	}
	if kind == "redis" {
		// The trace counter does not expire: drop it.
		t.Cleanup(func() {
			opts, err := redis.ParseURL(u)
			if err != nil {
				t.Error(err)
				return
			}
			c := redis.NewClient(opts)
			defer c.Close()
			if err := c.Del(context.Background(), "mcp-confirm:{"+ns+"}:trace").Err(); err != nil {
				t.Error(err)
			}
		})
	}
	return stores
}

// recordStore drives two replicas' ledgers, each over its own store of
// kind sharing one namespace, from workers goroutines at once, ops
// operations each, through recordConcurrent's workload on the store's own
// clock (a pause sleeps), and returns the NDJSON trace of the events the
// stores' Observe hooks reported, put in the order they took effect (see
// order).
func recordStore(t *testing.T, kind string, seed uint64, workers, ops int) []byte {
	t.Helper()
	u := storeURL(t, kind)
	tm := storeTimings[kind]
	var (
		mu    sync.Mutex
		lines []line
	)
	stores := openStores(t, kind, u, func(r string, e ledger.Event) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line{Event: e, Replica: r})
	})
	// The ledgers' clock, read for Expires, in the stores' microseconds.
	clock := func() time.Time { return time.Now().Truncate(time.Microsecond).UTC() }
	ledgers := map[string]*ledger.Ledger{}
	for r, s := range stores {
		l, err := ledger.New(s, ledger.Options{TTL: tm.ttl, Lease: tm.lease, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		ledgers[r] = l
	}
	drive(ledgers, seed, workers, ops, func(f func()) { f() }, time.Sleep, clock, realTick)
	mu.Lock()
	defer mu.Unlock()
	if err := order(lines, tm); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// order puts the events of a shared store in the order they took effect,
// as the store reports it: by the time each was decided on (an Issue's
// being its issuing clock, timing.at), then by the number its step drew.
// It fails if an event has no number (it came from no store step), if an
// Issue's issuing clock is after its store's step, or if, so ordered,
// the numbers of one confirmation's events do not increase -- the order
// of each confirmation's events must be the store's own (its steps on one
// confirmation run one at a time: Redis runs one script at a time,
// PostgreSQL's hold the confirmation's lock). Events of different
// confirmations are ordered by time alone: each is a step on its own
// record, so any order of theirs at one time is the same behaviour.
func order(lines []line, tm timing) error {
	for _, l := range lines {
		switch {
		case l.Seq == 0:
			return fmt.Errorf("event %+v: no sequence number: not reported by a store's step", l)
		case l.Action == ledger.ActionIssue && tm.at(event{Action: "Issue", Time: l.Time, Expires: l.Expires}).After(l.Time):
			return fmt.Errorf("event %+v: issued after the store's step", l)
		}
	}
	key := func(l line) time.Time {
		return tm.at(event{Action: string(l.Action), Time: l.Time, Expires: l.Expires})
	}
	slices.SortStableFunc(lines, func(a, b line) int {
		return cmp.Or(key(a).Compare(key(b)), cmp.Compare(a.Seq, b.Seq))
	})
	last := map[ledger.ID]uint64{}
	for _, l := range lines {
		if l.Seq <= last[l.ID] {
			return fmt.Errorf("confirmation %s: event %d after event %d at a later time: not the store's order", l.ID, l.Seq, last[l.ID])
		}
		last[l.ID] = l.Seq
	}
	return nil
}

// storeMutations are the lies the negative control of each shared
// store's trace tells (see mutations): a double redemption, a late
// Complete overwriting in doubt, a redemption awaiting approval, and a
// retry told another outcome than the recorded one.
var storeMutations = []string{"Redeem in_progress->ok", "Complete in_doubt->ok", "Redeem awaiting_approval->ok",
	"Redeem done, outcome flipped"}

// TestStoreTracesAreBehaviours checks with TLC that traces of ledgers over
// the real Redis and PostgreSQL stores, two replicas each with its own
// client of one shared namespace, driven from six goroutines at once, are
// behaviours of the specification: the events are what the stores' own
// steps reported (their Observe hooks: the script's reply, the statement's
// row), on the stores' clocks, in the stores' order. Its negative control
// changes one event of the same trace into a lie (storeMutations) and
// TLC must reject the trace up to it; the events before it are a prefix
// of a trace TLC accepted.
func TestStoreTracesAreBehaviours(t *testing.T) {
	jar := tlcJar(t)
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			tm := storeTimings[kind]
			ndjson := recordStore(t, kind, 3, 6, 40)
			evs, err := parse(ndjson)
			if err != nil {
				t.Fatal(err)
			}
			start := traceStart(evs, tm)
			if ok, _ := checkTimed(t, jar, evs, start, "shared", tm); !ok {
				n := firstRejectedTimed(t, jar, evs, start, tm)
				t.Fatalf("TLC rejected the %s trace at event %d: %+v\ntrace:\n%s", kind, n+1, evs[n], ndjson)
			}
			if missing := missingOutcomes(evs); len(missing) > 0 {
				t.Errorf("the trace has no %q", missing)
			}
			t.Logf("%d events from 6 goroutines on two replicas accepted", len(evs))
			for _, name := range storeMutations {
				t.Run(name, func(t *testing.T) {
					i := slices.IndexFunc(mutations, func(m mutation) bool { return m.name == name })
					m := mutations[i]
					n := slices.IndexFunc(evs, m.find)
					if n < 0 {
						t.Skipf("the trace has no event to change for %q", name)
					}
					bad := slices.Clone(evs[:n+1])
					m.change(&bad[n])
					if ok, out := checkTimed(t, jar, bad, start, "shared", tm); ok {
						t.Errorf("TLC accepted event %d %+v changed to %+v:\n%s", n+1, evs[n], bad[n], out)
					}
				})
			}
		})
	}
}

// traceStart is the time a trace timed by tm starts at: its first event's.
func traceStart(evs []event, tm timing) time.Time {
	if len(evs) == 0 {
		return time.Time{}
	}
	return tm.at(evs[0])
}

// firstRejectedTimed is firstRejected of a trace timed by tm.
func firstRejectedTimed(t *testing.T, jar string, evs []event, start time.Time, tm timing) int {
	t.Helper()
	lo, hi := 0, len(evs)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok, _ := checkTimed(t, jar, evs[:mid], start, "shared", tm); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
