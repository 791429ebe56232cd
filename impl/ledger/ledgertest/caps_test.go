package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

func TestCapsMemory(t *testing.T) {
	Caps(t, func(_ testing.TB, maxPending, perPrincipal int) (ledger.Store, ledger.Store) {
		m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: maxPending, MaxPendingPerPrincipal: perPrincipal})
		return m, m
	})
}

// checkThenAddStore caps pending confirmations the way a store without an
// atomic Add would: it counts, lets go of its lock, and inserts if the
// count it read had room. One at a time it is exact; racing, it admits
// past its caps.
type checkThenAddStore struct {
	maxPending, perPrincipal int
	mu                       sync.Mutex
	m                        map[ledger.ID]ledger.Confirmation
	spent                    map[ledger.ID]bool
}

func (s *checkThenAddStore) Add(_ context.Context, c ledger.Confirmation) error {
	s.mu.Lock()
	if _, ok := s.m[c.ID]; ok {
		s.mu.Unlock()
		return ledger.ErrExists
	}
	total, mine := 0, 0
	for id, p := range s.m {
		if !s.spent[id] {
			total++
			if p.Principal == c.Principal {
				mine++
			}
		}
	}
	s.mu.Unlock()
	time.Sleep(time.Millisecond) // the window between check and act
	if total >= s.maxPending || mine >= s.perPrincipal {
		return ledger.ErrFull
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[c.ID] = c
	return nil
}

func (s *checkThenAddStore) Spend(_ context.Context, id ledger.ID, to ledger.State, _ time.Duration) (ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[id]
	switch {
	case !ok:
		return ledger.Record{}, ledger.ErrUnknown
	case s.spent[id]:
		return ledger.Record{}, ledger.ErrInDoubt
	}
	s.spent[id] = true
	return ledger.Record{Confirmation: c, State: to}, nil
}

func (s *checkThenAddStore) Complete(context.Context, ledger.ID, ledger.Outcome) error {
	return ledger.ErrNotActing
}

func (s *checkThenAddStore) Decide(context.Context, ledger.ID, ledger.Approver, bool) (ledger.Record, error) {
	return ledger.Record{}, ledger.ErrInBand
}

func (s *checkThenAddStore) Lookup(_ context.Context, id ledger.ID) (ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[id]
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return ledger.Record{Confirmation: c, State: ledger.Pending}, nil
}

// capsControls are the negative controls of Caps (see controls).
func capsControls() []control {
	return []control{
		{"Caps/no per-principal cap", "past her own cap",
			func(t *testing.T) {
				Caps(t, func(_ testing.TB, maxPending, _ int) (ledger.Store, ledger.Store) {
					m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: maxPending, MaxPendingPerPrincipal: maxPending})
					return m, m
				})
			}},
		{"Caps/check then add", "racing Adds admitted",
			func(t *testing.T) {
				Caps(t, func(_ testing.TB, maxPending, perPrincipal int) (ledger.Store, ledger.Store) {
					s := &checkThenAddStore{maxPending: maxPending, perPrincipal: perPrincipal,
						m: map[ledger.ID]ledger.Confirmation{}, spent: map[ledger.ID]bool{}}
					return s, s
				})
			}},
	}
}
