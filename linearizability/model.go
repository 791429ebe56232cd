// Package linearizability checks that a [ledger.Store] behaves, under
// concurrency, like the single-threaded specification of spec/Ledger.tla:
// every history of Issue, Redeem and Cancel calls recorded from many
// goroutines must be explainable by some order of atomic steps that respects
// real time (each step happens between its call and its return).
//
// It has three parts, all usable outside tests:
//
//   - [Model]: a porcupine model of one confirmation's life, partitioned by
//     confirmation id, with expiry decided by the store's clock.
//   - [Recorder] and [Client]: record the operations of any number of
//     goroutines against any store (or, through [Client.Do], any transport
//     such as an HTTP server), with monotonic call and return times.
//     Operations whose outcome is unknown are kept, never dropped.
//   - [Record] drives a store with a racing workload, and [Verify] / [Check]
//     run porcupine on the history.
//
// What it guarantees: a history reported [porcupine.Illegal] is a real
// violation of the at-most-once contract as the model states it (two
// successful spends of one confirmation, a spend honoured after its expiry
// or after a cancel, a refusal the state cannot explain) — provided the
// recorder's skew allowance covers the offset between the store's clock
// and the recorder's, and the store's expiry rounding. A history reported
// [porcupine.Ok] only says that this history had an explanation: it is a
// test, not a proof.
//
// What it does not check: the caps (ErrFull is accepted anywhere, since a
// cap counts confirmations of other partitions), the opaque fields of a
// confirmation (the conformance suite in impl/ledger/ledgertest does), or
// how long a store remembers an expired confirmation (forgetting it is
// accepted at any time after its expiry).
package linearizability

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Op is the kind of a recorded operation.
type Op uint8

const (
	OpIssue  Op = iota + 1 // Store.Add: a new pending confirmation
	OpRedeem               // Store.Spend(id, Redeemed)
	OpCancel               // Store.Spend(id, Cancelled)
)

func (o Op) String() string {
	switch o {
	case OpIssue:
		return "issue"
	case OpRedeem:
		return "redeem"
	case OpCancel:
		return "cancel"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Input is what an operation asked for, plus the times the model needs:
// porcupine's Step never sees call and return times, so the window in which
// the store may have read its clock travels in the input.
//
// All times are nanoseconds on the history's time axis: monotonic time since
// the [Recorder] started.
type Input struct {
	Op Op
	ID ledger.ID
	// Expires is, for OpIssue, the confirmation's expiry.
	Expires int64
	// From and To bound the instant at which the store decided: the call
	// time minus the allowed clock skew, and the return time plus it.
	// To is math.MaxInt64 when the outcome is unknown (the store may still
	// apply the request later).
	From, To int64
}

// Output is what an operation returned.
type Output struct {
	// Result is the outcome; ledger.ResultError means the outcome is
	// unknown: the operation may or may not have taken effect.
	Result ledger.Result
	// ID is, for a successful spend, the id of the confirmation returned.
	ID ledger.ID
}

// status is where a confirmation is, as far as the history can tell.
type status uint8

const (
	absent    status = iota // never issued (or not yet)
	pending                 // issued, not spent, not known to be expired
	redeemed                // spent by a Redeem
	cancelled               // spent by a Cancel
	expired                 // some operation saw the store's clock at or past the expiry
	forgotten               // the store dropped it, after its expiry
)

func (s status) String() string {
	switch s {
	case absent:
		return "absent"
	case pending:
		return "pending"
	case redeemed:
		return "redeemed"
	case cancelled:
		return "cancelled"
	case expired:
		return "expired"
	case forgotten:
		return "forgotten"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// state is one confirmation's state: a partition's whole state.
type state struct {
	status  status
	expires int64 // expiry on the time axis; 0 while absent
}

func (s state) String() string {
	if s.status == absent {
		return "absent"
	}
	return fmt.Sprintf("%s (expires %s)", s.status, axis(s.expires))
}

// Model returns the porcupine model of the ledger, already converted from
// [NondeterministicModel] (see there for the states and transitions).
func Model() porcupine.Model {
	nm := NondeterministicModel()
	return nm.ToModel()
}

// NondeterministicModel returns the model of one confirmation: a partition
// per confirmation id, each starting absent.
//
// States: absent → pending (Issue) → redeemed or cancelled (Spend); any
// issued state → expired once an operation has observed the store's clock at
// or past the expiry; any issued state → forgotten when a store that may
// drop expired entries answers ErrUnknown after the expiry. expired and
// forgotten are absorbing for spends, because the store's clock never runs
// backwards: after one operation has seen the confirmation expired, every
// operation ordered after it must see it expired (or forgotten) too.
//
// Expiry is decided by the store's clock at an unknown instant inside the
// operation's [From, To] window. A spend whose window lies wholly before
// the expiry must be decided on the state (ok, spent, cancelled); one
// wholly at or after it must answer expired (or unknown, if forgotten); one
// whose window straddles the expiry may do either, and its answer tells the
// model which side it fell on. So the answer, not a coin, picks the branch:
// such an operation is deterministic given its output.
//
// Nondeterminism comes only from operations whose outcome is unknown
// (Output.Result == ledger.ResultError): an Issue may or may not have
// added the confirmation, a Spend of a pending one may or may not have spent
// it; the step returns both states, and later answers prune the set.
func NondeterministicModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: Partition,
		Init:      func() []any { return []any{state{}} },
		Step: func(s, in, out any) []any {
			return step(s.(state), in.(Input), out.(Output))
		},
		Equal: func(a, b any) bool { return a.(state) == b.(state) },
		Hash: func(s any) uint64 {
			st := s.(state)
			return uint64(st.expires)*0x9e3779b97f4a7c15 ^ uint64(st.status)
		},
		DescribeOperation: describeOperation,
		DescribeState:     func(s any) string { return s.(state).String() },
	}
}

// step returns the states a confirmation in state s can be in after the
// operation in returned out; none if that answer was impossible.
func step(s state, in Input, out Output) []any {
	issued := s.status != absent && s.status != forgotten
	// live: the store's clock may have read before the expiry;
	// late: it may have read at or after it.
	live := in.From < s.expires
	late := in.To >= s.expires

	if in.Op == OpIssue {
		added := state{status: pending, expires: in.Expires}
		switch out.Result {
		case ledger.ResultOK:
			// An id is never reused in practice, but a store may forget an
			// expired confirmation and then accept its id again.
			if !issued || late {
				return []any{added}
			}
		case ledger.ResultExists:
			if issued {
				return []any{s}
			}
		case ledger.ResultFull:
			// Caps count other partitions: accepted anywhere, no change.
			return []any{s}
		case ledger.ResultError:
			if !issued || late {
				return []any{s, added}
			}
			return []any{s}
		}
		return nil
	}

	to := redeemed
	if in.Op == OpCancel {
		to = cancelled
	}
	switch out.Result {
	case ledger.ResultOK:
		if s.status == pending && live && out.ID == in.ID {
			return []any{state{status: to, expires: s.expires}}
		}
	case ledger.ResultSpent:
		if s.status == redeemed && live {
			return []any{s}
		}
	case ledger.ResultCancelled:
		if s.status == cancelled && live {
			return []any{s}
		}
	case ledger.ResultExpired:
		if issued && late {
			return []any{state{status: expired, expires: s.expires}}
		}
	case ledger.ResultUnknown:
		switch {
		case s.status == absent:
			return []any{s}
		case late: // forgotten after its expiry, and stays forgotten
			return []any{state{status: forgotten, expires: s.expires}}
		}
	case ledger.ResultError:
		if s.status == pending && live {
			return []any{s, state{status: to, expires: s.expires}}
		}
		return []any{s}
	}
	return nil
}

// Partition splits a history by confirmation id, keeping the order in which
// ids first appear, so that each confirmation is checked on its own.
func Partition(history []porcupine.Operation) [][]porcupine.Operation {
	index := make(map[ledger.ID]int)
	var parts [][]porcupine.Operation
	for _, op := range history {
		id := op.Input.(Input).ID
		i, ok := index[id]
		if !ok {
			i = len(parts)
			index[id] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeOperation(in, out any) string {
	i, o := in.(Input), out.(Output)
	var call string
	if i.Op == OpIssue {
		call = fmt.Sprintf("issue %s expiring at %s", short(i.ID), axis(i.Expires))
	} else {
		call = fmt.Sprintf("%s %s in [%s, %s]", i.Op, short(i.ID), axis(i.From), axis(i.To))
	}
	switch {
	case o.Result == ledger.ResultError:
		return call + " → outcome unknown (may or may not have applied)"
	case o.Result == ledger.ResultOK && i.Op != OpIssue && o.ID != i.ID:
		return fmt.Sprintf("%s → ok, but returned %s", call, short(o.ID))
	}
	return fmt.Sprintf("%s → %s", call, o.Result)
}

// short abbreviates an id to its last 8 hex digits, which differ between
// the ids of one workload (its ids share a random prefix).
func short(id ledger.ID) string { return "…" + id.String()[24:] }

// axis formats a time on the history's time axis.
func axis(ns int64) string {
	if ns == math.MaxInt64 {
		return "∞"
	}
	return time.Duration(ns).String()
}
