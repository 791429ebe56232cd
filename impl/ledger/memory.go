package ledger

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryOptions configures a [Memory] store. The zero value is ready to use.
type MemoryOptions struct {
	// MaxPending caps pending confirmations overall. Default 10,000.
	MaxPending int
	// MaxPendingPerPrincipal caps pending confirmations per principal.
	// Default 100.
	MaxPendingPerPrincipal int
	// Grace is how long a confirmation is remembered after its expiry, so
	// that a late replay reads as spent or expired rather than unknown.
	// Either way it is refused. Default 1 minute.
	Grace time.Duration
	// Now is the store's clock, which decides expiry. Default time.Now.
	Now func() time.Time
}

// Memory is the in-process [Store]: a map under one mutex. It is safe for
// concurrent use; every Spend is atomic with respect to every other call.
//
// Expired entries are swept by the calls themselves (no goroutine): each Add
// and Spend first drops the entries whose expiry plus grace has passed, in
// expiry order, so memory is bounded by the caps plus what expired within
// the last grace period.
//
// It does not survive a restart and is not shared between processes: use a
// shared store (Redis, PostgreSQL) behind a load balancer.
type Memory struct {
	maxPending, maxPerPrincipal int
	grace                       time.Duration
	now                         func() time.Time

	mu           sync.Mutex
	entries      map[ID]*entry
	byExpiry     expiryHeap     // every entry, soonest expiry first
	pending      int            // entries in state Pending (expired or not)
	perPrincipal map[string]int // pending entries per principal
}

type entry struct {
	c     Confirmation
	state State
}

var _ Store = (*Memory)(nil)

// Default caps of a [Memory] store.
const (
	DefaultMaxPending             = 10_000
	DefaultMaxPendingPerPrincipal = 100
	DefaultGrace                  = time.Minute
)

// NewMemory returns an empty in-memory store.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{
		maxPending:      opts.MaxPending,
		maxPerPrincipal: opts.MaxPendingPerPrincipal,
		grace:           opts.Grace,
		now:             opts.Now,
		entries:         make(map[ID]*entry),
		perPrincipal:    make(map[string]int),
	}
	if m.maxPending <= 0 {
		m.maxPending = DefaultMaxPending
	}
	if m.maxPerPrincipal <= 0 {
		m.maxPerPrincipal = DefaultMaxPendingPerPrincipal
	}
	if m.grace <= 0 {
		m.grace = DefaultGrace
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Add implements [Store].
func (m *Memory) Add(_ context.Context, c Confirmation) error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if _, ok := m.entries[c.ID]; ok {
		return fmt.Errorf("%w: %s", ErrExists, c.ID)
	}
	// Caps stop a flood of never-answered questions from growing memory
	// without bound, and one principal from starving the others.
	if m.pending >= m.maxPending {
		return fmt.Errorf("%w: %d pending", ErrFull, m.pending)
	}
	if m.perPrincipal[c.Principal] >= m.maxPerPrincipal {
		return fmt.Errorf("%w: %d pending for this principal", ErrFull, m.perPrincipal[c.Principal])
	}
	e := &entry{c: c, state: Pending}
	m.entries[c.ID] = e
	heap.Push(&m.byExpiry, e)
	m.pending++
	m.perPrincipal[c.Principal]++
	return nil
}

// Spend implements [Store].
func (m *Memory) Spend(_ context.Context, id ID, to State) (Confirmation, error) {
	if to != Redeemed && to != Cancelled {
		return Confirmation{}, fmt.Errorf("ledger: cannot spend into state %v", to)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	e, ok := m.entries[id]
	switch {
	case !ok:
		return Confirmation{}, ErrUnknown
	case !now.Before(e.c.Expires):
		return Confirmation{}, ErrExpired
	case e.state == Redeemed:
		return Confirmation{}, ErrSpent
	case e.state == Cancelled:
		return Confirmation{}, ErrCancelled
	}
	e.state = to
	m.release(e)
	return e.c, nil
}

// Len reports how many confirmations the store remembers, and how many of
// them are pending (including expired ones not yet swept).
func (m *Memory) Len() (remembered, pending int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries), m.pending
}

// release forgets that e counts against the pending caps.
func (m *Memory) release(e *entry) {
	m.pending--
	p := e.c.Principal
	if m.perPrincipal[p]--; m.perPrincipal[p] == 0 {
		delete(m.perPrincipal, p)
	}
}

// sweep forgets every entry whose expiry plus grace is not after now.
func (m *Memory) sweep(now time.Time) {
	for len(m.byExpiry) > 0 {
		e := m.byExpiry[0]
		if now.Before(e.c.Expires.Add(m.grace)) {
			return
		}
		heap.Pop(&m.byExpiry)
		delete(m.entries, e.c.ID)
		if e.state == Pending {
			m.release(e)
		}
	}
}

// expiryHeap orders entries by expiry, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].c.Expires.Before(h[j].c.Expires) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
