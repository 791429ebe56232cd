package ledgertest

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// spec is the Go transcription of spec/Ledger.tla's store, one function per
// action, for one store shared by every replica that opens it. The rapid
// test drives a real store and this model with the same actions and
// requires the same answer from both, and the same record.
type spec struct {
	recs map[ledger.ID]*specRecord // absent: never issued here, or forgotten
}

type specRecord struct {
	ledger.Record
	leaseEnd time.Time
}

// Issue: a new confirmation becomes pending.
func (m *spec) Issue(c ledger.Confirmation) {
	m.recs[c.ID] = &specRecord{Record: ledger.Record{Confirmation: c, State: ledger.Pending}}
}

// at reads the record of id at the store's time now: an acting one whose
// lease has ended is in doubt (LeaseExpiry), for good.
func (m *spec) at(id ledger.ID, now time.Time) (*specRecord, bool) {
	r, ok := m.recs[id]
	if ok && r.State == ledger.Acting && !now.Before(r.leaseEnd) {
		r.State = ledger.InDoubt
	}
	return r, ok
}

// answer is what a Spend of the spent record r gets (Replay): for one
// cancelled, the record and ErrDeclined if an approver declined it.
func answer(r *specRecord) (ledger.Record, error) {
	switch r.State {
	case ledger.Cancelled:
		for _, d := range r.Decisions {
			if !d.Approve {
				return r.Record, ledger.ErrDeclined
			}
		}
		return ledger.Record{}, ledger.ErrCancelled
	case ledger.Acting:
		return r.Record, ledger.ErrInProgress
	case ledger.Done, ledger.Failed:
		return r.Record, ledger.ErrDone
	}
	return r.Record, ledger.ErrInDoubt
}

// Spend is Redeem (to = Acting) or Cancel (to = Cancelled): the atomic
// compare-and-set on the store, at the store's time now. A Redeem of a
// confirmation that needs out-of-band approval waits for the approvals
// (ApprovedIn); a Cancel does not.
func (m *spec) Spend(id ledger.ID, to ledger.State, lease time.Duration, now time.Time) (ledger.Record, error) {
	r, ok := m.at(id, now)
	switch {
	case !ok:
		return ledger.Record{}, ledger.ErrUnknown
	case r.State != ledger.Pending:
		return answer(r)
	case !now.Before(r.Expires):
		return ledger.Record{}, ledger.ErrExpired
	case to == ledger.Acting && r.Approval != nil && approvals(r.Decisions) < r.Approval.Required:
		return r.Record, ledger.ErrAwaitingApproval
	}
	r.State = to
	if to == ledger.Acting {
		r.leaseEnd = now.Add(lease)
	}
	return r.Record, nil
}

// Complete records o for the acting confirmation id, before its lease
// ends: a compare-and-set from Acting.
func (m *spec) Complete(id ledger.ID, o ledger.Outcome, now time.Time) error {
	r, ok := m.at(id, now)
	switch {
	case !ok:
		return ledger.ErrUnknown
	case r.State == ledger.Pending && !now.Before(r.Expires):
		return ledger.ErrExpired
	case r.State == ledger.Pending:
		return ledger.ErrNotActing
	case r.State != ledger.Acting:
		_, err := answer(r)
		return err
	}
	r.State = o.Kind.State()
	r.Outcome = o
	return nil
}

// approvals counts the approving decisions.
func approvals(ds []ledger.Decision) int {
	n := 0
	for _, d := range ds {
		if d.Approve {
			n++
		}
	}
	return n
}

// Decide is an approver's decision (Ledger.tla's Decide), at the store's
// time now: recorded only for a confirmation that needs out-of-band
// approval, by a listed approver who is not its requester, once per
// approver, before the outcome is decided, while pending and unexpired.
// Refused, in the order the stores answer: in band, not an approver (the
// requester, or unlisted), decided, cancelled, expired.
func (m *spec) Decide(id ledger.ID, p ledger.Approver, approve bool, now time.Time) (ledger.Record, error) {
	r, ok := m.at(id, now)
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	a := r.Approval
	switch {
	case a == nil:
		return ledger.Record{}, ledger.ErrInBand
	case a.Requester != "" && p.ID == a.Requester:
		return ledger.Record{}, ledger.ErrSelfApproval
	case !listed(a, p):
		return ledger.Record{}, ledger.ErrNotApprover
	}
	decided := approvals(r.Decisions) >= a.Required
	for _, d := range r.Decisions {
		decided = decided || d.Approver == p.ID || !d.Approve
	}
	switch {
	case decided || r.State != ledger.Pending && r.State != ledger.Cancelled:
		return r.Record, ledger.ErrDecided
	case r.State == ledger.Cancelled:
		return r.Record, ledger.ErrCancelled
	case !now.Before(r.Expires):
		return r.Record, ledger.ErrExpired
	}
	r.Decisions = append(slices.Clip(r.Decisions), ledger.Decision{Approver: p.ID, Approve: approve, At: now})
	if !approve {
		r.State = ledger.Cancelled
	}
	return r.Record, nil
}

// listed reports whether p's ID or one of its groups is among a's approvers.
func listed(a *ledger.Approval, p ledger.Approver) bool {
	for _, n := range a.Approvers {
		if n == p.ID || slices.Contains(p.Groups, n) {
			return true
		}
	}
	return false
}

// Lookup reads the record of id at now, changing nothing but the lazy in
// doubt.
func (m *spec) Lookup(id ledger.ID, now time.Time) (ledger.Record, error) {
	r, ok := m.at(id, now)
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return r.Record, nil
}

// forgettable reports whether a store may have forgotten id by now: after
// its expiry and the end of its lease (plus a grace the spec does not
// know), never before.
func (m *spec) forgettable(id ledger.ID, now time.Time) bool {
	r, ok := m.recs[id]
	return !ok || !now.Before(r.Expires) && !now.Before(r.leaseEnd)
}

// startLine lines up the racers of one race (RedeemRace, CompleteRace).
// The race puts it in the context of each racer's call, with the racer's
// number; real stores never look at them. The deliberately broken stores
// of the negative controls (broken_test.go) do: the racy one waits at it
// between its check and its act, so that its race window opens on every
// race, however loaded the machine; the others take their turns in the
// racers' order, so that the scheduler does not pick the winner. Either
// way a failure reproduces exactly while rapid shrinks it: timing windows
// made the control's failure come and go, and on a loaded CI runner the
// shrinking ran out of time with a longer sequence than the shortest.
type startLine struct {
	left atomic.Int32
	all  chan struct{} // closed when every racer has reached the line

	mu   sync.Mutex
	cond *sync.Cond
	next int // the racer whose turn it is
}

type (
	startLineKey struct{}
	racerKey     struct{}
)

func newStartLine(racers int) *startLine {
	l := &startLine{all: make(chan struct{})}
	l.left.Store(int32(racers))
	l.cond = sync.NewCond(&l.mu)
	return l
}

// racing returns the context of racer i of a race lined up by l.
func racing(ctx context.Context, l *startLine, i int) context.Context {
	return context.WithValue(context.WithValue(ctx, startLineKey{}, l), racerKey{}, i)
}

// reach marks one racer at the line and waits for the rest. It gives up
// after ten seconds, so that a store that calls it wrongly (twice in one
// call, say) cannot hang the test.
func (l *startLine) reach() {
	if l.left.Add(-1) == 0 {
		close(l.all)
	}
	select {
	case <-l.all:
	case <-time.After(10 * time.Second):
	}
}

// inTurn runs f as racer i once every racer before it has run.
func (l *startLine) inTurn(i int, f func()) {
	l.mu.Lock()
	for l.next != i {
		l.cond.Wait()
	}
	l.mu.Unlock()
	f()
	l.mu.Lock()
	l.next++
	l.cond.Broadcast()
	l.mu.Unlock()
}

// Model checks a store against the spec with rapid, in sequences of Issue,
// Redeem, Cancel, Complete and concurrent races on one confirmation
// (spends, and completes), through one or (when the factory can) two
// handles on the same store. With a clock the store honours
// (Factory.NewAt), time also advances between steps, and leases last
// minutes; otherwise a lease is [Short] or [Long].
func Model(t *testing.T, f Factory) {
	rapid.Check(t, func(rt *rapid.T) { modelRun(t, rt, f) })
}

func modelRun(t testing.TB, rt *rapid.T, f Factory) {
	ctx := context.Background()
	var clock atomic.Int64 // unix nanoseconds of the fake clock
	clock.Store(time.Now().UnixNano())
	var now func() time.Time
	var s ledger.Store
	if f.NewAt != nil {
		now = func() time.Time { return time.Unix(0, clock.Load()) }
		s = f.NewAt(t, now)
	} else {
		now = time.Now
		s = f.New(t)
	}
	stores := []ledger.Store{s}
	if f.Replica != nil {
		stores = append(stores, f.Replica(t, s))
	}
	m := &spec{recs: map[ledger.ID]*specRecord{}}
	var ids []ledger.ID
	// Ids are numbered, not random, so that a failure reproduces exactly
	// while rapid shrinks it; the run's random prefix keeps runs that share
	// a store (Redis, PostgreSQL) apart.
	prefix := NewID(rt)
	n := uint64(0)
	nextID := func() ledger.ID {
		n++
		id := prefix
		binary.BigEndian.PutUint64(id[8:], n)
		return id
	}

	pick := func(rt *rapid.T) ledger.ID {
		if len(ids) == 0 || rapid.IntRange(0, 9).Draw(rt, "unknown") == 9 {
			return nextID()
		}
		return rapid.SampledFrom(ids).Draw(rt, "id")
	}
	lease := func(rt *rapid.T) time.Duration {
		if f.NewAt != nil {
			return time.Duration(rapid.IntRange(1, 30).Draw(rt, "leaseMinutes")) * time.Minute
		}
		return rapid.SampledFrom([]time.Duration{Short, Long}).Draw(rt, "lease")
	}
	drawOutcome := func(rt *rapid.T) ledger.Outcome {
		o := ledger.Outcome{Kind: rapid.SampledFrom([]ledger.OutcomeKind{ledger.OutcomeDone, ledger.OutcomeFailed, ledger.OutcomeUnknown}).Draw(rt, "outcome")}
		if rapid.IntRange(0, 9).Draw(rt, "digestOnly") == 9 {
			o.Size = int64(rapid.IntRange(1, 1<<30).Draw(rt, "size"))
			copy(o.SHA256[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "sha256"))
			return o
		}
		o.Result = rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "result")
		o.Size = int64(len(o.Result))
		return o
	}
	issue := func(rt *rapid.T, ttl time.Duration) {
		c := Fresh(rt)
		c.ID = nextID()
		c.Expires = now().Add(ttl).Truncate(time.Millisecond)
		if rapid.Bool().Draw(rt, "outOfBand") {
			c.Approval = drawApproval(rt)
		}
		if err := stores[0].Add(ctx, c); err != nil {
			rt.Fatalf("Add: %v", err)
		}
		m.Issue(c)
		ids = append(ids, c.ID)
	}
	// check compares a store's answer with the spec's. Details go to the
	// log, a stable message to Fatalf: rapid shrinks only while the
	// failure message stays the same, so it names the call, not the action
	// (Redeem or RedeemRace) that made it. (Actions are drawn by name, in
	// sorted order, and shrink toward the first: so Redeem shrinks before
	// RedeemRace, whose winner the scheduler picks.)
	check := func(rt *rapid.T, call string, id ledger.ID, via int, got ledger.Record, gotErr error, want ledger.Record, wantErr error, at time.Time) {
		if errors.Is(gotErr, ledger.ErrUnknown) && m.forgettable(id, at) {
			delete(m.recs, id) // forgotten, and stays so
			return
		}
		if !errors.Is(gotErr, wantErr) || ledger.ResultOf(gotErr) != ledger.ResultOf(wantErr) || (wantErr == nil) != (gotErr == nil) {
			rt.Logf("%s(#%d) via replica %d = %v, spec says %v", call, seq(id), via, gotErr, wantErr)
			rt.Fatalf("%s = %v, spec says %v", call, ledger.ResultOf(gotErr), ledger.ResultOf(wantErr))
		}
		if answersRecord(wantErr) && !sameRecord(got, want) {
			rt.Logf("%s(#%d) via replica %d returned %+v, spec says %+v", call, seq(id), via, got, want)
			rt.Fatalf("%s returned a record the spec does not hold", call)
		}
	}
	// decided checks what a store answered to p's decision on id, and
	// takes the time the store recorded it at: its own clock.
	decided := func(rt *rapid.T, id ledger.ID, via int, p ledger.Approver, approve bool, got ledger.Record, gotErr error, before, after time.Time) {
		want, wantErr := m.Decide(id, p, approve, before)
		if wantErr == nil && gotErr == nil && len(got.Decisions) == len(want.Decisions) {
			at := got.Decisions[len(got.Decisions)-1].At
			if f.NewAt != nil && !at.Equal(before) || at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
				rt.Logf("Decide(#%d) recorded at %v, called between %v and %v", seq(id), at, before, after)
				rt.Fatalf("Decide recorded a decision at a time it was not called")
			}
			want.Decisions[len(want.Decisions)-1].At = at
			r := m.recs[id]
			r.Decisions[len(r.Decisions)-1].At = at
		}
		check(rt, "Decide", id, via, got, gotErr, want, wantErr, before)
	}
	spend := func(rt *rapid.T, to ledger.State) {
		id := pick(rt)
		via := rapid.IntRange(0, len(stores)-1).Draw(rt, "replica")
		d := Long
		if to == ledger.Acting {
			d = lease(rt)
		}
		at := now()
		got, gotErr := stores[via].Spend(ctx, id, to, d)
		want, wantErr := m.Spend(id, to, d, at)
		check(rt, "Spend("+to.String()+")", id, via, got, gotErr, want, wantErr, at)
	}
	approver := func(rt *rapid.T) ledger.Approver {
		return rapid.SampledFrom(approverPool).Draw(rt, "approver")
	}
	actions := map[string]func(*rapid.T){
		"Decide": func(rt *rapid.T) {
			id := pick(rt)
			via := rapid.IntRange(0, len(stores)-1).Draw(rt, "replica")
			p, approve := approver(rt), rapid.Bool().Draw(rt, "approve")
			before := now()
			got, err := stores[via].Decide(ctx, id, p, approve)
			decided(rt, id, via, p, approve, got, err, before, now())
		},
		"DecideRace": func(rt *rapid.T) {
			id := pick(rt)
			n := rapid.IntRange(2, 6).Draw(rt, "deciders")
			ps, approves := make([]ledger.Approver, n), make([]bool, n)
			for i := range n {
				ps[i], approves[i] = approver(rt), rapid.Bool().Draw(rt, "approve")
			}
			recs, errs := make([]ledger.Record, n), make([]error, n)
			line := newStartLine(n)
			before := now()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { recs[i], errs[i] = stores[i%len(stores)].Decide(racing(ctx, line, i), id, ps[i], approves[i]) })
			}
			wg.Wait()
			after := now()
			for _, i := range decisionOrder(recs, errs) {
				decided(rt, id, i%len(stores), ps[i], approves[i], recs[i], errs[i], before, after)
			}
		},
		"Lookup": func(rt *rapid.T) {
			id := pick(rt)
			via := rapid.IntRange(0, len(stores)-1).Draw(rt, "replica")
			at := now()
			got, err := stores[via].Lookup(ctx, id)
			want, wantErr := m.Lookup(id, at)
			if err == nil && wantErr == nil && want.State == ledger.Cancelled && want.Approval == nil {
				// A cancelled confirmation approved in band may keep only
				// its id and expiry (the memory store drops the rest).
				got.Confirmation = ledger.Confirmation{ID: got.ID, Expires: got.Expires}
				want.Confirmation = ledger.Confirmation{ID: want.ID, Expires: want.Expires}
			}
			check(rt, "Lookup", id, via, got, err, want, wantErr, at)
		},
		"Issue":        func(rt *rapid.T) { issue(rt, time.Hour) },
		"IssueExpired": func(rt *rapid.T) { issue(rt, -time.Second) },
		"Redeem":       func(rt *rapid.T) { spend(rt, ledger.Acting) },
		"Cancel":       func(rt *rapid.T) { spend(rt, ledger.Cancelled) },
		"Complete": func(rt *rapid.T) {
			id := pick(rt)
			via := rapid.IntRange(0, len(stores)-1).Draw(rt, "replica")
			o := drawOutcome(rt)
			at := now()
			err := stores[via].Complete(ctx, id, o)
			check(rt, "Complete", id, via, ledger.Record{}, err, ledger.Record{}, m.Complete(id, o, at), at)
		},
		"RedeemRace": func(rt *rapid.T) {
			id := pick(rt)
			tos := rapid.SliceOfN(rapid.SampledFrom([]ledger.State{ledger.Acting, ledger.Cancelled}), 2, 8).Draw(rt, "racers")
			errs := make([]error, len(tos))
			recs := make([]ledger.Record, len(tos))
			line := newStartLine(len(tos))
			at := now()
			var wg sync.WaitGroup
			for i, to := range tos {
				wg.Go(func() { recs[i], errs[i] = stores[i%len(stores)].Spend(racing(ctx, line, i), id, to, Long) })
			}
			wg.Wait()
			for _, i := range linearized(rt, errs, "RedeemRace: two racers both spent one confirmation") {
				want, wantErr := m.Spend(id, tos[i], Long, at)
				check(rt, "Spend("+tos[i].String()+")", id, i%len(stores), recs[i], errs[i], want, wantErr, at)
			}
		},
		"CompleteRace": func(rt *rapid.T) {
			id := pick(rt)
			outs := rapid.SliceOfN(rapid.Custom(drawOutcome), 2, 8).Draw(rt, "completers")
			errs := make([]error, len(outs))
			line := newStartLine(len(outs))
			at := now()
			var wg sync.WaitGroup
			for i, o := range outs {
				wg.Go(func() { errs[i] = stores[i%len(stores)].Complete(racing(ctx, line, i), id, o) })
			}
			wg.Wait()
			for _, i := range linearized(rt, errs, "CompleteRace: two outcomes recorded for one confirmation") {
				check(rt, "Complete", id, i%len(stores), ledger.Record{}, errs[i], ledger.Record{}, m.Complete(id, outs[i], at), at)
			}
		},
	}
	if f.NewAt != nil {
		// Tick: time passes; confirmations reach their expiry, leases end.
		actions["Tick"] = func(rt *rapid.T) {
			d := time.Duration(rapid.IntRange(1, 90).Draw(rt, "minutes")) * time.Minute
			clock.Add(int64(d))
		}
		actions["Issue"] = func(rt *rapid.T) {
			issue(rt, time.Duration(rapid.IntRange(1, 120).Draw(rt, "ttlMinutes"))*time.Minute)
		}
	}
	rt.Repeat(actions)
}

// answersRecord reports whether a call that wants err must return the
// spec's record with it: on success, and with every answer from a record.
func answersRecord(err error) bool {
	return err == nil || errors.Is(err, ledger.ErrSpent) || errors.Is(err, ledger.ErrDeclined) ||
		errors.Is(err, ledger.ErrAwaitingApproval) || errors.Is(err, ledger.ErrDecided)
}

// The approvers the model test draws: alice listed by ID, bob and carol
// by group, mallory in no listed group.
var approverPool = []ledger.Approver{
	{ID: "alice"},
	{ID: "bob", Groups: []string{"group:ops"}},
	{ID: "carol\x00é", Groups: []string{"group:x", "group:ops"}},
	{ID: "mallory", Groups: []string{"group:x"}},
}

// drawApproval draws the out-of-band approval of a confirmation: one or
// two approvals, its requester none, an approver or a listed one, and a
// question a lossy store would mangle.
func drawApproval(rt *rapid.T) *ledger.Approval {
	return &ledger.Approval{
		Required:  rapid.IntRange(1, 2).Draw(rt, "required"),
		Approvers: []string{"alice", "group:ops"},
		Requester: rapid.SampledFrom([]string{"", "alice", "bob", "mallory"}).Draw(rt, "requester"),
		Question:  "Delete «a\u2068b\u2069»?\x00",
	}
}

// decisionOrder orders the racers of one DecideRace for the spec: by the
// number of decisions each saw recorded (a success counts the decisions
// before its own), those that saw none of the record (refused for who
// they are) first, and at each count the refused before the one that
// added a decision.
func decisionOrder(recs []ledger.Record, errs []error) []int {
	key := func(i int) int {
		switch {
		case errs[i] == nil:
			return 2*(len(recs[i].Decisions)-1) + 1
		case len(recs[i].Decisions) == 0 && recs[i].Approval == nil:
			return -1
		}
		return 2 * len(recs[i].Decisions)
	}
	order := make([]int, len(errs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return key(a) - key(b) })
	return order
}

// linearized orders the racers of one race, whose calls returned errs, for
// the spec: those told to await approval, the one that succeeded (if any),
// then the others. If two succeeded, it fails with twice, what the race
// let happen.
func linearized(rt *rapid.T, errs []error, twice string) []int {
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				rt.Logf("racers %d and %d both succeeded", winner, i)
				rt.Fatalf("%s", twice)
			}
			winner = i
		}
	}
	// A Redeem told to await approval found the confirmation pending: it
	// came before a winning Cancel.
	order := make([]int, 0, len(errs))
	for i, err := range errs {
		if errors.Is(err, ledger.ErrAwaitingApproval) {
			order = append(order, i)
		}
	}
	if winner >= 0 {
		order = append(order, winner)
	}
	for i, err := range errs {
		if i != winner && !errors.Is(err, ledger.ErrAwaitingApproval) {
			order = append(order, i)
		}
	}
	return order
}

// sameRecord reports whether a store's record is the spec's: the same
// confirmation (its approval included), state, outcome and decisions.
func sameRecord(got, want ledger.Record) bool {
	return equal(got.Confirmation, want.Confirmation) && got.State == want.State && sameOutcome(got.Outcome, want.Outcome) &&
		sameDecisions(got.Decisions, want.Decisions)
}

// seq is the number of a model id, for messages that read the same on
// every run.
func seq(id ledger.ID) uint64 { return binary.BigEndian.Uint64(id[8:]) }
