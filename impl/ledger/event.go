package ledger

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
)

// Action names a ledger operation as the TLA+ specification (spec/Ledger.tla)
// names the corresponding action.
type Action string

const (
	ActionIssue  Action = "Issue"
	ActionRedeem Action = "Redeem"
	ActionCancel Action = "Cancel"
)

// Result is the outcome of an operation, one word per sentinel error.
type Result string

const (
	ResultOK        Result = "ok"
	ResultUnknown   Result = "unknown"
	ResultSpent     Result = "spent"
	ResultCancelled Result = "cancelled"
	ResultExpired   Result = "expired"
	ResultFull      Result = "full"
	ResultExists    Result = "exists"
	ResultError     Result = "error" // any other error: outcome unknown
)

// ResultOf reports the [Result] an error from a [Store] or [Ledger] stands for.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrUnknown):
		return ResultUnknown
	case errors.Is(err, ErrSpent):
		return ResultSpent
	case errors.Is(err, ErrCancelled):
		return ResultCancelled
	case errors.Is(err, ErrExpired):
		return ResultExpired
	case errors.Is(err, ErrFull):
		return ResultFull
	case errors.Is(err, ErrExists):
		return ResultExists
	}
	return ResultError
}

// An Event records one completed ledger operation.
type Event struct {
	Time   time.Time `json:"time"`
	Action Action    `json:"action"`
	ID     ID        `json:"id"`
	Result Result    `json:"result"`
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
