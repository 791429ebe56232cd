package ledgertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

// A Floor is the bare engine work that a store's Issue and Redeem cannot
// beat, done by the same client: Put writes a value the size of an entry
// and returns its key; Take removes that value and returns it in one
// atomic step (GETDEL, DELETE … RETURNING), as Redeem must.
type Floor[K any] struct {
	Put  func() (K, error)
	Take func(K) error
}

// Op returns Put then Take as one operation, for [BenchmarkOp].
func (f Floor[K]) Op() error {
	k, err := f.Put()
	if err != nil {
		return err
	}
	return f.Take(k)
}

// BenchmarkVersusFloor measures the same Issue plus Redeem as
// [BenchmarkIssueRedeem] against floor call by call: each iteration makes
// one pair and one Put and Take, the ledger first on even iterations and
// the floor first on odd ones, timing each call, so that both see the same
// load, connections and runtime state, and a machine whose load drifts
// during the run moves both alike. Its sub-benchmarks, serial/versus and
// parallel/versus, report each call's time (issue-ns/op, redeem-ns/op,
// put-ns/op, take-ns/op) and two ratios: redeem/take, the atomic
// redemption against the engine's atomic take, and pair/floor, Issue plus
// Redeem against Put plus Take. ns/op is the whole iteration.
func BenchmarkVersusFloor[K any](b *testing.B, s ledger.Store, floor Floor[K]) {
	ctx := context.Background()
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	proto := Fresh(b)
	const issue, redeem, put, take = 0, 1, 2, 3
	var took [4]atomic.Int64 // ns spent in each call
	timed := func(call int, f func() error) error {
		t0 := time.Now()
		err := f()
		took[call].Add(int64(time.Since(t0)))
		return err
	}
	pair := func() error {
		var c ledger.Confirmation
		if err := timed(issue, func() (err error) { c, err = l.Issue(ctx, proto); return err }); err != nil {
			return err
		}
		return timed(redeem, func() error { _, err := l.Redeem(ctx, c.ID); return err })
	}
	bare := func() error {
		var k K
		if err := timed(put, func() (err error) { k, err = floor.Put(); return err }); err != nil {
			return err
		}
		return timed(take, func() error { return floor.Take(k) })
	}
	iteration := func(i int) error {
		first, second := pair, bare
		if i%2 == 1 {
			first, second = bare, pair
		}
		if err := first(); err != nil {
			return err
		}
		return second()
	}
	run := func(b *testing.B, loop func()) {
		for i := range took {
			took[i].Store(0)
		}
		loop()
		var ns [4]float64
		for i := range took {
			ns[i] = float64(took[i].Load())
		}
		for i, unit := range [4]string{"issue-ns/op", "redeem-ns/op", "put-ns/op", "take-ns/op"} {
			b.ReportMetric(ns[i]/float64(b.N), unit)
		}
		b.ReportMetric(ns[redeem]/ns[take], "redeem/take")
		b.ReportMetric((ns[issue]+ns[redeem])/(ns[put]+ns[take]), "pair/floor")
	}
	b.Run("serial/versus", func(b *testing.B) {
		run(b, func() {
			i := 0
			for b.Loop() {
				if err := iteration(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("parallel/versus", func(b *testing.B) {
		run(b, func() {
			var goroutines atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(goroutines.Add(1)) // the goroutines start on different sides
				for pb.Next() {
					if err := iteration(i); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
					i++
				}
			})
		})
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
