// Package ledgertest is the conformance suite every [ledger.Store] must
// pass: the in-memory store, Redis and PostgreSQL run the same tests, the
// same rapid model test and the same concurrency checks. [Conformance]
// walks every transition of one confirmation — redeemed, completed done,
// failed or unknown, its lease ended, cancelled, expired — and checks the
// record each retry is answered with; [Concurrent] races Spends, and
// [ConcurrentComplete] races Completes and retries, of one confirmation;
// [Approvals] walks out-of-band approval (decisions, four-eyes, awaiting,
// declined) and [ConcurrentDecide] races approvers; [Model] runs all of it
// against spec/Ledger.tla's transcription.
//
// Stores that server replicas share over the network (Redis, PostgreSQL)
// also run the checks only a networked store needs: [Namespaces],
// [GoneAway] (a server closed, not listening or hanging, at [ClosedAddr]
// and [SilentAddr]), [OpenErrors] (Open errors name the server and never
// echo the password) and [RedeemOnce] on the store their Open returns;
// and [BenchmarkIssueRedeem] beside a floor of their own, run with
// [BenchmarkOp]. [Namespaced] makes their Factory.
//
// Expiry is exercised with absolute times around the real clock (entries
// issued already expired, or expiring an hour from now), and leases by
// their length (a microsecond, over by the next call, or an hour), because
// shared stores decide expiry and leases on their own server's clock, which
// a test cannot move.
package ledgertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Factory makes stores for the suite.
type Factory struct {
	// New returns a new, empty store. It registers its own cleanup. The
	// model test calls it once per rapid check (hundreds of times in one
	// test), so for a networked store it should hand out fresh namespaces
	// on shared connections rather than open a pool each time.
	New func(t testing.TB) ledger.Store
	// NewAt, if set, returns a new, empty store that decides expiry on the
	// clock now, so the model test can move time. Nil for stores that run
	// on their own server's clock.
	NewAt func(t testing.TB, now func() time.Time) ledger.Store
	// Replica, if set, returns a second handle on the same backing store as
	// s, as another server replica would open it. Nil for stores that cannot
	// be shared (memory).
	Replica func(t testing.TB, s ledger.Store) ledger.Store
}

// Run runs the whole suite against the stores f makes.
func Run(t *testing.T, f Factory) {
	t.Run("Conformance", func(t *testing.T) { Conformance(t, f) })
	t.Run("Concurrent", func(t *testing.T) { Concurrent(t, f) })
	t.Run("ConcurrentComplete", func(t *testing.T) { ConcurrentComplete(t, f) })
	t.Run("Model", func(t *testing.T) { Model(t, f) })
	t.Run("Approvals", func(t *testing.T) { Approvals(t, f) })
	t.Run("ConcurrentDecide", func(t *testing.T) { ConcurrentDecide(t, f) })
	if f.Replica != nil {
		t.Run("Replicas", func(t *testing.T) { Replicas(t, f) })
	}
}

// TB is the part of testing.TB (and *rapid.T) the helpers need.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// NewID returns a random confirmation id.
func NewID(t TB) ledger.ID {
	var id ledger.ID
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// Fresh returns a confirmation that expires an hour from now, with fields
// that a lossy store would mangle (NUL, invalid UTF-8, non-ASCII).
func Fresh(t TB) ledger.Confirmation {
	return ledger.Confirmation{
		ID:         NewID(t),
		Tool:       "delete_file",
		ArgsDigest: "5f2b1c0e",
		Principal:  "user-\x00-\xff-é",
		Subject:    "dev=1 ino=2 size=12 «a\\nb»",
		Expires:    time.Now().Add(time.Hour).Truncate(time.Millisecond),
	}
}

// Expired returns a confirmation whose expiry passed a second ago, recent
// enough that every store still remembers it.
func Expired(t TB) ledger.Confirmation {
	c := Fresh(t)
	c.Expires = time.Now().Add(-time.Second).Truncate(time.Millisecond)
	return c
}

func add(t testing.TB, s ledger.Store, c ledger.Confirmation) {
	t.Helper()
	if err := s.Add(context.Background(), c); err != nil {
		t.Fatalf("Add(%s): %v", c.ID, err)
	}
}

func equal(a, b ledger.Confirmation) bool {
	return a.ID == b.ID && a.Tool == b.Tool && a.ArgsDigest == b.ArgsDigest &&
		a.Principal == b.Principal && a.Subject == b.Subject &&
		a.Expires.Equal(b.Expires) && sameApproval(a.Approval, b.Approval)
}

func sameApproval(a, b *ledger.Approval) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Required == b.Required && slices.Equal(a.Approvers, b.Approvers) &&
		a.Requester == b.Requester && a.Question == b.Question
}

// sameDecisions reports whether two lists of decisions are the same, in
// the same order, to the microsecond (what every store keeps).
func sameDecisions(a, b []ledger.Decision) bool {
	return slices.EqualFunc(a, b, func(x, y ledger.Decision) bool {
		return x.Approver == y.Approver && x.Approve == y.Approve && x.At.Truncate(time.Microsecond).Equal(y.At.Truncate(time.Microsecond))
	})
}

// Leases the suite redeems with, on every store's clock: Short is over
// by the time the next call reaches the store; Long outlasts any test.
const (
	Short = time.Microsecond
	Long  = time.Hour
)

// An Outcome the suite records: kind, and a result that a lossy store
// would mangle.
func outcome(kind ledger.OutcomeKind) ledger.Outcome {
	r := []byte(`{"content":[{"type":"text","text":"Deleted \u00ab\u2068a\u2069\u00bb."}]}` + "\x00\xff")
	return ledger.Outcome{Kind: kind, Result: r, Size: int64(len(r))}
}

// digestOnly is the outcome of a result too long to keep.
func digestOnly() ledger.Outcome {
	o := ledger.Outcome{Kind: ledger.OutcomeDone, Size: 1 << 20}
	for i := range o.SHA256 {
		o.SHA256[i] = byte(i) ^ 0xa5
	}
	return o
}

func sameOutcome(a, b ledger.Outcome) bool {
	return a.Kind == b.Kind && bytes.Equal(a.Result, b.Result) && a.Size == b.Size && a.SHA256 == b.SHA256
}

// An op is one call of the conformance table, and the answer it wants.
type op struct {
	name    string // "redeem", "cancel", "complete", "wait"
	lease   time.Duration
	outcome ledger.Outcome
	want    error // nil: success
	state   ledger.State
}

func redeem(lease time.Duration, want error, st ledger.State) op {
	return op{name: "redeem", lease: lease, want: want, state: st}
}
func cancel(want error, st ledger.State) op {
	return op{name: "cancel", want: want, state: st}
}
func complete(o ledger.Outcome, want error) op { return op{name: "complete", outcome: o, want: want} }

// wait is long enough for a Short lease to be over on every store.
var wait = op{name: "wait"}

// Conformance checks each transition of a single confirmation: every
// answer, and, with in progress, done and in doubt, the record that comes
// with it.
func Conformance(t *testing.T, f Factory) {
	ctx := context.Background()
	done, failed, unknown := outcome(ledger.OutcomeDone), outcome(ledger.OutcomeFailed), outcome(ledger.OutcomeUnknown)
	var (
		Acting, Done, Failed, InDoubt, Cancelled = ledger.Acting, ledger.Done, ledger.Failed, ledger.InDoubt, ledger.Cancelled
		inProgress, errDone, inDoubt             = ledger.ErrInProgress, ledger.ErrDone, ledger.ErrInDoubt
	)
	tests := []struct {
		name  string
		make  func(TB) ledger.Confirmation
		added bool
		ops   []op
	}{
		{"redeem once", Fresh, true, []op{redeem(Long, nil, Acting)}},
		{"redeem twice", Fresh, true, []op{redeem(Long, nil, Acting), redeem(Long, inProgress, Acting)}},
		{"redeem then cancel", Fresh, true, []op{redeem(Long, nil, Acting), cancel(inProgress, Acting)}},
		{"cancel then redeem", Fresh, true, []op{cancel(nil, Cancelled), redeem(Long, ledger.ErrCancelled, 0)}},
		{"cancel twice", Fresh, true, []op{cancel(nil, Cancelled), cancel(ledger.ErrCancelled, 0)}},
		{"unknown", Fresh, false, []op{redeem(Long, ledger.ErrUnknown, 0), cancel(ledger.ErrUnknown, 0), complete(done, ledger.ErrUnknown)}},
		{"expired", Expired, true, []op{redeem(Long, ledger.ErrExpired, 0), cancel(ledger.ErrExpired, 0), complete(done, ledger.ErrExpired), redeem(Long, ledger.ErrExpired, 0)}},
		{"done, then retried", Fresh, true, []op{redeem(Long, nil, Acting), complete(done, nil),
			redeem(Long, errDone, Done), cancel(errDone, Done), complete(failed, errDone), redeem(Long, errDone, Done)}},
		{"failed, then retried", Fresh, true, []op{redeem(Long, nil, Acting), complete(failed, nil),
			redeem(Long, errDone, Failed), complete(done, errDone), redeem(Long, errDone, Failed)}},
		{"outcome unknown", Fresh, true, []op{redeem(Long, nil, Acting), complete(unknown, nil),
			redeem(Long, inDoubt, InDoubt), complete(done, inDoubt), cancel(inDoubt, InDoubt)}},
		{"result too long to keep", Fresh, true, []op{redeem(Long, nil, Acting), complete(digestOnly(), nil), redeem(Long, errDone, Done)}},
		{"lease ends", Fresh, true, []op{redeem(Short, nil, Acting), wait,
			redeem(Long, inDoubt, InDoubt), complete(done, inDoubt), redeem(Long, inDoubt, InDoubt)}},
		{"complete after the lease", Fresh, true, []op{redeem(Short, nil, Acting), wait,
			complete(done, inDoubt), complete(done, inDoubt), redeem(Long, inDoubt, InDoubt), cancel(inDoubt, InDoubt)}},
		{"complete before redeem", Fresh, true, []op{complete(done, ledger.ErrNotActing), redeem(Long, nil, Acting)}},
		{"complete cancelled", Fresh, true, []op{cancel(nil, Cancelled), complete(done, ledger.ErrCancelled), redeem(Long, ledger.ErrCancelled, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := f.New(t)
			c := tt.make(t)
			if tt.added {
				add(t, s, c)
			}
			var recorded ledger.Outcome // the first outcome a Complete recorded
			for i, o := range tt.ops {
				var rec ledger.Record
				var err error
				switch o.name {
				case "wait":
					time.Sleep(time.Millisecond)
					continue
				case "complete":
					err = s.Complete(ctx, c.ID, o.outcome)
					if err == nil {
						recorded = o.outcome
					}
				default:
					to := ledger.Acting
					if o.name == "cancel" {
						to = ledger.Cancelled
					}
					rec, err = s.Spend(ctx, c.ID, to, o.lease)
				}
				if !errors.Is(err, o.want) || (o.want == nil) != (err == nil) {
					t.Fatalf("op %d: %s = %v, want %v", i, o.name, err, o.want)
				}
				if o.name == "complete" || o.state == 0 && o.want != nil {
					continue
				}
				if !equal(rec.Confirmation, c) || rec.State != o.state {
					t.Fatalf("op %d: %s returned %+v in state %v, want %+v in state %v", i, o.name, rec.Confirmation, rec.State, c, o.state)
				}
				if !sameOutcome(rec.Outcome, recorded) {
					t.Fatalf("op %d: %s returned outcome %+v, want %+v", i, o.name, rec.Outcome, recorded)
				}
			}
		})
	}

	t.Run("duplicate id", func(t *testing.T) {
		s := f.New(t)
		c := Fresh(t)
		add(t, s, c)
		dup := c
		dup.Tool = "other"
		if err := s.Add(ctx, dup); !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("second Add = %v, want ErrExists", err)
		}
		got, err := s.Spend(ctx, c.ID, ledger.Acting, Long)
		if err != nil || !equal(got.Confirmation, c) {
			t.Fatalf("Spend after duplicate Add = %+v, %v; want the original", got, err)
		}
	})

	t.Run("isolation", func(t *testing.T) {
		s := f.New(t)
		a, b := Fresh(t), Fresh(t)
		add(t, s, a)
		add(t, s, b)
		if _, err := s.Spend(ctx, a.ID, ledger.Acting, Long); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, a.ID, done); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, b.ID, done); !errors.Is(err, ledger.ErrNotActing) {
			t.Fatalf("completing a changed b: %v", err)
		}
		if _, err := s.Spend(ctx, b.ID, ledger.Cancelled, 0); err != nil {
			t.Fatalf("spending a changed b: %v", err)
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		s := f.New(t)
		c := Fresh(t)
		add(t, s, c)
		for _, tt := range []struct {
			to    ledger.State
			lease time.Duration
		}{{ledger.Pending, Long}, {ledger.Done, Long}, {ledger.InDoubt, Long}, {ledger.Acting, 0}, {ledger.Acting, -time.Second}} {
			if _, err := s.Spend(ctx, c.ID, tt.to, tt.lease); ledger.ResultOf(err) != ledger.ResultError {
				t.Fatalf("Spend(%v, lease %v) = %v, want an error that is no ledger answer", tt.to, tt.lease, err)
			}
		}
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, Long); err != nil {
			t.Fatalf("a refused Spend changed the entry: %v", err)
		}
		for _, o := range []ledger.Outcome{{}, {Kind: 9}, {Kind: ledger.OutcomeDone, Result: []byte("ab"), Size: 3}, {Kind: ledger.OutcomeDone, Size: -1}} {
			if err := s.Complete(ctx, c.ID, o); ledger.ResultOf(err) != ledger.ResultError {
				t.Fatalf("Complete(%+v) = %v, want an error that is no ledger answer", o, err)
			}
		}
		if err := s.Complete(ctx, c.ID, done); err != nil {
			t.Fatalf("a refused Complete changed the entry: %v", err)
		}
	})

	// A recorded outcome, an action in progress and a cancellation are
	// answered as such after the confirmation's expiry: only a pending
	// confirmation expires.
	t.Run("answered after expiry", func(t *testing.T) {
		s := f.New(t)
		const ttl = 300 * time.Millisecond
		cs := make([]ledger.Confirmation, 3)
		for i := range cs {
			cs[i] = Fresh(t)
			cs[i].Expires = time.Now().Add(ttl).Truncate(time.Millisecond)
			add(t, s, cs[i])
		}
		for i, to := range []ledger.State{ledger.Acting, ledger.Acting, ledger.Cancelled} {
			if _, err := s.Spend(ctx, cs[i].ID, to, Long); err != nil {
				t.Fatalf("Spend(%v): %v (a loaded machine took %v?)", to, err, ttl)
			}
		}
		if err := s.Complete(ctx, cs[0].ID, done); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(cs[0].Expires) + 10*time.Millisecond)
		for i, want := range []error{ledger.ErrDone, ledger.ErrInProgress, ledger.ErrCancelled} {
			rec, err := s.Spend(ctx, cs[i].ID, ledger.Acting, Long)
			if !errors.Is(err, want) {
				t.Fatalf("after expiry: Spend = %v, want %v", err, want)
			}
			if i == 0 && !sameOutcome(rec.Outcome, done) {
				t.Fatalf("after expiry: outcome %+v, want %+v", rec.Outcome, done)
			}
		}
	})
}

// Concurrent races many goroutines spending the same confirmations: for
// each, exactly one succeeds and every other is answered from its record:
// in progress or cancelled.
func Concurrent(t *testing.T, f Factory) {
	const ids, racers = 16, 32
	s := f.New(t)
	stores := []ledger.Store{s}
	if f.Replica != nil {
		stores = append(stores, f.Replica(t, s))
	}
	cs := make([]ledger.Confirmation, ids)
	for i := range cs {
		cs[i] = Fresh(t)
		add(t, s, cs[i])
	}
	wins := make([]int, ids)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := range racers {
		for i, c := range cs {
			wg.Go(func() {
				to := ledger.Acting
				if r%4 == 3 {
					to = ledger.Cancelled
				}
				_, err := stores[r%len(stores)].Spend(context.Background(), c.ID, to, Long)
				switch {
				case err == nil:
					mu.Lock()
					wins[i]++
					mu.Unlock()
				case errors.Is(err, ledger.ErrInProgress), errors.Is(err, ledger.ErrCancelled):
				default:
					t.Errorf("Spend(%s): unexpected error %v", c.ID, err)
				}
			})
		}
	}
	wg.Wait()
	for i, w := range wins {
		if w != 1 {
			t.Errorf("confirmation %d was spent %d times, want exactly 1", i, w)
		}
	}
}

// ConcurrentComplete races many goroutines recording different outcomes
// of one redeemed confirmation, and retries redeeming it: exactly one
// Complete succeeds, every other is refused as done, and every retry is
// answered in progress or with the one outcome recorded.
func ConcurrentComplete(t *testing.T, f Factory) {
	const racers = 32
	ctx := context.Background()
	s := f.New(t)
	stores := []ledger.Store{s}
	if f.Replica != nil {
		stores = append(stores, f.Replica(t, s))
	}
	c := Fresh(t)
	add(t, s, c)
	if _, err := s.Spend(ctx, c.ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	outcomes := make([]ledger.Outcome, racers)
	completed := make([]bool, racers)
	retries := make([]ledger.Record, racers)
	var wg sync.WaitGroup
	for r := range racers {
		outcomes[r] = outcome(ledger.OutcomeKind(1 + r%3))
		outcomes[r].Result = fmt.Appendf(outcomes[r].Result, " racer %d", r)
		outcomes[r].Size = int64(len(outcomes[r].Result))
		wg.Go(func() {
			st := stores[r%len(stores)]
			switch err := st.Complete(ctx, c.ID, outcomes[r]); {
			case err == nil:
				completed[r] = true
			case errors.Is(err, ledger.ErrDone), errors.Is(err, ledger.ErrInDoubt):
			default:
				t.Errorf("Complete: unexpected error %v", err)
			}
			rec, err := st.Spend(ctx, c.ID, ledger.Acting, Long)
			if !errors.Is(err, ledger.ErrSpent) {
				t.Errorf("retry: %v, want a record's answer", err)
			}
			retries[r] = rec
		})
	}
	wg.Wait()
	winner := -1
	for r, ok := range completed {
		if ok {
			if winner >= 0 {
				t.Fatalf("racers %d and %d both recorded an outcome", winner, r)
			}
			winner = r
		}
	}
	if winner < 0 {
		t.Fatal("no Complete succeeded")
	}
	for r, rec := range retries {
		if rec.State != ledger.Acting && !sameOutcome(rec.Outcome, outcomes[winner]) {
			t.Fatalf("retry %d was answered %v %+v; the outcome recorded is %+v", r, rec.State, rec.Outcome, outcomes[winner])
		}
	}
}

// Replicas checks that a confirmation added through one handle is spent,
// once, through another, and its outcome recorded through either is the
// answer through both.
func Replicas(t *testing.T, f Factory) {
	ctx := context.Background()
	a := f.New(t)
	b := f.Replica(t, a)
	c := Fresh(t)
	add(t, a, c)
	got, err := b.Spend(ctx, c.ID, ledger.Acting, Long)
	if err != nil || !equal(got.Confirmation, c) {
		t.Fatalf("replica B Spend = %+v, %v; want the confirmation A added", got, err)
	}
	if _, err := a.Spend(ctx, c.ID, ledger.Acting, Long); !errors.Is(err, ledger.ErrInProgress) {
		t.Fatalf("replica A Spend after B = %v, want ErrInProgress", err)
	}
	o := outcome(ledger.OutcomeDone)
	if err := a.Complete(ctx, c.ID, o); err != nil {
		t.Fatalf("replica A Complete of B's redemption: %v", err)
	}
	for name, s := range map[string]ledger.Store{"A": a, "B": b} {
		if rec, err := s.Spend(ctx, c.ID, ledger.Acting, Long); !errors.Is(err, ledger.ErrDone) || !sameOutcome(rec.Outcome, o) {
			t.Fatalf("replica %s retry = %v %+v, want ErrDone with %+v", name, err, rec.Outcome, o)
		}
	}
}
