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
// same run, the floor: a bare SET then GETDEL of a value of similar size.
func BenchmarkIssueRedeem(b *testing.B) {
	ctx := context.Background()
	c := newClient(b)
	ns := namespace(b, c)
	ledgertest.BenchmarkIssueRedeem(b, newStore(b, c, redisledger.Options{Namespace: ns}))

	proto := ledgertest.Fresh(b)
	value := proto.Tool + proto.ArgsDigest + proto.Principal + proto.Subject
	var n atomic.Int64
	ledgertest.BenchmarkOp(b, "floor", func() error {
		key := ns + "floor:" + strconv.FormatInt(n.Add(1), 10)
		if err := c.Set(ctx, key, value, 0).Err(); err != nil {
			return err
		}
		return c.GetDel(ctx, key).Err()
	})
}
