// Package ledger makes a confirmation usable at most once.
//
// A server that asks a person "are you sure?" records the question as a
// pending [Confirmation] with [Ledger.Issue] and acts only after
// [Ledger.Redeem] has atomically moved it from pending to redeemed. A second
// redemption of the same confirmation — a replayed approval, a concurrent
// retry, a retry through another replica sharing the store — fails with
// [ErrSpent]; a declined question is spent with [Ledger.Cancel] and can never
// be redeemed afterwards.
//
// The MCP specification (2026-07-28, multi round-trip requests) says binding a
// requestState to principal, TTL and request does not make it single-use, and
// that servers needing at-most-once must enforce it themselves: this package
// is that enforcement.
//
// What it guarantees: for every confirmation id, at most one Redeem succeeds,
// and none succeeds after a Cancel, after the confirmation's expiry (checked
// inside the store's atomic step, on the store's clock), or on a store that
// never saw the Issue.
//
// What it does not guarantee: exactly once. If the process that redeemed a
// confirmation crashes before acting, the approval is lost, never retried; the
// user must ask again. It does not check that the redeemed confirmation is
// for the call at hand: callers compare the returned Confirmation's fields
// (tool, argument digest, principal, subject) with the request they are
// about to execute. The in-memory store ([Memory]) is local to one process:
// behind a load balancer, a confirmation issued by one replica is unknown to
// another (refused, never honoured twice), and a restart forgets every
// pending confirmation.
package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors returned by [Ledger.Redeem] and [Ledger.Cancel]; each names a
// different reason the confirmation cannot be used. Callers branch on them
// with errors.Is.
var (
	// ErrUnknown: the store has no record of the id — never issued here
	// (for example by another replica with its own memory store), forgotten
	// by a restart, or forgotten after its expiry.
	ErrUnknown = errors.New("ledger: unknown confirmation")
	// ErrSpent: the confirmation was already redeemed.
	ErrSpent = errors.New("ledger: confirmation already redeemed")
	// ErrCancelled: the confirmation was cancelled (the user declined).
	ErrCancelled = errors.New("ledger: confirmation cancelled")
	// ErrExpired: the confirmation expired before it was redeemed.
	ErrExpired = errors.New("ledger: confirmation expired")
	// ErrFull: a cap on pending confirmations was reached; nothing was issued.
	ErrFull = errors.New("ledger: too many pending confirmations")
	// ErrExists: Add was given an id the store already holds.
	ErrExists = errors.New("ledger: confirmation id already exists")
)

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
type State uint8

const (
	Pending   State = iota // issued, awaiting the user's answer
	Redeemed               // approved and spent: the action may run once
	Cancelled              // declined or abandoned: spent without acting
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Redeemed:
		return "redeemed"
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
// compare before acting, and forgets it at expiry plus grace, so it is no
// audit record (log the question where it is asked, as impl/confirm does).
// Keeping only the bindings keeps a pending confirmation small.
type Confirmation struct {
	ID         ID
	Tool       string    // the tool (or prompt, or resource) the approval is for
	ArgsDigest string    // digest of the call's canonical arguments
	Principal  string    // who was asked; caps are counted per principal
	Subject    string    // identity of the object to act on (e.g. a file's device, inode, size, mtime)
	Expires    time.Time // after this instant the confirmation cannot be redeemed
}

// Store keeps confirmations. Implementations must make Spend a single atomic
// compare-and-set: of any number of concurrent Spend calls for one id, across
// every process sharing the store, at most one returns a nil error.
type Store interface {
	// Add records c as pending. It fails with ErrFull when a cap is reached
	// and with ErrExists when c.ID is already present; either way the store is
	// unchanged.
	Add(ctx context.Context, c Confirmation) error
	// Spend atomically moves the pending, unexpired confirmation id to state
	// to (Redeemed or Cancelled) and returns it. Otherwise it changes nothing
	// and fails with ErrUnknown, ErrSpent, ErrCancelled or ErrExpired; an
	// expired confirmation is reported as ErrExpired whatever its state, for
	// as long as the store still remembers it. Any other error (a store that
	// went away) means the outcome is unknown: callers must treat the
	// confirmation as spent and not act.
	Spend(ctx context.Context, id ID, to State) (Confirmation, error)
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
	// Now is the issuing clock. Default time.Now.
	Now func() time.Time
	// Rand is the source of confirmation ids. Default: the store's NewID if
	// it is an [IDSource], else crypto/rand.
	Rand io.Reader
	// Observe, if set, is called after every Issue, Redeem and Cancel with
	// what happened, for tracing (see [NDJSON]). It must be safe for
	// concurrent use and must not block.
	Observe func(Event)
}

// DefaultTTL is the lifetime of a confirmation when Options.TTL is zero.
const DefaultTTL = 10 * time.Minute

// A Ledger issues and spends confirmations held in a [Store].
// It is safe for concurrent use when its Store is.
type Ledger struct {
	store   Store
	ttl     time.Duration
	now     func() time.Time
	rand    io.Reader // nil: ids, or else crypto/rand.Read
	ids     IDSource  // store, if it chooses its ids
	observe func(Event)
}

// New returns a ledger over store.
func New(store Store, opts Options) (*Ledger, error) {
	if store == nil {
		return nil, errors.New("ledger: nil store")
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("ledger: negative TTL %v", opts.TTL)
	}
	l := &Ledger{store: store, ttl: opts.TTL, now: opts.Now, rand: opts.Rand, observe: opts.Observe}
	l.ids, _ = store.(IDSource)
	if l.ttl == 0 {
		l.ttl = DefaultTTL
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l, nil
}

// TTL reports how long issued confirmations stay redeemable.
func (l *Ledger) TTL() time.Duration { return l.ttl }

// Issue records c as pending with a fresh random ID and an expiry TTL from
// now, and returns it as stored. c.ID and c.Expires are ignored.
func (l *Ledger) Issue(ctx context.Context, c Confirmation) (Confirmation, error) {
	id, err := l.newID(c.Principal)
	if err != nil {
		return Confirmation{}, err
	}
	c.ID = id
	c.Expires = l.now().Add(l.ttl)
	err = l.store.Add(ctx, c)
	l.emit(ActionIssue, c.ID, err)
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

// Redeem spends the pending confirmation id and returns it: the caller may
// now act, once. See [Store.Spend] for the errors.
func (l *Ledger) Redeem(ctx context.Context, id ID) (Confirmation, error) {
	c, err := l.store.Spend(ctx, id, Redeemed)
	l.emit(ActionRedeem, id, err)
	if err != nil {
		return Confirmation{}, fmt.Errorf("ledger: redeem %s: %w", id, err)
	}
	return c, nil
}

// Cancel spends the pending confirmation id without acting, so that it can
// never be redeemed. See [Store.Spend] for the errors.
func (l *Ledger) Cancel(ctx context.Context, id ID) (Confirmation, error) {
	c, err := l.store.Spend(ctx, id, Cancelled)
	l.emit(ActionCancel, id, err)
	if err != nil {
		return Confirmation{}, fmt.Errorf("ledger: cancel %s: %w", id, err)
	}
	return c, nil
}

func (l *Ledger) emit(a Action, id ID, err error) {
	if l.observe == nil {
		return
	}
	l.observe(Event{Time: l.now(), Action: a, ID: id, Result: ResultOf(err)})
}
