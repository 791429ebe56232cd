package linearizability

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Workload configures [Record]. The zero value is the default workload.
type Workload struct {
	// Goroutines is how many goroutines race. Default 64.
	Goroutines int
	// Operations is how many operations they perform in all. Default 10,000.
	Operations int
	// Hot is how many confirmations are being raced at any moment: every
	// spend picks one of the Hot most recently issued ones, so about
	// Goroutines/Hot goroutines contend for each. Default 8.
	Hot int
	// Racers caps the operations in flight on one confirmation at once
	// (its Add included); a goroutine that finds every hot confirmation
	// at the cap issues a new one instead. Porcupine's search is
	// exponential in this number — a history with 20 or more operations
	// overlapping on one id can take minutes to check — so the cap keeps
	// checking time bounded whatever the goroutine count and the store's
	// latency. Default 16.
	Racers int
	// OpTimeout, if positive, bounds each operation with a context
	// deadline; a timed-out operation is recorded as outcome unknown.
	OpTimeout time.Duration
	// Skew is the clock-skew allowance passed to the [Recorder].
	Skew time.Duration
	// WallClock says that the store decides expiry on a clock of its own
	// (a database server's), which it compares with Expires' wall reading.
	// Expiries are then issued without a monotonic reading, so that the
	// history places that wall reading on its axis: the two readings of
	// one time.Now may be milliseconds apart on a loaded machine, and the
	// store would seem to expire confirmations early. Leave it false for
	// an in-process store, which compares monotonic readings.
	WallClock bool
	// Replicas are more handles on the same shared store, as other server
	// replicas would open it: goroutine g works through handle
	// g mod (1+len(Replicas)), the store passed to Record being handle 0.
	Replicas []ledger.Store
}

// Defaults of a [Workload].
const (
	DefaultGoroutines = 64
	DefaultOperations = 10_000
	DefaultHot        = 8
	DefaultRacers     = 16
)

// The mix of operations, per thousand. One issue in four needs out-of-band
// approval; half the spends of such a confirmation are decisions. Other
// spends of a hot confirmation are redeems three times in four and
// cancels otherwise. A redeem asks for a
// lease of an hour three times in four, otherwise one short enough to end
// while the confirmation is still hot; a redeem that succeeds is followed
// by its Complete (done, failed or unknown) seven times in eight with a
// long lease, half the time with a short one, before or after its end.
const (
	mixIssue        = 40  // expires in an hour: decided on its state alone
	mixIssueExpired = 10  // already expired when issued: every spend must see it expired
	mixIssueSoon    = 40  // expires while still hot: spent across its expiry
	mixUnknown      = 30  // spend an id never issued: must be refused as unknown
	mixDuplicate    = 10  // re-issue a hot confirmation: must be refused as existing, once one Add won
	mixComplete     = 20  // complete a hot confirmation, whoever redeemed it: races its redeemer's Complete
	mixSpend        = 850 // redeem or cancel a hot confirmation
)

// Record drives s with w's workload and returns the history: Goroutines
// goroutines, released at once, each performing its share of Operations,
// racing redeems, cancels and completes of the same few confirmations
// while new ones are issued (some already expired, some expiring
// mid-race) and ids that were never issued are tried; with w.Replicas, through several handles on
// one shared store. The first goroutine first plays scripted scenes (see
// scenes.go) on confirmations of their own, so that each answer the race
// gives rarely is in every history. Half the operations yield once between their recorded
// call and the store, so that windows overlap even on one processor.
// Ids carry a random 64-bit prefix, so runs
// sharing a store do not collide.
//
// It returns an error if w is invalid, or with the partial history if ctx
// ends first.
func Record(ctx context.Context, s ledger.Store, w Workload) (History, error) {
	if s == nil {
		return History{}, fmt.Errorf("linearizability: nil store")
	}
	if w.Goroutines < 0 || w.Operations < 0 || w.Hot < 0 || w.Racers < 0 || w.OpTimeout < 0 {
		return History{}, fmt.Errorf("linearizability: negative workload size in %+v", w)
	}
	if w.Goroutines == 0 {
		w.Goroutines = DefaultGoroutines
	}
	if w.Operations == 0 {
		w.Operations = DefaultOperations
	}
	if w.Hot == 0 {
		w.Hot = DefaultHot
	}
	if w.Racers == 0 {
		w.Racers = DefaultRacers
	}
	rec, err := NewRecorder(RecorderOptions{Skew: w.Skew})
	if err != nil {
		return History{}, err
	}

	var prefix [8]byte
	if _, err := rand.Read(prefix[:]); err != nil {
		return History{}, fmt.Errorf("linearizability: id prefix: %w", err)
	}
	var seq atomic.Uint64
	newID := func() ledger.ID {
		var id ledger.ID
		copy(id[:8], prefix[:])
		binary.BigEndian.PutUint64(id[8:], seq.Add(1))
		return id
	}
	stores := append([]ledger.Store{s}, w.Replicas...)
	for i, r := range stores {
		if r == nil {
			return History{}, fmt.Errorf("linearizability: nil replica %d", i)
		}
	}
	wl := &run{rec: rec, hot: make([]atomic.Pointer[hotEntry], w.Hot), racers: int32(w.Racers), newID: newID, wallClock: w.WallClock}
	// Tags, like ids, start at a random number, so that runs sharing a
	// store never answer with each other's outcomes.
	var tags [8]byte
	if _, err := rand.Read(tags[:]); err != nil {
		return History{}, fmt.Errorf("linearizability: tags: %w", err)
	}
	wl.tags.Store(binary.BigEndian.Uint64(tags[:]) &^ (1<<32 - 1))

	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range w.Goroutines {
		n := w.Operations / w.Goroutines
		if g < w.Operations%w.Goroutines {
			n++
		}
		c := rec.Client()
		rnd := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
		principal := fmt.Sprintf("client-%d", g)
		wg.Go(func() {
			<-start
			if g == 0 {
				n -= wl.play(ctx, stores[0], c, n, w.Skew)
			}
			for n > 0 {
				if ctx.Err() != nil {
					return
				}
				opCtx, cancel := ctx, context.CancelFunc(func() {})
				if w.OpTimeout > 0 {
					opCtx, cancel = context.WithTimeout(ctx, w.OpTimeout)
				}
				n -= wl.act(opCtx, stores[g%len(stores)], c, rnd, principal, n)
				cancel()
				// Hand the processor over between operations, so that the
				// goroutines interleave operation by operation instead of
				// each running a burst of its share alone.
				runtime.Gosched()
			}
		})
	}
	close(start)
	wg.Wait()

	h := rec.History()
	h.Goroutines = w.Goroutines
	return h, ctx.Err()
}

// run is the shared state of one Record call.
type run struct {
	rec    *Recorder
	hot    []atomic.Pointer[hotEntry]
	racers int32
	newID  func() ledger.ID
	issued atomic.Int64  // confirmations published to hot so far
	tags   atomic.Uint64 // the last outcome tag handed out
	// wallClock: issue expiries without a monotonic reading (Workload.WallClock).
	wallClock bool
}

// hotEntry is a confirmation being raced, and how many operations on it
// are in flight.
type hotEntry struct {
	conf     ledger.Confirmation
	inflight atomic.Int32
}

// lifetime estimates how long a confirmation stays hot: the time between
// two issues into the same slot so far. A confirmation expiring within it
// is likely to be spent across its expiry, whatever the store's speed.
func (wl *run) lifetime() time.Duration {
	n := wl.issued.Load()
	if n == 0 {
		return time.Millisecond
	}
	return max(time.Duration(wl.rec.now()*int64(len(wl.hot))/n), time.Microsecond)
}

// acquire picks a hot confirmation with room for one more operation and
// counts that operation in; nil if it found none.
func (wl *run) acquire(rnd *mrand.Rand) *hotEntry {
	for range 2 * len(wl.hot) {
		e := wl.hot[rnd.IntN(len(wl.hot))].Load()
		if e == nil {
			continue
		}
		if e.inflight.Add(1) <= wl.racers {
			return e
		}
		e.inflight.Add(-1)
	}
	return nil
}

// act performs one randomly chosen operation of the workload, or, with
// left at least 2, a redeem and its complete, and reports how many it
// performed.
func (wl *run) act(ctx context.Context, s ledger.Store, c *Client, rnd *mrand.Rand, principal string, left int) int {
	if rnd.IntN(2) == 0 {
		s = yielding{s}
	}
	issue := func(ttl time.Duration) {
		// One in four needs out-of-band approval, one or two approvals.
		var a *ledger.Approval
		if rnd.IntN(4) == 0 {
			a = needing(1+rnd.IntN(2), []string{"", Approvers[alice].ID, Approvers[bob].ID, Approvers[mallory].ID}[rnd.IntN(4)])
		}
		// Keeps its monotonic reading, so that an in-process store and the
		// recorder compare it on the same clock; a store on a clock of its
		// own compares the wall reading, and the recorder must place that.
		expires := time.Now().Add(ttl)
		if wl.wallClock {
			expires = expires.Round(0)
		}
		e := &hotEntry{conf: ledger.Confirmation{
			ID:         wl.newID(),
			Tool:       "linearizability",
			ArgsDigest: "-",
			Principal:  principal,
			Expires:    expires,
			Approval:   a,
		}}
		e.inflight.Store(1)
		// Published before the Add, so that spends race the Add itself.
		wl.hot[rnd.IntN(len(wl.hot))].Store(e)
		wl.issued.Add(1)
		_ = c.Issue(ctx, s, e.conf)
		e.inflight.Add(-1)
	}
	ops := 1
	switch r := rnd.IntN(1000); {
	case r < mixIssue:
		issue(time.Hour)
	case r < mixIssue+mixIssueExpired:
		issue(-time.Second)
	case r < mixIssue+mixIssueExpired+mixIssueSoon:
		issue(time.Duration(rnd.Int64N(int64(wl.lifetime()))))
	case r < mixIssue+mixIssueExpired+mixIssueSoon+mixUnknown:
		_, _ = c.Redeem(ctx, s, wl.newID(), time.Hour)
	default: // a duplicate issue, a complete or a spend of a hot confirmation
		e := wl.acquire(rnd)
		if e == nil {
			issue(time.Hour)
			return ops
		}
		switch {
		case r < mixIssue+mixIssueExpired+mixIssueSoon+mixUnknown+mixDuplicate:
			_ = c.Issue(ctx, s, e.conf)
		case r < mixIssue+mixIssueExpired+mixIssueSoon+mixUnknown+mixDuplicate+mixComplete:
			wl.complete(ctx, s, c, rnd, e.conf.ID)
		case e.conf.Approval != nil && rnd.IntN(2) == 0:
			// Half the spends of one that needs approval are decisions,
			// by anyone: approvers, the requester, someone unlisted.
			_, _ = c.Decide(ctx, s, e.conf.ID, rnd.IntN(len(Approvers)), rnd.IntN(5) != 0)
		case rnd.IntN(4) == 3:
			_, _ = c.Cancel(ctx, s, e.conf.ID)
		default:
			// Long leases are completed seven times in eight; short ones
			// half the time, so that more are left to end in doubt.
			lease, skip := time.Hour, 8
			if rnd.IntN(4) == 0 {
				lease, skip = time.Duration(1+rnd.Int64N(int64(2*wl.lifetime()))), 2
			}
			if _, err := c.Redeem(ctx, s, e.conf.ID, lease); err == nil && left >= 2 && rnd.IntN(skip) != 0 {
				wl.complete(ctx, s, c, rnd, e.conf.ID)
				ops++
			}
		}
		e.inflight.Add(-1)
	}
	return ops
}

// complete records an outcome for id: done, failed or unknown, with a
// result (a tag) no other Complete records.
func (wl *run) complete(ctx context.Context, s ledger.Store, c *Client, rnd *mrand.Rand, id ledger.ID) {
	kind := ledger.OutcomeDone
	switch r := rnd.IntN(20); {
	case r < 5:
		kind = ledger.OutcomeFailed
	case r < 8:
		kind = ledger.OutcomeUnknown
	}
	_ = c.Complete(ctx, s, id, kind, wl.tags.Add(1))
}

// yielding hands the processor over after an operation's call is recorded
// and before the store sees it, as a network round trip would: operations
// of different goroutines then overlap even on one processor, and the
// store's atomicity, not the scheduler, must keep them apart. Half of the
// workload's operations go through it; the other half keep tight windows,
// which constrain the order most.
type yielding struct{ ledger.Store }

func (y yielding) Add(ctx context.Context, c ledger.Confirmation) error {
	runtime.Gosched()
	return y.Store.Add(ctx, c)
}

func (y yielding) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	runtime.Gosched()
	return y.Store.Spend(ctx, id, to, lease)
}

func (y yielding) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	runtime.Gosched()
	return y.Store.Complete(ctx, id, o)
}

func (y yielding) Decide(ctx context.Context, id ledger.ID, p ledger.Approver, approve bool) (ledger.Record, error) {
	runtime.Gosched()
	return y.Store.Decide(ctx, id, p, approve)
}

// The indexes in Approvers of the workload's approvers.
const (
	alice = iota
	bob
	carol
	mallory
)

// needing is what a confirmation of the workload needs out of band:
// required approvals from alice or the group of bob and carol (mallory is
// in another), requested by requester.
func needing(required int, requester string) *ledger.Approval {
	return &ledger.Approval{Required: required, Approvers: []string{Approvers[alice].ID, "group:ops"}, Requester: requester}
}
