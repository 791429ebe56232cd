package redisledger_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
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

// BenchmarkRedisReplicated measures what waiting for a replica costs a
// Spend: a primary and its replica, redis-servers of the benchmark's own
// on loopback, and two stores on the primary, one with Replicas 1 (each
// Spend then WAITs for the replica in the same round trip) and one
// without. Each iteration redeems one confirmation through each, in turn
// first, each call timed; the confirmations are added beforehand, in the
// same iteration, untimed. It reports the median call of each,
// wait-ns/op and nowait-ns/op, and their ratio wait/nowait: measured in
// one loop, so that both see the same machine, and by medians, so that
// the few calls a loaded machine stalls for milliseconds (the replica is
// a third process to be scheduled) do not decide it.
func BenchmarkRedisReplicated(b *testing.B) {
	primary, _ := replicated(b)
	ctx := context.Background()
	open := func(query string) *redisledger.Store {
		s, err := redisledger.Open(ctx, primary.URL()+query, redisledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	wait, nowait := open("?replicas=1&wait=1s"), open("")
	var took [2][]time.Duration
	stores := [2]*redisledger.Store{wait, nowait}
	for i := 0; b.Loop(); i++ {
		var confs [2]ledger.Confirmation
		for k := range confs {
			confs[k] = ledgertest.Fresh(b)
			if err := nowait.Add(ctx, confs[k]); err != nil {
				b.Fatal(err)
			}
		}
		for j := range 2 {
			k := (i + j) % 2 // the first of the two alternates
			began := time.Now()
			if _, err := stores[k].Spend(ctx, confs[k].ID, ledger.Acting, time.Hour); err != nil {
				b.Fatal(err)
			}
			took[k] = append(took[k], time.Since(began))
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	w, nw := median(took[0]), median(took[1])
	b.ReportMetric(w, "wait-ns/op")
	b.ReportMetric(nw, "nowait-ns/op")
	b.ReportMetric(w/nw, "wait/nowait")
}
