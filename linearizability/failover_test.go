package linearizability

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/internal/failover"
)

// TestRedisFailover kills the Redis primary of a primary, a replica and
// three Sentinels while approvals are redeemed and acted on, through two
// handles (two server replicas) on one redis-sentinel:// URL, and retries
// every approval through the replica the Sentinels promote (see
// runFailover). With replicas=1 (every write waits for the replica) no
// approval acts twice, every retry is answered with the outcome its one
// action recorded or "in doubt", and porcupine finds the whole history
// linearizable across the failover. The control, the same without WAIT,
// must act twice and be found not linearizable: else the scenario proved
// nothing. Both open through storeurl.Open, as the server does: it
// accepts the first and refuses the second (ErrNotDurable), which is
// then opened with AllowRollback. The stores keep the audit trail, and
// after each run the promoted primary's trail agrees with its ledger
// (trailAgrees), the control's too: a record and its transition are one
// script, replicated — or lost — together.
func TestRedisFailover(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		safe, stall bool
	}{
		{"replicas=1/stalled", "replicas=1&wait=500ms", true, true},
		{"replicas=1/mid-flow", "replicas=1&wait=500ms", true, false},
		{"control: no WAIT/stalled", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := failover.StartRedis(t)
			stores := openThrough(t, set.URL(tc.query), tc.safe, true)
			c := failoverCase{
				stores: stores, crash: set.Crash,
				promote: set.WaitPromoted, reprovision: set.AttachReplica, opTimeout: 3 * time.Second,
			}
			if tc.stall {
				c.stall = set.Relay.Stall
			}
			runFailover(t, c).verdict(t, tc.safe)
			trailAgrees(t, stores[0])
		})
	}
}

// TestPostgresFailover kills the PostgreSQL primary (every process of it)
// of a primary and a standby while approvals are redeemed and acted on,
// through two handles on one multi-host URL
// (target_session_attrs=read-write), promotes the standby, and retries
// every approval through it (see runFailover). With a synchronous
// standby no approval acts twice, every retry is answered with the
// outcome its one action recorded or "in doubt", and porcupine finds the
// history linearizable across the failover. The control, an asynchronous
// standby, must act twice and be found not linearizable. storeurl.Open
// accepts the first and refuses the second (ErrNotDurable).
func TestPostgresFailover(t *testing.T) {
	for _, tc := range []struct {
		name               string
		synchronous, stall bool
	}{
		{"synchronous standby/stalled", true, true},
		{"synchronous standby/mid-flow", true, false},
		{"control: asynchronous standby/stalled", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := failover.StartPostgres(t, tc.synchronous)
			stores := openThrough(t, set.URL(), tc.synchronous, false)
			c := failoverCase{stores: stores, crash: set.Crash, promote: set.Promote, opTimeout: 2 * time.Second}
			if tc.stall {
				c.stall = set.Relay.Stall
			}
			runFailover(t, c).verdict(t, tc.synchronous)
		})
	}
}

// openThrough opens two handles on the store rawURL names, as two server
// replicas do at start-up (storeurl.Open: connect, then the durability
// check). A safe store must pass the check; the control must be refused
// with ErrNotDurable, and is then opened accepting the risk
// (AllowRollback), as an operator could. With audited, the stores keep
// the audit trail.
func openThrough(t *testing.T, rawURL string, safe, audited bool) []ledger.Store {
	t.Helper()
	ctx := t.Context()
	opts := storeurl.Options{Logger: slog.New(slog.DiscardHandler), Audit: audited}
	if !safe {
		_, _, err := storeurl.Open(ctx, rawURL, "failover", opts)
		if !errors.Is(err, storeurl.ErrNotDurable) {
			t.Fatalf("the control store was not refused at start-up: %v, want ErrNotDurable", err)
		}
		t.Logf("refused at start-up, as it should be: %v", err)
		opts.AllowRollback = true
	}
	stores := make([]ledger.Store, 2)
	for i := range stores {
		s, release, err := storeurl.Open(ctx, rawURL, "failover", opts)
		if err != nil {
			t.Fatalf("open %s: %v", rawURL, err)
		}
		t.Cleanup(release)
		stores[i] = s
	}
	return stores
}

// trailAgrees checks the audit trail of s, after a failover run, against
// its ledger (trailProblems); TestTrailProblems is its control.
func trailAgrees(t *testing.T, s ledger.Store) {
	t.Helper()
	tr := storeurl.Trail(s)
	if tr == nil {
		t.Fatal("the store keeps no audit trail")
	}
	n, problems, err := trailProblems(t.Context(), tr)
	if err != nil {
		t.Fatalf("the trail after the failover: %v", err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("the trail after the failover: %d records, verified", n)
}

// trailProblems verifies the chain of tr and checks that every approval
// of a failover run (each redeemed in the end, on the promoted primary at
// the latest) has exactly one record of its redemption and at most one
// of its outcome. A record kept while its transition was lost shows as a
// second redemption's record; a transition without its record, as none.
func trailProblems(ctx context.Context, tr audit.Trail) (records uint64, problems []string, err error) {
	sum, err := audit.Verify(tr.Records(ctx, 1), nil, audit.VerifyOptions{})
	if err != nil {
		return 0, nil, err
	}
	redeemed, completed := map[string]int{}, map[string]int{}
	for line, err := range tr.Records(ctx, 1) {
		if err != nil {
			return 0, nil, err
		}
		r, err := audit.Parse(line)
		if err != nil {
			return 0, nil, err
		}
		switch {
		case r.Op == audit.OpRedeem && r.Result == "ok":
			redeemed[r.ID]++
		case r.Op == audit.OpComplete && r.Result == "ok":
			completed[r.ID]++
		}
	}
	for i := range failoverApprovals {
		id := ledger.ID{0: 0xfa, 15: byte(i)}.String()
		if redeemed[id] != 1 || completed[id] > 1 {
			problems = append(problems, fmt.Sprintf("approval %s: %d records of its redemption, %d of its outcome; want 1 and at most 1", id, redeemed[id], completed[id]))
		}
	}
	return sum.Records, problems, nil
}

// sliceTrail is a trail of lines in memory.
type sliceTrail [][]byte

func (s sliceTrail) Head(context.Context) (uint64, audit.Hash, error) { return 0, audit.Hash{}, nil }
func (s sliceTrail) Records(context.Context, uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for _, l := range s {
			if !yield(l, nil) {
				return
			}
		}
	}
}
func (s sliceTrail) AddCheckpoint(context.Context, audit.Checkpoint) error   { return nil }
func (s sliceTrail) Checkpoints(context.Context) ([]audit.Checkpoint, error) { return nil, nil }

// TestTrailProblems is trailProblems' control: a chained trail with one
// redemption and outcome per approval passes; one with an approval's
// redemption missing, or recorded twice, or its outcome twice, does not.
func TestTrailProblems(t *testing.T) {
	chain := func(skip, twice int, op audit.Op) sliceTrail {
		var tr sliceTrail
		var prev audit.Hash
		add := func(op audit.Op, id ledger.ID) {
			r := audit.Record{Op: op, ID: id.String(), Seq: uint64(len(tr) + 1), Time: 1, Result: "ok", Prev: prev}
			tr = append(tr, r.Canonical())
			prev = r.Sum()
		}
		for i := range failoverApprovals {
			id := ledger.ID{0: 0xfa, 15: byte(i)}
			for _, o := range []audit.Op{audit.OpRedeem, audit.OpComplete} {
				if i == skip && o == op {
					continue
				}
				add(o, id)
				if i == twice && o == op {
					add(o, id)
				}
			}
		}
		return tr
	}
	for _, tc := range []struct {
		name string
		tr   sliceTrail
		bad  bool
	}{
		{"one of each", chain(-1, -1, ""), false},
		{"a redemption without its record", chain(3, -1, audit.OpRedeem), true},
		{"a redemption recorded twice", chain(-1, 5, audit.OpRedeem), true},
		{"an outcome recorded twice", chain(-1, 7, audit.OpComplete), true},
	} {
		_, problems, err := trailProblems(t.Context(), tc.tr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (len(problems) > 0) != tc.bad {
			t.Errorf("%s: problems %v, want some: %v", tc.name, problems, tc.bad)
		}
	}
}

// A failoverCase is a replicated store under test: handles on it that
// follow a failover, and how to stall its replication (nil: the primary
// is killed with replication flowing), crash its primary and wait for the
// replica's promotion.
type failoverCase struct {
	stores  []ledger.Store
	stall   func()
	crash   func()
	promote func() time.Duration
	// reprovision, if set, gives the promoted primary a replica of its
	// own, without which a store that waits for one fails every write.
	reprovision func() time.Duration
	opTimeout   time.Duration // bounds each operation: one that hangs is outcome unknown
}

// failoverApprovals is how many approvals a failover run issues: half are
// redeemed with replication flowing, half with it stalled, across the
// crash.
const failoverApprovals = 16

// failoverLease is the lease of every redemption: the retries after the
// failover wait for it to end, so that an approval is answered from its
// record (done or in doubt), not in progress.
const failoverLease = time.Second

// A failoverResult is what a failover run saw.
type failoverResult struct {
	acts    map[ledger.ID]int            // times each approval's action ran
	answers map[ledger.Result]int        // the last retry's answers, one per approval
	wrong   []string                     // approvals answered otherwise than from their record
	report  Report                       // porcupine's verdict on the whole history
	timing  map[string]time.Duration     // phases, for the log
	phase   map[ledger.Result]int        // first answers of the redemptions racing across the crash
	byPhase map[string]map[ledger.ID]int // acts per phase
}

// runFailover runs one failover through the handles of c, two goroutines
// per approval racing each redemption (one per handle), every operation
// recorded for porcupine:
//
//  1. issue failoverApprovals approvals;
//  2. redeem the first half, acting on each redemption (counted) and
//     recording its outcome (Complete, done, with a result naming it);
//  3. stall replication (or not), redeem the second half the same way,
//     and, once every racer has had an answer or a failure (a quarter of
//     them, not stalled), kill the primary and sever its link to the
//     replica; the racers keep retrying on failures, through the crash
//     and the promotion;
//  4. once promoted, and every lease has ended, retry every approval
//     through both handles, acting on any redemption, and then once more
//     to read its answer.
//
// An approval whose redemption succeeded was acted on at once: an action
// that runs twice for one approval is the failure the replicated store
// must prevent.
func runFailover(t *testing.T, c failoverCase) failoverResult {
	t.Helper()
	rec, err := NewRecorder(RecorderOptions{Skew: sharedSkew})
	if err != nil {
		t.Fatal(err)
	}
	res := failoverResult{acts: make(map[ledger.ID]int), answers: make(map[ledger.Result]int), timing: make(map[string]time.Duration),
		phase: make(map[ledger.Result]int), byPhase: make(map[string]map[ledger.ID]int)}
	var mu sync.Mutex
	var tags atomic.Uint64
	// unix ns of the latest redemption's return, whatever it answered: one
	// whose reply was lost may have been applied and promoted, its lease
	// begun as late as then.
	var lastSpend atomic.Int64
	phaseName := "before the stall"
	// redeem redeems id through s, acts on success and records the
	// outcome; it reports the redemption's result.
	redeem := func(ctx context.Context, cl *Client, s ledger.Store, id ledger.ID) ledger.Result {
		opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
		_, err := cl.Redeem(opCtx, s, id, failoverLease)
		cancel()
		lastSpend.Store(time.Now().UnixNano())
		r := ledger.ResultOf(err)
		if r != ledger.ResultOK {
			return r
		}
		mu.Lock()
		res.acts[id]++ // the action
		if res.byPhase[phaseName] == nil {
			res.byPhase[phaseName] = make(map[ledger.ID]int)
		}
		res.byPhase[phaseName][id]++
		mu.Unlock()
		opCtx, cancel = context.WithTimeout(ctx, c.opTimeout)
		_ = cl.Complete(opCtx, s, id, ledger.OutcomeDone, tags.Add(1))
		cancel()
		return r
	}
	ctx := t.Context()
	ids := make([]ledger.ID, failoverApprovals)
	begin := time.Now()
	issuer := rec.Client()
	for i := range ids {
		ids[i] = ledger.ID{0: 0xfa, 15: byte(i)}
		conf := ledger.Confirmation{ID: ids[i], Tool: "failover", ArgsDigest: "-", Principal: "p", Expires: time.Now().Add(time.Hour).Round(0)}
		opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
		if err := issuer.Issue(opCtx, c.stores[i%len(c.stores)], conf); err != nil {
			t.Fatalf("issue before the failover: %v", err)
		}
		cancel()
	}
	// race has two goroutines per approval of ids redeem it, one per
	// handle, until each has an answer or stop is closed; returned counts
	// the racers that had a first reply.
	race := func(ids []ledger.ID, stop <-chan struct{}, returned *atomic.Int32) *sync.WaitGroup {
		var wg sync.WaitGroup
		for _, id := range ids {
			for _, s := range c.stores {
				cl := rec.Client()
				wg.Go(func() {
					first := true
					for {
						r := redeem(ctx, cl, s, id)
						if first && returned != nil {
							returned.Add(1)
							mu.Lock()
							res.phase[r]++
							mu.Unlock()
						}
						first = false
						if r != ledger.ResultError {
							return
						}
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
						}
					}
				})
			}
		}
		return &wg
	}

	half := ids[:len(ids)/2]
	never := make(chan struct{})
	race(half, never, nil).Wait()
	res.timing["before the stall"] = time.Since(begin)

	mu.Lock()
	phaseName = "racing across the crash"
	mu.Unlock()
	// Stalled, the primary is killed once every racer had a reply (each
	// is retrying, or done); mid-flow, once a quarter had, the others in
	// flight.
	racing := int32(len(ids)-len(half)) * int32(len(c.stores))
	crashAt := racing
	if c.stall != nil {
		c.stall()
	} else {
		crashAt = max(racing/4, 1)
	}
	stalledAt := time.Now()
	stop := make(chan struct{})
	var returned atomic.Int32
	racers := race(ids[len(ids)/2:], stop, &returned)
	for returned.Load() < crashAt {
		time.Sleep(time.Millisecond)
	}
	res.timing["racing until the crash"] = time.Since(stalledAt)
	c.crash()
	res.timing["promotion"] = c.promote()
	if c.reprovision != nil {
		res.timing["a new replica"] = c.reprovision()
	}
	close(stop)
	racers.Wait()

	// Every lease has ended: each approval is answered from its record.
	if d := time.Until(time.Unix(0, lastSpend.Load()).Add(failoverLease + 2*sharedSkew)); d > 0 {
		time.Sleep(d)
	}
	mu.Lock()
	phaseName = "retried after the failover"
	mu.Unlock()
	race(ids, never, nil).Wait()
	// The last retry, once more through each handle: its answer.
	for i, id := range ids {
		cl := rec.Client()
		opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
		r, err := cl.Redeem(opCtx, c.stores[i%len(c.stores)], id, failoverLease)
		cancel()
		result := ledger.ResultOf(err)
		res.answers[result]++
		mu.Lock()
		acted := res.acts[id]
		mu.Unlock()
		switch {
		case result == ledger.ResultInDoubt:
		case result == ledger.ResultDone && acted > 0 && r.Outcome.Kind == ledger.OutcomeDone:
		default:
			res.wrong = append(res.wrong, fmt.Sprintf("approval %s, acted on %d time(s): last retry %v (%v)", short(id), acted, result, err))
		}
	}
	res.timing["in all"] = time.Since(begin)
	res.report = Verify(rec.History(), checkTimeout)
	return res
}

// verdict checks a failover run: with safe, nothing acted twice, every
// approval's last retry answered from its record, and the history
// linearizable; else (the control), something acted twice, and porcupine
// found it.
func (r failoverResult) verdict(t *testing.T, safe bool) {
	t.Helper()
	var twice []string
	acted := 0
	for id, n := range r.acts {
		acted++
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s: %d times", short(id), n))
		}
	}
	t.Logf("timing: %v", r.timing)
	t.Logf("racing across the crash, first replies: %v", r.phase)
	for name, acts := range r.byPhase {
		t.Logf("acted on %s: %d approval(s)", name, len(acts))
	}
	t.Logf("%d of %d approvals acted on; acted twice: %d %v; last retries: %v", acted, failoverApprovals, len(twice), twice, r.answers)
	t.Logf("history: %v", r.report.Stats)
	t.Logf("porcupine: %s in %v", r.report.Result, r.report.Elapsed.Round(time.Millisecond))
	if r.report.Result == porcupine.Unknown {
		t.Fatalf("porcupine timed out: no verdict, which is not a pass")
	}
	if !safe {
		if len(twice) == 0 || r.report.Result != porcupine.Illegal {
			t.Fatalf("control: %d approval(s) acted twice, porcupine %s: the failover lost no acknowledged Spend, so the scenario shows nothing", len(twice), r.report.Result)
		}
		if bad := r.report.Violations(); len(bad) > 0 {
			t.Logf("control, as expected: %d approval(s) without a linearization, the first:\n%s", len(bad), Describe(bad[0]))
		}
		return
	}
	if len(twice) > 0 {
		t.Errorf("acted twice across the failover: %v", twice)
	}
	for _, w := range r.wrong {
		t.Errorf("%s", w)
	}
	if r.report.Result != porcupine.Ok {
		msg := "the history across the failover is not linearizable"
		bad := r.report.Violations()
		for i, ops := range bad {
			msg += fmt.Sprintf("; approval %d of %d without a linearization:\n%s", i+1, len(bad), Describe(ops))
		}
		if f, err := os.CreateTemp("", "failover-*.html"); err != nil {
			t.Logf("visualization not written: %v", err)
		} else if f.Close(); r.report.Visualize(f.Name()) != nil {
			t.Logf("visualization not written to %s", f.Name())
		} else {
			msg += "\nvisualization: " + f.Name()
		}
		t.Error(msg)
	}
	if acted == 0 {
		t.Error("nothing was acted on: the scenario exercised nothing")
	}
}
