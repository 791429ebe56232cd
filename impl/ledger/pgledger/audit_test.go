package pgledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

// crashTable is the table of the stores whose audit table has the
// crash-injecting trigger: apart, so that no other test or benchmark pays
// for it.
const crashTable = "mcp_confirm_crash_test"

// auditedStore returns a store on table keeping its trail, in a fresh
// namespace whose rows (ledger and trail) are deleted when t ends.
func auditedStore(t testing.TB, p *pgxpool.Pool, table string) *pgledger.Store {
	t.Helper()
	ns := namespace(t, p, table)
	s := newStore(t, p, pgledger.Options{Table: table, Namespace: ns, Audit: true})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, suffix := range []string{"_audit", "_audit_head", "_audit_checkpoint"} {
			if _, err := p.Exec(ctx, `DELETE FROM `+pgx.Identifier{table + suffix}.Sanitize()+` WHERE namespace = $1`, ns); err != nil {
				t.Errorf("cleanup of %s: %v", ns, err)
			}
		}
	})
	return s
}

// pgAudit makes audited stores; Rewrite rewrites the namespace's rows of
// the trail as its administrator could; NewFaulty's crash is a trigger
// that raises an exception after the record's INSERT, inside the
// transaction of the transition, while the namespace is listed in the
// crash table.
func pgAudit(t *testing.T) ledgertest.AuditFactory {
	p := newPool(t)
	ctx := context.Background()
	setup := []string{
		`SELECT pg_advisory_xact_lock(hashtextextended('mcp-confirm/pgledger-test-crash', 0))`,
		`CREATE TABLE IF NOT EXISTS mcp_confirm_test_crash (namespace text PRIMARY KEY)`,
		`CREATE OR REPLACE FUNCTION mcp_confirm_test_crash() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT FROM mcp_confirm_test_crash WHERE namespace = NEW.namespace) THEN
		RAISE EXCEPTION 'injected crash after the audit record, before the commit';
	END IF;
	RETURN NEW;
END $$`,
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range setup {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ledgertest.AuditFactory{
		New: func(t testing.TB) (ledger.Store, audit.Trail) {
			s := auditedStore(t, p, pgledger.DefaultTable)
			return s, s
		},
		Rewrite: func(t testing.TB, tr audit.Trail, lines [][]byte) {
			rewrite(t, p, pgledger.DefaultTable, tr.(*pgledger.Store), lines)
		},
		NewFaulty: func(t testing.TB) (ledger.Store, audit.Trail, func(bool)) {
			s := auditedStore(t, p, crashTable)
			trigger := pgx.Identifier{crashTable + "_audit"}.Sanitize()
			if _, err := p.Exec(ctx, `CREATE OR REPLACE TRIGGER mcp_confirm_test_crash AFTER INSERT ON `+trigger+
				` FOR EACH ROW EXECUTE FUNCTION mcp_confirm_test_crash()`); err != nil {
				t.Fatal(err)
			}
			ns := s.Namespace()
			t.Cleanup(func() { p.Exec(context.Background(), `DELETE FROM mcp_confirm_test_crash WHERE namespace = $1`, ns) })
			return s, s, func(on bool) {
				q := `DELETE FROM mcp_confirm_test_crash WHERE namespace = $1`
				if on {
					q = `INSERT INTO mcp_confirm_test_crash VALUES ($1) ON CONFLICT DO NOTHING`
				}
				if _, err := p.Exec(context.Background(), q, ns); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

// rewrite replaces the records of s's trail with lines, at seq 1, 2, ...
func rewrite(t testing.TB, p *pgxpool.Pool, table string, s *pgledger.Store, lines [][]byte) {
	t.Helper()
	ctx := context.Background()
	records := pgx.Identifier{table + "_audit"}.Sanitize()
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM `+records+` WHERE namespace = $1`, s.Namespace()); err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		if _, err := tx.Exec(ctx, `INSERT INTO `+records+` VALUES ($1, $2, $3)`, s.Namespace(), i+1, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAuditTrail(t *testing.T) { ledgertest.AuditTrail(t, pgAudit(t)) }

func TestAuditChainTamper(t *testing.T) { ledgertest.AuditChainTamper(t, pgAudit(t)) }

func TestAuditAtomicWithLedger(t *testing.T) { ledgertest.AuditAtomic(t, pgAudit(t)) }

// TestAuditedStore runs the store suite on audited stores: the trail
// changes none of the answers, under concurrency too.
func TestAuditedStore(t *testing.T) {
	rapidtest.OutOfTree(t) // the model test's fail files
	p := newPool(t)
	ledgertest.Run(t, ledgertest.Namespaced(
		func(t testing.TB) (ledger.Store, string) {
			s := auditedStore(t, p, pgledger.DefaultTable)
			return s, s.Namespace()
		},
		func(t testing.TB, ns string) ledger.Store {
			return newStore(t, p, pgledger.Options{Namespace: ns, Audit: true})
		},
	))
}
