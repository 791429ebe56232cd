package ledger

import (
	"container/heap"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
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
	// Observe, if set, is called for every Add (as Issue), Spend (as
	// Redeem or Cancel) and Decide with a store-wide lock held, so events arrive in
	// the order the operations took effect — the order trace validation
	// (spec/trace) needs, which Options.Observe on a Ledger, called after
	// the fact, cannot give under concurrency. While it is set, calls take
	// effect one at a time. ctx is the operation's. It must be fast and
	// must not call the store.
	Observe func(ctx context.Context, e Event)
	// Audit, if set, is the trail every Add, Spend, Decide and Complete
	// writes its record to (package audit; [audit.Recorded] says which
	// answers get one), under the confirmation's shard lock and before
	// the transition takes effect: the record is appended and synced,
	// then the transition is applied, and no call sees it before. A
	// record that cannot be written fails the call, changing nothing
	// (an error that is none of the ledger's sentinels: the caller acts
	// on nothing). While it is set, audited calls take effect one at a
	// time, each costing a write synced to the file's data (one
	// pwritev2 with RWF_DSYNC on Linux; see [audit.File]).
	Audit *audit.File
}

// Memory is the in-process [Store]. It is safe for concurrent use; every
// Spend, Complete and Decide is atomic with respect to every other call,
// and reads the clock while it holds its shard's lock.
//
// It keeps its confirmations in 64 shards, each a map and an expiry queue
// under its own mutex, and is an [IDSource]: an id it chooses names, in
// the low six bits of its first byte, the shard of its principal (a hash
// of the name keyed at random per store). So the calls of different
// principals seldom touch the same lock, map or queue, and go on side by
// side on different CPUs, while one principal's confirmations stay
// together, as in one map. Those six bits say nothing but which ids may
// share a principal; the other 122 are random, so ids stay unguessable.
// An id from elsewhere (Options.Rand) goes to the shard its bits name. The
// caps are exact and shared by all shards: an atomic count of pending
// confirmations, and a count per principal under one of 64 locks, also
// chosen by the hash of its name.
//
// Expired entries are swept by the calls themselves (no goroutine): each
// Add, Spend and Complete first drops the entries of its shard whose
// expiry (or lease's end, if later) plus grace has passed, in that order; every 64th Add of a shard also sweeps
// another, in turn, if one of its entries is due, so that the shards of
// principals who stopped asking forget too; and an Add that finds a cap
// reached sweeps every shard that is due before it refuses. A shard that
// drains to a quarter of its peak moves to smaller tables: a Go map never
// shrinks. Pending confirmations are capped, so a flood of never-answered
// questions holds memory flat at the cap. Redeemed and cancelled ones are
// not capped: each is remembered until its expiry plus grace (11 minutes
// after issue with the defaults), or its lease's end plus grace if that is
// later, so that every retry is answered from the record. A cancelled
// entry keeps only its id, expiry and state; a redeemed one keeps its
// fields too, so that a retry can be checked against what the approval was
// for, and its outcome once recorded (in its binary form, in a map of its
// shard), which the ledger bounds ([Options.MaxResult]). One that needs
// out-of-band approval keeps, in another map of its shard, a copy of its
// [Approval] (its question included, at most [MaxQuestion] bytes) and
// its decisions, cancelled or not, so that a decline is answered with who
// declined; a confirmation approved in band costs nothing more for it.
//
// Memory (BENCHMARKS.md): a pending confirmation costs its fields (Tool,
// ArgsDigest and Subject copied into one allocation; Principal kept once
// per principal) plus about 130 bytes: 290 bytes with a typical 180-byte
// payload, and as much once redeemed. Recording a typical 107-byte result
// adds about 200 bytes: 490 in all.
//
// It does not survive a restart and is not shared between processes: use a
// shared store (Redis, PostgreSQL) behind a load balancer.
type Memory struct {
	maxPending, maxPerPrincipal int
	grace                       time.Duration
	now                         func() time.Time
	observe                     func(context.Context, Event)
	audit                       *audit.File
	auditFault                  func() error // tests: fails between a record and its transition

	// epoch is the store clock's reading at NewMemory; expiries are kept
	// as offsets from it, which keeps the monotonic clock's ordering in 8
	// bytes rather than a 24-byte time.Time.
	epoch time.Time
	seed  maphash.Seed // spreads principals over the shards

	// order serializes every Add and Spend while observe is set, so that
	// events arrive in the order the calls took effect.
	order sync.Mutex

	_       [64]byte
	pending atomic.Int64 // entries in state Pending (expired or not), in every shard
	_       [64]byte

	shards     [numShards]shard
	principals [numShards]principals
}

// numShards is a power of two: an id's shard is its first byte's low
// bits, a principal's the low bits of its name's hash. Two principals share
// a shard with probability 1/64.
const numShards = 64

// sweepEvery is how many Adds of a shard go by between its sweeps of
// another shard.
const sweepEvery = 64

// A shard holds the entries whose ids name it.
type shard struct {
	mu       sync.Mutex
	index    int // in its store's shards
	entries  map[ID]*entry
	outcomes map[ID][]byte // binary forms of the entries' outcomes; nil until the first
	// approvals holds what the entries that need out-of-band approval
	// need and the decisions recorded; nil until the first.
	approvals map[ID]*approvalState
	byExpiry  expiryQueue // every entry, soonest to forget first
	peak      int         // most entries since entries was made
	adds      uint        // Adds, to sweep another shard every sweepEvery
	// due is when its soonest entry is to be swept (its expiry plus
	// grace, as an offset from the epoch), for other shards to read
	// without the lock; written under it.
	due atomic.Int64
	_   [64]byte // keeps a shard's lock off its neighbour's cache line
}

// approvalState is what a shard keeps of a confirmation that needs
// out-of-band approval: the Approval it was added with (a copy) and the
// decisions recorded, in order. Kept beside the entry rather than in it,
// so that a confirmation approved in band costs nothing more.
type approvalState struct {
	approval  *Approval
	decisions []Decision
}

// principals holds the principals whose names hash to its index.
type principals struct {
	mu     sync.Mutex
	byName map[string]*principal // principals of remembered entries
	_      [64]byte
}

// An entry is one confirmation. fields holds Tool, ArgsDigest and Subject
// back to back (the lengths of the first two in toolLen and argsLen); a
// cancelled entry drops them: a replay needs only the id, the expiry and
// the state. A redeemed one keeps them, so that a retry can be checked
// against what the approval was for; its outcome, once recorded, is in its
// shard's outcomes. 64 bytes: a pointer more would make it 80.
type entry struct {
	id        ID
	expires   time.Duration // Expires as an offset from the store's epoch
	leaseEnd  time.Duration // once redeemed: when the lease ends, as an offset
	fields    string
	principal *principal
	toolLen   uint16
	argsLen   uint16
	state     State
	// requeued: the entry is in its shard's queue by its lease's end,
	// which outlived its expiry, rather than by its expiry.
	requeued bool
}

// forgetAfter is when e may be forgotten, less the grace: its expiry, or
// the end of its lease once it has been put back in the queue by it. It is
// the queue's key, and changes only while e is out of the queue.
func (e *entry) forgetAfter() time.Duration {
	if e.requeued {
		return e.leaseEnd
	}
	return e.expires
}

// principal holds one principal's name once for all its entries, and
// counts them: pending ones for the cap, all remembered ones to know when
// to forget it. Keeping it while its spent entries are remembered spares
// a principal who asks and answers in turn an allocation per question.
// Its counts grow only under home.mu, and shrink without it: a count read
// under home.mu can only be too high, never too low.
type principal struct {
	name          string
	home          *principals
	pending, refs atomic.Int64
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

var (
	_ Store    = (*Memory)(nil)
	_ IDSource = (*Memory)(nil)
)

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
		audit:           opts.Audit,
		seed:            maphash.MakeSeed(),
	}
	for i := range m.shards {
		m.shards[i].index = i
		m.shards[i].entries = make(map[ID]*entry)
		m.shards[i].due.Store(math.MaxInt64)
	}
	for i := range m.principals {
		m.principals[i].byName = make(map[string]*principal)
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

// NewID implements [IDSource]: 122 bits from crypto/rand, and in the low
// six bits of the first byte the shard of principal. rand.Read never
// fails: it crashes the program.
func (m *Memory) NewID(principal string) ID {
	var id ID
	rand.Read(id[:])
	id[0] = id[0]&^(numShards-1) | byte(m.principalShard(principal))
	return id
}

func (m *Memory) principalShard(name string) uint64 {
	return maphash.String(m.seed, name) & (numShards - 1)
}

func (m *Memory) shard(id ID) *shard { return &m.shards[id[0]&(numShards-1)] }

// maxOffset bounds how far from the store's epoch an expiry may be.
const maxOffset = 100 * 365 * 24 * time.Hour

// Add implements [Store].
func (m *Memory) Add(ctx context.Context, c Confirmation) (err error) {
	// Bounded so that offsets, and differences of offsets, never overflow.
	expires := c.Expires.Sub(m.epoch)
	if expires > maxOffset || expires < -maxOffset {
		return fmt.Errorf("ledger: add %s: expiry %v is more than 100 years from the store's clock", c.ID, c.Expires)
	}
	if len(c.Tool) > math.MaxUint16 || len(c.ArgsDigest) > math.MaxUint16 {
		return fmt.Errorf("ledger: add %s: tool or argument digest longer than 64 KiB", c.ID)
	}
	if err := c.Approval.Check(); err != nil {
		return fmt.Errorf("ledger: add %s: %w", c.ID, err)
	}
	var appr *approvalState
	if c.Approval != nil {
		appr = &approvalState{approval: c.Approval.clone()}
	}
	var rec *audit.Record
	if m.audit != nil {
		r := AuditIssue(ctx, c)
		rec = &r
	}
	// Built outside the lock.
	e := &entry{
		id:      c.ID,
		expires: expires,
		toolLen: uint16(len(c.Tool)),
		argsLen: uint16(len(c.ArgsDigest)),
		fields:  c.Tool + c.ArgsDigest + c.Subject,
	}
	var now time.Time
	if m.observe != nil {
		m.order.Lock()
		defer m.order.Unlock()
		defer func() { m.observe(ctx, IssueEvent(now, c, err)) }()
	}
	// Read once any lock is held, so that events come in the order of
	// their times. (The shard's lock comes later: an Add's answer does not
	// depend on the time, only which entries it sweeps first.)
	now = m.now()
	at := now.Sub(m.epoch)
	err = m.add(e, appr, c.Principal, at, rec)
	if errors.Is(err, ErrFull) {
		// Expired entries of the other shards may be what fills a cap:
		// sweep them, then try once more.
		swept := false
		for i := range m.shards {
			if s := &m.shards[i]; int64(at) >= s.due.Load() {
				s.mu.Lock()
				s.sweep(m, at)
				s.mu.Unlock()
				swept = true
			}
		}
		if swept {
			err = m.add(e, appr, c.Principal, at, rec)
		}
	}
	return err
}

// add puts e in its shard, pending for principal name, with appr if it
// needs out-of-band approval, if its id is new and the caps allow, and
// writes rec, its audit record, if set, before it takes effect.
func (m *Memory) add(e *entry, appr *approvalState, name string, at time.Duration, rec *audit.Record) error {
	s := m.shard(e.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(m, at)
	if _, ok := s.entries[e.id]; ok {
		return fmt.Errorf("%w: %s", ErrExists, e.id)
	}
	if err := m.admit(e, name); err != nil {
		return err
	}
	if rec != nil {
		pend, err := m.auditBegin(*rec)
		if err != nil {
			m.unpend(e)
			e.principal.release()
			return err
		}
		defer pend.Commit() // before s.mu's unlock: deferred after it
	}
	s.entries[e.id] = e
	if appr != nil {
		if s.approvals == nil {
			s.approvals = make(map[ID]*approvalState)
		}
		s.approvals[e.id] = appr
	}
	s.peak = max(s.peak, len(s.entries))
	s.byExpiry.push(e)
	if due := m.due(e); due < s.due.Load() {
		s.due.Store(due)
	}
	if s.adds++; s.adds%sweepEvery == 0 {
		// TryLock: never wait, and never deadlock, holding s.
		other := &m.shards[(s.index+int(s.adds/sweepEvery))%numShards]
		if other != s && int64(at) >= other.due.Load() && other.mu.TryLock() {
			other.sweep(m, at)
			other.mu.Unlock()
		}
	}
	return nil
}

// admit counts e against the caps, pending for principal name, or fails
// with ErrFull and counts nothing. Both counts change only once both caps
// have room, so neither is ever over its cap, even for an instant.
func (m *Memory) admit(e *entry, name string) error {
	home := &m.principals[m.principalShard(name)]
	home.mu.Lock()
	defer home.mu.Unlock()
	p := home.byName[name]
	// Caps stop a flood of never-answered questions from growing memory
	// without bound, and one principal from starving the others.
	for {
		n := m.pending.Load()
		if n >= int64(m.maxPending) {
			return fmt.Errorf("%w: %d pending", ErrFull, n)
		}
		if p != nil && p.pending.Load() >= int64(m.maxPerPrincipal) {
			return fmt.Errorf("%w: %d pending for this principal", ErrFull, p.pending.Load())
		}
		if m.pending.CompareAndSwap(n, n+1) {
			break
		}
	}
	if p == nil {
		p = &principal{name: name, home: home}
		home.byName[name] = p
	}
	p.pending.Add(1)
	p.refs.Add(1)
	e.principal = p
	return nil
}

// Spend implements [Store].
func (m *Memory) Spend(ctx context.Context, id ID, to State, lease time.Duration) (r Record, err error) {
	switch {
	case to != Acting && to != Cancelled:
		return Record{}, fmt.Errorf("ledger: cannot spend into state %v", to)
	case to == Acting && (lease <= 0 || lease > maxOffset):
		return Record{}, fmt.Errorf("ledger: lease %v: want more than 0 and at most 100 years", lease)
	}
	var now time.Time
	if m.observe != nil {
		m.order.Lock()
		defer m.order.Unlock()
		defer func() { m.observe(ctx, SpendEvent(now, to, id, r, err)) }()
	}
	var rec audit.Record
	if m.audit != nil {
		rec = AuditSpend(ctx, id, to)
	}
	s := m.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read under the lock: a reading taken before it may be overtaken by
	// calls that held the lock meanwhile, and a Spend that waited would
	// decide on a time before theirs (a confirmation they saw expired
	// would be redeemed after).
	now = m.now()
	at := now.Sub(m.epoch)
	s.sweep(m, at)
	e, ok := s.entries[id]
	if !ok {
		return m.refused(rec, Record{}, ErrUnknown)
	}
	if e.state != Pending {
		r, err := s.record(m, e, at)
		return m.refused(rec, r, err)
	}
	if at >= e.expires {
		return m.refused(rec, Record{}, ErrExpired)
	}
	appr := s.approvals[id]
	r = Record{Confirmation: m.confirmation(e), State: to}
	if appr != nil {
		r.Approval, r.Decisions = appr.approval.clone(), slices.Clone(appr.decisions)
		// Out-of-band approval: no redemption before the approvers the
		// confirmation needs have approved it, whatever the client says.
		if to == Acting && !r.Approved() {
			r.State = Pending
			return m.refused(rec, r, ErrAwaitingApproval)
		}
	}
	if m.audit != nil {
		pend, err := m.auditBegin(rec)
		if err != nil {
			return Record{}, err
		}
		defer pend.Commit() // before s.mu's unlock: deferred after it
	}
	m.unpend(e)
	e.state = to
	switch {
	case to == Acting:
		e.leaseEnd = at + lease
	case appr == nil:
		e.fields = ""
	}
	return r, nil
}

// record answers a Spend of the spent entry e at at from its record. An
// acting entry whose lease has ended is in doubt from then on. s is locked.
func (s *shard) record(m *Memory, e *entry, at time.Duration) (Record, error) {
	if e.state == Acting && at >= e.leaseEnd {
		e.state = InDoubt // for good: a late Complete finds it so
	}
	if e.state == Cancelled {
		if appr := s.approvals[e.id]; appr != nil {
			r := Record{Confirmation: m.confirmation(e), State: Cancelled,
				Decisions: slices.Clone(appr.decisions)}
			r.Approval = appr.approval.clone()
			if _, declined := r.Declined(); declined {
				return r, ErrDeclined
			}
		}
		return Record{}, ErrCancelled
	}
	r := s.full(m, e)
	switch e.state {
	case Acting:
		return r, ErrInProgress
	case Done, Failed:
		return r, ErrDone
	}
	return r, ErrInDoubt
}

// full rebuilds the Record of e, with its approval, decisions and
// outcome. s is locked.
func (s *shard) full(m *Memory, e *entry) Record {
	appr := s.approvals[e.id]
	if e.state == Cancelled && appr == nil {
		// Its fields are dropped: only the id, expiry and state are left.
		return Record{Confirmation: Confirmation{ID: e.id, Expires: m.epoch.Add(e.expires)}, State: Cancelled}
	}
	r := Record{Confirmation: m.confirmation(e), State: e.state}
	if appr != nil {
		r.Approval, r.Decisions = appr.approval.clone(), slices.Clone(appr.decisions)
	}
	if b, ok := s.outcomes[e.id]; ok {
		// A copy: the record stays the store's.
		if err := r.Outcome.UnmarshalBinary(b); err != nil {
			panic("ledger: the memory store's own outcome does not decode: " + err.Error())
		}
	}
	return r
}

// Decide implements [Store]: [Record.Decide] under the shard's lock, on
// the store's clock read under it.
func (m *Memory) Decide(ctx context.Context, id ID, p Approver, approve bool) (r Record, err error) {
	var now time.Time
	if m.observe != nil {
		m.order.Lock()
		defer m.order.Unlock()
		defer func() { m.observe(ctx, DecideEvent(now, id, p.ID, approve, err)) }()
	}
	var rec audit.Record
	if m.audit != nil {
		rec = AuditDecide(ctx, id, p, approve)
	}
	s := m.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = m.now()
	at := now.Sub(m.epoch)
	s.sweep(m, at)
	e, ok := s.entries[id]
	if !ok {
		return m.refused(rec, Record{}, ErrUnknown)
	}
	if e.state == Acting && at >= e.leaseEnd {
		e.state = InDoubt
	}
	r, err = s.full(m, e).Decide(p, approve, now)
	if err != nil {
		return m.refused(rec, r, err)
	}
	if m.audit != nil {
		pend, err := m.auditBegin(rec)
		if err != nil {
			return Record{}, err
		}
		defer pend.Commit() // before s.mu's unlock: deferred after it
	}
	appr := s.approvals[id]
	appr.decisions = append(appr.decisions, r.Decisions[len(r.Decisions)-1])
	if !approve {
		// Declined: cancelled for good, and no longer pending.
		m.unpend(e)
		e.state = Cancelled
	}
	return r, nil
}

// Lookup implements [Store].
func (m *Memory) Lookup(_ context.Context, id ID) (Record, error) {
	s := m.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	at := m.now().Sub(m.epoch)
	s.sweep(m, at)
	e, ok := s.entries[id]
	if !ok {
		return Record{}, ErrUnknown
	}
	if e.state == Acting && at >= e.leaseEnd {
		e.state = InDoubt // for good, as record decides it
	}
	return s.full(m, e), nil
}

// Complete implements [Store]. It keeps a copy of o, in its binary form.
func (m *Memory) Complete(ctx context.Context, id ID, o Outcome) (err error) {
	if err := o.Check(); err != nil {
		return fmt.Errorf("ledger: complete %s: %w", id, err)
	}
	var now time.Time
	if m.observe != nil {
		m.order.Lock()
		defer m.order.Unlock()
		defer func() {
			m.observe(ctx, CompleteEvent(now, id, o.Kind, err))
		}()
	}
	var rec audit.Record
	if m.audit != nil {
		rec = AuditComplete(ctx, id, o.Kind)
	}
	s := m.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = m.now() // under the lock, as Spend reads it
	at := now.Sub(m.epoch)
	s.sweep(m, at)
	e, ok := s.entries[id]
	switch {
	case !ok:
		return m.auditRefusal(rec, ErrUnknown)
	case e.state == Pending && at >= e.expires:
		return m.auditRefusal(rec, ErrExpired)
	case e.state == Pending:
		return m.auditRefusal(rec, ErrNotActing)
	case e.state != Acting || at >= e.leaseEnd:
		_, err := s.record(m, e, at)
		return m.auditRefusal(rec, err)
	}
	b, err := o.MarshalBinary() // a copy, in one allocation
	if err != nil {
		return fmt.Errorf("ledger: complete %s: %w", id, err)
	}
	if m.audit != nil {
		pend, err := m.auditBegin(rec)
		if err != nil {
			return err
		}
		defer pend.Commit() // before s.mu's unlock: deferred after it
	}
	if s.outcomes == nil {
		s.outcomes = make(map[ID][]byte)
	}
	s.outcomes[id] = b
	e.state = o.Kind.State()
	return nil
}

// Len reports how many confirmations the store remembers, and how many of
// them are pending (including expired ones within their grace). It sweeps
// every shard first, as an Add or Spend sweeps its own.
func (m *Memory) Len() (remembered, pending int) {
	at := m.now().Sub(m.epoch)
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.sweep(m, at)
		remembered += len(s.entries)
		s.mu.Unlock()
	}
	return remembered, int(m.pending.Load())
}

// setDue records when s is next to be swept: when e, its soonest entry (or
// nil), is. s is locked. It stores only a change: a store is a locked
// instruction, a load a plain read.
func (s *shard) setDue(m *Memory, e *entry) {
	due := int64(math.MaxInt64)
	if e != nil {
		due = m.due(e)
	}
	if due != s.due.Load() {
		s.due.Store(due)
	}
}

// due is when e is to be swept: its expiry plus grace, as an offset from
// the epoch, or math.MaxInt64 if that is further than an offset goes.
func (m *Memory) due(e *entry) int64 {
	// Only a positive offset can overflow; for a negative one the
	// subtraction itself would.
	t := e.forgetAfter()
	if t > 0 && m.grace > math.MaxInt64-t {
		return math.MaxInt64
	}
	return int64(t + m.grace)
}

// unpend forgets that the pending entry e counts against the pending caps.
// Its shard is locked.
func (m *Memory) unpend(e *entry) {
	e.principal.pending.Add(-1)
	m.pending.Add(-1)
}

// sweep forgets every entry of s whose expiry plus grace is not after at
// (an offset from the epoch, as Spend names it). s is locked.
func (s *shard) sweep(m *Memory, at time.Duration) {
	for {
		e := s.byExpiry.peek()
		if e == nil || int64(at) < m.due(e) {
			s.setDue(m, e)
			s.shrink()
			return
		}
		s.byExpiry.pop()
		if e.state != Pending && e.state != Cancelled && !e.requeued && e.leaseEnd > e.expires {
			// Redeemed late in its life: remembered until its lease's
			// end plus grace, so that every retry the lease allows is
			// answered from the record.
			e.requeued = true
			s.byExpiry.push(e)
			continue
		}
		delete(s.entries, e.id)
		delete(s.outcomes, e.id)
		delete(s.approvals, e.id)
		if e.state == Pending {
			m.unpend(e)
		}
		e.principal.release()
	}
}

// release forgets one entry of p, and p once it has none.
func (p *principal) release() {
	if p.refs.Add(-1) == 0 {
		// Under home.mu, refs is exact: an Add that found p may have
		// counted a new entry since, and that entry may even be gone
		// again and p forgotten, and a new principal of the same name
		// made, which must stay.
		p.home.mu.Lock()
		if p.refs.Load() == 0 && p.home.byName[p.name] == p {
			delete(p.home.byName, p.name)
		}
		p.home.mu.Unlock()
	}
}

// shrink moves the entries of s to a new map once they fall to a quarter
// of their peak. A Go map never gives back the tables it grew: without
// this, each shard would keep tables for the most entries its principals
// ever had at once, and a store whose busy principals come and go could
// hold 64 tables the size of the one map it needed. Each copy of n entries
// follows at least 3n deletions. sweep calls it once it has swept, so a
// long sweep copies once, at the size it leaves.
func (s *shard) shrink() {
	if s.outcomes != nil && len(s.outcomes) == 0 {
		s.outcomes = nil
	}
	if s.approvals != nil && len(s.approvals) == 0 {
		s.approvals = nil
	}
	if s.peak < 1024 || len(s.entries) > s.peak/4 {
		return
	}
	entries := make(map[ID]*entry, len(s.entries))
	maps.Copy(entries, s.entries)
	s.entries, s.peak = entries, len(entries)
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
	if n := len(q.fifo); n == q.head || e.forgetAfter() >= q.fifo[n-1].forgetAfter() {
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
	if len(q.late) > 0 && (e == nil || q.late[0].forgetAfter() < e.forgetAfter()) {
		e = q.late[0]
	}
	return e
}

// pop removes the entry peek returns.
func (q *expiryQueue) pop() {
	if q.head == len(q.fifo) || (len(q.late) > 0 && q.late[0].forgetAfter() < q.fifo[q.head].forgetAfter()) {
		heap.Pop(&q.late)
		return
	}
	q.fifo[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.fifo) && cap(q.fifo) > 1024:
		// Empty: give a large array back, as shard.shrink gives back a
		// map's tables.
		q.fifo, q.head = nil, 0
	case q.head == len(q.fifo):
		q.fifo, q.head = q.fifo[:0], 0
	case q.head >= 1024 && 2*q.head >= len(q.fifo):
		live := q.fifo[q.head:]
		if 4*len(live) < cap(q.fifo) {
			// Draining: move what is left to an array of its size.
			q.fifo, q.head = append(make([]*entry, 0, 2*len(live)), live...), 0
			return
		}
		// Reuse the front half rather than grow the slice forever.
		n := copy(q.fifo, live)
		clear(q.fifo[n:])
		q.fifo, q.head = q.fifo[:n], 0
	}
}

// expiryHeap orders entries by expiry, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].forgetAfter() < h[j].forgetAfter() }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
