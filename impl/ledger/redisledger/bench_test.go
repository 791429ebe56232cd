package redisledger_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
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
	w, nw := spendInTurn(b, ctx, nowait, [2]*redisledger.Store{wait, nowait})
	b.ReportMetric(w, "wait-ns/op")
	b.ReportMetric(nw, "nowait-ns/op")
	b.ReportMetric(w/nw, "wait/nowait")
}

// BenchmarkAuditedSpend measures what the audit trail costs a Spend: two
// stores on the shared server, one with Audit (the Spend's script also
// seals its record — reads the head, hashes the record's last blocks in
// Lua — and appends it) and one without. Each iteration redeems one
// confirmation through each, in turn first, each call timed, with the
// same audit.Call in the context (a front end's); the confirmations are
// added beforehand, untimed. It reports the median call of each,
// audited-ns/op and plain-ns/op, their ratio audited/plain, and their
// difference, record-µs: what one record adds to a call, most of it
// Redis's time in the script.
func BenchmarkAuditedSpend(b *testing.B) {
	ctx := audit.WithCall(context.Background(), audit.Call{Principal: "oidc:https://id.example alice",
		Tool: "delete_file", ArgsDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Answer: "accept"})
	c := newClient(b)
	ns := namespace(b, c)
	audited := newStore(b, c, redisledger.Options{Namespace: ns, Audit: true})
	plain := newStore(b, c, redisledger.Options{Namespace: ns})
	a, p := spendInTurn(b, ctx, plain, [2]*redisledger.Store{audited, plain})
	b.ReportMetric(a, "audited-ns/op")
	b.ReportMetric(p, "plain-ns/op")
	b.ReportMetric(a/p, "audited/plain")
	b.ReportMetric((a-p)/1e3, "record-µs")
}

// spendInTurn redeems, each iteration, one confirmation through each of
// the two stores, in turn first, each call timed; the confirmations are
// added through add beforehand, untimed. It returns the median call of
// each store, in nanoseconds.
func spendInTurn(b *testing.B, ctx context.Context, add *redisledger.Store, stores [2]*redisledger.Store) (first, second float64) {
	var took [2][]time.Duration
	for i := 0; b.Loop(); i++ {
		var confs [2]ledger.Confirmation
		for k := range confs {
			confs[k] = ledgertest.Fresh(b)
			if err := add.Add(ctx, confs[k]); err != nil {
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
	return median(took[0]), median(took[1])
}
