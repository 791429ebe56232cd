package ledgertest

import (
	"context"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// BenchmarkIssueRedeem measures one Issue plus one Redeem of a [Fresh]
// confirmation through a Ledger over s, as sub-benchmarks serial/ledger
// and parallel/ledger (see [BenchmarkOp]). A store's own benchmark runs
// it beside its floor: the bare server round trips that the store cannot
// beat, with the same connections in the same run.
func BenchmarkIssueRedeem(b *testing.B, s ledger.Store) {
	ctx := context.Background()
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	proto := Fresh(b)
	BenchmarkOp(b, "ledger", func() error {
		conf, err := l.Issue(ctx, proto)
		if err != nil {
			return err
		}
		_, err = l.Redeem(ctx, conf.ID)
		return err
	})
}

// BenchmarkOp measures op, safe for concurrent use, as two sub-benchmarks:
// serial/name, one call after another, and parallel/name, from
// GOMAXPROCS goroutines. An error from op fails the benchmark.
func BenchmarkOp(b *testing.B, name string, op func() error) {
	b.Run("serial/"+name, func(b *testing.B) {
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel/"+name, func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
			}
		})
	})
}
