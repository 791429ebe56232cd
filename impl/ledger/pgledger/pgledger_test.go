package pgledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

const urlEnv = "MCP_CONFIRM_POSTGRES_URL"

// serverURL returns the database the tests run against, or skips.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(urlEnv)
	if u == "" {
		t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL store tests", urlEnv)
	}
	return u
}

// newPool opens a pool of its own on the test database, with the default
// table in place.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s, err := pgledger.New(p, pgledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func random(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// namespace returns a namespace no other test run uses, and deletes its
// rows of table when t ends.
func namespace(t testing.TB, p *pgxpool.Pool, table string) string {
	t.Helper()
	ns := "mcp-confirm-test:" + random(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.Exec(ctx, `DELETE FROM `+pgx.Identifier{table}.Sanitize()+` WHERE namespace = $1`, ns); err != nil {
			t.Errorf("cleanup of %s: %v", ns, err)
		}
	})
	return ns
}

func newStore(t testing.TB, p *pgxpool.Pool, opts pgledger.Options) *pgledger.Store {
	t.Helper()
	s, err := pgledger.New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// factory makes stores over two independent pools: New uses the first,
// Replica the second with the same namespace, as two server replicas would.
func factory(t *testing.T) ledgertest.Factory {
	a, b := newPool(t), newPool(t)
	return ledgertest.Namespaced(
		func(t testing.TB) (ledger.Store, string) {
			ns := namespace(t, a, pgledger.DefaultTable)
			return newStore(t, a, pgledger.Options{Namespace: ns}), ns
		},
		func(t testing.TB, ns string) ledger.Store {
			return newStore(t, b, pgledger.Options{Namespace: ns})
		},
	)
}

func TestStore(t *testing.T) {
	rapidtest.OutOfTree(t) // the model test's fail files
	ledgertest.Run(t, factory(t))
}

// TestNamespaces checks that stores with different namespaces on one
// table are separate ledgers.
func TestNamespaces(t *testing.T) {
	ledgertest.Namespaces(t, factory(t))
}

// TestExpiresRoundTrip checks that Expires comes back to the nanosecond,
// and that expiry is decided to the nanosecond too: a confirmation that
// expired less than a microsecond ago is expired.
func TestExpiresRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	s := newStore(t, p, pgledger.Options{Namespace: namespace(t, p, pgledger.DefaultTable)})
	for _, ns := range []int{0, 1, 999, 1000, 123_456_789} {
		conf := ledgertest.Fresh(t)
		conf.Expires = time.Unix(1_900_000_000, int64(ns))
		if err := s.Add(ctx, conf); err != nil {
			t.Fatal(err)
		}
		got, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Expires.Equal(conf.Expires) {
			t.Errorf("Expires = %v, want %v", got.Expires, conf.Expires)
		}
	}
}

// TestSweep checks the explicit sweep and the one Add runs, scheduled on
// the store's clock.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	clock := time.Unix(1_800_000_000, 0)
	s := newStore(t, p, pgledger.Options{
		Namespace:  namespace(t, p, pgledger.DefaultTable),
		Grace:      time.Minute,
		SweepEvery: time.Minute,
		Now:        func() time.Time { return clock },
	})
	old := func() ledger.Confirmation { // past expiry plus grace
		c := ledgertest.Fresh(t)
		c.Expires = time.Now().Add(-2 * time.Minute)
		return c
	}
	recent, fresh := ledgertest.Expired(t), ledgertest.Fresh(t) // within grace; pending
	a, b := old(), old()
	for _, c := range []ledger.Confirmation{a, recent, fresh} { // the first Add sweeps
		if err := s.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Spend(ctx, a.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("Spend of a row not yet swept = %v, want ErrExpired", err)
	}
	clock = clock.Add(time.Minute - time.Nanosecond)
	if err := s.Add(ctx, b); err != nil { // too soon: no sweep
		t.Fatal(err)
	}
	if _, err := s.Spend(ctx, a.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("Add swept before SweepEvery: Spend = %v, want ErrExpired", err)
	}
	clock = clock.Add(time.Nanosecond)
	if err := s.Add(ctx, ledgertest.Fresh(t)); err != nil { // sweeps a and b
		t.Fatal(err)
	}
	for _, c := range []ledger.Confirmation{a, b} {
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrUnknown) {
			t.Fatalf("Spend of a swept row = %v, want ErrUnknown", err)
		}
	}
	if _, err := s.Spend(ctx, recent.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("Spend of a row within grace = %v, want ErrExpired", err)
	}
	if _, err := s.Spend(ctx, fresh.ID, ledger.Acting, ledgertest.Long); err != nil {
		t.Fatalf("a pending row was swept: %v", err)
	}
	if err := s.Add(ctx, old()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 row", n, err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0 rows", n, err)
	}
}

// tempTable returns the name of a table no other test uses, dropped when
// the test ends.
func tempTable(t *testing.T, p *pgxpool.Pool) string {
	table := "mcp_confirm_test_" + random(t)
	t.Cleanup(func() {
		if _, err := p.Exec(context.Background(), `DROP TABLE IF EXISTS `+table); err != nil {
			t.Error(err)
		}
	})
	return table
}

// TestMigrateConcurrently starts many replicas at once on a new table.
func TestMigrateConcurrently(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	table := tempTable(t, p)
	const replicas = 8
	stores := make([]*pgledger.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		stores[i] = newStore(t, newPool(t), pgledger.Options{Table: table})
		wg.Go(func() { errs[i] = stores[i].Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Migrate: %v", i, err)
		}
	}
	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	conf := ledgertest.Fresh(t)
	if err := stores[1].Add(ctx, conf); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[2].Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateDropsShown upgrades a table made by an earlier version, which
// kept the question's wording in a NOT NULL column "shown": Migrate drops
// the column, keeps the rows, and the store then adds and spends.
func TestMigrateDropsShown(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	table := tempTable(t, p)
	old := ledgertest.Fresh(t)
	if _, err := p.Exec(ctx, `CREATE TABLE `+table+` (
	namespace text NOT NULL, id bytea NOT NULL, state text NOT NULL,
	tool bytea NOT NULL, args_digest bytea NOT NULL, principal bytea NOT NULL,
	shown bytea NOT NULL, subject bytea NOT NULL,
	expires_at timestamptz NOT NULL, expires_ns smallint NOT NULL,
	PRIMARY KEY (namespace, id))`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `INSERT INTO `+table+` VALUES ('ns', $1, 'pending', $2, $3, $4, 'Delete?', $5, $6, 0)`,
		old.ID[:], []byte(old.Tool), []byte(old.ArgsDigest), []byte(old.Principal), []byte(old.Subject), old.Expires); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, p, pgledger.Options{Table: table, Namespace: "ns"})
	columns := func() int {
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_attribute
			WHERE attrelid = $1::regclass AND attname = 'shown' AND NOT attisdropped`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if columns() != 1 {
		t.Fatal("setup: no column shown")
	}
	for range 2 { // the second Migrate finds nothing to do
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if n := columns(); n != 0 {
			t.Fatalf("column shown still there after Migrate")
		}
	}
	got, err := s.Spend(ctx, old.ID, ledger.Acting, ledgertest.Long)
	if err != nil || got.Tool != old.Tool || got.Subject != old.Subject {
		t.Fatalf("Spend of the row made before the upgrade = %+v, %v", got, err)
	}
	conf := ledgertest.Fresh(t)
	if err := s.Add(ctx, conf); err != nil {
		t.Fatalf("Add after the upgrade: %v", err)
	}
	if _, err := s.Spend(ctx, conf.ID, ledger.Acting, ledgertest.Long); err != nil {
		t.Fatalf("Spend after the upgrade: %v", err)
	}
}

// TestMigrateOutcomes upgrades a table made before outcomes were recorded
// (its state column checked for pending, redeemed and cancelled only):
// Migrate adds the lease's and the outcome's columns and widens the check,
// keeping the rows. A row an earlier version redeemed is answered in doubt
// (it recorded nothing); a pending one is redeemed, completed and answered
// from its record; and a replica of the earlier version can still redeem.
func TestMigrateOutcomes(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	table := tempTable(t, p)
	if _, err := p.Exec(ctx, `CREATE TABLE `+table+` (
	namespace   text        NOT NULL,
	id          bytea       NOT NULL CHECK (length(id) = 16),
	state       text        NOT NULL CHECK (state IN ('pending', 'redeemed', 'cancelled')),
	tool        bytea       NOT NULL,
	args_digest bytea       NOT NULL,
	principal   bytea       NOT NULL,
	subject     bytea       NOT NULL,
	expires_at  timestamptz NOT NULL,
	expires_ns  smallint    NOT NULL CHECK (expires_ns BETWEEN 0 AND 999),
	PRIMARY KEY (namespace, id)
) WITH (fillfactor = 90)`); err != nil {
		t.Fatal(err)
	}
	redeemed, pending, older := ledgertest.Fresh(t), ledgertest.Fresh(t), ledgertest.Fresh(t)
	for _, row := range []struct {
		c     ledger.Confirmation
		state string
	}{{redeemed, "redeemed"}, {pending, "pending"}, {older, "pending"}} {
		if _, err := p.Exec(ctx, `INSERT INTO `+table+` VALUES ('ns', $1, $2, $3, $4, $5, $6, $7, 0)`,
			row.c.ID[:], row.state, []byte(row.c.Tool), []byte(row.c.ArgsDigest), []byte(row.c.Principal), []byte(row.c.Subject), row.c.Expires); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, p, pgledger.Options{Table: table, Namespace: "ns"})
	for range 2 { // the second Migrate finds nothing to do
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	if _, err := s.Spend(ctx, redeemed.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Spend of a row redeemed before the upgrade = %v, want ErrInDoubt", err)
	}
	if _, err := s.Spend(ctx, pending.ID, ledger.Acting, ledgertest.Long); err != nil {
		t.Fatalf("Spend of a row pending before the upgrade: %v", err)
	}
	o := ledger.Outcome{Kind: ledger.OutcomeDone, Result: []byte("r"), Size: 1}
	if err := s.Complete(ctx, pending.ID, o); err != nil {
		t.Fatalf("Complete after the upgrade: %v", err)
	}
	if rec, err := s.Spend(ctx, pending.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrDone) || string(rec.Outcome.Result) != "r" {
		t.Fatalf("retry after the upgrade = %v %q, want ErrDone and the outcome", err, rec.Outcome.Result)
	}
	// The earlier version's Spend, still running on another replica.
	if tag, err := p.Exec(ctx, `UPDATE `+table+` SET state = 'redeemed' WHERE namespace = 'ns' AND id = $1 AND state = 'pending' AND expires_at > now()`,
		older.ID[:]); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the earlier version's Spend: %v, %d rows", err, tag.RowsAffected())
	}
	if _, err := s.Spend(ctx, older.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Spend of a row an earlier replica redeemed = %v, want ErrInDoubt", err)
	}
}

// TestMigrateApprovals upgrades a table made before out-of-band approval
// (no approval and decisions columns, no 'awaiting' in its check):
// Migrate adds them, keeping the rows, and a confirmation that needs
// approval is then added, decided and redeemed. A replica of the earlier
// version, whose Spend redeems any pending row, leaves a row awaiting
// approval alone (its read then finds a state it does not know, and
// refuses); its control, an in-band row, it redeems.
func TestMigrateApprovals(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	table := tempTable(t, p)
	if _, err := p.Exec(ctx, `CREATE TABLE `+table+` (
	namespace   text        NOT NULL,
	id          bytea       NOT NULL CHECK (length(id) = 16),
	state       text        NOT NULL,
	tool        bytea       NOT NULL,
	args_digest bytea       NOT NULL,
	principal   bytea       NOT NULL,
	subject     bytea       NOT NULL,
	expires_at  timestamptz NOT NULL,
	expires_ns  smallint    NOT NULL CHECK (expires_ns BETWEEN 0 AND 999),
	lease_until timestamptz,
	outcome     bytea,
	PRIMARY KEY (namespace, id),
	CONSTRAINT `+table+`_state_check CHECK (state IN ('pending', 'acting', 'done', 'failed', 'in_doubt', 'redeemed', 'cancelled'))
) WITH (fillfactor = 90)`); err != nil {
		t.Fatal(err)
	}
	before := ledgertest.Fresh(t)
	if _, err := p.Exec(ctx, `INSERT INTO `+table+` VALUES ('ns', $1, 'pending', $2, $3, $4, $5, $6, 0)`,
		before.ID[:], []byte(before.Tool), []byte(before.ArgsDigest), []byte(before.Principal), []byte(before.Subject), before.Expires); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, p, pgledger.Options{Table: table, Namespace: "ns"})
	for range 2 { // the second Migrate finds nothing to do
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	oob, inBand := ledgertest.OutOfBand(ledgertest.Fresh(t), 1, ""), ledgertest.Fresh(t)
	for _, c := range []ledger.Confirmation{oob, inBand} {
		if err := s.Add(ctx, c); err != nil {
			t.Fatalf("Add after the upgrade: %v", err)
		}
	}
	// The earlier version's Spend, still running on another replica.
	priorSpend := `UPDATE ` + table + ` SET state = 'acting', lease_until = clock_timestamp() + interval '1 hour'
WHERE namespace = 'ns' AND id = $1 AND state = 'pending' AND expires_at > clock_timestamp()`
	for _, tc := range []struct {
		c    ledger.Confirmation
		rows int64
	}{{oob, 0}, {inBand, 1}} {
		if tag, err := p.Exec(ctx, priorSpend, tc.c.ID[:]); err != nil || tag.RowsAffected() != tc.rows {
			t.Fatalf("the earlier version's Spend of %s: %v, %d rows; want %d", tc.c.ID, err, tag.RowsAffected(), tc.rows)
		}
	}
	if _, err := s.Spend(ctx, oob.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrAwaitingApproval) {
		t.Fatalf("Redeem before approval = %v, want ErrAwaitingApproval", err)
	}
	approver := ledger.Approver{ID: oob.Approval.Approvers[0]}
	if rec, err := s.Decide(ctx, oob.ID, approver, true); err != nil || len(rec.Decisions) != 1 {
		t.Fatalf("Decide after the upgrade = %+v, %v", rec.Decisions, err)
	}
	for _, c := range []ledger.Confirmation{oob, before} {
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); err != nil {
			t.Fatalf("Redeem after the upgrade: %v", err)
		}
	}
}

// TestOptions checks that New validates.
func TestOptions(t *testing.T) {
	p, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tests := []struct {
		name string
		pool *pgxpool.Pool
		opts pgledger.Options
		ok   bool
	}{
		{"zero", p, pgledger.Options{}, true},
		{"table", p, pgledger.Options{Table: "Ledger_2"}, true},
		{"namespace", p, pgledger.Options{Namespace: "mcp-confirm:files.example.com"}, true},
		{"nil pool", nil, pgledger.Options{}, false},
		{"table with quote", p, pgledger.Options{Table: `a"b`}, false},
		{"table with semicolon", p, pgledger.Options{Table: "a;drop table x"}, false},
		{"table with schema", p, pgledger.Options{Table: "public.ledger"}, false},
		{"table starting with a digit", p, pgledger.Options{Table: "1ledger"}, false},
		{"table too long", p, pgledger.Options{Table: strings.Repeat("a", 51)}, false},
		{"namespace with NUL", p, pgledger.Options{Namespace: "a\x00b"}, false},
		{"namespace not UTF-8", p, pgledger.Options{Namespace: "a\xffb"}, false},
		{"negative grace", p, pgledger.Options{Grace: -1}, false},
		{"negative sweep", p, pgledger.Options{SweepEvery: -1}, false},
		{"negative cap", p, pgledger.Options{MaxPending: -1}, false},
		{"negative principal cap", p, pgledger.Options{MaxPendingPerPrincipal: -1}, false},
	}
	for _, tt := range tests {
		_, err := pgledger.New(tt.pool, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestGoneAway checks that a store whose database is unreachable, hangs,
// or was closed fails with an error that is not a ledger answer, within
// the caller's deadline.
func TestGoneAway(t *testing.T) {
	closed := func(t *testing.T) *pgledger.Store {
		s, err := pgledger.Open(context.Background(), serverURL(t), pgledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return s
	}
	at := func(t *testing.T, addr string) *pgledger.Store {
		p, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/test?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return newStore(t, p, pgledger.Options{})
	}
	ledgertest.GoneAway(t, closed, at, map[string]func(context.Context, *pgledger.Store) error{
		"Sweep": func(ctx context.Context, s *pgledger.Store) error {
			_, err := s.Sweep(ctx)
			return err
		},
		"Migrate": func(ctx context.Context, s *pgledger.Store) error { return s.Migrate(ctx) },
	})
}

// TestOpenErrors checks that Open fails clearly, naming the server, and
// never echoes the password.
func TestOpenErrors(t *testing.T) {
	const pw = "s3cret"
	closed, silent := ledgertest.ClosedAddr(t), ledgertest.SilentAddr(t)
	tests := []ledgertest.OpenFailure{
		{Name: "nothing listening", URL: "postgres://postgres:" + pw + "@" + closed + "/test?sslmode=disable", Want: closed},
		{Name: "server hangs", URL: "postgres://postgres:" + pw + "@" + silent + "/test?sslmode=disable", Want: silent},
		{Name: "unparsable", URL: "postgres://postgres:" + pw + "@[::1/test", Want: "invalid connection string"},
		{Name: "bad port", URL: "postgres://postgres:" + pw + "@localhost:" + pw + "/test", Want: "invalid connection string"},
		{Name: "bad option", URL: "postgres://postgres:" + pw + "@localhost/test?sslmode=" + pw, Want: "invalid connection string"},
		{Name: "@ in password", URL: "postgres://postgres:" + pw + "@x@localhost/test?sslmode=bogus", Want: "invalid connection string"},
		{Name: "key = value", URL: "host=127.0.0.1 password = " + pw + " sslmode=bogus", Want: "invalid connection string"},
		{Name: "key= value", URL: "host=127.0.0.1 password= " + pw + " sslmode=bogus", Want: "invalid connection string"},
		{Name: "key=value", URL: "host=127.0.0.1 port=" + closed[strings.LastIndex(closed, ":")+1:] + " password=" + pw, Want: closed},
	}
	if u := os.Getenv(urlEnv); u != "" {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Database = "no_such_database_" + random(t)
		server := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
		tests = append(tests, ledgertest.OpenFailure{
			Name: "no such database", URL: "postgres://" + cfg.ConnConfig.User + ":" + pw + "@" + server + "/" + cfg.ConnConfig.Database + "?sslmode=disable", Want: server,
		})
	}
	open := func(opts pgledger.Options) func(ctx context.Context, url string) error {
		return func(ctx context.Context, url string) error {
			s, err := pgledger.Open(ctx, url, opts)
			if err == nil {
				s.Close()
			}
			return err
		}
	}
	ledgertest.OpenErrors(t, pw, open(pgledger.Options{}), tests)
	ledgertest.OpenErrors(t, pw, open(pgledger.Options{Table: "no-such-table"}), []ledgertest.OpenFailure{
		{Name: "bad table", URL: "postgres://postgres:" + pw + "@" + closed + "/test?sslmode=disable", Want: "table name"},
	})
	// Negative control: pgxpool's own error does echo the password, so the
	// check above can fail.
	if _, err := pgxpool.ParseConfig("host=127.0.0.1 password= " + pw + " sslmode=bogus"); err == nil || !strings.Contains(err.Error(), pw) {
		t.Fatalf("control: pgxpool.ParseConfig error %v does not contain the password", err)
	}
}

func TestOpen(t *testing.T) {
	p := newPool(t)
	ns := namespace(t, p, pgledger.DefaultTable)
	s, err := pgledger.Open(context.Background(), serverURL(t), pgledger.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledgertest.RedeemOnce(t, s)
}

// TestCaps runs the shared check of the caps over two pools, as two
// replicas would make their Adds.
func TestCaps(t *testing.T) {
	a, b := newPool(t), newPool(t)
	ledgertest.Caps(t, func(t testing.TB, maxPending, perPrincipal int) (ledger.Store, ledger.Store) {
		opts := pgledger.Options{Namespace: namespace(t, a, pgledger.DefaultTable), MaxPending: maxPending, MaxPendingPerPrincipal: perPrincipal}
		return newStore(t, a, opts), newStore(t, b, opts)
	})
}
