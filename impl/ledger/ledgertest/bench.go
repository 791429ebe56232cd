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

// Op runs Put, then Take of what it put: the floor as one operation, for
// [BenchmarkOp].
func (f Floor[K]) Op() error {
	k, err := f.Put()
	if err != nil {
		return err
	}
	return f.Take(k)
}

// BenchmarkVersusFloor measures the same Issue plus Redeem as
// [BenchmarkIssueRedeem] against floor, interleaved, so that both see the
// same load, connections and runtime state, and a machine whose load
// drifts during the run moves both alike:
//
//   - serial/versus: each iteration makes one pair and one Put and Take,
//     the ledger first on even iterations and the floor first on odd ones.
//   - parallel/versus: GOMAXPROCS goroutines; time is cut into 20 ms
//     phases, ledger and floor in turn, and every goroutine works on the
//     side of the phase it is in, so that ledger calls run beside ledger
//     calls (as in parallel/ledger) rather than beside the cheaper floor.
//
// Each call is timed. It reports each call's mean time (issue-ns/op,
// redeem-ns/op, put-ns/op, take-ns/op) and two ratios: redeem/take, the
// atomic redemption against the engine's atomic take, and pair/floor,
// Issue plus Redeem against Put plus Take; with a fixed number of
// goroutines the ratio of mean times is also the ratio of throughputs.
// ns/op is wall time per iteration (one pair or one floor op in parallel).
func BenchmarkVersusFloor[K any](b *testing.B, s ledger.Store, floor Floor[K]) {
	ctx := context.Background()
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	proto := Fresh(b)
	const issue, redeem, put, take = 0, 1, 2, 3
	var (
		took   [4]atomic.Int64 // ns spent in each call
		counts [2]atomic.Int64 // pairs, floor ops
	)
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
		counts[0].Add(1)
		return timed(redeem, func() error { _, err := l.Redeem(ctx, c.ID); return err })
	}
	bare := func() error {
		var k K
		if err := timed(put, func() (err error) { k, err = floor.Put(); return err }); err != nil {
			return err
		}
		counts[1].Add(1)
		return timed(take, func() error { return floor.Take(k) })
	}
	run := func(b *testing.B, loop func()) {
		for i := range took {
			took[i].Store(0)
		}
		counts[0].Store(0)
		counts[1].Store(0)
		loop()
		pairs, floors := float64(counts[0].Load()), float64(counts[1].Load())
		if pairs == 0 || floors == 0 {
			// A run shorter than a phase (the first, b.N = 1) has one side
			// only: nothing to compare.
			return
		}
		var mean [4]float64
		for i, n := range [4]float64{pairs, pairs, floors, floors} {
			mean[i] = float64(took[i].Load()) / n
		}
		for i, unit := range [4]string{"issue-ns/op", "redeem-ns/op", "put-ns/op", "take-ns/op"} {
			b.ReportMetric(mean[i], unit)
		}
		b.ReportMetric(mean[redeem]/mean[take], "redeem/take")
		b.ReportMetric((mean[issue]+mean[redeem])/(mean[put]+mean[take]), "pair/floor")
	}
	b.Run("serial/versus", func(b *testing.B) {
		run(b, func() {
			i := 0
			for b.Loop() {
				first, second := pair, bare
				if i%2 == 1 {
					first, second = bare, pair
				}
				if err := first(); err != nil {
					b.Fatal(err)
				}
				if err := second(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("parallel/versus", func(b *testing.B) {
		const phase = 20 * time.Millisecond
		run(b, func() {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					op := pair
					if time.Now().UnixNano()/int64(phase)%2 == 1 {
						op = bare
					}
					if err := op(); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
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
