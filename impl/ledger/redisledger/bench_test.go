package redisledger_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
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
	s := newStore(b, c, redisledger.Options{Namespace: ns})
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	proto := ledgertest.Fresh(b)
	issueRedeem := func() error {
		conf, err := l.Issue(ctx, proto)
		if err != nil {
			return err
		}
		_, err = l.Redeem(ctx, conf.ID)
		return err
	}
	value := proto.Tool + proto.ArgsDigest + proto.Principal + proto.Shown + proto.Subject
	var n atomic.Int64
	setGetDel := func() error {
		key := ns + "floor:" + strconv.FormatInt(n.Add(1), 10)
		if err := c.Set(ctx, key, value, 0).Err(); err != nil {
			return err
		}
		return c.GetDel(ctx, key).Err()
	}
	for _, bm := range []struct {
		name string
		op   func() error
	}{{"ledger", issueRedeem}, {"floor", setGetDel}} {
		b.Run("serial/"+bm.name, func(b *testing.B) {
			for b.Loop() {
				if err := bm.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("parallel/"+bm.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := bm.op(); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
				}
			})
		})
	}
}
