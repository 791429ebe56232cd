package ledger

import (
	"container/heap"
	"context"
	"fmt"
	"math"
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
	// Observe, if set, is called for every Add (as Issue) and Spend (as
	// Redeem or Cancel) with the store's lock held, so events arrive in the
	// order the operations took effect — the order trace validation
	// (spec/trace) needs, which Options.Observe on a Ledger, called after
	// the fact, cannot give under concurrency. ctx is the operation's. It
	// must be fast and must not call the store.
	Observe func(ctx context.Context, e Event)
}

// Memory is the in-process [Store]: a map under one mutex. It is safe for
// concurrent use; every Spend is atomic with respect to every other call.
//
// Expired entries are swept by the calls themselves (no goroutine): each Add
// and Spend first drops the entries whose expiry plus grace has passed, in
// expiry order. Pending confirmations are capped, so a flood of
// never-answered questions holds memory flat at the cap. Redeemed and
// cancelled ones are not capped: each is remembered until its expiry plus
// grace (11 minutes after issue with the defaults), so that a replay reads
// as spent; a spent entry keeps only its id, expiry and state.
//
// Memory (BENCHMARKS.md): a pending confirmation costs its fields (Tool,
// ArgsDigest and Subject copied into one allocation; Principal kept once
// per principal) plus about 130 bytes: 290 bytes with a typical 180-byte
// payload. A spent one still remembered costs about 115 bytes.
//
// It does not survive a restart and is not shared between processes: use a
// shared store (Redis, PostgreSQL) behind a load balancer.
type Memory struct {
	maxPending, maxPerPrincipal int
	grace                       time.Duration
	now                         func() time.Time
	observe                     func(context.Context, Event)

	// epoch is the store clock's reading at NewMemory; expiries are kept
	// as offsets from it, which keeps the monotonic clock's ordering in 8
	// bytes rather than a 24-byte time.Time.
	epoch time.Time

	mu           sync.Mutex
	entries      map[ID]*entry
	byExpiry     expiryQueue           // every entry, soonest expiry first
	pending      int                   // entries in state Pending (expired or not)
	perPrincipal map[string]*principal // principals of remembered entries
}

// An entry is one confirmation. While it is pending, fields holds Tool,
// ArgsDigest and Subject back to back (the lengths of the first two in
// toolLen and argsLen); once spent, fields is dropped: a replay needs only
// the id, the expiry and the state.
type entry struct {
	id        ID
	expires   time.Duration // Expires as an offset from the store's epoch
	state     State
	toolLen   uint32
	argsLen   uint32
	fields    string
	principal *principal
}

// principal holds one principal's name once for all its entries, and
// counts them: pending ones for the cap, all remembered ones to know when
// to forget it. Keeping it while its spent entries are remembered spares
// a principal who asks and answers in turn an allocation per question.
type principal struct {
	name          string
	pending, refs int
}

// confirmation rebuilds the Confirmation of a pending entry.
func (m *Memory) confirmation(e *entry) Confirmation {
	tool, rest := e.fields[:e.toolLen], e.fields[e.toolLen:]
	return Confirmation{
		ID:         e.id,
		Tool:       tool,
		ArgsDigest: rest[:e.argsLen],
		Principal:  e.principal.name,
		Subject:    rest[e.argsLen:],
		Expires:    m.epoch.Add(e.expires),
	}
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
		observe:         opts.Observe,
		entries:         make(map[ID]*entry),
		perPrincipal:    make(map[string]*principal),
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
	m.epoch = m.now()
	return m
}

// maxOffset bounds how far from the store's epoch an expiry may be.
const maxOffset = 100 * 365 * 24 * time.Hour

// Add implements [Store].
func (m *Memory) Add(ctx context.Context, c Confirmation) (err error) {
	if uint64(len(c.Tool)) > math.MaxUint32 || uint64(len(c.ArgsDigest)) > math.MaxUint32 {
		return fmt.Errorf("ledger: add %s: field longer than 4 GiB", c.ID)
	}
	// Bounded so that offsets, and differences of offsets, never overflow.
	expires := c.Expires.Sub(m.epoch)
	if expires > maxOffset || expires < -maxOffset {
		return fmt.Errorf("ledger: add %s: expiry %v is more than 100 years from the store's clock", c.ID, c.Expires)
	}
	// Built outside the lock.
	e := &entry{
		id:      c.ID,
		expires: expires,
		toolLen: uint32(len(c.Tool)),
		argsLen: uint32(len(c.ArgsDigest)),
		fields:  c.Tool + c.ArgsDigest + c.Subject,
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observe != nil {
		defer func() { m.observe(ctx, Event{Time: now, Action: ActionIssue, ID: c.ID, Result: ResultOf(err)}) }()
	}
	m.sweep(now.Sub(m.epoch))
	if _, ok := m.entries[c.ID]; ok {
		return fmt.Errorf("%w: %s", ErrExists, c.ID)
	}
	// Caps stop a flood of never-answered questions from growing memory
	// without bound, and one principal from starving the others.
	if m.pending >= m.maxPending {
		return fmt.Errorf("%w: %d pending", ErrFull, m.pending)
	}
	p := m.perPrincipal[c.Principal]
	if p == nil {
		p = &principal{name: c.Principal}
		m.perPrincipal[c.Principal] = p
	}
	if p.pending >= m.maxPerPrincipal {
		return fmt.Errorf("%w: %d pending for this principal", ErrFull, p.pending)
	}
	e.principal = p
	m.entries[c.ID] = e
	m.byExpiry.push(e)
	m.pending++
	p.pending++
	p.refs++
	return nil
}

// Spend implements [Store].
func (m *Memory) Spend(ctx context.Context, id ID, to State) (_ Confirmation, err error) {
	if to != Redeemed && to != Cancelled {
		return Confirmation{}, fmt.Errorf("ledger: cannot spend into state %v", to)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observe != nil {
		action := ActionRedeem
		if to == Cancelled {
			action = ActionCancel
		}
		defer func() { m.observe(ctx, Event{Time: now, Action: action, ID: id, Result: ResultOf(err)}) }()
	}
	at := now.Sub(m.epoch)
	m.sweep(at)
	e, ok := m.entries[id]
	switch {
	case !ok:
		return Confirmation{}, ErrUnknown
	case at >= e.expires:
		return Confirmation{}, ErrExpired
	case e.state == Redeemed:
		return Confirmation{}, ErrSpent
	case e.state == Cancelled:
		return Confirmation{}, ErrCancelled
	}
	c := m.confirmation(e)
	e.state = to
	m.release(e)
	return c, nil
}

// Len reports how many confirmations the store remembers, and how many of
// them are pending (including expired ones not yet swept).
func (m *Memory) Len() (remembered, pending int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries), m.pending
}

// release forgets the fields of the pending entry e and that it counts
// against the pending caps.
func (m *Memory) release(e *entry) {
	m.pending--
	e.principal.pending--
	e.fields = ""
}

// sweep forgets every entry whose expiry plus grace is not after at (an
// offset from the epoch, as Spend names it).
func (m *Memory) sweep(at time.Duration) {
	for {
		e := m.byExpiry.peek()
		if e == nil || at < e.expires || at-e.expires < m.grace {
			return
		}
		m.byExpiry.pop()
		delete(m.entries, e.id)
		if e.state == Pending {
			m.release(e)
		}
		p := e.principal
		if p.refs--; p.refs == 0 {
			delete(m.perPrincipal, p.name)
		}
	}
}

// expiryQueue orders entries by expiry, soonest first. Entries that arrive
// in expiry order — the usual case: one ledger, one TTL, one clock — go to
// a FIFO, pushed and popped in constant time; the others go to a heap. (A
// heap alone spent a third of a steady-state issue and redeem in Pop.)
type expiryQueue struct {
	fifo []*entry // fifo[head:], nondecreasing expiry
	head int
	late expiryHeap // entries that expire before the FIFO's last one
}

func (q *expiryQueue) push(e *entry) {
	if n := len(q.fifo); n == q.head || e.expires >= q.fifo[n-1].expires {
		q.fifo = append(q.fifo, e)
		return
	}
	heap.Push(&q.late, e)
}

// peek returns the entry with the soonest expiry, nil if there is none.
func (q *expiryQueue) peek() *entry {
	var e *entry
	if q.head < len(q.fifo) {
		e = q.fifo[q.head]
	}
	if len(q.late) > 0 && (e == nil || q.late[0].expires < e.expires) {
		e = q.late[0]
	}
	return e
}

// pop removes the entry peek returns.
func (q *expiryQueue) pop() {
	if q.head == len(q.fifo) || (len(q.late) > 0 && q.late[0].expires < q.fifo[q.head].expires) {
		heap.Pop(&q.late)
		return
	}
	q.fifo[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.fifo):
		q.fifo, q.head = q.fifo[:0], 0
	case q.head >= 1024 && 2*q.head >= len(q.fifo):
		// Reuse the front half rather than grow the slice forever.
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo, q.head = q.fifo[:n], 0
	}
}

// expiryHeap orders entries by expiry, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
