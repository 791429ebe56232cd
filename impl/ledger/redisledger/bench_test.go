package redisledger_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// BenchmarkIssueRedeem measures one Issue plus one Redeem through the
// ledger (two script calls), and beside it, with the same client in the
// same run, the floor: a bare SET then GETDEL of a value of similar size;
// then the two interleaved, each call timed (ledgertest.BenchmarkVersusFloor).
func BenchmarkIssueRedeem(b *testing.B) {
	ctx := context.Background()
	c := newClient(b)
	ns := namespace(b, c)
	store := newStore(b, c, redisledger.Options{Namespace: ns})
	ledgertest.BenchmarkIssueRedeem(b, store)

	proto := ledgertest.Fresh(b)
	value := proto.Tool + proto.ArgsDigest + proto.Principal + proto.Subject
	var n atomic.Int64
	floor := ledgertest.Floor[string]{
		Put: func() (string, error) {
			key := ns + "floor:" + strconv.FormatInt(n.Add(1), 10)
			return key, c.Set(ctx, key, value, 0).Err()
		},
		Take: func(key string) error { return c.GetDel(ctx, key).Err() },
	}
	ledgertest.BenchmarkOp(b, "floor", floor.Op)
	ledgertest.BenchmarkVersusFloor(b, store, floor)
}
