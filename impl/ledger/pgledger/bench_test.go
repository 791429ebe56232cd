package pgledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
)

// BenchmarkIssueRedeem measures one Issue plus one Redeem through the
// ledger (an INSERT and an UPDATE ... RETURNING), and beside it, with the
// same pool in the same run, the floor: a bare INSERT of the same row into
// the same table, then DELETE ... RETURNING it; then the two interleaved,
// each call timed (ledgertest.BenchmarkVersusFloor). The table is its own
// (benchTable), as BenchmarkAuditedSpend's is: the shared one is never
// vacuumed, and its dead rows would decide the plans.
func BenchmarkIssueRedeem(b *testing.B) {
	ctx := context.Background()
	p := newPool(b)
	table := benchTable(b, p)
	t := pgx.Identifier{table}.Sanitize()
	ns := namespace(b, p, table)
	store := newStore(b, p, pgledger.Options{Table: table, Namespace: ns})
	ledgertest.BenchmarkIssueRedeem(b, store)

	proto := ledgertest.Fresh(b)
	floor := ledgertest.Floor[ledger.ID]{
		Put: func() (ledger.ID, error) {
			id := ledgertest.NewID(b)
			_, err := p.Exec(ctx, `INSERT INTO `+t+`
				(namespace, id, state, tool, args_digest, principal, subject, expires_at, expires_ns)
				VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, 0)`,
				ns, id[:], []byte(proto.Tool), []byte(proto.ArgsDigest), []byte(proto.Principal),
				[]byte(proto.Subject), proto.Expires)
			return id, err
		},
		Take: func(id ledger.ID) error {
			var tool, args, principal, subject []byte
			return p.QueryRow(ctx, `DELETE FROM `+t+` WHERE namespace = $1 AND id = $2
				RETURNING tool, args_digest, principal, subject`, ns, id[:]).
				Scan(&tool, &args, &principal, &subject)
		},
	}
	ledgertest.BenchmarkOp(b, "floor", floor.Op)
	ledgertest.BenchmarkVersusFloor(b, store, floor)
}

// BenchmarkAuditedSpend measures a Spend (to acting) on a store keeping
// its audit trail beside a Spend on one that keeps none, same pool, same
// table, interleaved (the order alternating each iteration), each call
// timed on its own; the Adds they spend are not timed. It reports the
// ratio of the medians as "audited/plain" (BENCHMARKS.md). The table is
// its own (benchTable), so that the dead rows other runs left in the
// shared one do not decide the plans.
func BenchmarkAuditedSpend(b *testing.B) {
	ctx := context.Background()
	p := newPool(b)
	table := benchTable(b, p)
	plain := newStore(b, p, pgledger.Options{Table: table, Namespace: namespace(b, p, table)})
	audited := auditedStore(b, p, table)
	spend := func(s ledger.Store) time.Duration {
		c := ledgertest.Fresh(b)
		if err := s.Add(ctx, c); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var a, q []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			a, q = append(a, spend(audited)), append(q, spend(plain))
		} else {
			q, a = append(q, spend(plain)), append(a, spend(audited))
		}
	}
	slices.Sort(a)
	slices.Sort(q)
	b.ReportMetric(float64(a[len(a)/2])/float64(q[len(q)/2]), "audited/plain")
	b.ReportMetric(float64(a[len(a)/2].Microseconds()), "audited-µs")
	b.ReportMetric(float64(q[len(q)/2].Microseconds()), "plain-µs")
}

// benchTable returns the name of a new table, made by Migrate, which is
// dropped with its audit tables when b ends.
func benchTable(b *testing.B, p *pgxpool.Pool) string {
	b.Helper()
	table := "mcp_confirm_bench_" + random(b)
	b.Cleanup(func() {
		ts := pgx.Identifier{table}.Sanitize()
		for _, suffix := range []string{"_audit", "_audit_head", "_audit_checkpoint"} {
			ts += ", " + pgx.Identifier{table + suffix}.Sanitize()
		}
		if _, err := p.Exec(context.Background(), `DROP TABLE IF EXISTS `+ts); err != nil {
			b.Error(err)
		}
	})
	if err := newStore(b, p, pgledger.Options{Table: table}).Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return table
}
