package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Action names a ledger operation as the TLA+ specification (spec/Ledger.tla)
// names the corresponding action.
type Action string

const (
	ActionIssue    Action = "Issue"
	ActionRedeem   Action = "Redeem"
	ActionCancel   Action = "Cancel"
	ActionComplete Action = "Complete"
	ActionDecide   Action = "Decide"
)

// Result is the outcome of an operation, one word per sentinel error.
type Result string

const (
	ResultOK           Result = "ok"
	ResultUnknown      Result = "unknown"
	ResultInProgress   Result = "in_progress"
	ResultDone         Result = "done"
	ResultInDoubt      Result = "in_doubt"
	ResultCancelled    Result = "cancelled"
	ResultExpired      Result = "expired"
	ResultFull         Result = "full"
	ResultExists       Result = "exists"
	ResultNotActing    Result = "not_acting"
	ResultAwaiting     Result = "awaiting_approval"
	ResultDeclined     Result = "declined"
	ResultDecided      Result = "decided"
	ResultNotApprover  Result = "not_approver"
	ResultSelfApproval Result = "self_approval"
	ResultInBand       Result = "in_band"
	ResultError        Result = "error" // any other error: outcome unknown
)

// ResultOf reports the [Result] an error from a [Store] or [Ledger] stands for.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrUnknown):
		return ResultUnknown
	case errors.Is(err, ErrInProgress):
		return ResultInProgress
	case errors.Is(err, ErrDone):
		return ResultDone
	case errors.Is(err, ErrSpent):
		// ErrInDoubt, or a bare ErrSpent from a store written before
		// outcomes were recorded: redeemed, and no one can tell more.
		return ResultInDoubt
	case errors.Is(err, ErrDeclined):
		return ResultDeclined
	case errors.Is(err, ErrCancelled):
		return ResultCancelled
	case errors.Is(err, ErrExpired):
		return ResultExpired
	case errors.Is(err, ErrFull):
		return ResultFull
	case errors.Is(err, ErrExists):
		return ResultExists
	case errors.Is(err, ErrNotActing):
		return ResultNotActing
	case errors.Is(err, ErrAwaitingApproval):
		return ResultAwaiting
	case errors.Is(err, ErrDecided):
		return ResultDecided
	case errors.Is(err, ErrSelfApproval):
		return ResultSelfApproval
	case errors.Is(err, ErrNotApprover):
		return ResultNotApprover
	case errors.Is(err, ErrInBand):
		return ResultInBand
	}
	return ResultError
}

// An Event records one completed ledger operation. A Complete's event
// carries the outcome it tried to record (done, failed or unknown), whether
// or not it succeeded; a Redeem's or Cancel's answered done, the outcome
// recorded (done or failed), which the answer gave back. An Issue's event
// of a confirmation that needs out-of-band approval carries the approvals
// it needs and its requester; a Decide's, who decided and how.
type Event struct {
	Time    time.Time   `json:"time"`
	Action  Action      `json:"action"`
	ID      ID          `json:"id"`
	Result  Result      `json:"result"`
	Outcome OutcomeKind `json:"outcome,omitzero"`
	// Approvals is, on an Issue, how many approvals the confirmation
	// needs (0: none, in band).
	Approvals int `json:"approvals,omitzero"`
	// Requester is, on an Issue, the Approval's requester.
	Requester string `json:"requester,omitzero"`
	// Approver is, on a Decide, the approver's ID.
	Approver string `json:"approver,omitzero"`
	// Decision is, on a Decide, "approve" or "decline".
	Decision string `json:"decision,omitzero"`
	// Expires is, on an Issue, the confirmation's expiry: the issuing
	// ledger's clock plus its TTL, which is the time the specification's
	// Issue happens at (Time is the store's clock at its step).
	Expires time.Time `json:"expires,omitzero"`
	// Seq is, from a shared store (redisledger, pgledger), a number the
	// store drew inside the step that took effect, increasing in the
	// order the steps on one confirmation took effect: such a store
	// reports its events after the step, in whatever order the calls
	// return, so a trace is put in order by Time, then Seq. Zero from a
	// store that reports under its lock (Memory).
	Seq uint64 `json:"seq,omitzero"`
}

// MarshalText encodes the kind as done, failed or unknown.
func (k OutcomeKind) MarshalText() ([]byte, error) {
	if k < OutcomeDone || k > OutcomeUnknown {
		return nil, fmt.Errorf("ledger: invalid outcome %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText parses the form MarshalText writes.
func (k *OutcomeKind) UnmarshalText(b []byte) error {
	for v := OutcomeDone; v <= OutcomeUnknown; v++ {
		if string(b) == v.String() {
			*k = v
			return nil
		}
	}
	return fmt.Errorf("ledger: invalid outcome %q", b)
}

// MarshalText encodes the id as hex, so events read well as JSON.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the hex form.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// NDJSON returns an Observe function that writes each event to w as one
// line of JSON. Writes are serialized; a write error is dropped (tracing
// never changes the ledger's behaviour).
func NDJSON(w io.Writer) func(Event) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
}

// SpendEvent is the event of a [Store.Spend] of id into state to
// (Acting: a Redeem; Cancelled: a Cancel) that returned r and err, at
// time t.
func SpendEvent(t time.Time, to State, id ID, r Record, err error) Event {
	a := ActionRedeem
	if to == Cancelled {
		a = ActionCancel
	}
	e := Event{Time: t, Action: a, ID: id, Result: ResultOf(err)}
	if e.Result == ResultDone {
		e.Outcome = r.Outcome.Kind
	}
	return e
}

// IssueEvent is the event of a [Store.Add] of c (as an Issue) that
// returned err, at time t.
func IssueEvent(t time.Time, c Confirmation, err error) Event {
	e := Event{Time: t, Action: ActionIssue, ID: c.ID, Result: ResultOf(err), Expires: c.Expires}
	if c.Approval != nil {
		e.Approvals, e.Requester = c.Approval.Required, c.Approval.Requester
	}
	return e
}

// DecideEvent is the event of a [Store.Decide] of id by approver that
// returned err, at time t.
func DecideEvent(t time.Time, id ID, approver string, approve bool, err error) Event {
	e := Event{Time: t, Action: ActionDecide, ID: id, Result: ResultOf(err), Approver: approver, Decision: "decline"}
	if approve {
		e.Decision = "approve"
	}
	return e
}

// CompleteEvent is the event of a [Store.Complete] of id, recording an
// outcome of kind k, that returned err, at time t.
func CompleteEvent(t time.Time, id ID, k OutcomeKind, err error) Event {
	return Event{Time: t, Action: ActionComplete, ID: id, Result: ResultOf(err), Outcome: k}
}
