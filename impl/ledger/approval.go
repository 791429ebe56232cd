package ledger

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Errors of out-of-band approval, returned by [Ledger.Redeem],
// [Ledger.Cancel] and [Ledger.Decide] (and the [Store] methods under
// them). Callers branch on them with errors.Is.
var (
	// ErrAwaitingApproval: Redeem of a pending confirmation that needs
	// out-of-band approval before the approvals it needs are all
	// recorded. Nothing changed; the Record returned shows the decisions
	// so far and the expiry.
	ErrAwaitingApproval = errors.New("ledger: confirmation awaiting out-of-band approval")
	// ErrDeclined: an approver declined the confirmation out of band: it
	// is cancelled for good. errors.Is(err, ErrCancelled) holds too; the
	// Record returned names who declined.
	ErrDeclined error = &cancelledError{"ledger: confirmation declined by an approver"}
	// ErrDecided: Decide was refused because this approver's decision is
	// recorded already, or the outcome is: every approval it needs is in
	// (and it may since have been redeemed), or an approver declined it.
	// Nothing changed; the Record returned holds what was recorded.
	ErrDecided = errors.New("ledger: approval already decided")
	// ErrNotApprover: Decide by an approver who may not decide this
	// confirmation: neither its ID nor any of its groups is listed in
	// [Approval.Approvers].
	ErrNotApprover = errors.New("ledger: not an approver of this confirmation")
	// ErrSelfApproval: Decide by the confirmation's requester, who may
	// never decide their own request (four-eyes).
	// errors.Is(err, ErrNotApprover) holds too.
	ErrSelfApproval error = &notApproverError{"ledger: the requester cannot decide their own request"}
	// ErrInBand: Decide of a confirmation that needs no out-of-band
	// approval (its Approval is nil): only the person asked in band
	// answers it.
	ErrInBand = errors.New("ledger: confirmation needs no out-of-band approval")
)

// cancelledError is a sentinel that also satisfies errors.Is(err,
// ErrCancelled).
type cancelledError struct{ msg string }

func (e *cancelledError) Error() string        { return e.msg }
func (e *cancelledError) Is(target error) bool { return target == ErrCancelled }

// notApproverError is a sentinel that also satisfies errors.Is(err,
// ErrNotApprover).
type notApproverError struct{ msg string }

func (e *notApproverError) Error() string        { return e.msg }
func (e *notApproverError) Is(target error) bool { return target == ErrNotApprover }

// An Approval is the out-of-band approval a confirmation needs before it
// can be redeemed, besides whatever the person asked in band answered:
// Required distinct approvers, each listed in Approvers and none of them
// the Requester, must approve it with [Ledger.Decide]; a single decline
// cancels it. A confirmation's Approval is written once, by Add, and never
// changes.
type Approval struct {
	// Required is how many distinct approvers must approve: 1 to
	// [MaxRequired].
	Required int
	// Approvers lists who may decide: an [Approver] is eligible if its ID
	// or one of its Groups is listed. The names are the caller's (keep
	// identities and groups apart, e.g. "sub:…" and "group:…"). 1 to
	// [MaxApprovers] names, each 1 to [MaxName] bytes.
	Approvers []string
	// Requester is who asked for the call, as an [Approver.ID]: they may
	// never decide it (four-eyes), even if listed. Empty: no approver is
	// the requester, or the policy lets the requester approve their own
	// call (one person, their own second device). At most MaxName bytes.
	Requester string
	// Question is what the approval page shows, in the caller's encoding
	// (the sanitized question): kept, unlike an in-band question's
	// wording, so that whichever replica serves the page can show it. At
	// most [MaxQuestion] bytes.
	Question string
}

// Bounds of an [Approval] and an [Approver], so that a record stays small
// and a store's encoding simple.
const (
	MaxRequired  = 16
	MaxApprovers = 64
	MaxName      = 1024
	MaxQuestion  = 64 << 10
	MaxGroups    = 1024
)

// Check reports whether a can be recorded: see the bounds on each field.
// Every field must be valid UTF-8, so that what a store keeps and what a
// page shows agree byte for byte.
func (a *Approval) Check() error {
	switch {
	case a == nil:
		return nil
	case a.Required < 1 || a.Required > MaxRequired:
		return fmt.Errorf("ledger: approval requires %d approvers: want 1 to %d", a.Required, MaxRequired)
	case len(a.Approvers) < 1 || len(a.Approvers) > MaxApprovers:
		return fmt.Errorf("ledger: approval lists %d approvers: want 1 to %d", len(a.Approvers), MaxApprovers)
	case len(a.Requester) > MaxName || !utf8.ValidString(a.Requester):
		return errors.New("ledger: approval's requester is longer than MaxName or not UTF-8")
	case len(a.Question) > MaxQuestion || !utf8.ValidString(a.Question):
		return fmt.Errorf("ledger: approval's question of %d bytes is longer than %d or not UTF-8", len(a.Question), MaxQuestion)
	}
	for _, n := range a.Approvers {
		if n == "" || len(n) > MaxName || !utf8.ValidString(n) {
			return fmt.Errorf("ledger: approver name of %d bytes: want 1 to %d bytes of UTF-8", len(n), MaxName)
		}
	}
	return nil
}

// clone returns a copy of a that shares nothing with it.
func (a *Approval) clone() *Approval {
	if a == nil {
		return nil
	}
	c := *a
	c.Approvers = slices.Clone(a.Approvers)
	return &c
}

// Clone returns a copy of a that shares no slice with it (nil for nil),
// for stores that keep what they are given.
func (a *Approval) Clone() *Approval { return a.clone() }

// Eligible reports whether p may decide a confirmation that needs a: nil
// if so, ErrSelfApproval if p is its requester, ErrNotApprover if neither
// p's ID nor any of its groups is listed, and ErrInBand for a nil a.
func (a *Approval) Eligible(p Approver) error {
	switch {
	case a == nil:
		return ErrInBand
	// Four-eyes: a caller who is also an approver (or an agent driving
	// its own approver's session) cannot approve its own call.
	case a.Requester != "" && p.ID == a.Requester:
		return ErrSelfApproval
	// Only listed approvers decide: signing in is not enough.
	case slices.Contains(a.Approvers, p.ID):
		return nil
	}
	for _, g := range p.Groups {
		if slices.Contains(a.Approvers, g) {
			return nil
		}
	}
	return ErrNotApprover
}

// An Approver is a person deciding out of band, as their own sign-in
// authenticated them: never from the caller's credentials, which an agent
// holds.
type Approver struct {
	// ID names the person, stably and uniquely (e.g. the issuer and
	// subject of an OpenID Connect ID token): it is recorded, it makes
	// approvals distinct, and it is compared with [Approval.Requester].
	// 1 to [MaxName] bytes of UTF-8.
	ID string
	// Groups are further names the identity provider vouches for (group
	// claims), any of which [Approval.Approvers] may list. Not recorded.
	// At most [MaxGroups].
	Groups []string
}

// Check reports whether p can decide at all: an ID within the bounds.
func (p Approver) Check() error {
	switch {
	case p.ID == "" || len(p.ID) > MaxName || !utf8.ValidString(p.ID):
		return fmt.Errorf("ledger: approver ID of %d bytes: want 1 to %d bytes of UTF-8", len(p.ID), MaxName)
	case len(p.Groups) > MaxGroups:
		return fmt.Errorf("ledger: approver in %d groups: at most %d", len(p.Groups), MaxGroups)
	}
	return nil
}

// A Decision is one approver's decision on a confirmation, as recorded.
type Decision struct {
	Approver string    // the [Approver.ID]
	Approve  bool      // false: declined
	At       time.Time // when it was recorded, on the store's clock
}

// Approvals reports how many of r's decisions approve.
func (r Record) Approvals() int {
	n := 0
	for _, d := range r.Decisions {
		if d.Approve {
			n++
		}
	}
	return n
}

// Approved reports whether r needs no further approval: it needs none
// (in band), or the approvals it needs are all recorded and no one
// declined.
func (r Record) Approved() bool {
	if r.Approval == nil {
		return true
	}
	_, declined := r.Declined()
	return !declined && r.Approvals() >= r.Approval.Required
}

// Declined returns the decision that declined r, if one did.
func (r Record) Declined() (Decision, bool) {
	for _, d := range r.Decisions {
		if !d.Approve {
			return d, true
		}
	}
	return Decision{}, false
}

// DecisionOf returns the decision of the approver with ID id, if recorded.
func (r Record) DecisionOf(id string) (Decision, bool) {
	for _, d := range r.Decisions {
		if d.Approver == id {
			return d, true
		}
	}
	return Decision{}, false
}

// Decide is the rule of [Store.Decide], for stores to apply inside their
// atomic step: r is the confirmation as the store holds it, now the
// store's clock, p the approver deciding. It returns r with p's decision
// added, at now (a decline moves it to Cancelled), or the error that
// refuses the decision, in this order: ErrInBand; p's eligibility
// (ErrSelfApproval, ErrNotApprover), with an empty Record, so that an
// ineligible person learns nothing of the confirmation; ErrDecided (p
// decided already, or the outcome is decided); ErrCancelled (withdrawn by
// the client); ErrExpired (pending at or after its expiry). Refused, it
// returns r as it is. A store answers ErrUnknown itself, for an id it does
// not hold. The trace validation of the specification (spec/TraceLedger.tla,
// DecideAnswer) checks the same order.
func (r Record) Decide(p Approver, approve bool, now time.Time) (Record, error) {
	if r.Approval == nil {
		return Record{}, ErrInBand
	}
	if err := r.Approval.Eligible(p); err != nil {
		return Record{}, err
	}
	_, mine := r.DecisionOf(p.ID)
	_, declined := r.Declined()
	switch {
	// Recorded once: a second decision, by the same approver or by
	// another after the outcome, would let a decline undo an approval
	// already acted on, or an approval undo a decline.
	case mine || declined || r.Approvals() >= r.Approval.Required || r.State != Pending && r.State != Cancelled:
		return r, ErrDecided
	case r.State == Cancelled:
		return r, ErrCancelled
	case !now.Before(r.Expires):
		return r, ErrExpired
	}
	r.Decisions = append(slices.Clip(r.Decisions), Decision{Approver: p.ID, Approve: approve, At: now})
	if !approve {
		r.State = Cancelled
	}
	return r, nil
}
