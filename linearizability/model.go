// Package linearizability checks that a [ledger.Store] behaves, under
// concurrency, like the single-threaded specification of spec/Ledger.tla:
// every history of Issue, Redeem, Cancel, Complete and Decide calls recorded from
// many goroutines must be explainable by some order of atomic steps that
// respects real time (each step happens between its call and its return).
//
// It has three parts, all usable outside tests:
//
//   - [Model]: a porcupine model of one confirmation's life, partitioned by
//     confirmation id, with expiry and the lease decided by the store's
//     clock, and a retry of a redeemed confirmation answered from its
//     record.
//   - [Recorder] and [Client]: record the operations of any number of
//     goroutines against any store (or, through [Client.Do], any transport
//     such as an HTTP server), with monotonic call and return times.
//     Operations whose outcome is unknown are kept, never dropped.
//   - [Record] drives a store with a racing workload, and [Verify] / [Check]
//     run porcupine on the history.
//
// What it guarantees: a history reported [porcupine.Illegal] is a real
// violation of the contract as the model states it (two successful spends
// of one confirmation, a spend honoured after its expiry or after a
// cancel, two outcomes recorded for one confirmation or one recorded after
// its lease, a retry answered with another outcome than the one recorded,
// a redeem before the out-of-band approvals were in, a decision recorded
// twice, after the outcome, by the requester or by someone not listed,
// a refusal the state cannot explain) — provided the recorder's skew
// allowance covers the offset between the store's clock and the
// recorder's, and the store's rounding of expiries and leases. A history
// reported [porcupine.Ok] only says that this history had an explanation:
// it is a test, not a proof.
//
// What it does not check: the caps (ErrFull is accepted anywhere, since a
// cap counts confirmations of other partitions), the opaque fields of a
// confirmation (the conformance suite in impl/ledger/ledgertest does), or
// how long a store remembers an expired confirmation (forgetting it is
// accepted at any time after its expiry and its lease's end).
package linearizability

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Op is the kind of a recorded operation.
type Op uint8

const (
	OpIssue    Op = iota + 1 // Store.Add: a new pending confirmation
	OpRedeem                 // Store.Spend(id, Acting, lease)
	OpCancel                 // Store.Spend(id, Cancelled, 0)
	OpComplete               // Store.Complete(id, outcome)
	OpDecide                 // Store.Decide(id, Approvers[Approver], approve)
)

// Approvers are the approvers whose decisions a history records: an
// OpDecide names one by its index ([Input.Approver]). An Issue of a
// confirmation that needs out-of-band approval records which of them may
// decide it and which is its requester ([Input.Eligible],
// [Input.Requester]), as the confirmation's Approval says.
var Approvers = [...]ledger.Approver{
	{ID: "alice"},
	{ID: "bob", Groups: []string{"group:ops"}},
	{ID: "carol", Groups: []string{"group:ops"}},
	{ID: "mallory", Groups: []string{"group:guests"}},
}

// eligibility returns, for an Issue of a confirmation that needs a, the
// approvals it needs, the mask of the Approvers who may decide it and the
// mask of those who are its requester.
func eligibility(a *ledger.Approval) (need uint8, eligible, requester uint64) {
	if a == nil {
		return 0, 0, 0
	}
	for i, p := range Approvers {
		switch a.Eligible(p) {
		case nil:
			eligible |= 1 << i
		case ledger.ErrSelfApproval:
			requester |= 1 << i
		}
	}
	return uint8(a.Required), eligible, requester
}

func (o Op) String() string {
	switch o {
	case OpIssue:
		return "issue"
	case OpRedeem:
		return "redeem"
	case OpCancel:
		return "cancel"
	case OpComplete:
		return "complete"
	case OpDecide:
		return "decide"
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
	// Lease is, for OpRedeem, the lease asked for, in nanoseconds.
	Lease int64
	// Kind and Tag are, for OpComplete, the outcome recorded: its kind,
	// and a number naming its result (see [TagResult]).
	Kind ledger.OutcomeKind
	Tag  uint64
	// Need, Eligible and Requester are, for OpIssue, the approvals the
	// confirmation needs out of band (0: none) and the masks of the
	// [Approvers] who may decide it and who are its requester.
	Need                uint8
	Eligible, Requester uint64
	// Approver and Approve are, for OpDecide, the index in [Approvers] of
	// who decides, and how.
	Approver uint8
	Approve  bool
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
	// Kind and Tag are, for a spend answered done, the recorded outcome it
	// returned. Zero: the answer did not say (an end-to-end decline).
	Kind ledger.OutcomeKind
	Tag  uint64
}

// TagResult is the result a workload's Complete records for tag: its 8
// bytes, big-endian, so that an answer names which Complete it came from.
func TagResult(tag uint64) []byte { return binary.BigEndian.AppendUint64(nil, tag) }

// ResultTag reads a tag back from a recorded result: the number TagResult
// encoded, or for any other result an FNV-1a hash of it.
func ResultTag(result []byte) uint64 {
	if len(result) == 8 {
		return binary.BigEndian.Uint64(result)
	}
	h := fnv.New64a()
	h.Write(result)
	return h.Sum64()
}

// status is where a confirmation is, as far as the history can tell.
type status uint8

const (
	absent    status = iota // never issued (or not yet)
	pending                 // issued, not spent, not known to be expired
	acting                  // redeemed; its lease may not have ended
	recorded                // done or failed: its outcome recorded
	inDoubt                 // redeemed, and an answer said in doubt (or an unknown outcome was recorded)
	cancelled               // spent by a Cancel, or declined by an approver
	expired                 // pending, and some operation saw the store's clock at or past the expiry
	forgotten               // the store dropped it, after its expiry (and its lease's end)
)

func (s status) String() string {
	switch s {
	case absent:
		return "absent"
	case pending:
		return "pending"
	case acting:
		return "acting"
	case recorded:
		return "recorded"
	case inDoubt:
		return "in doubt"
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
	// leaseFrom and leaseTo bound the end of the lease, once redeemed: the
	// store set it to its clock plus the lease, at an instant inside the
	// redeem's window.
	leaseFrom, leaseTo int64
	kind               ledger.OutcomeKind // the outcome recorded, if any
	tag                uint64
	// Out-of-band approval: the approvals needed (0: in band), the masks
	// of the Approvers who may decide and who are the requester, those who
	// decided, how many approved, and whether one declined.
	need                         uint8
	eligible, requester, decided uint64
	approvals                    uint8
	declined                     bool
}

// undecided reports whether an eligible approver's decision on s may
// still be recorded: it needs approval, no one declined, the approvals
// are not all in, and it was not redeemed.
func (s state) undecided() bool {
	return s.need > 0 && !s.declined && s.approvals < s.need &&
		s.status != acting && s.status != recorded && s.status != inDoubt
}

func (s state) String() string {
	switch s.status {
	case absent:
		return "absent"
	case acting, inDoubt:
		return fmt.Sprintf("%s (lease ends in [%s, %s])", s.status, axis(s.leaseFrom), axis(s.leaseTo))
	case recorded:
		return fmt.Sprintf("recorded %s #%d", s.kind, s.tag)
	}
	if s.need > 0 {
		return fmt.Sprintf("%s (expires %s; %d of %d approvals, decided %04b, declined %v)",
			s.status, axis(s.expires), s.approvals, s.need, s.decided, s.declined)
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
// States: absent → pending (Issue) → acting (Redeem, with a lease) or
// cancelled (Cancel); acting → recorded (Complete, done or failed, while
// the lease runs) or in doubt (Complete of an unknown outcome, or an answer
// after the lease's end). pending → expired once an operation has observed
// the store's clock at or past the expiry; every other state is answered
// as it is, whatever the clock. Any issued state → forgotten when a store
// answers ErrUnknown after the expiry (and after the lease's end, if it
// was redeemed). expired, in doubt and forgotten are absorbing, because
// the store's clock never runs backwards.
//
// A retry of a redeemed confirmation is answered from its record: in
// progress while the lease may run, in doubt once it may have ended (or
// an unknown outcome was recorded), and done with exactly the recorded
// outcome (kind and tag) once one was. A Complete succeeds only on an
// acting confirmation whose lease may still run: the compare-and-set.
//
// Expiry and the lease's end are decided by the store's clock at an
// unknown instant inside the operation's [From, To] window. An operation
// whose window lies wholly before the instant must be decided as before
// it; one wholly at or after it, as after; one whose window straddles it
// may do either, and its answer tells the model which side it fell on. So
// the answer, not a coin, picks the branch: such an operation is
// deterministic given its output.
//
// Nondeterminism comes only from operations whose outcome is unknown
// (Output.Result == ledger.ResultError): an Issue may or may not have
// added the confirmation, a Spend of a pending one may or may not have spent
// it, a Complete of an acting one may or may not have recorded its
// outcome; the step returns both states, and later answers prune the set.
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
			h := uint64(st.expires)*0x9e3779b97f4a7c15 ^ uint64(st.status)
			h = (h^uint64(st.leaseFrom))*0x9e3779b97f4a7c15 ^ uint64(st.leaseTo)
			h = (h^st.decided)*0x9e3779b97f4a7c15 ^ uint64(st.approvals)
			return (h^st.tag)*0x9e3779b97f4a7c15 ^ uint64(st.kind)
		},
		DescribeOperation: describeOperation,
		DescribeState:     func(s any) string { return s.(state).String() },
	}
}

// step returns the states a confirmation in state s can be in after the
// operation in returned out; none if that answer was impossible.
func step(s state, in Input, out Output) []any {
	issued := s.status != absent && s.status != forgotten
	redeemed := s.status == acting || s.status == recorded || s.status == inDoubt
	// live: the store's clock may have read before the expiry;
	// late: it may have read at or after it. leaseLive and leaseOver: the
	// same about the end of the lease.
	live := in.From < s.expires
	late := in.To >= s.expires
	leaseLive := in.From < s.leaseTo
	leaseOver := in.To >= s.leaseFrom
	with := func(st status) []any { s.status = st; return []any{s} }

	if in.Op == OpIssue {
		added := state{status: pending, expires: in.Expires, need: in.Need, eligible: in.Eligible, requester: in.Requester}
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

	// A decision is answered from the record (cancelled, expired) only
	// if the approver may decide and nothing is decided yet.
	bit := uint64(1) << (in.Approver % 64)
	mayDecide := in.Op != OpDecide || issued && s.eligible&bit != 0 && s.requester&bit == 0 && s.decided&bit == 0 && s.undecided()

	// Answers every operation on an issued confirmation may get from its
	// state.
	switch out.Result {
	case ledger.ResultInDoubt:
		switch {
		case in.Op == OpDecide:
		case s.status == inDoubt:
			return []any{s}
		case s.status == acting && leaseOver:
			return with(inDoubt)
		}
		return nil
	case ledger.ResultCancelled:
		if s.status == cancelled && !s.declined && mayDecide {
			return []any{s}
		}
		return nil
	case ledger.ResultDeclined:
		if s.status == cancelled && s.declined && in.Op != OpDecide {
			return []any{s}
		}
		return nil
	case ledger.ResultExpired:
		if (s.status == pending || s.status == expired) && late && mayDecide {
			return with(expired)
		}
		return nil
	case ledger.ResultUnknown:
		switch {
		case s.status == absent:
			return []any{s}
		case late && (!redeemed || leaseOver): // forgotten, and stays forgotten
			return with(forgotten)
		}
		return nil
	}

	if in.Op == OpDecide {
		if !issued {
			return nil
		}
		mine := s.eligible&bit != 0 && s.requester&bit == 0
		decided := s
		decided.decided |= bit
		if in.Approve {
			decided.approvals++
		} else {
			decided.status, decided.declined = cancelled, true
		}
		switch out.Result {
		case ledger.ResultInBand:
			if s.need == 0 {
				return []any{s}
			}
		case ledger.ResultSelfApproval:
			if s.need > 0 && s.requester&bit != 0 {
				return []any{s}
			}
		case ledger.ResultNotApprover:
			if s.need > 0 && s.requester&bit == 0 && s.eligible&bit == 0 {
				return []any{s}
			}
		case ledger.ResultDecided:
			if s.need > 0 && mine && !mayDecide {
				return []any{s}
			}
		case ledger.ResultOK:
			if mayDecide && s.status == pending && live {
				return []any{decided}
			}
		case ledger.ResultError:
			if mayDecide && s.status == pending && live {
				return []any{s, decided}
			}
			return []any{s}
		}
		return nil
	}

	if in.Op == OpComplete {
		completed := s
		completed.status, completed.kind, completed.tag = recorded, in.Kind, in.Tag
		if in.Kind == ledger.OutcomeUnknown {
			completed.status = inDoubt
		}
		switch out.Result {
		case ledger.ResultOK:
			if s.status == acting && leaseLive {
				return []any{completed}
			}
		case ledger.ResultDone:
			if s.status == recorded {
				return []any{s}
			}
		case ledger.ResultNotActing:
			if s.status == pending && live {
				return []any{s}
			}
		case ledger.ResultError:
			if s.status == acting && leaseLive {
				return []any{s, completed}
			}
			return []any{s}
		}
		return nil
	}

	spent := s
	if in.Op == OpRedeem {
		spent.status = acting
		spent.leaseFrom, spent.leaseTo = addSat(in.From, in.Lease), addSat(in.To, in.Lease)
	} else {
		spent.status = cancelled
	}
	// Out-of-band approval: a redeem waits for the approvals; a cancel
	// does not.
	approved := in.Op == OpCancel || s.approvals >= s.need
	switch out.Result {
	case ledger.ResultOK:
		if s.status == pending && live && out.ID == in.ID && approved {
			return []any{spent}
		}
	case ledger.ResultAwaiting:
		if s.status == pending && live && !approved {
			return []any{s}
		}
	case ledger.ResultInProgress:
		if s.status == acting && leaseLive {
			return []any{s}
		}
	case ledger.ResultDone:
		if s.status == recorded && (out.Kind == 0 && out.Tag == 0 || out.Kind == s.kind && out.Tag == s.tag) {
			return []any{s}
		}
	case ledger.ResultError:
		if s.status == pending && live && approved {
			return []any{s, spent}
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
	switch i.Op {
	case OpIssue:
		call = fmt.Sprintf("issue %s expiring at %s", short(i.ID), axis(i.Expires))
		if i.Need > 0 {
			call += fmt.Sprintf(" needing %d approvals (may decide %04b, requester %04b)", i.Need, i.Eligible, i.Requester)
		}
	case OpRedeem:
		call = fmt.Sprintf("redeem %s for %s in [%s, %s]", short(i.ID), time.Duration(i.Lease), axis(i.From), axis(i.To))
	case OpComplete:
		call = fmt.Sprintf("complete %s %s #%d in [%s, %s]", short(i.ID), i.Kind, i.Tag, axis(i.From), axis(i.To))
	case OpDecide:
		how := "decline"
		if i.Approve {
			how = "approve"
		}
		call = fmt.Sprintf("%s (%s) %s in [%s, %s]", Approvers[i.Approver%uint8(len(Approvers))].ID, how, short(i.ID), axis(i.From), axis(i.To))
	default:
		call = fmt.Sprintf("%s %s in [%s, %s]", i.Op, short(i.ID), axis(i.From), axis(i.To))
	}
	switch {
	case o.Result == ledger.ResultError:
		return call + " → outcome unknown (may or may not have applied)"
	case o.Result == ledger.ResultOK && i.Op != OpIssue && i.Op != OpComplete && o.ID != i.ID:
		return fmt.Sprintf("%s → ok, but returned %s", call, short(o.ID))
	case o.Result == ledger.ResultDone && o.Kind != 0:
		return fmt.Sprintf("%s → done: %s #%d", call, o.Kind, o.Tag)
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
