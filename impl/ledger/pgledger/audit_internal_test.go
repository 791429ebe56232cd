package pgledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

// TestSealWithoutHead runs each audited statement on a namespace that has
// no head row: the statement fails whole, as noHead recognizes (the
// record's insert of no line), leaving the row as it was, no head row and
// no record. Its control: the same statement after headRowSQL makes its
// change and record 1, which verifies.
func TestSealWithoutHead(t *testing.T) {
	const noRow = ledger.State(255) // Lookup: ErrUnknown
	url := os.Getenv("MCP_CONFIRM_POSTGRES_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_POSTGRES_URL to run the PostgreSQL store tests")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	outcome, err := ledger.Outcome{Kind: ledger.OutcomeDone}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup ledger.State // the row before the statement
		want  ledger.State // after it, once made
		sql   func(s *Store) string
		args  func(s *Store, c ledger.Confirmation) []any
	}{
		{"add", noRow, ledger.Pending, func(s *Store) string { return s.addAuditSQL }, func(s *Store, c ledger.Confirmation) []any {
			at, ns := ceilMicro(c.Expires)
			return []any{s.ns, c.ID[:], []byte(c.Tool), []byte(c.ArgsDigest), []byte(c.Principal), []byte(c.Subject),
				at, ns, s.maxPending, s.maxPer, nil, nil, ledger.AuditIssue(ctx, c).Prefix()}
		}},
		{"spend", ledger.Pending, ledger.Acting, func(s *Store) string { return s.spendAuditSQL }, func(s *Store, c ledger.Confirmation) []any {
			return []any{s.ns, c.ID[:], "acting", int64(time.Hour / time.Microsecond), nil, ledger.AuditSpend(ctx, c.ID, ledger.Acting).Prefix()}
		}},
		{"complete", ledger.Acting, ledger.Done, func(s *Store) string { return s.completeAuditSQL }, func(s *Store, c ledger.Confirmation) []any {
			return []any{s.ns, c.ID[:], "done", outcome, nil, ledger.AuditComplete(ctx, c.ID, ledger.OutcomeDone).Prefix()}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b [8]byte
			rand.Read(b[:])
			ns := "mcp-confirm-test:" + hex.EncodeToString(b[:])
			s, err := New(pool, Options{Namespace: ns, Audit: true})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := New(pool, Options{Namespace: ns}) // moves the row without a record
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, q := range []string{`DELETE FROM ` + s.table + ` WHERE namespace = $1`, `DELETE FROM ` + s.auditHead + ` WHERE namespace = $1`,
					`DELETE FROM ` + pgx.Identifier{s.records}.Sanitize() + ` WHERE namespace = $1`} {
					if _, err := pool.Exec(context.Background(), q, ns); err != nil {
						t.Error(err)
					}
				}
			})
			conf := ledgertest.Fresh(t)
			if c.setup != noRow {
				if err := plain.Add(ctx, conf); err != nil {
					t.Fatal(err)
				}
			}
			if c.setup == ledger.Acting {
				if _, err := plain.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long); err != nil {
					t.Fatal(err)
				}
			}
			state := func() ledger.State {
				rec, err := plain.Lookup(ctx, conf.ID)
				if errors.Is(err, ledger.ErrUnknown) {
					return noRow
				} else if err != nil {
					t.Fatal(err)
				}
				return rec.State
			}
			count := func(table string) (n int) {
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE namespace = $1`, ns).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			_, err = pool.Exec(ctx, c.sql(s), c.args(s, conf)...)
			if !s.noHead(err) {
				t.Fatalf("without a head row: %v; want the record's insert of no line", err)
			}
			if got, heads, records := state(), count(s.auditHead), count(pgx.Identifier{s.records}.Sanitize()); got != c.setup || heads != 0 || records != 0 {
				t.Fatalf("after the failed statement: state %v, %d head rows, %d records; want %v, 0, 0", got, heads, records, c.setup)
			}
			if _, err := pool.Exec(ctx, s.headRowSQL, ns); err != nil {
				t.Fatal(err)
			}
			if seq, _, err := s.Head(ctx); err != nil || seq != 0 {
				t.Fatalf("Head of a made head row = %d, %v; want 0", seq, err)
			}
			if _, err := pool.Exec(ctx, c.sql(s), c.args(s, conf)...); err != nil {
				t.Fatalf("with a head row: %v", err)
			}
			sum, err := audit.Verify(s.Records(ctx, 1), nil, audit.VerifyOptions{})
			if got := state(); got != c.want || err != nil || sum.Records != 1 {
				t.Fatalf("with a head row: state %v, trail %+v, %v; want %v and 1 record", got, sum, err, c.want)
			}
		})
	}
}
