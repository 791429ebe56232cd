package linearizability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	// selfApproval: Decide does not exclude the requester.
	selfApproval bool
	// decideTwice: Decide records a decision whatever was decided before.
	decideTwice bool
	// redeemUnapproved: Spend redeems without looking at the approvals.
	redeemUnapproved bool

	mu sync.Mutex
	m  map[ledger.ID]*brokenEntry
}

type brokenEntry struct {
	ledger.Record
	leaseEnd time.Time
}

var _ ledger.Store = (*broken)(nil)

func (s *broken) Add(_ context.Context, c ledger.Confirmation) error {
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
		if _, declined := e.Declined(); declined {
			return e.Record, ledger.ErrDeclined
		}
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
	case to == ledger.Acting && !e.Approved() && !s.redeemUnapproved:
		return e.Record, ledger.ErrAwaitingApproval
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

// Decide is ledger.Record.Decide under the lock, unless a fault records a
// decision it refuses.
func (s *broken) Decide(_ context.Context, id ledger.ID, p ledger.Approver, approve bool) (ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e, ok := s.m[id]
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	if e.State == ledger.Acting && !now.Before(e.leaseEnd) {
		e.State = ledger.InDoubt
	}
	r, err := e.Record.Decide(p, approve, now)
	if faulty := s.selfApproval && errors.Is(err, ledger.ErrSelfApproval) && slices.Contains(e.Approval.Approvers, p.ID) ||
		s.decideTwice && errors.Is(err, ledger.ErrDecided); faulty && e.State == ledger.Pending && now.Before(e.Expires) {
		r, err = e.Record, nil
		r.Decisions = append(slices.Clip(r.Decisions), ledger.Decision{Approver: p.ID, Approve: approve, At: now})
		if !approve {
			r.State = ledger.Cancelled
		}
	}
	if err == nil {
		e.Record = r
	}
	return r, err
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
		{"self-approval", func() ledger.Store { return &broken{selfApproval: true} }, selfDecided},
		{"decision recorded twice", func() ledger.Store { return &broken{decideTwice: true} }, decidedTwice},
		{"redeem before approval", func() ledger.Store { return &broken{redeemUnapproved: true} }, redeemedUnapproved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The workload is random: a defect needing a rarer
			// interleaving (a requester deciding while its confirmation is
			// still pending) may not show in one history. Record afresh
			// until it does; the history that shows it must be rejected.
			const attempts = 8
			var (
				h    History
				what string
				ok   bool
			)
			for i := 0; i < attempts && !ok; i++ {
				h = record(t, tt.store(), workload())
				what, ok = tt.witness(h)
			}
			if !ok {
				t.Fatalf("the defect never showed in %d histories; the last: %v", attempts, h.Stats())
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
		if (in.Op == OpRedeem || in.Op == OpCancel) && out.Result == ledger.ResultOK {
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
		if e, ok := expiry[in.ID]; ok && (in.Op == OpRedeem || in.Op == OpCancel) && out.Result == ledger.ResultOK && in.From >= e {
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

// issues returns the Issue input of every confirmation in h.
func issues(h History) map[ledger.ID]Input {
	m := make(map[ledger.ID]Input)
	for _, op := range h.Operations {
		if in := op.Input.(Input); in.Op == OpIssue {
			m[in.ID] = in
		}
	}
	return m
}

// selfDecided finds a decision recorded by the confirmation's requester.
func selfDecided(h History) (string, bool) {
	is, n := issues(h), 0
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op == OpDecide && out.Result == ledger.ResultOK && is[in.ID].Requester&(1<<in.Approver) != 0 {
			n++
		}
	}
	return fmt.Sprintf("%d decisions recorded by the confirmation's requester", n), n > 0
}

// decidedTwice finds a confirmation with a decision recorded twice by one
// approver, or more than its outcome took: more approvals than it needs,
// or anything beside a decline.
func decidedTwice(h History) (string, bool) {
	is := issues(h)
	type count struct {
		by               map[uint8]int
		approvals, total int
		declined         bool
	}
	counts := make(map[ledger.ID]*count)
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op != OpDecide || out.Result != ledger.ResultOK {
			continue
		}
		c := counts[in.ID]
		if c == nil {
			c = &count{by: make(map[uint8]int)}
			counts[in.ID] = c
		}
		c.by[in.Approver]++
		c.total++
		if in.Approve {
			c.approvals++
		} else {
			c.declined = true
		}
	}
	n := 0
	for id, c := range counts {
		twice := c.approvals > int(is[id].Need) || c.declined && c.total > 1
		for _, k := range c.by {
			twice = twice || k > 1
		}
		if twice {
			n++
		}
	}
	return fmt.Sprintf("%d confirmations with a decision recorded twice", n), n > 0
}

// redeemedUnapproved finds a confirmation redeemed with fewer approvals
// recorded, in the whole history, than it needs.
func redeemedUnapproved(h History) (string, bool) {
	is := issues(h)
	approvals := make(map[ledger.ID]int)
	for _, op := range h.Operations {
		if in, out := op.Input.(Input), op.Output.(Output); in.Op == OpDecide && in.Approve && out.Result == ledger.ResultOK {
			approvals[in.ID]++
		}
	}
	n := 0
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op == OpRedeem && out.Result == ledger.ResultOK && approvals[in.ID] < int(is[in.ID].Need) {
			n++
		}
	}
	return fmt.Sprintf("%d redeems of a confirmation short of its approvals", n), n > 0
}
