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
)

// Result is the outcome of an operation, one word per sentinel error.
type Result string

const (
	ResultOK         Result = "ok"
	ResultUnknown    Result = "unknown"
	ResultInProgress Result = "in_progress"
	ResultDone       Result = "done"
	ResultInDoubt    Result = "in_doubt"
	ResultCancelled  Result = "cancelled"
	ResultExpired    Result = "expired"
	ResultFull       Result = "full"
	ResultExists     Result = "exists"
	ResultNotActing  Result = "not_acting"
	ResultError      Result = "error" // any other error: outcome unknown
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
	}
	return ResultError
}

// An Event records one completed ledger operation. A Complete's event
// carries the outcome it tried to record (done, failed or unknown), whether
// or not it succeeded; a Redeem's or Cancel's answered done, the outcome
// recorded (done or failed), which the answer gave back.
type Event struct {
	Time    time.Time   `json:"time"`
	Action  Action      `json:"action"`
	ID      ID          `json:"id"`
	Result  Result      `json:"result"`
	Outcome OutcomeKind `json:"outcome,omitzero"`
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

// spendEvent is the event of a Redeem or Cancel that returned r, err.
func spendEvent(t time.Time, a Action, id ID, r Record, err error) Event {
	e := Event{Time: t, Action: a, ID: id, Result: ResultOf(err)}
	if e.Result == ResultDone {
		e.Outcome = r.Outcome.Kind
	}
	return e
}
