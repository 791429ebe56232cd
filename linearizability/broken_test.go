package linearizability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// broken is a store with one deliberate defect, chosen by its flags, and
// otherwise the in-memory store's behaviour (minus caps and sweeping).
type broken struct {
	// checkThenAct: Spend reads the state under the lock, releases it,
	// yields, and writes under the lock again — so several concurrent
	// spends can all see "pending" and all succeed.
	checkThenAct bool
	// ignoreExpiry: Spend honours confirmations past their expiry.
	ignoreExpiry bool
	// rerun: a Redeem of a confirmation whose outcome is recorded runs
	// again: it succeeds, as if the approval were new.
	rerun bool
	// blindComplete: Complete records its outcome whatever the state and
	// the lease: no compare-and-set from acting.
	blindComplete bool

	mu sync.Mutex
	m  map[ledger.ID]*brokenEntry
}

type brokenEntry struct {
	ledger.Record
	leaseEnd time.Time
}

var _ ledger.Store = (*broken)(nil)

func (s *broken) Add(_ context.Context, c ledger.Confirmation) error {
	if c.Approval != nil {
		return fmt.Errorf("broken: out-of-band approval not supported")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[ledger.ID]*brokenEntry)
	}
	if _, ok := s.m[c.ID]; ok {
		return ledger.ErrExists
	}
	s.m[c.ID] = &brokenEntry{Record: ledger.Record{Confirmation: c, State: ledger.Pending}}
	return nil
}

// answer is what a spend of the spent entry e gets at now. s is locked.
func (e *brokenEntry) answer(now time.Time) (ledger.Record, error) {
	if e.State == ledger.Acting && !now.Before(e.leaseEnd) {
		e.State = ledger.InDoubt
	}
	switch e.State {
	case ledger.Cancelled:
		return ledger.Record{}, ledger.ErrCancelled
	case ledger.Acting:
		return e.Record, ledger.ErrInProgress
	case ledger.Done, ledger.Failed:
		return e.Record, ledger.ErrDone
	}
	return e.Record, ledger.ErrInDoubt
}

func (s *broken) Spend(_ context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	s.mu.Lock()
	now := time.Now() // under the lock, as the in-memory store reads it
	e, ok := s.m[id]
	var st ledger.State
	if ok {
		st = e.State
	}
	if !s.checkThenAct {
		defer s.mu.Unlock()
	} else {
		s.mu.Unlock()
	}
	switch {
	case !ok:
		return ledger.Record{}, ledger.ErrUnknown
	case s.rerun && to == ledger.Acting && (st == ledger.Done || st == ledger.Failed):
	case st != ledger.Pending:
		if s.checkThenAct {
			s.mu.Lock()
			defer s.mu.Unlock()
		}
		return e.answer(now)
	case !s.ignoreExpiry && !now.Before(e.Expires):
		return ledger.Record{}, ledger.ErrExpired
	}
	if s.checkThenAct {
		// The window between check and act, widened by handing the
		// processor to another goroutine (no sleep: the scheduler, not
		// the wall clock, opens the race).
		runtime.Gosched()
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	e.State, e.leaseEnd, e.Outcome = to, now.Add(lease), ledger.Outcome{}
	return e.Record, nil
}

func (s *broken) Complete(_ context.Context, id ledger.ID, o ledger.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e, ok := s.m[id]
	switch {
	case !ok:
		return ledger.ErrUnknown
	case s.blindComplete:
	case e.State == ledger.Pending && !now.Before(e.Expires):
		return ledger.ErrExpired
	case e.State == ledger.Pending:
		return ledger.ErrNotActing
	case e.State != ledger.Acting || !now.Before(e.leaseEnd):
		_, err := e.answer(now)
		return err
	}
	e.State, e.Outcome = o.Kind.State(), o
	return nil
}

// Decide answers as a store of in-band confirmations only (the workload
// issues no other).
func (s *broken) Decide(ctx context.Context, id ledger.ID, _ ledger.Approver, _ bool) (ledger.Record, error) {
	if _, err := s.Lookup(ctx, id); err != nil {
		return ledger.Record{}, err
	}
	return ledger.Record{}, ledger.ErrInBand
}

func (s *broken) Lookup(_ context.Context, id ledger.ID) (ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return e.Record, nil
}

// TestBrokenStores is the negative control: the same workload and checker
// must reject each defective store, and the history must show the defect
// (so the rejection is for the right reason). The visualization of each
// failing history is written under os.TempDir() and named in the log.
func TestBrokenStores(t *testing.T) {
	tests := []struct {
		name  string
		store func() ledger.Store
		// witness finds the defect in the history.
		witness func(h History) (string, bool)
	}{
		{"check-then-act", func() ledger.Store { return &broken{checkThenAct: true} }, doubleSpend},
		{"ignores expiry", func() ledger.Store { return &broken{ignoreExpiry: true} }, spentAfterExpiry},
		{"replay runs again", func() ledger.Store { return &broken{rerun: true} }, redeemedAfterOutcome},
		{"complete without compare-and-set", func() ledger.Store { return &broken{blindComplete: true} }, completedOutOfTurn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workload()
			h := record(t, tt.store(), w)
			what, ok := tt.witness(h)
			if !ok {
				t.Fatalf("the defect never showed in the history: %v", h.Stats())
			}
			t.Logf("defect in the history: %s", what)
			r := Verify(h, checkTimeout)
			t.Logf("history: %v", r.Stats)
			t.Logf("porcupine: %s in %v", r.Result, r.Elapsed.Round(time.Millisecond))
			if r.Result != porcupine.Illegal {
				t.Fatalf("porcupine says %s for a %s store, want Illegal", r.Result, tt.name)
			}
			bad := r.Violations()
			if len(bad) == 0 {
				t.Fatal("Illegal, but no partition without a linearization")
			}
			t.Logf("%d confirmations without a linearization; the first:\n%s", len(bad), Describe(bad[0]))

			dir := filepath.Join(os.TempDir(), "mcp-confirm-linearizability")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+".html")
			if err := r.Visualize(path); err != nil {
				t.Fatalf("Visualize: %v", err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Size() == 0 {
				t.Fatalf("visualization not written: %v", err)
			}
			t.Logf("visualization (%d KiB): %s", fi.Size()>>10, path)
		})
	}
}

// doubleSpend finds a confirmation spent successfully more than once.
func doubleSpend(h History) (string, bool) {
	wins := make(map[ledger.ID]int)
	most, worst := 0, ledger.ID{}
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op != OpIssue && out.Result == ledger.ResultOK {
			if wins[in.ID]++; wins[in.ID] > most {
				most, worst = wins[in.ID], in.ID
			}
		}
	}
	n := 0
	for _, w := range wins {
		if w > 1 {
			n++
		}
	}
	return fmt.Sprintf("%d confirmations spent more than once; %s %d times", n, short(worst), most), n > 0
}

// spentAfterExpiry finds a spend that succeeded although it was called
// after its confirmation's expiry.
func spentAfterExpiry(h History) (string, bool) {
	expiry := make(map[ledger.ID]int64)
	for _, op := range h.Operations {
		if in := op.Input.(Input); in.Op == OpIssue {
			expiry[in.ID] = in.Expires
		}
	}
	n := 0
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if e, ok := expiry[in.ID]; ok && in.Op != OpIssue && out.Result == ledger.ResultOK && in.From >= e {
			n++
		}
	}
	return fmt.Sprintf("%d spends succeeded after their confirmation's expiry", n), n > 0
}

// redeemedAfterOutcome finds a redeem that succeeded after an outcome of
// its confirmation had been recorded: a replay that ran again.
func redeemedAfterOutcome(h History) (string, bool) {
	recorded := make(map[ledger.ID]int64) // when the first outcome was recorded
	for _, op := range h.Operations {
		if in, out := op.Input.(Input), op.Output.(Output); in.Op == OpComplete && out.Result == ledger.ResultOK {
			if t, ok := recorded[in.ID]; !ok || op.Return < t {
				recorded[in.ID] = op.Return
			}
		}
	}
	n := 0
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if t, ok := recorded[in.ID]; ok && in.Op == OpRedeem && out.Result == ledger.ResultOK && op.Call > t {
			n++
		}
	}
	return fmt.Sprintf("%d redeems succeeded after their confirmation's outcome was recorded", n), n > 0
}

// completedOutOfTurn finds a confirmation with two outcomes recorded, or
// one recorded without a redeem before it.
func completedOutOfTurn(h History) (string, bool) {
	completes, redeems := make(map[ledger.ID]int), make(map[ledger.ID]int)
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Result != ledger.ResultOK {
			continue
		}
		switch in.Op {
		case OpComplete:
			completes[in.ID]++
		case OpRedeem:
			redeems[in.ID]++
		}
	}
	n := 0
	for id, c := range completes {
		if c > 1 || redeems[id] == 0 {
			n++
		}
	}
	return fmt.Sprintf("%d confirmations with two outcomes recorded, or one never redeemed", n), n > 0
}
