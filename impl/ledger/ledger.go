// Package ledger makes a confirmation usable at most once, and records what
// came of it, so that every retry of the approval gets that one answer.
//
// A server that asks a person "are you sure?" records the question as a
// pending [Confirmation] with [Ledger.Issue] and acts only after
// [Ledger.Redeem] has atomically moved it from pending to acting, with a
// lease. Once the action has run it records the outcome with
// [Ledger.Complete]: done (with the action's result), failed, or unknown
// (the caller cannot tell whether it happened). A second redemption of the
// same confirmation — a replayed approval, a client retrying after a lost
// reply, a concurrent retry, a retry through another replica sharing the
// store — runs nothing and is answered from the record: [ErrInProgress]
// while the action runs, [ErrDone] with the recorded outcome, or
// [ErrInDoubt] when no one can tell what happened. A declined question is
// spent with [Ledger.Cancel] and can never be redeemed afterwards.
//
// # Out-of-band approval
//
// A person's in-band answer is relayed by the client, and a client that
// lies (a prompt-injected agent driving its own client, an auto-approve
// setting) is, to the ledger, the person. A confirmation whose
// [Confirmation.Approval] is set also needs approvers reached outside the
// chat: [Approval.Required] distinct approvers, each listed in
// [Approval.Approvers] (by ID or group) and none of them its
// [Approval.Requester] (four-eyes), must approve it with [Ledger.Decide]
// before [Ledger.Redeem] succeeds; until then Redeem answers
// [ErrAwaitingApproval] and changes nothing. One decline cancels it
// ([ErrDeclined], which is also ErrCancelled). Each Decide is one atomic
// step in the store, on the store's clock: an approver's decision is
// recorded once, and none after the outcome is decided (all approvals in,
// or a decline) or the confirmation expired or was withdrawn (the
// client's Cancel); a refused decision changes nothing and is answered
// with what was recorded ([ErrDecided] and the [Record], whose Decisions
// name who decided what, and when). [Ledger.Lookup] reads a record
// without changing it, for an approval page to show its
// [Approval.Question], its deadline (Expires) and the decisions so far.
// spec/Ledger.tla states these rules (NoRedeemWithoutApproval,
// OnlyAuthorizedDecide, NoSelfDecision, DecidedOnce) and TLC checks them
// (spec/LedgerApprove.cfg, spec/LedgerFourEyes.cfg).
//
// What the ledger does not do for approvals: authenticate. The caller
// builds the [Approver] from the approver's own sign-in (OpenID Connect,
// a passkey), never from the request's caller's credentials, and names
// the Requester in the same naming as Approver.ID (an empty Requester
// excludes no one). It does not notify approvers. All three stores
// (memory, redisledger, pgledger) record decisions; a replica of a version
// before out-of-band approval sharing a store refuses a confirmation that
// needs it rather than redeem it (see each store's package doc).
//
// # Audit trail
//
// Each store can keep a tamper-evident trail of what it did (package
// audit): [MemoryOptions.Audit] (a JSONL file), pgledger's and
// redisledger's Options.Audit. Such a store writes one record per Add,
// Spend, Decide and Complete (and per refusal [audit.Recorded] keeps) in
// the same atomic step as the transition, so that neither exists without
// the other; [AuditIssue], [AuditSpend], [AuditDecide] and [AuditComplete]
// build the records' caller-known part, from the call's [audit.Call].
// The Store interface does not change: a store without a trail writes
// none.
//
// The MCP specification (2026-07-28, multi round-trip requests) says binding a
// requestState to principal, TTL and request does not make it single-use, and
// that servers needing at-most-once must enforce it themselves: this package
// is that enforcement.
//
// What it guarantees, for every confirmation id, every store deciding inside
// its own atomic step on its own clock: at most one Redeem succeeds, and none
// succeeds after a Cancel, after the confirmation's expiry, or on a store that
// never saw the Issue; at most one Complete succeeds, only on an acting
// confirmation before its lease ends, so a late writer cannot overwrite in
// doubt; every Redeem after an outcome is recorded returns that outcome,
// whether or not the confirmation's expiry has passed, until the store
// forgets it (its expiry or its lease's end, whichever is later, plus grace;
// never before).
//
// What it does not guarantee: exactly-once effects. If the process that
// redeemed a confirmation crashes before recording an outcome, or its action
// outlasts the lease, the confirmation is in doubt for good: the action may
// or may not have happened, it is never run again, and the person must check
// before asking again. A result longer than [Options.MaxResult] is recorded
// as its size and SHA-256 only. It does not check that a record is for the
// call at hand: callers compare the returned Confirmation's fields (tool,
// argument digest, principal, subject) with the request they are about to
// execute, or to answer. The in-memory store ([Memory]) is local to one
// process: behind a load balancer, a confirmation issued by one replica is
// unknown to another (refused, never honoured twice), and a restart forgets
// every confirmation and every recorded outcome.
package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors returned by [Ledger.Redeem], [Ledger.Cancel] and
// [Ledger.Complete]; each names a different reason the confirmation cannot
// be used. Callers branch on them with errors.Is.
var (
	// ErrUnknown: the store has no record of the id — never issued here
	// (for example by another replica with its own memory store), forgotten
	// by a restart, or forgotten after its expiry.
	ErrUnknown = errors.New("ledger: unknown confirmation")
	// ErrSpent is what ErrInProgress, ErrDone and ErrInDoubt have in
	// common: the confirmation was redeemed, and nothing may run for it
	// again. errors.Is(err, ErrSpent) holds for each of them; a store
	// never returns ErrSpent alone.
	ErrSpent = errors.New("ledger: confirmation already redeemed")
	// ErrInProgress: the confirmation was redeemed, and the action it
	// approved is running (its lease has not ended).
	ErrInProgress error = &spentError{"ledger: confirmation already redeemed: the action is in progress"}
	// ErrDone: the action ran, and its outcome (done or failed) is
	// recorded: the [Record] returned with it holds that outcome.
	ErrDone error = &spentError{"ledger: confirmation already redeemed: the action's outcome is recorded"}
	// ErrInDoubt: the confirmation was redeemed, and no one can tell
	// whether its action happened: the lease ended without an outcome (a
	// crash between redeeming and recording), or the outcome was recorded
	// as unknown.
	ErrInDoubt error = &spentError{"ledger: confirmation already redeemed: the action may or may not have happened"}
	// ErrCancelled: the confirmation was cancelled (the user declined).
	ErrCancelled = errors.New("ledger: confirmation cancelled")
	// ErrExpired: the confirmation expired before it was redeemed.
	ErrExpired = errors.New("ledger: confirmation expired")
	// ErrFull: a cap on pending confirmations was reached; nothing was issued.
	ErrFull = errors.New("ledger: too many pending confirmations")
	// ErrExists: Add was given an id the store already holds.
	ErrExists = errors.New("ledger: confirmation id already exists")
	// ErrNotActing: Complete was given a pending confirmation: nothing
	// was redeemed, so there is nothing to record.
	ErrNotActing = errors.New("ledger: confirmation not redeemed")
)

// spentError is a sentinel that also satisfies errors.Is(err, ErrSpent),
// so that callers which only ask "was it spent?" keep working.
type spentError struct{ msg string }

func (e *spentError) Error() string        { return e.msg }
func (e *spentError) Is(target error) bool { return target == ErrSpent }

// ID identifies a confirmation: 128 bits, at least 120 of them random (a
// store may use the rest: see [IDSource]), never reused.
type ID [16]byte

// String returns the id as 32 lower-case hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses the form produced by [ID.String].
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return ID{}, fmt.Errorf("ledger: id %q: want %d hex digits", s, 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ID{}, fmt.Errorf("ledger: id %q: %w", s, err)
	}
	// Reject upper-case hex so an id has exactly one spelling.
	if id.String() != s {
		return ID{}, fmt.Errorf("ledger: id %q: not lower-case hex", s)
	}
	return id, nil
}

// State is where a confirmation is in its life.
//
//	Pending ─Redeem→ Acting ─Complete→ Done | Failed | InDoubt
//	   │               └──lease ends, no Complete──→ InDoubt
//	   └─Cancel→ Cancelled
//
// A pending confirmation whose expiry has passed is expired; every other
// state stays as it is until the store forgets the confirmation.
type State uint8

const (
	Pending   State = iota // issued, awaiting the person's answer
	Acting                 // approved and redeemed: the action runs, once, within the lease
	Done                   // the action ran and returned a result, recorded
	Failed                 // the action ran and failed or refused, recorded
	InDoubt                // no one can tell whether the action happened: nothing runs, ever
	Cancelled              // declined or abandoned: nothing ran
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Acting:
		return "acting"
	case Done:
		return "done"
	case Failed:
		return "failed"
	case InDoubt:
		return "in doubt"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// A Confirmation is one question put to a person: what its approval binds.
// Every field but ID and Expires is opaque to the ledger: the caller decides
// what it binds and compares it after redemption.
//
// The question's wording is not kept: the ledger holds what the caller must
// compare before acting, and forgets it at expiry plus grace. The audit
// trail keeps it (package audit): a store that keeps one records the
// question of each Add from the [audit.Call] the caller puts in its
// context, and never forgets it.
// Keeping only the bindings keeps a pending confirmation small.
type Confirmation struct {
	ID         ID
	Tool       string    // the tool (or prompt, or resource) the approval is for
	ArgsDigest string    // digest of the call's canonical arguments
	Principal  string    // who was asked; caps are counted per principal
	Subject    string    // identity of the object to act on (e.g. a file's device, inode, size, mtime)
	Expires    time.Time // after this instant the confirmation cannot be redeemed
	// Approval, if set, is the out-of-band approval the confirmation
	// needs before it can be redeemed; nil: none (the person's in-band
	// answer is all it needs).
	Approval *Approval
}

// An OutcomeKind says what came of an action: what [Ledger.Complete]
// records.
type OutcomeKind uint8

const (
	OutcomeDone    OutcomeKind = iota + 1 // the action ran and returned its result
	OutcomeFailed                         // the action ran and failed, or refused: nothing was done
	OutcomeUnknown                        // the caller cannot tell whether the action happened
)

// State is the state Complete moves a confirmation to.
func (k OutcomeKind) State() State {
	switch k {
	case OutcomeDone:
		return Done
	case OutcomeFailed:
		return Failed
	}
	return InDoubt
}

func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDone:
		return "done"
	case OutcomeFailed:
		return "failed"
	case OutcomeUnknown:
		return "unknown"
	}
	return fmt.Sprintf("OutcomeKind(%d)", uint8(k))
}

// An Outcome is what came of acting on a confirmation, as recorded: what
// every later retry of the approval is answered with.
type Outcome struct {
	Kind OutcomeKind
	// Result is what the action returned, in the caller's encoding
	// (impl/confirm: the tool result as JSON), or nil when it was longer
	// than the ledger keeps ([Options.MaxResult]).
	Result []byte
	// Size is the length of the action's result in bytes.
	Size int64
	// SHA256 is the digest of a result too long to keep; zero otherwise.
	SHA256 [sha256.Size]byte
}

// Kept reports whether Result is the whole result, rather than the
// digest of one too long to keep.
func (o Outcome) Kept() bool { return int64(len(o.Result)) == o.Size }

// A Record is a confirmation as [Store.Spend] found it: what it binds,
// where it is in its life, and, once recorded, what came of it.
type Record struct {
	Confirmation
	State   State
	Outcome Outcome // set in Done, Failed, and InDoubt by an unknown outcome
	// Decisions are the out-of-band decisions recorded, in the order
	// they were (see [Approval]); none for a confirmation approved in band.
	Decisions []Decision
}

// Store keeps confirmations. Implementations must make Spend, Complete
// and Decide each a single atomic compare-and-set, deciding on the store's
// own clock: of any number of concurrent Spend calls for one id, across
// every process sharing the store, at most one returns a nil error; at
// most one Complete of it ever succeeds; and at most one Decide per
// approver, none once the outcome is decided.
type Store interface {
	// Add records c as pending, with its Approval if any (see
	// [Approval.Check]; the store keeps a copy). It fails with ErrFull
	// when a cap is reached and with ErrExists when c.ID is already
	// present; either way the store is unchanged.
	Add(ctx context.Context, c Confirmation) error
	// Spend atomically moves the pending, unexpired confirmation id to state
	// to, and returns it: to Acting (the approval was given; the caller acts
	// now) with a lease that ends lease after now on the store's clock, or
	// to Cancelled (lease unused). A confirmation that needs out-of-band
	// approval moves to Acting only once every approval it needs is
	// recorded (and its Record then holds them); to Cancelled at any time
	// while pending. Otherwise it changes nothing and fails, by the
	// confirmation's state: ErrInProgress (acting, before its lease
	// ends), ErrInDoubt (acting after it, or an unknown outcome recorded),
	// ErrDone (done or failed: the returned Record holds the outcome),
	// ErrDeclined (an approver declined: the Record says who),
	// ErrCancelled, ErrExpired (pending, past its expiry),
	// ErrAwaitingApproval (pending and unexpired, an approval missing:
	// the Record holds the decisions so far) or ErrUnknown. With
	// ErrInProgress, ErrDone and ErrInDoubt the Record is the
	// confirmation as redeemed, so the caller can check what it binds
	// before answering from it. Any other error (a store that went away)
	// means the outcome is unknown: callers must treat the confirmation as
	// spent and not act.
	Spend(ctx context.Context, id ID, to State, lease time.Duration) (Record, error)
	// Decide atomically records p's decision on confirmation id -- to
	// approve it, or to decline it, which cancels it -- following
	// [Record.Decide] on the store's clock, and returns the record with
	// the decision. Refused, it changes nothing and fails with what
	// Record.Decide answers, or ErrUnknown. The store checks p against
	// the Approval it was given by Add; the caller authenticates p. Any
	// other error means the outcome is unknown.
	Decide(ctx context.Context, id ID, p Approver, approve bool) (Record, error)
	// Lookup returns the record of confirmation id as it stands, changing
	// nothing that a later call could tell: ErrUnknown if the store does
	// not hold it. A redeemed confirmation whose lease has ended reads as
	// InDoubt; a pending one past its expiry reads as Pending (compare
	// Expires). A cancelled one that needed no out-of-band approval may
	// have lost every field but ID and Expires.
	Lookup(ctx context.Context, id ID) (Record, error)
	// Complete atomically records o as the outcome of the acting
	// confirmation id, moving it to o.Kind's state, only while the store's
	// clock is before the end of its lease. Otherwise it changes nothing and
	// fails: ErrInDoubt (the lease has ended, or an unknown outcome is
	// recorded), ErrDone (an outcome is recorded already), ErrNotActing
	// (pending), ErrCancelled, ErrExpired or ErrUnknown. The store keeps
	// o.Result as given: the caller bounds its size. Any other error means
	// the outcome is unknown.
	Complete(ctx context.Context, id ID, o Outcome) error
}

// An IDSource is a [Store] that chooses the ids of the confirmations it is
// to hold. [Ledger.Issue] takes its ids from NewID, given the
// confirmation's principal, unless [Options.Rand] is set. NewID must be
// safe for concurrent use and return ids no one can guess: at least 120
// bits from crypto/rand, the rest the store's to use (the in-memory store
// names in them the shard it keeps the principal's confirmations in).
type IDSource interface {
	NewID(principal string) ID
}

// Options configures a [Ledger]. The zero value is ready to use.
type Options struct {
	// TTL is how long an issued confirmation stays redeemable. Default 10 minutes.
	TTL time.Duration
	// Lease is how long the caller has, once a confirmation is redeemed, to
	// act and record the outcome with Complete. Past it, the confirmation is
	// in doubt for good: an action slower than its lease is never run
	// twice, but its outcome is not recorded. Default 2 minutes.
	Lease time.Duration
	// MaxResult is the longest result Complete keeps; a longer one is
	// recorded as its size and SHA-256. Default 64 KiB.
	MaxResult int
	// Now is the issuing clock. Default time.Now.
	Now func() time.Time
	// Rand is the source of confirmation ids. Default: the store's NewID if
	// it is an [IDSource], else crypto/rand.
	Rand io.Reader
	// Observe, if set, is called after every Issue, Redeem, Cancel and
	// Complete with what happened, for tracing (see [NDJSON]). It must be
	// safe for concurrent use and must not block.
	Observe func(Event)
}

// Defaults of [Options].
const (
	DefaultTTL       = 10 * time.Minute
	DefaultLease     = 2 * time.Minute
	DefaultMaxResult = 64 << 10
)

// A Ledger issues and spends confirmations held in a [Store], and records
// what came of them. It is safe for concurrent use when its Store is.
type Ledger struct {
	store     Store
	ttl       time.Duration
	lease     time.Duration
	maxResult int
	now       func() time.Time
	rand      io.Reader // nil: ids, or else crypto/rand.Read
	ids       IDSource  // store, if it chooses its ids
	observe   func(Event)
}

// New returns a ledger over store.
func New(store Store, opts Options) (*Ledger, error) {
	if store == nil {
		return nil, errors.New("ledger: nil store")
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("ledger: negative TTL %v", opts.TTL)
	}
	if opts.Lease < 0 {
		return nil, fmt.Errorf("ledger: negative lease %v", opts.Lease)
	}
	if opts.MaxResult < 0 {
		return nil, fmt.Errorf("ledger: negative MaxResult %d", opts.MaxResult)
	}
	l := &Ledger{store: store, ttl: opts.TTL, lease: opts.Lease, maxResult: opts.MaxResult,
		now: opts.Now, rand: opts.Rand, observe: opts.Observe}
	l.ids, _ = store.(IDSource)
	if l.ttl == 0 {
		l.ttl = DefaultTTL
	}
	if l.lease == 0 {
		l.lease = DefaultLease
	}
	if l.maxResult == 0 {
		l.maxResult = DefaultMaxResult
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l, nil
}

// TTL reports how long issued confirmations stay redeemable.
func (l *Ledger) TTL() time.Duration { return l.ttl }

// Lease reports how long a redeemed confirmation's action may take.
func (l *Ledger) Lease() time.Duration { return l.lease }

// Issue records c as pending with a fresh random ID and an expiry TTL from
// now, and returns it as stored. c.ID and c.Expires are ignored. With
// c.Approval set, the confirmation cannot be redeemed before the
// approvals it names are recorded with [Ledger.Decide]; an invalid
// Approval (see [Approval.Check]) is refused, and nothing is issued.
func (l *Ledger) Issue(ctx context.Context, c Confirmation) (Confirmation, error) {
	if err := c.Approval.Check(); err != nil {
		return Confirmation{}, fmt.Errorf("ledger: issue: %w", err)
	}
	id, err := l.newID(c.Principal)
	if err != nil {
		return Confirmation{}, err
	}
	c.ID = id
	c.Expires = l.now().Add(l.ttl)
	c.Approval = c.Approval.clone() // the caller's slices stay the caller's
	err = l.store.Add(ctx, c)
	if l.observe != nil {
		l.observe(IssueEvent(l.now(), c, err))
	}
	if err != nil {
		return Confirmation{}, fmt.Errorf("ledger: issue: %w", err)
	}
	return c, nil
}

// newID returns a fresh random id for a confirmation of principal: from
// Options.Rand if set, else from the store if it is an IDSource, else from
// crypto/rand. With crypto/rand the id stays on the stack: crypto/rand.Read
// does not let its buffer escape (an io.Reader's Read would), and it never
// fails: it crashes the program.
func (l *Ledger) newID(principal string) (ID, error) {
	var id ID
	switch {
	case l.rand == nil && l.ids != nil:
		return l.ids.NewID(principal), nil
	case l.rand == nil:
		rand.Read(id[:])
		return id, nil
	}
	b := make([]byte, len(id))
	if _, err := io.ReadFull(l.rand, b); err != nil {
		return ID{}, fmt.Errorf("ledger: new id: %w", err)
	}
	return ID(b), nil
}

// Redeem spends the pending confirmation id and returns it, acting: the
// caller may now act, once, and must then record what came of it with
// Complete within the lease. A retry of a redeemed confirmation is
// answered from its record: ErrInProgress, ErrDone (with the outcome in
// the Record) or ErrInDoubt. One that needs out-of-band approval is
// refused with ErrAwaitingApproval until every approval is recorded, and
// with ErrDeclined once an approver declined. See [Store.Spend] for the
// errors.
func (l *Ledger) Redeem(ctx context.Context, id ID) (Record, error) {
	r, err := l.store.Spend(ctx, id, Acting, l.lease)
	if l.observe != nil {
		l.observe(SpendEvent(l.now(), Acting, id, r, err))
	}
	if err != nil {
		return r, fmt.Errorf("ledger: redeem %s: %w", id, err)
	}
	return r, nil
}

// Cancel spends the pending confirmation id without acting, so that it can
// never be redeemed. See [Store.Spend] for the errors.
func (l *Ledger) Cancel(ctx context.Context, id ID) (Confirmation, error) {
	r, err := l.store.Spend(ctx, id, Cancelled, 0)
	if l.observe != nil {
		l.observe(SpendEvent(l.now(), Cancelled, id, r, err))
	}
	if err != nil {
		return Confirmation{}, fmt.Errorf("ledger: cancel %s: %w", id, err)
	}
	return r.Confirmation, nil
}

// Decide records p's decision on confirmation id, which needs out-of-band
// approval: approve (the confirmation becomes redeemable once every
// approval it needs is in) or decline (it is cancelled, for good). The
// caller must have authenticated p separately from the request's caller
// -- the caller's own credentials must never decide. It returns the record
// with the decision. Each approver decides once, and no one once the
// outcome is decided: ErrDecided, with the record of what was decided.
// See [Record.Decide] for the other errors; none changes anything.
func (l *Ledger) Decide(ctx context.Context, id ID, p Approver, approve bool) (Record, error) {
	if err := p.Check(); err != nil {
		return Record{}, fmt.Errorf("ledger: decide %s: %w", id, err)
	}
	r, err := l.store.Decide(ctx, id, p, approve)
	if l.observe != nil {
		l.observe(DecideEvent(l.now(), id, p.ID, approve, err))
	}
	if err != nil {
		return r, fmt.Errorf("ledger: decide %s: %w", id, err)
	}
	return r, nil
}

// Lookup returns the record of confirmation id as it stands, changing
// nothing: for an approval page, its question and the decisions so far.
// It fails with ErrUnknown for an id the store does not hold. See
// [Store.Lookup].
func (l *Ledger) Lookup(ctx context.Context, id ID) (Record, error) {
	r, err := l.store.Lookup(ctx, id)
	if err != nil {
		return r, fmt.Errorf("ledger: lookup %s: %w", id, err)
	}
	return r, nil
}

// Complete records what came of acting on the redeemed confirmation id:
// kind, and result, the action's result in the caller's encoding, which
// every later retry of the approval gets back. A result longer than
// Options.MaxResult is recorded as its size and SHA-256 only. It fails
// with ErrInDoubt once the lease has ended (the retries are told the
// action may or may not have happened), and with ErrDone if an outcome is
// recorded already; see [Store.Complete].
func (l *Ledger) Complete(ctx context.Context, id ID, kind OutcomeKind, result []byte) error {
	if kind < OutcomeDone || kind > OutcomeUnknown {
		return fmt.Errorf("ledger: complete %s: invalid outcome %v", id, kind)
	}
	err := l.store.Complete(ctx, id, l.bound(kind, result))
	if l.observe != nil {
		l.observe(CompleteEvent(l.now(), id, kind, err))
	}
	if err != nil {
		return fmt.Errorf("ledger: complete %s: %w", id, err)
	}
	return nil
}

// bound returns the outcome of kind and result as the ledger keeps it.
func (l *Ledger) bound(kind OutcomeKind, result []byte) Outcome {
	o := Outcome{Kind: kind, Size: int64(len(result))}
	if len(result) <= l.maxResult {
		o.Result = result
	} else {
		// Bounded: a tool that returns megabytes must not make every
		// remembered confirmation that large.
		o.SHA256 = sha256.Sum256(result)
	}
	return o
}
