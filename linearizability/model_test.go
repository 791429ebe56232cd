package linearizability

import (
	"math"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

const inf = math.MaxInt64

var (
	idA = ledger.ID{0xa}
	idB = ledger.ID{0xb}
)

// issue is Add(id, expiring at exp) called at call, returning res at ret.
func issue(id ledger.ID, exp, call, ret int64, res ledger.Result) porcupine.Operation {
	return porcupine.Operation{
		Input: Input{Op: OpIssue, ID: id, Expires: exp, From: call, To: ret},
		Call:  call, Output: Output{Result: res}, Return: ret,
	}
}

// spend is a redeem or cancel of id called at call, returning res at ret
// (ret = inf: outcome unknown). A successful spend returns id.
func spend(op Op, id ledger.ID, call, ret int64, res ledger.Result) porcupine.Operation {
	out := Output{Result: res}
	if res == ledger.ResultOK {
		out.ID = id
	}
	return porcupine.Operation{
		Input: Input{Op: op, ID: id, From: call, To: ret},
		Call:  call, Output: out, Return: ret,
	}
}

// skewed widens op's decision window by skew on both sides, as a Recorder
// with RecorderOptions.Skew does.
func skewed(op porcupine.Operation, skew int64) porcupine.Operation {
	in := op.Input.(Input)
	in.From -= skew
	in.To += skew
	op.Input = in
	return op
}

// lease is the lease of every redeem below but leased's: it ends after
// every operation.
const lease = int64(1_000_000)

func redeem(id ledger.ID, call, ret int64, res ledger.Result) porcupine.Operation {
	return leased(id, lease, call, ret, res)
}

// leased is a redeem of id asking for a lease of l.
func leased(id ledger.ID, l, call, ret int64, res ledger.Result) porcupine.Operation {
	op := spend(OpRedeem, id, call, ret, res)
	in := op.Input.(Input)
	in.Lease = l
	op.Input = in
	return op
}

// replayed is a redeem of id answered done with the outcome kind #tag.
func replayed(id ledger.ID, call, ret int64, kind ledger.OutcomeKind, tag uint64) porcupine.Operation {
	op := redeem(id, call, ret, done)
	op.Output = Output{Result: done, Kind: kind, Tag: tag}
	return op
}

// complete records the outcome kind #tag for id, called at call and
// returning res at ret.
func complete(id ledger.ID, kind ledger.OutcomeKind, tag uint64, call, ret int64, res ledger.Result) porcupine.Operation {
	return porcupine.Operation{
		Input: Input{Op: OpComplete, ID: id, Kind: kind, Tag: tag, From: call, To: ret},
		Call:  call, Output: Output{Result: res}, Return: ret,
	}
}

func cancel(id ledger.ID, call, ret int64, res ledger.Result) porcupine.Operation {
	return spend(OpCancel, id, call, ret, res)
}

// issueOOB is issue of a confirmation that needs need approvals of the
// workload's approvers (alice, or bob and carol by group), requested by
// bob.
func issueOOB(id ledger.ID, need int, exp, call, ret int64, res ledger.Result) porcupine.Operation {
	op := issue(id, exp, call, ret, res)
	in := op.Input.(Input)
	in.Need, in.Eligible, in.Requester = eligibility(needing(need, Approvers[bob].ID))
	op.Input = in
	return op
}

// decide is approver's decision on id (approve or not), called at call,
// returning res at ret.
func decide(id ledger.ID, approver int, approve bool, call, ret int64, res ledger.Result) porcupine.Operation {
	return porcupine.Operation{
		Input: Input{Op: OpDecide, ID: id, Approver: uint8(approver), Approve: approve, From: call, To: ret},
		Call:  call, Output: Output{Result: res}, Return: ret,
	}
}

const (
	ok         = ledger.ResultOK
	progress   = ledger.ResultInProgress
	done       = ledger.ResultDone
	doubt      = ledger.ResultInDoubt
	notActing  = ledger.ResultNotActing
	cancelledR = ledger.ResultCancelled
	expiredR   = ledger.ResultExpired
	unknown    = ledger.ResultUnknown
	errR       = ledger.ResultError // outcome unknown
	exists     = ledger.ResultExists
	full       = ledger.ResultFull
	awaiting   = ledger.ResultAwaiting
	declinedR  = ledger.ResultDeclined
	decidedR   = ledger.ResultDecided
	selfR      = ledger.ResultSelfApproval
	notApprR   = ledger.ResultNotApprover
	inBandR    = ledger.ResultInBand
	far        = int64(1_000_000) // an expiry after every operation below

	kDone, kFailed, kUnknown = ledger.OutcomeDone, ledger.OutcomeFailed, ledger.OutcomeUnknown
)

// TestModel checks the model on small histories, legal and illegal side by
// side: each illegal one differs from a legal one by the bug it shows.
func TestModel(t *testing.T) {
	wrongID := redeem(idA, 2, 3, ok)
	wrongID.Output = Output{Result: ok, ID: idB}

	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool // linearizable
	}{
		// At most once.
		{"redeem then in progress", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idA, 4, 5, progress)}, true},
		{"redeemed twice", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idA, 4, 5, ok)}, false},
		{"racing redeems, one wins", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 6, progress), redeem(idA, 3, 5, ok)}, true},
		{"racing redeems, both win", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 6, ok), redeem(idA, 3, 5, ok)}, false},
		{"in progress before any redeem", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, progress), redeem(idA, 4, 5, ok)}, false},
		{"cancel then cancelled", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, cancelledR)}, true},
		{"redeemed after cancel", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, ok)}, false},
		{"wrong refusal after cancel", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, progress)}, false},
		{"returns another confirmation", []porcupine.Operation{issue(idA, far, 0, 1, ok), wrongID}, false},

		// One answer: a retry gets the outcome recorded, exactly.
		{"done, then replayed", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), replayed(idA, 6, 7, kDone, 7), cancel(idA, 8, 9, done)}, true},
		{"replayed with another outcome", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), replayed(idA, 6, 7, kDone, 8)}, false},
		{"replayed with another kind", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), replayed(idA, 6, 7, kFailed, 7)}, false},
		{"failed, then replayed", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kFailed, 7, 4, 5, ok), replayed(idA, 6, 7, kFailed, 7)}, true},
		{"done before it was recorded", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), replayed(idA, 4, 5, kDone, 7), complete(idA, kDone, 7, 6, 7, ok)}, false},
		{"replay racing the complete", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), replayed(idA, 4, 7, kDone, 7), complete(idA, kDone, 7, 5, 6, ok), redeem(idA, 4, 5, progress)}, true},
		{"in progress after the outcome", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), redeem(idA, 6, 7, progress)}, false},
		{"replay runs again", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), redeem(idA, 6, 7, ok)}, false},
		{"completed twice", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), complete(idA, kFailed, 8, 6, 7, ok)}, false},
		{"second complete refused", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), complete(idA, kFailed, 8, 6, 7, done)}, true},
		{"racing completes, both win", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 8, ok), complete(idA, kFailed, 8, 5, 7, ok)}, false},
		{"racing completes, one wins", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 8, done), complete(idA, kFailed, 8, 5, 7, ok), replayed(idA, 9, 10, kFailed, 8)}, true},
		{"complete before redeem", []porcupine.Operation{issue(idA, far, 0, 1, ok), complete(idA, kDone, 7, 2, 3, notActing), redeem(idA, 4, 5, ok)}, true},
		{"complete of a pending one accepted", []porcupine.Operation{issue(idA, far, 0, 1, ok), complete(idA, kDone, 7, 2, 3, ok)}, false},
		{"complete of a cancelled one", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, cancelledR)}, true},
		{"unknown outcome recorded", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kUnknown, 7, 4, 5, ok), redeem(idA, 6, 7, doubt), complete(idA, kDone, 8, 8, 9, doubt)}, true},
		{"unknown outcome replayed as done", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kUnknown, 7, 4, 5, ok), replayed(idA, 6, 7, kUnknown, 7)}, false},

		// The lease (ending 100 after the redeem's instant, in [102, 103]
		// here), decided on the store's clock within [From, To].
		{"in progress within the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 50, 60, progress)}, true},
		{"in doubt within the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 50, 60, doubt)}, false},
		{"in doubt after the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 110, 120, doubt), cancel(idA, 130, 140, doubt)}, true},
		{"in progress after the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 110, 120, progress)}, false},
		{"completed after the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), complete(idA, kDone, 7, 110, 120, ok)}, false},
		{"late complete refused", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), complete(idA, kDone, 7, 110, 120, doubt), redeem(idA, 130, 140, doubt)}, true},
		{"completed within the lease", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), complete(idA, kDone, 7, 50, 60, ok), replayed(idA, 110, 120, kDone, 7)}, true},
		{"straddling the lease, in progress", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 95, 110, progress)}, true},
		{"straddling the lease, in doubt", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 95, 110, doubt)}, true},
		// In doubt is for good: once seen, a later complete cannot record.
		{"in doubt, then completed", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok), redeem(idA, 95, 110, doubt), complete(idA, kDone, 7, 96, 120, ok)}, false},
		{"in doubt, then in progress within skew", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok),
			skewed(redeem(idA, 100, 104, doubt), 5), skewed(redeem(idA, 105, 106, progress), 5)}, false},
		{"in progress, then in doubt within skew", []porcupine.Operation{issue(idA, far, 0, 1, ok), leased(idA, 100, 2, 3, ok),
			skewed(redeem(idA, 100, 104, progress), 5), skewed(redeem(idA, 105, 106, doubt), 5)}, true},

		// Ids the store never saw.
		{"never issued", []porcupine.Operation{redeem(idA, 0, 1, unknown), cancel(idA, 2, 3, unknown)}, true},
		{"never issued but redeemed", []porcupine.Operation{redeem(idA, 0, 1, ok)}, false},
		{"never issued but expired", []porcupine.Operation{redeem(idA, 0, 1, expiredR)}, false},
		{"redeem racing its issue", []porcupine.Operation{redeem(idA, 0, 10, unknown), issue(idA, far, 1, 2, ok)}, true},
		{"unknown after issue returned", []porcupine.Operation{issue(idA, far, 1, 2, ok), redeem(idA, 3, 4, unknown)}, false},

		// Adding.
		{"duplicate add refused", []porcupine.Operation{issue(idA, far, 0, 1, ok), issue(idA, far, 2, 3, exists)}, true},
		{"duplicate add accepted", []porcupine.Operation{issue(idA, far, 0, 1, ok), issue(idA, far, 2, 3, ok)}, false},
		{"exists before any add", []porcupine.Operation{issue(idA, far, 0, 1, exists)}, false},
		{"full changes nothing", []porcupine.Operation{issue(idA, far, 0, 1, full), redeem(idA, 2, 3, unknown)}, true},
		{"full but added", []porcupine.Operation{issue(idA, far, 0, 1, full), redeem(idA, 2, 3, ok)}, false},

		// Expiry at 100, decided on the store's clock within [From, To].
		{"redeemed before expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 50, 60, ok)}, true},
		{"redeemed after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, ok)}, false},
		{"expired after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, expiredR)}, true},
		{"expired before expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 50, 60, expiredR)}, false},
		{"expired at the expiry instant", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 100, 100, expiredR)}, true},
		{"redeemed at the expiry instant", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 100, 100, ok)}, false},
		{"straddling, redeemed", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 90, 110, ok)}, true},
		{"straddling, expired", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 90, 110, expiredR)}, true},
		// Only a pending confirmation expires: the others are answered
		// from their state.
		{"in progress after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 2, 3, ok), cancel(idA, 110, 120, progress)}, true},
		{"redeemed one reported expired", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 2, 3, ok), cancel(idA, 110, 120, expiredR)}, false},
		{"done after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, 5, ok), replayed(idA, 110, 120, kDone, 7)}, true},
		{"cancelled after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 110, 120, cancelledR)}, true},
		{"issued already expired", []porcupine.Operation{issue(idA, -5, 0, 1, ok), redeem(idA, 2, 3, expiredR), cancel(idA, 4, 5, expiredR)}, true},
		{"issued already expired, redeemed", []porcupine.Operation{issue(idA, -5, 0, 1, ok), redeem(idA, 2, 3, ok)}, false},
		// The clock does not run backwards: once a spend has seen the
		// confirmation expired, a spend after it cannot succeed, even when
		// a clock-skew allowance (5 here) makes its own window straddle
		// the expiry.
		{"expired, then expired within skew", []porcupine.Operation{
			issue(idA, 100, 0, 1, ok), skewed(redeem(idA, 95, 99, expiredR), 5), skewed(redeem(idA, 100, 102, expiredR), 5)}, true},
		{"expired, then redeemed within skew", []porcupine.Operation{
			issue(idA, 100, 0, 1, ok), skewed(redeem(idA, 95, 99, expiredR), 5), skewed(redeem(idA, 100, 102, ok), 5)}, false},
		{"redeemed, then expired within skew", []porcupine.Operation{
			issue(idA, 100, 0, 1, ok), skewed(redeem(idA, 95, 99, ok), 5), skewed(cancel(idA, 100, 102, expiredR), 5)}, false},
		{"expired, then redeemed by a straddling call", []porcupine.Operation{
			issue(idA, 100, 0, 1, ok), skewed(cancel(idA, 96, 98, expiredR), 5), skewed(redeem(idA, 95, 99, ok), 5)}, false},

		// Forgotten after expiry (a store may drop expired entries).
		{"forgotten after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, unknown), cancel(idA, 130, 140, unknown)}, true},
		{"forgotten before expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 50, 60, unknown)}, false},
		{"forgotten after expiry and lease", []porcupine.Operation{issue(idA, 100, 0, 1, ok), leased(idA, 200, 2, 3, ok), redeem(idA, 210, 220, unknown)}, true},
		{"forgotten before the lease's end", []porcupine.Operation{issue(idA, 100, 0, 1, ok), leased(idA, 200, 2, 3, ok), redeem(idA, 110, 120, unknown)}, false},
		{"remembered after forgotten", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, unknown), cancel(idA, 130, 140, expiredR)}, false},

		// Outcome unknown: may or may not have applied, at any later time.
		{"lost redeem applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, progress)}, true},
		{"lost redeem not applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok)}, true},
		{"lost redeem, then two wins", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok), redeem(idA, 7, 8, ok)}, false},
		{"lost cancel applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, inf, errR), redeem(idA, 5, 6, cancelledR)}, true},
		// A failover that lost a redeem some call had already been
		// answered from (a session of the dead primary read it before
		// the standby had it; see TestPostgresCrash in internal/failover).
		{"lost redeem answered from, then lost", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 3, 4, progress), redeem(idA, 5, 6, ok)}, false},
		{"lost complete answered from, then lost", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, inf, errR), replayed(idA, 5, 6, kDone, 7), redeem(idA, 7, 8, progress)}, false},
		{"lost redeem applied late", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok), cancel(idA, 7, 8, progress)}, true},
		{"lost redeem called after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, inf, errR), redeem(idA, 120, 130, progress)}, false},
		{"lost complete applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, inf, errR), replayed(idA, 5, 6, kDone, 7)}, true},
		{"lost complete not applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), complete(idA, kDone, 7, 4, inf, errR), redeem(idA, 5, 6, progress)}, true},
		{"lost complete of a pending one, applied after its redeem", []porcupine.Operation{issue(idA, far, 0, 1, ok), complete(idA, kDone, 7, 2, inf, errR), redeem(idA, 5, 6, ok), replayed(idA, 7, 8, kDone, 7)}, true},
		{"complete refused as pending, then replayed", []porcupine.Operation{issue(idA, far, 0, 1, ok), complete(idA, kDone, 7, 2, 3, notActing), redeem(idA, 5, 6, ok), replayed(idA, 7, 8, kDone, 7)}, false},
		{"lost issue applied", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, ok)}, true},
		{"lost issue not applied", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, unknown)}, true},
		{"lost issue both ways", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, ok), redeem(idA, 7, 8, unknown)}, false},
		// Dropping the lost operation instead of keeping it: the store's
		// honest answer no longer has an explanation.
		{"lost redeem dropped", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 5, 6, progress)}, false},

		// Out-of-band approval (requested by bob; alice, or carol by group,
		// may decide; mallory may not).
		{"awaiting, approved, redeemed", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), redeem(idA, 2, 3, awaiting),
			decide(idA, alice, true, 4, 5, ok), redeem(idA, 6, 7, ok), decide(idA, carol, true, 8, 9, decidedR)}, true},
		{"redeemed before approval", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), redeem(idA, 2, 3, ok)}, false},
		{"awaiting after approval", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, 3, ok), redeem(idA, 4, 5, awaiting)}, false},
		{"awaiting in band", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, awaiting)}, false},
		{"requester refused", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, bob, true, 2, 3, selfR), decide(idA, mallory, false, 4, 5, notApprR), redeem(idA, 6, 7, awaiting)}, true},
		{"requester's approval recorded", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, bob, true, 2, 3, ok)}, false},
		{"unlisted approver's decision recorded", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, mallory, false, 2, 3, ok)}, false},
		{"decided twice by one approver", []porcupine.Operation{issueOOB(idA, 2, far, 0, 1, ok), decide(idA, alice, true, 2, 3, ok), decide(idA, alice, true, 4, 5, ok)}, false},
		{"second decision refused", []porcupine.Operation{issueOOB(idA, 2, far, 0, 1, ok), decide(idA, alice, true, 2, 3, ok), decide(idA, alice, false, 4, 5, decidedR),
			redeem(idA, 6, 7, awaiting), decide(idA, carol, true, 8, 9, ok), redeem(idA, 10, 11, ok)}, true},
		{"decision after the outcome", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, 3, ok), decide(idA, carol, false, 4, 5, ok)}, false},
		{"racing approvers, one recorded", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, 6, decidedR), decide(idA, carol, false, 3, 5, ok),
			redeem(idA, 7, 8, declinedR), cancel(idA, 9, 10, declinedR)}, true},
		{"racing approvers, both recorded", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, 6, ok), decide(idA, carol, false, 3, 5, ok)}, false},
		{"declined, then redeemed", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, carol, false, 2, 3, ok), redeem(idA, 4, 5, ok)}, false},
		{"declined answered as cancelled", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, carol, false, 2, 3, ok), redeem(idA, 4, 5, cancelledR)}, false},
		{"withdrawn, then decided", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), cancel(idA, 2, 3, ok), decide(idA, alice, true, 4, 5, cancelledR), redeem(idA, 6, 7, cancelledR)}, true},
		{"decided after expiry", []porcupine.Operation{issueOOB(idA, 1, 100, 0, 1, ok), decide(idA, alice, true, 110, 120, ok)}, false},
		{"expired, undecided", []porcupine.Operation{issueOOB(idA, 1, 100, 0, 1, ok), decide(idA, alice, true, 110, 120, expiredR)}, true},
		{"approved, then decided after expiry", []porcupine.Operation{issueOOB(idA, 1, 100, 0, 1, ok), decide(idA, alice, true, 2, 3, ok), decide(idA, carol, true, 110, 120, decidedR)}, true},
		{"in band decided", []porcupine.Operation{issue(idA, far, 0, 1, ok), decide(idA, alice, true, 2, 3, inBandR), decide(idA, alice, true, 4, 5, ok)}, false},
		{"lost decision applied", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, inf, errR), redeem(idA, 5, 6, ok)}, true},
		{"lost decision not applied", []porcupine.Operation{issueOOB(idA, 1, far, 0, 1, ok), decide(idA, alice, true, 2, inf, errR), redeem(idA, 5, 6, awaiting)}, true},

		// Partitions are independent; one bad partition is enough.
		{"two ids", []porcupine.Operation{issue(idA, far, 0, 1, ok), issue(idB, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idB, 2, 3, ok)}, true},
		{"two ids, one double spend", []porcupine.Operation{issue(idA, far, 0, 1, ok), issue(idB, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idB, 2, 3, ok), redeem(idB, 4, 5, ok)}, false},
	}
	m := Model()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.ops {
				tt.ops[i].ClientId = i
			}
			if got := porcupine.CheckOperations(m, tt.ops); got != tt.want {
				t.Errorf("linearizable = %v, want %v; history:\n%s", got, tt.want, Describe(tt.ops))
			}
		})
	}
}

func TestPartition(t *testing.T) {
	ops := []porcupine.Operation{
		issue(idB, far, 0, 1, ok), issue(idA, far, 0, 1, ok), redeem(idB, 2, 3, ok), redeem(idA, 2, 3, ok),
	}
	parts := Partition(ops)
	if len(parts) != 2 || len(parts[0]) != 2 || len(parts[1]) != 2 {
		t.Fatalf("Partition gave %d parts: %v", len(parts), parts)
	}
	for i, id := range []ledger.ID{idB, idA} { // order of first appearance
		for _, op := range parts[i] {
			if op.Input.(Input).ID != id {
				t.Errorf("part %d holds an operation on %s", i, op.Input.(Input).ID)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	m := Model()
	tests := []struct {
		op   porcupine.Operation
		want string
	}{
		{issue(idA, 1_500_000, 0, 1, ok), "issue …00000000 expiring at 1.5ms → ok"},
		{redeem(idA, 1000, 2000, progress), "redeem …00000000 for 1ms in [1µs, 2µs] → in_progress"},
		{replayed(idA, 1000, 2000, kFailed, 7), "redeem …00000000 for 1ms in [1µs, 2µs] → done: failed #7"},
		{complete(idA, kDone, 9, 1000, 2000, doubt), "complete …00000000 done #9 in [1µs, 2µs] → in_doubt"},
		{cancel(idA, 1000, inf, errR), "cancel …00000000 in [1µs, ∞] → outcome unknown (may or may not have applied)"},
		{func() porcupine.Operation {
			op := redeem(idA, 1000, 2000, ok)
			op.Output = Output{Result: ok, ID: ledger.ID{15: 0xff}}
			return op
		}(), "redeem …00000000 for 1ms in [1µs, 2µs] → ok, but returned …000000ff"},
	}
	for _, tt := range tests {
		if got := m.DescribeOperation(tt.op.Input, tt.op.Output); got != tt.want {
			t.Errorf("DescribeOperation = %q, want %q", got, tt.want)
		}
	}
	st := state{status: pending, expires: 2_000_000}
	if got := m.DescribeState([]any{st}); !strings.Contains(got, "pending (expires 2ms)") {
		t.Errorf("DescribeState = %q", got)
	}
}
