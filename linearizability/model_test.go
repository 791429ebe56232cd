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

func redeem(id ledger.ID, call, ret int64, res ledger.Result) porcupine.Operation {
	return spend(OpRedeem, id, call, ret, res)
}

func cancel(id ledger.ID, call, ret int64, res ledger.Result) porcupine.Operation {
	return spend(OpCancel, id, call, ret, res)
}

const (
	ok         = ledger.ResultOK
	spent      = ledger.ResultSpent
	cancelledR = ledger.ResultCancelled
	expiredR   = ledger.ResultExpired
	unknown    = ledger.ResultUnknown
	errR       = ledger.ResultError // outcome unknown
	exists     = ledger.ResultExists
	full       = ledger.ResultFull
	far        = int64(1_000_000) // an expiry after every operation below
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
		{"redeem then spent", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idA, 4, 5, spent)}, true},
		{"redeemed twice", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), redeem(idA, 4, 5, ok)}, false},
		{"racing redeems, one wins", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 6, spent), redeem(idA, 3, 5, ok)}, true},
		{"racing redeems, both win", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 6, ok), redeem(idA, 3, 5, ok)}, false},
		{"spent before any redeem", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, spent), redeem(idA, 4, 5, ok)}, false},
		{"cancel then cancelled", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, cancelledR)}, true},
		{"redeemed after cancel", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, ok)}, false},
		{"wrong refusal after cancel", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 3, ok), redeem(idA, 4, 5, spent)}, false},
		{"returns another confirmation", []porcupine.Operation{issue(idA, far, 0, 1, ok), wrongID}, false},

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
		{"expired whatever its state", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 2, 3, ok), cancel(idA, 110, 120, expiredR)}, true},
		{"spent reported after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 2, 3, ok), cancel(idA, 110, 120, spent)}, false},
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
			issue(idA, 100, 0, 1, ok), skewed(redeem(idA, 95, 99, ok), 5), skewed(cancel(idA, 100, 102, expiredR), 5)}, true},

		// Forgotten after expiry (a store may drop expired entries).
		{"forgotten after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, unknown), cancel(idA, 130, 140, unknown)}, true},
		{"forgotten before expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 50, 60, unknown)}, false},
		{"remembered after forgotten", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, 120, unknown), cancel(idA, 130, 140, expiredR)}, false},

		// Outcome unknown: may or may not have applied, at any later time.
		{"lost redeem applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, spent)}, true},
		{"lost redeem not applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok)}, true},
		{"lost redeem, then two wins", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok), redeem(idA, 7, 8, ok)}, false},
		{"lost cancel applied", []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, inf, errR), redeem(idA, 5, 6, cancelledR)}, true},
		{"lost redeem applied late", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, inf, errR), redeem(idA, 5, 6, ok), cancel(idA, 7, 8, spent)}, true},
		{"lost redeem called after expiry", []porcupine.Operation{issue(idA, 100, 0, 1, ok), redeem(idA, 110, inf, errR), redeem(idA, 120, 130, spent)}, false},
		{"lost issue applied", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, ok)}, true},
		{"lost issue not applied", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, unknown)}, true},
		{"lost issue both ways", []porcupine.Operation{issue(idA, far, 0, inf, errR), redeem(idA, 5, 6, ok), redeem(idA, 7, 8, unknown)}, false},
		// Dropping the lost operation instead of keeping it: the store's
		// honest answer no longer has an explanation.
		{"lost redeem dropped", []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 5, 6, spent)}, false},

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
		{redeem(idA, 1000, 2000, spent), "redeem …00000000 in [1µs, 2µs] → spent"},
		{cancel(idA, 1000, inf, errR), "cancel …00000000 in [1µs, ∞] → outcome unknown (may or may not have applied)"},
		{func() porcupine.Operation {
			op := redeem(idA, 1000, 2000, ok)
			op.Output = Output{Result: ok, ID: ledger.ID{15: 0xff}}
			return op
		}(), "redeem …00000000 in [1µs, 2µs] → ok, but returned …000000ff"},
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
