package ledgertest

import (
	"context"
	"encoding/binary"
	"errors"
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
// requires the same outcome from both.
type spec struct {
	status map[ledger.ID]ledger.State // absent: never issued here
	expiry map[ledger.ID]time.Time
}

// Issue: a new confirmation becomes pending.
func (m *spec) Issue(c ledger.Confirmation) {
	m.status[c.ID] = ledger.Pending
	m.expiry[c.ID] = c.Expires
}

// Spend is Redeem (to = Redeemed) or Cancel (to = Cancelled): the atomic
// compare-and-set on the store, at the store's time now.
func (m *spec) Spend(id ledger.ID, to ledger.State, now time.Time) error {
	st, ok := m.status[id]
	switch {
	case !ok:
		return ledger.ErrUnknown
	case !now.Before(m.expiry[id]):
		return ledger.ErrExpired
	case st == ledger.Redeemed:
		return ledger.ErrSpent
	case st == ledger.Cancelled:
		return ledger.ErrCancelled
	}
	m.status[id] = to
	return nil
}

// startLine lines up the racers of one Race. The Race puts it in the
// context of each racer's Spend; real stores never look at it. The
// deliberately racy store of the negative control (broken_test.go) waits at
// it between its check and its act, so that its race window opens on every
// Race, however loaded the machine: timing windows made the control's
// failure come and go while rapid shrank it, and on a loaded CI runner the
// shrinking ran out of time with a longer sequence than the shortest.
type startLine struct {
	left atomic.Int32
	all  chan struct{} // closed when every racer has reached the line
}

type startLineKey struct{}

func newStartLine(racers int) *startLine {
	l := &startLine{all: make(chan struct{})}
	l.left.Store(int32(racers))
	return l
}

// reach marks one racer at the line and waits for the rest. It gives up
// after ten seconds, so that a store that calls it wrongly (twice in one
// Spend, say) cannot hang the test.
func (l *startLine) reach() {
	if l.left.Add(-1) == 0 {
		close(l.all)
	}
	select {
	case <-l.all:
	case <-time.After(10 * time.Second):
	}
}

// Model checks a store against the spec with rapid, in sequences of Issue,
// Redeem, Cancel and concurrent races on one confirmation, through one or
// (when the factory can) two handles on the same store. With a clock the
// store honours (Factory.NewAt), time also advances between steps.
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
	m := &spec{status: map[ledger.ID]ledger.State{}, expiry: map[ledger.ID]time.Time{}}
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
	issue := func(rt *rapid.T, ttl time.Duration) {
		c := Fresh(rt)
		c.ID = nextID()
		c.Expires = now().Add(ttl).Truncate(time.Millisecond)
		if err := stores[0].Add(ctx, c); err != nil {
			rt.Fatalf("Add: %v", err)
		}
		m.Issue(c)
		ids = append(ids, c.ID)
	}
	spend := func(rt *rapid.T, to ledger.State) {
		id := pick(rt)
		via := rapid.IntRange(0, len(stores)-1).Draw(rt, "replica")
		_, got := stores[via].Spend(ctx, id, to)
		want := m.Spend(id, to, now())
		if !sameOutcome(got, want) {
			// Details to the log, a stable message to Fatalf: rapid shrinks
			// only while the failure message stays the same.
			rt.Logf("Spend(#%d, %v) via replica %d = %v, spec says %v", seq(id), to, via, got, want)
			rt.Fatalf("Spend(%v) = %v, spec says %v", to, ledger.ResultOf(got), ledger.ResultOf(want))
		}
	}
	actions := map[string]func(*rapid.T){
		"Issue":        func(rt *rapid.T) { issue(rt, time.Hour) },
		"IssueExpired": func(rt *rapid.T) { issue(rt, -time.Second) },
		"Redeem":       func(rt *rapid.T) { spend(rt, ledger.Redeemed) },
		"Cancel":       func(rt *rapid.T) { spend(rt, ledger.Cancelled) },
		"Race": func(rt *rapid.T) {
			id := pick(rt)
			tos := rapid.SliceOfN(rapid.SampledFrom([]ledger.State{ledger.Redeemed, ledger.Cancelled}), 2, 8).Draw(rt, "racers")
			errs := make([]error, len(tos))
			raceCtx := context.WithValue(ctx, startLineKey{}, newStartLine(len(tos)))
			var wg sync.WaitGroup
			for i, to := range tos {
				wg.Go(func() { _, errs[i] = stores[i%len(stores)].Spend(raceCtx, id, to) })
			}
			wg.Wait()
			// Linearize: the spec applies the winner first, then the others.
			winner := -1
			for i, err := range errs {
				if err == nil {
					if winner >= 0 {
						rt.Logf("Race on #%d: racers %d and %d both spent it", seq(id), winner, i)
						rt.Fatalf("Race: two racers both spent one confirmation")
					}
					winner = i
				}
			}
			order := make([]int, 0, len(tos))
			if winner >= 0 {
				order = append(order, winner)
			}
			for i := range tos {
				if i != winner {
					order = append(order, i)
				}
			}
			at := now()
			for _, i := range order {
				if want := m.Spend(id, tos[i], at); !sameOutcome(errs[i], want) {
					rt.Logf("Race on #%d: racer %d (%v) got %v, spec says %v", seq(id), i, tos[i], errs[i], want)
					rt.Fatalf("Race: a racer got %v, spec says %v", ledger.ResultOf(errs[i]), ledger.ResultOf(want))
				}
			}
		},
	}
	if f.NewAt != nil {
		// Tick: time passes; confirmations reach their expiry.
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

// sameOutcome reports whether a store's answer matches the spec's. A store
// may forget an expired confirmation (after its grace period) and answer
// ErrUnknown where the spec still says ErrExpired: both refuse.
func sameOutcome(got, want error) bool {
	switch {
	case want == nil:
		return got == nil
	case errors.Is(want, ledger.ErrExpired):
		return errors.Is(got, ledger.ErrExpired) || errors.Is(got, ledger.ErrUnknown)
	}
	return errors.Is(got, want)
}

// seq is the number of a model id, for messages that read the same on
// every run.
func seq(id ledger.ID) uint64 { return binary.BigEndian.Uint64(id[8:]) }
