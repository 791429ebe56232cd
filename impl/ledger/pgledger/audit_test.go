package pgledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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

// TestMigrateAuditHead upgrades the audit tables of the earlier version,
// whose head row kept the last record's SHA-256 (head NOT NULL, with prev
// and at beside it), each namespace's trail written by that version's
// statement: Migrate adds the head's line and drops the copies, and the
// store's next records continue each chain from the head the earlier
// version left. Verify then passes over the whole trail. Its control: a
// head rewritten before the upgrade (a hash that is not record 2's) is
// continued too, and Verify names record 2.
func TestMigrateAuditHead(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	table := tempTable(t, p)
	records := pgx.Identifier{table + "_audit"}.Sanitize()
	head := pgx.Identifier{table + "_audit_head"}.Sanitize()
	cps := pgx.Identifier{table + "_audit_checkpoint"}.Sanitize()
	t.Cleanup(func() {
		if _, err := p.Exec(context.Background(), `DROP TABLE IF EXISTS `+records+`, `+head+`, `+cps); err != nil {
			t.Error(err)
		}
	})
	for _, q := range []string{
		`CREATE TABLE ` + records + ` (namespace text NOT NULL, seq bigint NOT NULL, line bytea NOT NULL, PRIMARY KEY (namespace, seq))`,
		`CREATE TABLE ` + head + ` (namespace text PRIMARY KEY, seq bigint NOT NULL, head bytea NOT NULL, prev bytea, at bigint)`,
		`CREATE TABLE ` + cps + ` (namespace text NOT NULL, seq bigint NOT NULL, checkpoint text NOT NULL, PRIMARY KEY (namespace, seq))`,
	} {
		if _, err := p.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The earlier version's statement appending a record.
	line := func(seq, at, prev string) string {
		return `$2::bytea || convert_to(format('"seq":%s,"time":%s,"result":"%s","prev":"%s"}', ` +
			seq + `, ` + at + `, $3::text, encode(` + prev + `, 'hex')), 'UTF8')`
	}
	zero := `decode(repeat('00', 32), 'hex')`
	earlier := `WITH sealed AS (
	INSERT INTO ` + head + ` AS h (namespace, seq, head, prev, at)
	SELECT $1, 1, sha256(` + line("1", "t.at", zero) + `), ` + zero + `, t.at
	FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS at) t
	ON CONFLICT (namespace) DO UPDATE SET seq = h.seq + 1, prev = h.head, at = EXCLUDED.at,
		head = sha256(` + line("h.seq + 1", "EXCLUDED.at", "h.head") + `)
	RETURNING seq, prev, at
), recorded AS (
	INSERT INTO ` + records + ` SELECT $1, seq, ` + line("seq", "at", "prev") + ` FROM sealed
) SELECT seq FROM sealed`
	cases := []struct {
		ns       string
		rewrite  bool // the head rewritten before the upgrade
		wantSeq  uint64
		wantFail bool
	}{{"ns", false, 0, false}, {"ns-rewritten", true, 2, true}}
	for _, c := range cases {
		for i := range 2 {
			prefix := audit.Record{Op: audit.OpIssue, ID: fmt.Sprint("before-", i), Principal: "alice", Tool: "t"}.Prefix()
			if _, err := p.Exec(ctx, earlier, c.ns, prefix, "ok"); err != nil {
				t.Fatalf("the earlier version's append: %v", err)
			}
		}
		if c.rewrite {
			if _, err := p.Exec(ctx, `UPDATE `+head+` SET head = sha256(head) WHERE namespace = $1`, c.ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	columns := func() (n int) {
		if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_attribute
			WHERE attrelid = $1::regclass AND attname IN ('prev', 'at') AND NOT attisdropped`, head).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if columns() != 2 {
		t.Fatal("setup: no columns prev and at")
	}
	for _, c := range cases {
		t.Run(c.ns, func(t *testing.T) {
			s := newStore(t, p, pgledger.Options{Table: table, Namespace: c.ns, Audit: true})
			for range 2 { // the second Migrate finds nothing to do
				if err := s.Migrate(ctx); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
				if n := columns(); n != 0 {
					t.Fatalf("%d of the columns prev and at still there after Migrate", n)
				}
			}
			ls := make([][]byte, 0, 4)
			for l, err := range s.Records(ctx, 1) {
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			if seq, h, err := s.Head(ctx); err != nil || seq != 2 || (h == sha256.Sum256(ls[1])) == c.rewrite {
				t.Fatalf("Head after the upgrade = %d, %x, %v; want 2, record 2's SHA-256 (rewritten: %v)", seq, h, err, c.rewrite)
			}
			conf := ledgertest.Fresh(t)
			if err := s.Add(ctx, conf); err != nil {
				t.Fatalf("Add after the upgrade: %v", err)
			}
			if _, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long); err != nil {
				t.Fatalf("Spend after the upgrade: %v", err)
			}
			sum, err := audit.Verify(s.Records(ctx, 1), nil, audit.VerifyOptions{})
			var b *audit.Break
			switch {
			case !c.wantFail && (err != nil || sum.Records != 4):
				t.Fatalf("Verify after the upgrade: %+v, %v; want 4 records", sum, err)
			case c.wantFail && (!errors.As(err, &b) || b.Seq != c.wantSeq || b.Problem != audit.Edited):
				t.Fatalf("Verify after a rewritten head: %v; want record %d edited", err, c.wantSeq)
			}
			if seq, h, err := s.Head(ctx); err != nil || seq != 4 || (!c.wantFail && h != sum.Head) {
				t.Fatalf("Head = %d, %x, %v; want 4, %x", seq, h, err, sum.Head)
			}
		})
	}
}

// TestAuditHeadRemade deletes the namespace's head row under a store that
// has made it: its next transition finds none, fails whole, and the store
// makes the row again and tries once more. With the trail deleted too,
// that makes the confirmation and record 1 (a transition made without its
// record in the failed try would have left the Add refused as existing).
// Its control: with the records kept, the retry's record 1 collides with
// the one there, so the Add fails, and adds nothing; the trail kept still
// verifies.
func TestAuditHeadRemade(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	records := pgx.Identifier{pgledger.DefaultTable + "_audit"}.Sanitize()
	head := pgx.Identifier{pgledger.DefaultTable + "_audit_head"}.Sanitize()
	for _, c := range []struct {
		name     string
		wipe     bool // the records deleted too
		wantAdd  bool
		wantRecs uint64
	}{{"trail deleted", true, true, 1}, {"records kept", false, false, 2}} {
		t.Run(c.name, func(t *testing.T) {
			s := auditedStore(t, p, pgledger.DefaultTable)
			first := ledgertest.Fresh(t)
			if err := s.Add(ctx, first); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Spend(ctx, first.ID, ledger.Acting, ledgertest.Long); err != nil {
				t.Fatal(err)
			}
			deletes := []string{head}
			if c.wipe {
				deletes = append(deletes, records)
			}
			for _, table := range deletes {
				if _, err := p.Exec(ctx, `DELETE FROM `+table+` WHERE namespace = $1`, s.Namespace()); err != nil {
					t.Fatal(err)
				}
			}
			next := ledgertest.Fresh(t)
			err := s.Add(ctx, next)
			if (err == nil) != c.wantAdd {
				t.Fatalf("Add after the head row's deletion: %v; want success %v", err, c.wantAdd)
			}
			_, lerr := s.Lookup(ctx, next.ID)
			if added := lerr == nil; added != c.wantAdd {
				t.Fatalf("Lookup after the Add: %v; want it added: %v", lerr, c.wantAdd)
			}
			sum, err := audit.Verify(s.Records(ctx, 1), nil, audit.VerifyOptions{})
			if err != nil || sum.Records != c.wantRecs {
				t.Fatalf("Verify: %+v, %v; want %d records", sum, err, c.wantRecs)
			}
		})
	}
}
