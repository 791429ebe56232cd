package trace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// replicaKey carries, in an operation's context, the replica that made it,
// so the store's Observe hook can label the event.
type replicaKey struct{}

// concurrentStart is the clock's reading when a concurrent run begins.
var concurrentStart = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// recordConcurrent drives two replicas' ledgers from workers goroutines at
// once, ops operations each, over one shared memory store ("shared") or a
// store per replica ("memory"), and returns the NDJSON trace the stores'
// Observe hooks wrote under their locks: the order the operations took
// effect, which is what trace validation needs.
//
// Time moves in ticks, each under the write half of a lock whose read half
// every operation holds, so no operation straddles a tick and every event's
// time is the clock at its step.
//
// Most operations are random: issue, redeem, cancel, on recent ids (so
// workers race on them) and older ones, and ids never issued. A worker that
// redeems a confirmation completes it, through the same replica, at once,
// in a later operation (its lease may have ended by then), or never (a
// crash). One operation in ten is instead a scenario (see scenario; the
// stories in turn, across the workers), its
// steps interleaved with the other workers', so that every answer occurs in
// every run.
func recordConcurrent(t *testing.T, deployment string, seed uint64, workers, ops int) []byte {
	t.Helper()
	var (
		clockMu sync.RWMutex
		now     = concurrentStart
		outMu   sync.Mutex
		out     bytes.Buffer
	)
	clock := func() time.Time { return now } // read with clockMu held
	// step runs f as one operation: the clock does not move meanwhile.
	step := func(f func()) {
		clockMu.RLock()
		defer clockMu.RUnlock()
		f()
	}
	advance := func(d time.Duration) {
		clockMu.Lock()
		defer clockMu.Unlock()
		now = now.Add(d)
	}
	enc := json.NewEncoder(&out)
	observe := func(ctx context.Context, e ledger.Event) {
		outMu.Lock()
		defer outMu.Unlock()
		if err := enc.Encode(line{Event: e, Replica: ctx.Value(replicaKey{}).(string)}); err != nil {
			t.Error(err)
		}
	}
	newStore := func() ledger.Store {
		return ledger.NewMemory(ledger.MemoryOptions{Grace: grace, Now: clock, Observe: observe})
	}
	shared := newStore()
	ledgers := map[string]*ledger.Ledger{}
	for _, r := range replicas {
		store := shared
		if deployment == "memory" {
			store = newStore()
		}
		l, err := ledger.New(store, ledger.Options{TTL: ttl, Lease: lease, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		ledgers[r] = l
	}
	drive(ledgers, seed, workers, ops, step, advance, clock, tick)
	return out.Bytes()
}

// drive runs the workload of recordConcurrent on ledgers, one per replica,
// from workers goroutines, ops operations each: step runs one operation,
// advance moves the clock (by d, or one tick), now reads it.
func drive(ledgers map[string]*ledger.Ledger, seed uint64, workers, ops int, step func(func()), advance func(time.Duration), now func() time.Time, tick time.Duration) {
	var idsMu sync.Mutex
	var stories atomic.Int64
	var issued []ledger.ID
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var acting []owed // this worker's: redeemed, not completed
			on := func(r string) context.Context { return context.WithValue(context.Background(), replicaKey{}, r) }
			complete := func(o owed) {
				_ = ledgers[o.replica].Complete(on(o.replica), o.id, kinds[rng.IntN(len(kinds))], []byte(`{"deleted":true}`))
			}
			<-startLine
			for range ops {
				p := rng.IntN(100)
				if p < 4 {
					advance(tick)
					continue
				}
				r := replicas[rng.IntN(len(replicas))]
				if p < 14 {
					// In turn, so that every run plays every story.
					scenario(rng, int(stories.Add(1)-1)%8, ledgers[r], on(r), step, advance, now)
					continue
				}
				ctx := on(r)
				idsMu.Lock()
				var id ledger.ID
				if n := len(issued); n > 0 && rng.IntN(10) > 0 {
					id = issued[max(0, n-1-rng.IntN(4))] // recent ids, so workers race on them
					if rng.IntN(4) == 0 {
						id = issued[max(0, n-1-rng.IntN(16))] // and older ones, answered after their expiry
					}
				} else {
					for i := range id {
						id[i] = byte(rng.Uint32()) // an id never issued
					}
				}
				idsMu.Unlock()

				step(func() {
					switch p := rng.IntN(100); {
					case p < 25:
						if c, err := ledgers[r].Issue(ctx, ledger.Confirmation{Tool: "delete_file", Approval: drawApproval(rng)}); err == nil {
							idsMu.Lock()
							issued = append(issued, c.ID)
							idsMu.Unlock()
						}
					case p < 65:
						if _, err := ledgers[r].Redeem(ctx, id); err == nil {
							switch q := rng.IntN(10); {
							case q < 5:
								complete(owed{id, r})
							case q < 9:
								acting = append(acting, owed{id, r})
							}
						}
					case p < 70 && len(acting) > 0:
						n := rng.IntN(len(acting))
						o := acting[n]
						acting = slices.Delete(acting, n, n+1)
						complete(o)
					case p < 80:
						_, _ = ledgers[r].Decide(ctx, id, approvers[rng.IntN(len(approvers))], rng.IntN(5) != 0)
					default:
						_, _ = ledgers[r].Cancel(ctx, id)
					}
				})
			}
		})
	}
	close(startLine)
	wg.Wait()
}

// concurrentOutcomes are the events every concurrent trace must contain,
// or its acceptance would mean little.
var concurrentOutcomes = []string{"Issue ok", "Redeem ok", "Cancel ok", "Redeem in_progress", "Redeem done",
	"Redeem in_doubt", "Redeem expired", "Redeem unknown", "Complete ok", "Complete in_doubt",
	"Decide ok", "Decide decided", "Decide self_approval", "Decide not_approver", "Redeem awaiting_approval", "Redeem declined"}

// missingOutcomes returns the concurrentOutcomes evs lacks.
func missingOutcomes(evs []event) []string {
	var missing []string
	for _, want := range concurrentOutcomes {
		if !slices.ContainsFunc(evs, func(e event) bool { return e.Action+" "+e.Result == want }) {
			missing = append(missing, want)
		}
	}
	return missing
}

// TestConcurrentTracesAreBehaviours checks with TLC that traces of ledgers
// driven from many goroutines at once are behaviours of the specification,
// in both deployments.
func TestConcurrentTracesAreBehaviours(t *testing.T) {
	jar := tlcJar(t)
	for _, deployment := range []string{"shared", "memory"} {
		t.Run(deployment, func(t *testing.T) {
			ndjson := recordConcurrent(t, deployment, 7, 8, 40)
			evs, err := parse(ndjson)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, e := range evs {
				seen[e.Action+" "+e.Result]++
			}
			if ok, _ := check(t, jar, evs, concurrentStart, deployment); !ok {
				n := firstRejected(t, jar, evs, concurrentStart, deployment)
				t.Fatalf("TLC rejected the concurrent trace at event %d: %+v", n+1, evs[n])
			}
			if missing := missingOutcomes(evs); len(missing) > 0 {
				t.Errorf("the trace has no %q; outcomes: %v", missing, seen)
			}
			t.Logf("%d events from 8 goroutines accepted; outcomes: %v", len(evs), seen)
		})
	}
}

// A committedTrace is a trace recorded from a concurrent run and checked
// by TLC, whose output is committed beside it with the SHA-256 of every
// file the check read: testdata/NAME.ndjson, .out and .sha256.
type committedTrace struct {
	name   string
	tm     timing
	start  func([]event) time.Time
	record func(*testing.T) []byte
}

// committedTraces are the committed traces: of the memory store shared by
// two replicas, and of the Redis and PostgreSQL stores, two replicas each
// with its own client.
var committedTraces = []committedTrace{
	{"concurrent-shared", simulated, func([]event) time.Time { return concurrentStart },
		func(t *testing.T) []byte { return recordConcurrent(t, "shared", 11, 8, 40) }},
	{"redis-shared", storeTimings["redis"], func(evs []event) time.Time { return traceStart(evs, storeTimings["redis"]) },
		func(t *testing.T) []byte { return recordStore(t, "redis", 11, 8, 40) }},
	{"postgres-shared", storeTimings["postgres"], func(evs []event) time.Time { return traceStart(evs, storeTimings["postgres"]) },
		func(t *testing.T) []byte { return recordStore(t, "postgres", 11, 8, 40) }},
}

func (c committedTrace) file(ext string) string { return filepath.Join("testdata", c.name+ext) }

// checkedFiles are the files whose content c's committed TLC output speaks
// for, relative to this package.
func (c committedTrace) checkedFiles() []string {
	return []string{"../Ledger.tla", "../TraceLedger.tla", c.file(".ndjson"), c.file(".out")}
}

func (c committedTrace) sums() (string, error) {
	var b strings.Builder
	for _, f := range c.checkedFiles() {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), filepath.Base(f))
	}
	return b.String(), nil
}

// TestCommittedTraceWasChecked always runs (CI has no TLC): each committed
// trace and TLC's committed verdict on it must still match the spec that
// verdict was reached on, byte for byte, the verdict must be acceptance,
// and the trace must contain every outcome a concurrent trace must.
func TestCommittedTraceWasChecked(t *testing.T) {
	for _, c := range committedTraces {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile(c.file(".sha256"))
			if err != nil {
				t.Fatalf("%v\nrecord and check one with: MCP_CONFIRM_RECORD_TRACE=1 TLA2TOOLS_JAR=... go test ./spec/trace -run TestRecordCommittedTrace/%s", err, c.name)
			}
			got, err := c.sums()
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("the spec, the trace or TLC's output changed since TLC checked the committed trace:\nnow:\n%s\nchecked:\n%s\nre-check with: MCP_CONFIRM_RECORD_TRACE=1 TLA2TOOLS_JAR=... go test ./spec/trace -run TestRecordCommittedTrace/%s", got, want, c.name)
			}
			out, err := os.ReadFile(c.file(".out"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), accepted) {
				t.Fatalf("the committed TLC output does not accept the trace (no %q)", accepted)
			}
			ndjson, evs := c.read(t)
			if missing := missingOutcomes(evs); len(missing) > 0 {
				t.Errorf("the committed trace has no %q: record one that does", missing)
			}
			t.Logf("committed trace: %d events, accepted by TLC (sha256 %s…)", len(evs), hex.EncodeToString(func() []byte { s := sha256.Sum256(ndjson); return s[:6] }()))
		})
	}
}

// read reads and parses the committed trace.
func (c committedTrace) read(t *testing.T) ([]byte, []event) {
	t.Helper()
	ndjson, err := os.ReadFile(c.file(".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := parse(ndjson)
	if err != nil {
		t.Fatal(err)
	}
	return ndjson, evs
}

// TestRecordCommittedTrace re-checks each committed trace with TLC, and
// with MCP_CONFIRM_RECORD_TRACE=1 records a new one first (the stores'
// need their servers), then rewrites the committed output and sums.
func TestRecordCommittedTrace(t *testing.T) {
	jar := tlcJar(t)
	for _, c := range committedTraces {
		t.Run(c.name, func(t *testing.T) {
			if os.Getenv("MCP_CONFIRM_RECORD_TRACE") == "1" {
				if err := os.WriteFile(c.file(".ndjson"), c.record(t), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, evs := c.read(t)
			ok, out := checkTimed(t, jar, evs, c.start(evs), "shared", c.tm)
			if !ok {
				t.Fatalf("TLC rejects the committed trace:\n%s", out)
			}
			if os.Getenv("MCP_CONFIRM_RECORD_TRACE") != "1" {
				return
			}
			if err := os.WriteFile(c.file(".out"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := c.sums()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.file(".sha256"), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("recorded and checked %d events", len(evs))
		})
	}
}
