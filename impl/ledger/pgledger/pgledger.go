// Package pgledger is a [ledger.Store] kept in a PostgreSQL table, shared by
// every server replica that opens the same namespace, so that a
// confirmation issued by one replica behind a load balancer is redeemed —
// once — by whichever replica the answer reaches, and survives restarts of
// the replicas and of the database.
//
// # What it guarantees
//
// Spend and Complete are each one transaction, sent in one round trip (a
// batch): take a transaction-scoped advisory lock named after the table,
// namespace and id, and change the row if it may change,
//
//	UPDATE ... SET state = 'acting', lease_until = clock_timestamp() + lease
//	WHERE ... AND state = 'pending' AND expires_at > clock_timestamp()
//
// for a Spend, and for a Complete a compare-and-set from acting, before
// the lease's end,
//
//	UPDATE ... SET state = 'done', outcome = ...
//	WHERE ... AND state = 'acting' AND lease_until > clock_timestamp()
//
// and, if it changed nothing, read the row (again under the lock, in a
// second round trip) to answer. Each statement reads the clock once and
// decides on that one reading (the sketches above read it twice for
// brevity). The lock is held until the commit,
// so every call on one confirmation, from any replica, decides alone, on
// the database's clock read while it holds the lock: of any number of
// concurrent Spend calls for one id, at most one succeeds, and every other
// is answered from the record it finds (in progress, done with the
// recorded outcome, in doubt, cancelled); at most one Complete succeeds,
// and a late one changes nothing. (now(), the transaction's start, is
// read before the lock: a call whose pipeline reached the server in two
// parts, the second delayed, would decide on a time before the previous
// holder's, and spend a confirmation another call had been told was
// expired, or record an outcome over an answer "in doubt".
// TestClockReadUnderLock holds a call's pipeline after its first message
// across the instant; decided on now(), porcupine finds its history not
// linearizable. Add's caps likewise count what is unexpired on the clock
// read under the namespace's lock.) An advisory lock costs no write:
// measured beside a bare UPDATE in one loop, the lock and the UPDATE cost
// 1.04× the UPDATE alone, where a row lock (SELECT ... FOR NO KEY UPDATE)
// cost 2×.
//
// An acting row whose lease has ended is in doubt: read so by every call
// after the lease's end, and never completed. The read that says why
// nothing changed is a second transaction: if by then the row has moved to
// where the change applies (inserted by a racing Add, which takes no row
// lock; or, for a Complete, redeemed meanwhile), the change is tried again.
// A replica of an earlier version takes no such lock: during an upgrade,
// its Spend is the single statement it always was.
//
// Out-of-band approval: a confirmation that needs it is inserted
// 'awaiting' (with its Approval in a column of its own), which Spend
// cancels but never redeems; Decide is one transaction that takes the
// same row lock, reads the row and the database's clock, applies
// [ledger.Record.Decide] and writes the decisions and the state: still
// 'awaiting', 'pending' once the last approval is in (then redeemable as
// any), or 'cancelled' on a decline. A replica of an earlier version,
// which knows no 'awaiting', neither redeems such a row nor answers from
// it: it refuses it as corrupt.
//
// Rows are kept until expires_at (or lease_until, if later) plus
// [Options.Grace], so that every retry in that time is answered from the
// record, then deleted by [Store.Sweep], which Add runs itself at most
// once per [Options.SweepEvery]. The store starts
// no goroutines (a pool made by [Open] runs pgxpool's own health checks
// until Close).
//
// # Standbys and failover
//
// With a synchronous standby (synchronous_standby_names naming it,
// synchronous_commit on), a commit returns only once the standby has
// flushed it, and holds the confirmation's lock until then, so no other
// call on the confirmation reads it before: a Spend is acted on, and a
// retry answered, only once the standby holds it. A commit the standby
// does not acknowledge waits, and so does every call on its
// confirmation; the caller's deadline closes its connection, an unknown
// outcome, and nothing is acted on. The store follows a promoted standby when its URL
// names every server, primary first, with target_session_attrs=read-write
// (postgres://user@primary:5432,standby:5432/db?target_session_attrs=read-write):
// pgx connects to the first that accepts writes. It does not promote:
// that is the operator's, or a failover tool's. TestPostgresFailover
// (linearizability) kills every process of the primary of a primary and
// a synchronous standby while approvals are redeemed and acted on,
// promotes the standby, and retries every approval through it: none acts
// twice, and porcupine finds the history linearizable across the
// failover; its control, an asynchronous standby, acts twice.
//
// Whatever ends a commit's wait before the standby's acknowledgement —
// pg_terminate_backend, the postmaster's death alone (the OOM killer, a
// SIGKILL to it: its backends outlive it until they next wait) — lets
// the commit, finished locally, and the lock, released, be seen by the
// sessions still running on that primary, though the standby never
// received it (the writer itself is never told it succeeded). So every
// answer read from a row without changing it (a refused Spend or
// Complete, Lookup, a refused Decide, an Add refused as existing or
// full) waits too: when the store's commits wait for a synchronous
// standby (synchronous_standby_names set and synchronous_commit not off
// or local, read at Migrate and CheckDurability), the read's transaction
// also writes a transactional message to the WAL
// (pg_logical_emit_message, read by no one), so that it commits with a
// commit record after every commit it saw, and PostgreSQL answers only
// once the standby holds that record. Until then nothing is answered;
// the caller's deadline closes the connection (in doubt), and the
// postmaster's death ends the session without an answer.
// TestReadsWaitForStandby terminates a Spend waiting for a stalled
// standby: its control, reads not waiting, answers a retry "in progress"
// and a Lookup "acting" from the commit the standby never got; waiting,
// neither gets an answer. TestPostgresCrash (internal/failover, "process
// group, read waits") shows the same against the postmaster killed
// alone; TestStandbyConformance runs the conformance suite on stores that
// wait. A refused Spend then costs a commit that waits for the standby
// (BenchmarkRefusedSpendWaits: 0.7–1.8 ms against 0.13–0.16 ms on
// loopback); checking pg_stat_replication's flush_lsn against the read's
// WAL position instead polls, with a mean of over 40 ms. Without a
// synchronous standby nothing is added. A standby configured after
// start-up is not seen until Migrate or CheckDurability runs again.
//
// What it does not give: the old primary must stay down, or come back as
// a standby of the new one (fenced): restarted as a primary, and listed
// first, it would take the writes of every new connection. A cancel
// request (pg_cancel_backend, a client set to send one on a deadline)
// during the synchronous wait makes PostgreSQL report the commit as done,
// unreplicated, with a warning, to the writer or reader it was sent for:
// pgx, as this store uses it, closes the connection on a deadline
// instead, and never sends one; never cancel sessions waiting on
// SyncRep. The audit trail's readers (Head, Records, Checkpoints) do not
// wait.
//
// # The audit trail
//
// With [Options.Audit], the namespace's audit trail (package audit) is
// kept in TABLE_audit, one row per record, chained through
// TABLE_audit_head, the namespace's last seq and that record's line (the
// head is its SHA-256). Each record is sealed inside the transaction of
// its transition by an upsert of the head row, which locks it until the
// commit and builds the record's line (its seq, time and prev from the
// head as it was), then an insert of that line (the head row is made, at
// seq 0, by a statement of its own before a store's first audited
// transition; a transition that finds it deleted since fails whole, and
// is tried once more after the row is made again: TestSealWithoutHead,
// TestAuditHeadRemade): a Spend's or Complete's
// change and its record are one statement (the change in a WITH, the
// record sealed over the row it returns, so a change that applies to
// nothing records nothing); an Add's insert and its record one
// statement; a Decide's one transaction. A refusal is read under the
// row's lock and recorded in one transaction. So a transition
// commits with its record or not at all (TestAuditAtomicWithLedger raises
// an exception after the record's insert, inside the transaction, for
// each kind of transition), and records are chained in the order their
// transitions commit. What it costs: the head row's lock serializes the
// namespace's audited transitions until each commits (about one per
// commit latency; BENCHMARKS.md). Records are never swept: the trail
// grows by one row per call.
//
// # What it does not guarantee
//
// At-most-once holds only while PostgreSQL keeps every committed write: a
// failover to an asynchronous standby that had not received a Spend, a
// restore from a backup older than the last Spend, or synchronous_commit =
// off followed by a crash, makes spent confirmations pending again. Run
// with synchronous_commit on (the default) and, with replicas, synchronous
// replication ([Store.CheckDurability] refuses anything else).
//
// Confirmations awaiting out-of-band approval count against the caps as
// pending ones do, through a third partial index; during a rolling upgrade
// from a version before out-of-band approval, that version's Adds do not
// count them.
//
// What the caps cost: Adds of one namespace run one at a time, across
// every replica (each holds the lock through its count, insert and
// commit), so a namespace admits about one Add per commit latency; Spends
// and other namespaces are not held up. Each Add counts, in two partial
// indexes of pending rows (one by expiry, one by the principal's SHA-256),
// at most MaxPending and MaxPendingPerPrincipal entries, plus index entries
// of rows spent since the last vacuum (which an index scan marks dead the
// first time it finds them, and skips after that: measured, 20,000 such
// entries add 0.1 ms to the count). Those indexes make Spend's UPDATE of
// state a non-HOT update (its row gets new entries in the primary key and
// expiry indexes). Measured side by side on a loaded machine, an Issue
// costs one and a half to two bare INSERTs (BENCHMARKS.md, "Caps in the
// shared stores").
//
// What the caps do not bound: spent rows, which are at most the issue
// rate times (TTL + Grace + SweepEvery); the number of principals; nor the
// rate of questions asked and answered. During a rolling upgrade from a
// version without caps, the old replicas' Adds take no lock and count
// nothing, so the caps hold only once every replica runs this one.
//
// Growth: one row per Add (measured: about 180 bytes of table and 105 of
// index for short fields and a 34-byte namespace; long fields add their
// length; a pending row also has an entry in each partial index), kept
// until a sweep after its expiry plus grace: at most the issue rate times
// (TTL + Grace + SweepEvery), plus the dead tuples autovacuum has not yet
// reclaimed. Only the store's own namespace is swept, and only when Add
// runs: a namespace that stops issuing keeps its rows until someone calls
// Sweep.
package pgledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/internal/redact"
)

// Options configures a [Store]. The zero value is ready to use.
type Options struct {
	// Table is the table's name, a plain identifier. Default [DefaultTable].
	Table string
	// Namespace keeps servers of different audiences sharing one table
	// apart: it is part of the primary key. Valid UTF-8 without NUL.
	Namespace string
	// Grace is how long a confirmation is remembered after its expiry, so
	// that a late replay reads as spent or expired rather than unknown.
	// Either way it is refused. Default [ledger.DefaultGrace].
	Grace time.Duration
	// SweepEvery is how often Add deletes the namespace's rows past their
	// expiry plus grace. Default [DefaultSweepEvery].
	SweepEvery time.Duration
	// Now is the clock that schedules those sweeps. Default time.Now.
	// Expiry itself is always decided by the database's clock.
	Now func() time.Time
	// MaxPending caps the unexpired pending confirmations of the
	// namespace: Add fails with [ledger.ErrFull] beyond it. Default
	// [DefaultMaxPending].
	MaxPending int
	// MaxPendingPerPrincipal caps the unexpired pending confirmations of
	// any one principal in the namespace, so that one caller cannot
	// starve the others: Add fails with [ledger.ErrFull] beyond it.
	// Default [ledger.DefaultMaxPendingPerPrincipal].
	MaxPendingPerPrincipal int
	// Audit keeps the namespace's audit trail (package audit) in tables
	// beside the ledger's (TABLE_audit, its head in TABLE_audit_head,
	// checkpoints in TABLE_audit_checkpoint): every Add, Spend, Decide
	// and Complete writes its record in the transaction of its
	// transition (see "The audit trail" in the package doc), and the
	// Store is then an [audit.Trail].
	Audit bool
	// Observe, if set, is called after every Add (as Issue), Spend (as
	// Redeem or Cancel), Complete and Decide with its event, for trace
	// validation (spec/trace): made from what the call's last statement
	// read and wrote under the confirmation's lock, timed by the
	// database's clock that statement decided on, and numbered
	// ([ledger.Event.Seq]) by a sequence, Table+"_trace" (which Migrate
	// creates), drawn in the same statement -- so that the events, which
	// arrive in the order the calls return, can be put in the order they
	// took effect. It costs one nextval per call. ctx is the call's;
	// Observe must be safe for concurrent use and fast.
	Observe func(ctx context.Context, e ledger.Event)
}

// Defaults of [Options].
const (
	DefaultTable      = "mcp_confirm_ledger"
	DefaultSweepEvery = time.Minute
	DefaultMaxPending = 10_000
)

// Store is a [ledger.Store] in PostgreSQL. It is safe for concurrent use,
// and any number of Stores (in any number of processes) with the same
// table and namespace on the same database share one ledger.
//
// Add is one statement (two when it sweeps); Spend is one statement when
// it succeeds and two when it does not. An error that is not one of the
// ledger's sentinels — the database unreachable, a deadline, a closed
// store — means the outcome is unknown, as [ledger.Store] requires.
type Store struct {
	pool       *pgxpool.Pool
	own        bool // Close closes pool
	closed     atomic.Bool
	table      string // quoted
	lockKey    string
	addLockKey string // serializes the namespace's Adds
	ns         string
	maxPending int64
	maxPer     int64
	grace      time.Duration
	sweepEvery time.Duration
	now        func() time.Time
	lastSweep  atomic.Int64 // unix nanoseconds on now's clock
	// readsWait: a commit waits for a synchronous standby, so every
	// answer read from a row waits too (waitSQL; see the package doc).
	readsWait atomic.Bool

	createSQL, indexSQL, pendingIndexSQL, principalIndexSQL, staleSQL, addSQL, sweepSQL string
	rowLockSQL, spendSQL, completeSQL, readSQL                                          string
	rowLockKey                                                                          string // prefix of the rows' advisory lock names
	// outcomesSQL tells whether the table has the columns of outcomes;
	// outcomesMigrationSQL adds them to a table made by an earlier version.
	outcomesSQL, outcomesMigrationSQL string
	// approvalsSQL and approvalsMigrationSQL do the same for the columns
	// of out-of-band approval; awaitingIndexSQL makes the caps' index of
	// confirmations awaiting approval.
	approvalsSQL, approvalsMigrationSQL, awaitingIndexSQL string
	lockSQL, decideReadSQL, decideSQL                     string
	// observe is Options.Observe; traceSeq the name of its sequence
	// (nil, SQL's NULL, which nextval takes for no number, when unset),
	// and traceSeqSQL the statement that creates it.
	observe     func(context.Context, ledger.Event)
	traceSeq    any
	traceSeqSQL string

	audit                                                   bool
	auditCreateSQL                                          []string
	appendSQL, addAuditSQL, spendAuditSQL, completeAuditSQL string
	headSQL, recordsSQL, addCheckpointSQL, checkpointsSQL   string
	// auditHeadSQL tells whether the head table has the column line;
	// auditHeadMigrationSQL adds it to a table made by an earlier version.
	auditHead, auditHeadSQL, auditHeadMigrationSQL string
	// headRowSQL makes the namespace's head row, at seq 0, if it has none;
	// headMade says this store has made sure of it since the last
	// transition that found none (records is TABLE_audit's name, which
	// the error of such a transition names).
	headRowSQL, records string
	headMade            atomic.Bool
}

var _ ledger.Store = (*Store)(nil)

// tableName keeps identifiers simple enough that the index name derived
// from them is valid too.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// New returns a store over pool, which stays the caller's: [Store.Close]
// does not close it. It does not create the table: call [Store.Migrate].
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgledger: nil pool")
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if !tableName.MatchString(opts.Table) {
		return nil, fmt.Errorf("pgledger: table name %q: want letters, digits and _, at most 50", opts.Table)
	}
	if !utf8.ValidString(opts.Namespace) || strings.ContainsRune(opts.Namespace, 0) {
		return nil, fmt.Errorf("pgledger: namespace %q: want UTF-8 without NUL", opts.Namespace)
	}
	if opts.Grace < 0 {
		return nil, fmt.Errorf("pgledger: negative grace %v", opts.Grace)
	}
	if opts.SweepEvery < 0 {
		return nil, fmt.Errorf("pgledger: negative SweepEvery %v", opts.SweepEvery)
	}
	if opts.MaxPending < 0 {
		return nil, fmt.Errorf("pgledger: negative MaxPending %d", opts.MaxPending)
	}
	if opts.MaxPendingPerPrincipal < 0 {
		return nil, fmt.Errorf("pgledger: negative MaxPendingPerPrincipal %d", opts.MaxPendingPerPrincipal)
	}
	s := &Store{
		pool:       pool,
		table:      pgx.Identifier{opts.Table}.Sanitize(),
		lockKey:    "mcp-confirm/pgledger:" + opts.Table,
		addLockKey: "mcp-confirm/pgledger-add:" + opts.Table + ":" + opts.Namespace,
		ns:         opts.Namespace,
		maxPending: int64(opts.MaxPending),
		maxPer:     int64(opts.MaxPendingPerPrincipal),
		grace:      opts.Grace,
		sweepEvery: opts.SweepEvery,
		now:        opts.Now,
		observe:    opts.Observe,
	}
	if s.grace == 0 {
		s.grace = ledger.DefaultGrace
	}
	if s.sweepEvery == 0 {
		s.sweepEvery = DefaultSweepEvery
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxPending == 0 {
		s.maxPending = DefaultMaxPending
	}
	if s.maxPer == 0 {
		s.maxPer = ledger.DefaultMaxPendingPerPrincipal
	}
	t, index := s.table, pgx.Identifier{opts.Table + "_expiry"}.Sanitize()
	if s.observe != nil {
		seq := pgx.Identifier{opts.Table + "_trace"}.Sanitize()
		s.traceSeq, s.traceSeqSQL = seq, `CREATE SEQUENCE IF NOT EXISTS `+seq
	}
	stateCheck := pgx.Identifier{opts.Table + "_state_check"}.Sanitize()
	pendingIndex := pgx.Identifier{opts.Table + "_pending"}.Sanitize()
	principalIndex := pgx.Identifier{opts.Table + "_principal"}.Sanitize()
	s.createSQL = `CREATE TABLE IF NOT EXISTS ` + t + ` (
	namespace   text        NOT NULL,
	id          bytea       NOT NULL CHECK (length(id) = 16),
	state       text        NOT NULL,
	tool        bytea       NOT NULL,
	args_digest bytea       NOT NULL,
	principal   bytea       NOT NULL,
	subject     bytea       NOT NULL,
	expires_at  timestamptz NOT NULL, -- Expires rounded up to the microsecond
	expires_ns  smallint    NOT NULL CHECK (expires_ns BETWEEN 0 AND 999), -- nanoseconds the rounding added
	lease_until timestamptz,          -- once redeemed: the end of its lease
	outcome     bytea,                -- once recorded: ledger.Outcome's binary form
	approval    bytea,                -- out-of-band approval needed (encodeApproval); null: none
	decisions   bytea,                -- out-of-band decisions recorded (encodeDecisions)
	PRIMARY KEY (namespace, id),
	CONSTRAINT ` + stateCheck + ` CHECK (state IN ` + states + `)
) WITH (fillfactor = 90) -- room for HOT updates of state`
	s.outcomesSQL = `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'lease_until' AND NOT attisdropped)`
	// The column's own CHECK of the first version has PostgreSQL's name
	// for it, <table>_state_check (the name is at most 62 bytes).
	s.outcomesMigrationSQL = `ALTER TABLE ` + t + `
	ADD COLUMN IF NOT EXISTS lease_until timestamptz,
	ADD COLUMN IF NOT EXISTS outcome bytea,
	DROP CONSTRAINT IF EXISTS ` + stateCheck + `,
	ADD CONSTRAINT ` + stateCheck + ` CHECK (state IN ` + states + `)`
	s.approvalsSQL = `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'decisions' AND NOT attisdropped)`
	s.approvalsMigrationSQL = `ALTER TABLE ` + t + `
	ADD COLUMN IF NOT EXISTS approval bytea,
	ADD COLUMN IF NOT EXISTS decisions bytea,
	DROP CONSTRAINT IF EXISTS ` + stateCheck + `,
	ADD CONSTRAINT ` + stateCheck + ` CHECK (state IN ` + states + `)`
	s.staleSQL = `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'shown' AND NOT attisdropped)`
	s.indexSQL = `CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + t + ` (namespace, expires_at)`
	// The caps count pending rows only: partial indexes keep them apart
	// from the spent ones. The principal's is hashed: a principal may be
	// longer than a B-tree entry can hold.
	s.pendingIndexSQL = `CREATE INDEX IF NOT EXISTS ` + pendingIndex + ` ON ` + t +
		` (namespace, expires_at) WHERE state = 'pending'`
	s.principalIndexSQL = `CREATE INDEX IF NOT EXISTS ` + principalIndex + ` ON ` + t +
		` (namespace, sha256(principal), expires_at) WHERE state = 'pending'`
	// Confirmations awaiting out-of-band approval count against the caps
	// too: one index serves both counts (the namespace is its prefix).
	s.awaitingIndexSQL = `CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{opts.Table + "_awaiting"}.Sanitize() + ` ON ` + t +
		` (namespace, sha256(principal), expires_at) WHERE state = 'awaiting'`
	// Run after the namespace's add lock is taken, in the same
	// transaction, so that its snapshot holds every row an earlier Add
	// committed. It counts (up to the caps), inserts if both have room,
	// and says whether the id was there before. It counts what is
	// unexpired on the clock read under the lock (clock_timestamp(), once
	// per count as an InitPlan, which the indexes can use), not now(), the
	// transaction's start, before the lock: an Add that waited for the
	// lock while a confirmation expired does not count it.
	s.addSQL = `WITH counts AS (
	SELECT
		(SELECT count(*) FROM (SELECT FROM ` + t + ` WHERE namespace = $1
			AND state = 'pending' AND expires_at > (SELECT clock_timestamp()) LIMIT $9) a) +
		(SELECT count(*) FROM (SELECT FROM ` + t + ` WHERE namespace = $1
			AND state = 'awaiting' AND expires_at > (SELECT clock_timestamp()) LIMIT $9) w) AS total,
		(SELECT count(*) FROM (SELECT FROM ` + t + ` WHERE namespace = $1
			AND sha256(principal) = sha256($5::bytea) AND principal = $5::bytea
			AND state = 'pending' AND expires_at > (SELECT clock_timestamp()) LIMIT $10) p) +
		(SELECT count(*) FROM (SELECT FROM ` + t + ` WHERE namespace = $1
			AND sha256(principal) = sha256($5::bytea) AND principal = $5::bytea
			AND state = 'awaiting' AND expires_at > (SELECT clock_timestamp()) LIMIT $10) q) AS mine
), added AS (
	INSERT INTO ` + t + ` (namespace, id, state, tool, args_digest, principal, subject, expires_at, expires_ns, approval)
	SELECT $1, $2, CASE WHEN $11::bytea IS NULL THEN 'pending' ELSE 'awaiting' END, $3, $4, $5, $6, $7, $8, $11
	FROM counts WHERE total < $9 AND mine < $10
	ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT count(*) FROM added), total, mine,
	EXISTS (SELECT FROM ` + t + ` WHERE namespace = $1 AND id = $2),
	clock_timestamp(), nextval($12::text::regclass)
FROM counts`
	// Spend and Complete: rowLockSQL and spendSQL or completeSQL in one
	// transaction; if that changed nothing, rowLockSQL and readSQL in
	// another (see the package doc). Each reads the clock as it
	// checks the row (clock_timestamp(), not now(), which is when the
	// transaction began).
	s.rowLockKey = "mcp-confirm/pgledger-row:" + opts.Table + ":" + opts.Namespace + ":"
	s.rowLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
	// A confirmation awaiting out-of-band approval is 'awaiting' until
	// its last approval makes it 'pending': it may be cancelled, never
	// redeemed. (A replica of an earlier version knows no 'awaiting', and
	// refuses such a row as corrupt.)
	//
	// Each reads the clock once (clockCTE: c.now, after the lock),
	// decides on that one reading, and returns it with a number from
	// the trace sequence (Options.Observe; NULL without).
	s.spendSQL = clockCTE(5) + `UPDATE ` + t + ` SET state = $3,
	lease_until = CASE WHEN $3 = 'acting' THEN c.now + $4::bigint * interval '1 microsecond' END
FROM c
WHERE namespace = $1 AND id = $2 AND (state = 'pending' OR state = 'awaiting' AND $3 = 'cancelled')
	AND expires_at > c.now
RETURNING ` + rowColumns
	s.completeSQL = clockCTE(5) + `UPDATE ` + t + ` SET state = $3, outcome = $4
FROM c
WHERE namespace = $1 AND id = $2 AND state = 'acting' AND lease_until > c.now
RETURNING ` + rowColumns
	// One row, found or not: the answer "unknown" is decided on a
	// clock reading too.
	s.readSQL = clockCTE(3) + `SELECT ` + rowColumns + ` FROM c LEFT JOIN ` + t + ` ON namespace = $1 AND id = $2`
	// Decide: one transaction that takes the row's lock, reads the row
	// and the clock, and writes what ledger.Record.Decide made of them.
	s.lockSQL = s.rowLockSQL
	s.decideReadSQL = s.readSQL
	s.decideSQL = `UPDATE ` + t + ` SET state = $3, decisions = $4 WHERE namespace = $1 AND id = $2`
	// A row is forgotten once both its expiry and its lease's end are
	// past grace; the expiry index finds the candidates.
	s.sweepSQL = `DELETE FROM ` + t + ` WHERE namespace = $1 AND expires_at < now() - $2::bigint * interval '1 microsecond'
	AND (lease_until IS NULL OR lease_until < now() - $2::bigint * interval '1 microsecond')`
	if opts.Audit {
		s.auditSQL(opts.Table)
	}
	return s, nil
}

// auditSQL prepares the statements of the audit trail of table.
func (s *Store) auditSQL(table string) {
	s.audit = true
	records := pgx.Identifier{table + "_audit"}.Sanitize()
	head := pgx.Identifier{table + "_audit_head"}.Sanitize()
	cps := pgx.Identifier{table + "_audit_checkpoint"}.Sanitize()
	s.auditCreateSQL = []string{
		`CREATE TABLE IF NOT EXISTS ` + records + ` (
	namespace text   NOT NULL,
	seq       bigint NOT NULL,
	line      bytea  NOT NULL, -- the record's canonical bytes (package audit)
	PRIMARY KEY (namespace, seq)
)`,
		`CREATE TABLE IF NOT EXISTS ` + head + ` (
	namespace text   PRIMARY KEY,
	seq       bigint NOT NULL,
	line      bytea, -- record seq's line: the head is its SHA-256
	head      bytea  -- the head, in a row last written by a version before line (else NULL)
)`,
		`CREATE TABLE IF NOT EXISTS ` + cps + ` (
	namespace  text   NOT NULL,
	seq        bigint NOT NULL,
	checkpoint text   NOT NULL, -- audit.Checkpoint as JSON
	PRIMARY KEY (namespace, seq)
)`,
	}
	// Head tables made before the head row kept its record's line have
	// head NOT NULL (and, since the record was sealed in its statement,
	// prev and at, copies of what the line holds): the line is added,
	// head kept for their rows until their next record, the copies
	// dropped. Checked first, so that a current table is never locked
	// exclusively.
	s.auditHeadSQL = `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'line' AND NOT attisdropped)`
	s.auditHeadMigrationSQL = `ALTER TABLE ` + head + ` ADD COLUMN IF NOT EXISTS line bytea,
	ALTER COLUMN head DROP NOT NULL, DROP COLUMN IF EXISTS prev, DROP COLUMN IF EXISTS at`
	s.auditHead = head
	// The namespace's head row is made, at seq 0 with no line (record 1's
	// prev is then 32 zero bytes), before a store's first audited
	// transition (Store.sealing), by a statement of its own, so that the
	// transitions' statements need not build a first record's line on
	// every call for the one call that inserts the row.
	s.headRowSQL = `INSERT INTO ` + head + ` (namespace, seq) VALUES ($1, 0) ON CONFLICT DO NOTHING`
	s.records = table + "_audit"
	// seal returns the CTEs that seal and insert the record whose prefix
	// is the parameter prefix and whose result the SQL expression result,
	// once per row of source (none: no record): one upsert of the
	// namespace's head row, which locks it until the commit (so records
	// are chained in the order their transitions commit), numbers the
	// record after the head's and builds its line, audit.Seal's format,
	// once (its time the database's clock, its prev the SHA-256 of the
	// head's line), keeping it as the new head's; then the insert of that
	// line as the record. The head row keeps the line rather than its
	// hash, so that no line is built or hashed twice: each is hashed once,
	// when the next record takes it as prev. The upsert's insert is taken
	// only when the head row is missing (deleted since the store made it):
	// it inserts no line, so the record's insert fails on its NOT NULL
	// line and the whole statement, transition included, with it (a
	// transition is never made without its record); Store.sealing then
	// makes the row and tries once more.
	seal := func(source, prefix, result string) string {
		line := func(seq, prev string) string {
			return prefix + ` || convert_to(format('"seq":%s,"time":%s,"result":"%s","prev":"%s"}', ` +
				seq + `, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, ` + result + `, encode(` + prev + `, 'hex')), 'UTF8')`
		}
		zero := `decode(repeat('00', 32), 'hex')`
		return `sealed AS (
	INSERT INTO ` + head + ` AS h (namespace, seq)
	SELECT $1, 0
	FROM ` + source + `
	ON CONFLICT (namespace) DO UPDATE SET seq = h.seq + 1, head = NULL,
		line = ` + line("h.seq + 1", "coalesce(sha256(h.line), h.head, "+zero+")") + `
	RETURNING seq, line
), recorded AS (
	INSERT INTO ` + records + ` SELECT $1, seq, line FROM sealed
)`
	}
	s.appendSQL = `WITH ` + seal(`(SELECT) one`, `$2::bytea`, `$3::text`) + ` SELECT seq FROM sealed`
	s.addAuditSQL = strings.Replace(s.addSQL, ")\nSELECT (SELECT count(*) FROM added), total, mine,",
		"), "+seal("added", "$13::bytea", "'ok'")+"\nSELECT (SELECT count(*) FROM added), total, mine,", 1)
	// The clock's CTE stays at the top level, where a data-modifying
	// one must be: WITH c AS (...), changed AS (UPDATE ...), sealed ...
	s.spendAuditSQL = strings.Replace(s.spendSQL, "\n", ", changed AS (\n", 1) + `), ` + seal("changed", "$6::bytea", "'ok'") +
		` SELECT * FROM changed`
	s.completeAuditSQL = strings.Replace(s.completeSQL, "\n", ", changed AS (\n", 1) + `), ` + seal("changed", "$6::bytea", "'ok'") +
		` SELECT * FROM changed`
	// A row not written since the upgrade keeps its head as it was.
	s.headSQL = `SELECT seq, coalesce(sha256(line), head) FROM ` + head + ` WHERE namespace = $1`
	s.recordsSQL = `SELECT line FROM ` + records + ` WHERE namespace = $1 AND seq >= $2 ORDER BY seq`
	s.addCheckpointSQL = `INSERT INTO ` + cps + ` VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	s.checkpointsSQL = `SELECT checkpoint FROM ` + cps + ` WHERE namespace = $1 ORDER BY seq`
}

// Open connects to the database at connString (a postgres:// URL or
// key=value string, as [pgxpool.ParseConfig] reads it), checks that it
// answers, creates the table if needed ([Store.Migrate]) and returns a
// store that owns the pool. Errors name the server but never the password.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %s", parseError(connString, err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %s", redact.Scrub(err.Error(), cfg.ConnConfig.Password))
	}
	s, err := New(pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.own = true
	server := fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if msg := redact.Scrub(err.Error(), cfg.ConnConfig.Password); msg != err.Error() {
			return nil, fmt.Errorf("pgledger: connect to %s: %s", server, msg)
		}
		return nil, fmt.Errorf("pgledger: connect to %s: %w", server, err)
	}
	if err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgledger: on %s: %w", server, err)
	}
	return s, nil
}

// parseError says why connString did not parse without echoing it. pgconn
// redacts the password from the connection string it quotes, best effort
// (it misses "password = x" and a password containing '@'), and the error
// it wraps and its ConnString field do not: only the reason after the
// quoted string is kept, scrubbed.
func parseError(connString string, err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); strings.HasPrefix(msg, "cannot parse `") && i >= 0 {
		msg = msg[i+len("`: "):]
	} else {
		msg = "unrecognised error"
	}
	return "invalid connection string (not shown): " + redact.Scrub(msg, passwords(connString)...)
}

// kvPassword finds the password of a key=value connection string.
var kvPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// passwords returns what may be the password in connString: the value of
// any password= key, and what may be the password of a URL.
func passwords(connString string) []string {
	var pws []string
	for _, m := range kvPassword.FindAllStringSubmatch(connString, -1) {
		pws = append(pws, m[1], strings.Trim(m[1], "'"))
	}
	return append(pws, redact.URLPasswords(connString)...)
}

// Migrate creates the table and its indexes if they do not exist (on a
// table made by an earlier version it adds the caps' partial indexes, with
// a CREATE INDEX that blocks writes to the table while it builds). It is
// idempotent, and safe when several replicas start at once: it holds a
// transaction-scoped advisory lock named after the table, because
// concurrent CREATE TABLE IF NOT EXISTS can still fail on PostgreSQL's
// catalog constraints.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.lockKey); err != nil {
		return fmt.Errorf("pgledger: migrate: lock: %w", err)
	}
	for _, sql := range append([]string{s.createSQL, s.indexSQL, s.pendingIndexSQL, s.principalIndexSQL, s.awaitingIndexSQL, s.traceSeqSQL}, s.auditCreateSQL...) {
		if sql == "" {
			continue // no trace sequence: not observed
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgledger: migrate: %w", err)
		}
	}
	// Tables made before the ledger stopped keeping the question's wording
	// have a NOT NULL column "shown" that inserts no longer fill. Checked
	// first so that an up-to-date table is never locked exclusively.
	var stale bool
	if err := tx.QueryRow(ctx, s.staleSQL, s.table).Scan(&stale); err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	if stale {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+s.table+` DROP COLUMN shown`); err != nil {
			return fmt.Errorf("pgledger: migrate: drop column shown: %w", err)
		}
	}
	// Tables made before outcomes were recorded lack lease_until and
	// outcome, and their CHECK knows only pending, redeemed and cancelled.
	var current bool
	if err := tx.QueryRow(ctx, s.outcomesSQL, s.table).Scan(&current); err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	if !current {
		if _, err := tx.Exec(ctx, s.outcomesMigrationSQL); err != nil {
			return fmt.Errorf("pgledger: migrate: outcomes: %w", err)
		}
	}
	// Tables made before out-of-band approval lack approval and
	// decisions, and their CHECK knows no 'awaiting'.
	if err := tx.QueryRow(ctx, s.approvalsSQL, s.table).Scan(&current); err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	if !current {
		if _, err := tx.Exec(ctx, s.approvalsMigrationSQL); err != nil {
			return fmt.Errorf("pgledger: migrate: approvals: %w", err)
		}
	}
	if s.audit {
		if err := tx.QueryRow(ctx, s.auditHeadSQL, s.auditHead).Scan(&current); err != nil {
			return fmt.Errorf("pgledger: migrate: %w", err)
		}
		if !current {
			if _, err := tx.Exec(ctx, s.auditHeadMigrationSQL); err != nil {
				return fmt.Errorf("pgledger: migrate: audit head: %w", err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	return s.detectStandby(ctx)
}

// waitSQL writes to the WAL (a transactional message, read by no one)
// so that the transaction that reads a row commits with a commit record
// after every commit it saw, and, with a synchronous standby, returns
// only once the standby holds that record, and so all it read.
const waitSQL = `SELECT pg_logical_emit_message(true, 'mcp-confirm', '')`

// syncSQL tells whether a commit of the store's connections waits for a
// synchronous standby.
const syncSQL = `SELECT current_setting('synchronous_standby_names') <> ''
	AND current_setting('synchronous_commit') NOT IN ('off', 'local')`

// detectStandby sets readsWait from syncSQL.
func (s *Store) detectStandby(ctx context.Context) error {
	var sync bool
	if err := s.pool.QueryRow(ctx, syncSQL).Scan(&sync); err != nil {
		return fmt.Errorf("pgledger: read synchronous_standby_names: %w", err)
	}
	s.readsWait.Store(sync)
	return nil
}

// queueWait queues waitSQL on b when answers must wait for a standby.
func (s *Store) queueWait(b *pgx.Batch) {
	if s.readsWait.Load() {
		b.Queue(waitSQL)
	}
}

// Sweep deletes the namespace's rows whose expiry plus grace has passed on
// the database's clock, and reports how many. Afterwards their ids are
// unknown (still refused).
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	tag, err := s.pool.Exec(ctx, s.sweepSQL, s.ns, s.grace.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("pgledger: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Close makes every later call fail, and closes the pool if [Open] made
// it. Calls in flight are not waited for.
func (s *Store) Close() {
	if s.closed.Swap(true) || !s.own {
		return
	}
	s.pool.Close()
}

var errClosed = errors.New("pgledger: store closed")

// Add implements [ledger.Store]. At most once per SweepEvery it first
// sweeps; a failed sweep is not reported (the insert reports a database
// that went away).
func (s *Store) Add(ctx context.Context, c ledger.Confirmation) (err error) {
	if s.closed.Load() {
		return errClosed
	}
	approval, err := encodeApproval(c.Approval)
	if err != nil {
		return fmt.Errorf("pgledger: add %s: %w", c.ID, err)
	}
	var st row // the stamp: now and seq
	var tseq *int64
	if s.observe != nil {
		defer func() {
			if tseq != nil {
				st.seq = uint64(*tseq)
			}
			s.observe(ctx, st.event(ledger.IssueEvent(st.now, c, err)))
		}()
	}
	now := s.now().UnixNano()
	if last := s.lastSweep.Load(); now-last >= int64(s.sweepEvery) && s.lastSweep.CompareAndSwap(last, now) {
		s.Sweep(ctx)
	}
	at, ns := ceilMicro(c.Expires)
	// One round trip, one transaction (a batch runs in an implicit one):
	// the lock, held to its commit, makes count-then-insert atomic for
	// every Add of the namespace, from any replica.
	var added, total, mine int64
	var existed bool
	insert := func() error {
		var b pgx.Batch
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.addLockKey)
		sql, args := s.addSQL, []any{s.ns, c.ID[:], []byte(c.Tool), []byte(c.ArgsDigest), []byte(c.Principal), []byte(c.Subject),
			at, ns, s.maxPending, s.maxPer, approval, s.traceSeq}
		if s.audit {
			sql, args = s.addAuditSQL, append(args, ledger.AuditIssue(ctx, c).Prefix())
		}
		b.Queue(sql, args...).QueryRow(func(r pgx.Row) error {
			return r.Scan(&added, &total, &mine, &existed, &st.now, &tseq)
		})
		// A refusal (exists, full) is read from rows that may not be on
		// the standby yet: it waits for them, as reads do.
		s.queueWait(&b)
		return s.pool.SendBatch(ctx, &b).Close()
	}
	if err = s.sealing(ctx, insert); err != nil {
		return fmt.Errorf("pgledger: add %s: %w", c.ID, err)
	}
	switch {
	case added == 1:
		return nil
	case existed:
		return fmt.Errorf("%w: %s", ledger.ErrExists, c.ID)
	case total >= s.maxPending:
		return fmt.Errorf("%w: %d pending in namespace %q", ledger.ErrFull, total, s.ns)
	case mine >= s.maxPer:
		return fmt.Errorf("%w: %d pending for this principal in namespace %q", ledger.ErrFull, mine, s.ns)
	}
	// A conflict with a row committed without the lock (a replica of an
	// older version, during an upgrade), which the snapshot missed.
	return fmt.Errorf("%w: %s", ledger.ErrExists, c.ID)
}

// Spend implements [ledger.Store].
func (s *Store) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (rec ledger.Record, err error) {
	target := "cancelled"
	switch {
	case to == ledger.Acting && lease > 0:
		target = "acting"
	case to != ledger.Cancelled:
		return ledger.Record{}, fmt.Errorf("pgledger: cannot spend into state %v with lease %v", to, lease)
	}
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	// A lease under a microsecond is one: the database's clock is in them.
	micros := max(int64((lease+time.Microsecond-1)/time.Microsecond), 1)
	// The change applies to a pending row (awaiting approval: only a
	// cancel), before its expiry.
	applies := func(r row) bool {
		return r.found && r.State == ledger.Pending && r.unexpired && (!r.awaiting || to == ledger.Cancelled)
	}
	var a *audited
	if s.audit {
		a = &audited{rec: ledger.AuditSpend(ctx, id, to), refusal: func(r row) error { _, err := r.answer(); return err }}
	}
	var r row
	if s.observe != nil {
		defer func() { s.observe(ctx, r.event(ledger.SpendEvent(r.now, to, id, rec, err))) }()
	}
	var spent bool
	spent, r, err = s.decide(ctx, id, applies, a, s.spendSQL, target, micros, s.traceSeq)
	switch {
	case err != nil:
		return ledger.Record{}, fmt.Errorf("pgledger: spend %s: %w", id, err)
	case spent:
		return ledger.Record{Confirmation: r.Confirmation, State: to, Decisions: r.Decisions}, nil
	}
	return r.answer()
}

// Complete implements [ledger.Store].
func (s *Store) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) (err error) {
	b, err := o.MarshalBinary()
	if err != nil {
		return fmt.Errorf("pgledger: complete %s: %w", id, err)
	}
	if s.closed.Load() {
		return errClosed
	}
	state := [...]string{ledger.OutcomeDone: "done", ledger.OutcomeFailed: "failed", ledger.OutcomeUnknown: "in_doubt"}[o.Kind]
	applies := func(r row) bool { return r.found && r.State == ledger.Acting }
	var a *audited
	if s.audit {
		a = &audited{rec: ledger.AuditComplete(ctx, id, o.Kind), refusal: completeRefusal}
	}
	var r row
	if s.observe != nil {
		defer func() { s.observe(ctx, r.event(ledger.CompleteEvent(r.now, id, o.Kind, err))) }()
	}
	var completed bool
	completed, r, err = s.decide(ctx, id, applies, a, s.completeSQL, state, b, s.traceSeq)
	switch {
	case err != nil:
		return fmt.Errorf("pgledger: complete %s: %w", id, err)
	case completed:
		return nil
	}
	return completeRefusal(r)
}

// completeRefusal is why a Complete that found r changed nothing.
func completeRefusal(r row) error {
	if r.found && r.State == ledger.Pending && r.unexpired {
		return ledger.ErrNotActing
	}
	_, err := r.answer()
	return err
}

// Decide implements [ledger.Store]: one transaction that takes the row's
// lock (as Spend and Complete do), reads the row and the database's clock,
// applies [ledger.Record.Decide] and writes the decisions and the state
// the row moves to: 'awaiting' until the last approval, then 'pending'
// (redeemable), or 'cancelled' on a decline. Two round trips, then the
// commit.
func (s *Store) Decide(ctx context.Context, id ledger.ID, p ledger.Approver, approve bool) (rec ledger.Record, err error) {
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	var r row
	if s.observe != nil {
		defer func() { s.observe(ctx, r.event(ledger.DecideEvent(r.now, id, p.ID, approve, err))) }()
	}
	var prefix []byte
	if s.audit {
		prefix = ledger.AuditDecide(ctx, id, p, approve).Prefix()
	}
	err = s.sealing(ctx, func() (err error) {
		rec, err = s.decideTx(ctx, id, p, approve, prefix, &r)
		return err
	})
	if err != nil && ledger.ResultOf(err) == ledger.ResultError {
		return ledger.Record{}, fmt.Errorf("pgledger: decide %s: %w", id, err)
	}
	return rec, err
}

// decideTx is Decide's transaction; r is the row it read.
func (s *Store) decideTx(ctx context.Context, id ledger.ID, p ledger.Approver, approve bool, prefix []byte, r *row) (ledger.Record, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ledger.Record{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var b pgx.Batch
	b.Queue(s.lockSQL, s.rowLockKey+id.String())
	b.Queue(s.decideReadSQL, s.ns, id[:], s.traceSeq).QueryRow(func(row pgx.Row) error { return r.scan(id, row) })
	s.queueWait(&b) // a refusal commits it (refusedIn)
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return ledger.Record{}, err
	}
	if !r.found {
		return ledger.Record{}, s.refusedIn(ctx, tx, audit.OpDecide, prefix, ledger.ErrUnknown)
	}
	rec, err := r.Record.Decide(p, approve, r.now)
	if err != nil {
		if aerr := s.refusedIn(ctx, tx, audit.OpDecide, prefix, err); aerr != err {
			return ledger.Record{}, aerr
		}
		return rec, err
	}
	state := "awaiting"
	switch {
	case !approve:
		state = "cancelled"
	case rec.Approved():
		state = "pending"
	}
	tag, err := tx.Exec(ctx, s.decideSQL, s.ns, id[:], state, encodeDecisions(rec.Decisions))
	switch {
	case err != nil:
		return ledger.Record{}, err
	case tag.RowsAffected() != 1:
		return ledger.Record{}, ledger.ErrUnknown // swept since it was read
	}
	if prefix != nil {
		if _, err := tx.Exec(ctx, s.appendSQL, s.ns, prefix, string(ledger.ResultOK)); err != nil {
			return ledger.Record{}, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return ledger.Record{}, err
	}
	return rec, nil
}

// Lookup implements [ledger.Store]: one statement, which changes nothing.
func (s *Store) Lookup(ctx context.Context, id ledger.ID) (ledger.Record, error) {
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	var r row
	var b pgx.Batch
	b.Queue(s.readSQL, s.ns, id[:], nil).QueryRow(func(row pgx.Row) error { return r.scan(id, row) })
	s.queueWait(&b)
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return ledger.Record{}, fmt.Errorf("pgledger: lookup %s: %w", id, err)
	}
	if !r.found {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return r.Record, nil
}

// decide runs change (spendSQL or completeSQL, with args after the
// namespace and id) under the row's lock, as the package doc describes,
// and reports whether it changed the row, and the row as it then is. The
// row is read in a second transaction when nothing changed, so it may have
// moved on since: if it moved to where the change applies (a row inserted
// since, for a Spend; a pending row now acting, for a Complete), the
// change is tried again.
func (s *Store) decide(ctx context.Context, id ledger.ID, applies func(row) bool, a *audited, change string, args ...any) (changed bool, r row, err error) {
	args = append([]any{s.ns, id[:]}, args...)
	if a == nil {
		return s.tryChange(ctx, id, applies, nil, change, args)
	}
	// The audited statement: the change, and its record sealed in the
	// same statement, so in the same transaction.
	change = map[string]string{s.spendSQL: s.spendAuditSQL, s.completeSQL: s.completeAuditSQL}[change]
	args = append(args, a.rec.Prefix())
	err = s.sealing(ctx, func() (err error) {
		changed, r, err = s.tryChange(ctx, id, applies, a, change, args)
		return err
	})
	return changed, r, err
}

// tryChange is decide's loop, with change and its args complete.
func (s *Store) tryChange(ctx context.Context, id ledger.ID, applies func(row) bool, a *audited, change string, args []any) (changed bool, r row, err error) {
	for range 3 {
		r = row{}
		if err := s.underLock(ctx, id, change, args, &r); err != nil {
			return false, row{}, err
		}
		if r.found {
			return true, r, nil
		}
		if a != nil {
			var done bool
			if done, err = s.refusal(ctx, id, applies, a, &r); err != nil || done {
				return false, r, err
			}
			continue
		}
		// Nothing changed: say why, from the row as it is now.
		if err := s.underLock(ctx, id, s.readSQL, []any{s.ns, id[:], s.traceSeq}, &r); err != nil {
			return false, row{}, err
		}
		if !applies(r) {
			return false, r, nil
		}
	}
	return false, row{}, fmt.Errorf("%w: the row kept changing", errCorrupt)
}

// underLock runs query with args, which returns a row of readSQL's
// columns or none, in one transaction after taking the row's lock, and
// scans what it returns into r.
func (s *Store) underLock(ctx context.Context, id ledger.ID, query string, args []any, r *row) error {
	var b pgx.Batch
	b.Queue(s.rowLockSQL, s.rowLockKey+id.String())
	b.Queue(query, args...).QueryRow(func(row pgx.Row) error { return r.scan(id, row) })
	if query == s.readSQL {
		// An answer read, not written: it waits for the standby.
		s.queueWait(&b)
	}
	return s.pool.SendBatch(ctx, &b).Close()
}

// confirmation rebuilds confirmation id from its columns.
func confirmation(id ledger.ID, tool, args, principal, subject []byte, at time.Time, ns int16) ledger.Confirmation {
	return ledger.Confirmation{
		ID:         id,
		Tool:       string(tool),
		ArgsDigest: string(args),
		Principal:  string(principal),
		Subject:    string(subject),
		Expires:    at.Add(-time.Duration(ns)),
	}
}

// clockCTE reads the database's clock once, as c.now, and draws a number
// from the trace sequence named by parameter $n (none, NULL, for NULL),
// as c.seq, for the statement that follows to decide on and return. It
// is one line.
func clockCTE(n int) string {
	return fmt.Sprintf("WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now, nextval($%d::text::regclass) AS seq)\n", n)
}

// rowColumns are the columns row.scan reads: the state as it stands on
// the database's clock c.now (a missing row: state ”), then c.now and
// c.seq.
const rowColumns = `coalesce(state, ''), coalesce(expires_at > c.now, false), coalesce(lease_until > c.now, false),
	tool, args_digest, principal, subject, coalesce(expires_at, c.now), coalesce(expires_ns, 0), outcome, approval,
	decisions, c.now, c.seq`

// The states of a row, and the ledger's states they stand for. A row
// "redeemed" was spent by a version that recorded no outcome: no one can
// tell what came of it. One "awaiting" is pending, awaiting out-of-band
// approval.
var stateNames = map[string]ledger.State{
	"pending":   ledger.Pending,
	"awaiting":  ledger.Pending,
	"acting":    ledger.Acting,
	"done":      ledger.Done,
	"failed":    ledger.Failed,
	"in_doubt":  ledger.InDoubt,
	"redeemed":  ledger.InDoubt,
	"cancelled": ledger.Cancelled,
}

// states is the CHECK on the state column. "redeemed" stays allowed, so
// that replicas of an earlier version keep working during an upgrade.
const states = `('pending', 'awaiting', 'acting', 'done', 'failed', 'in_doubt', 'redeemed', 'cancelled')`

// A row is a confirmation's row as readSQL reads it.
type row struct {
	ledger.Record
	found, unexpired bool
	awaiting         bool // pending, awaiting out-of-band approval
	// now is the database's clock the statement decided on, seq its
	// number from the trace sequence (0 without one); zero if no
	// statement returned a row.
	now time.Time
	seq uint64
}

// event returns e as of the statement r was read by: its number.
func (r row) event(e ledger.Event) ledger.Event {
	e.Seq = r.seq
	return e
}

// scan reads row into r; no row, or a missing one (state ”), leaves r
// not found.
func (r *row) scan(id ledger.ID, src pgx.Row) error {
	var state string
	var tool, args, principal, subject, outcome, approval, decisions []byte
	var at time.Time
	var ns int16
	var leased bool
	var seq *int64
	err := src.Scan(&state, &r.unexpired, &leased, &tool, &args, &principal, &subject, &at, &ns, &outcome,
		&approval, &decisions, &r.now, &seq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	if seq != nil {
		r.seq = uint64(*seq)
	}
	if state == "" {
		return nil // no such row
	}
	st, ok := stateNames[state]
	if !ok {
		return fmt.Errorf("%w: state %q", errCorrupt, state)
	}
	if st == ledger.Acting && !leased {
		st = ledger.InDoubt // the lease ended with no outcome recorded
	}
	r.found, r.State, r.awaiting = true, st, state == "awaiting"
	r.Confirmation = confirmation(id, tool, args, principal, subject, at, ns)
	if r.Approval, err = decodeApproval(approval); err != nil {
		return fmt.Errorf("%w: approval: %w", errCorrupt, err)
	}
	if r.Decisions, err = decodeDecisions(decisions); err != nil {
		return fmt.Errorf("%w: decisions: %w", errCorrupt, err)
	}
	if outcome != nil {
		if err := r.Outcome.UnmarshalBinary(outcome); err != nil {
			return fmt.Errorf("%w: %w", errCorrupt, err)
		}
	}
	return nil
}

// answer is the answer to a Spend or Complete that left r as it was: the
// record, and the error that says why nothing changed.
func (r row) answer() (ledger.Record, error) {
	switch {
	case !r.found:
		return ledger.Record{}, ledger.ErrUnknown
	case r.State == ledger.Pending && !r.unexpired:
		return ledger.Record{}, ledger.ErrExpired
	case r.awaiting:
		return r.Record, ledger.ErrAwaitingApproval
	case r.State == ledger.Pending:
		// Not reached: decide tries a pending row again.
		return ledger.Record{}, ledger.ErrUnknown
	case r.State == ledger.Acting:
		return r.Record, ledger.ErrInProgress
	case r.State == ledger.Done || r.State == ledger.Failed:
		return r.Record, ledger.ErrDone
	case r.State == ledger.InDoubt:
		return r.Record, ledger.ErrInDoubt
	}
	if _, declined := r.Declined(); declined {
		return r.Record, ledger.ErrDeclined
	}
	return ledger.Record{}, ledger.ErrCancelled
}

var errCorrupt = errors.New("corrupt row")

// ceilMicro rounds t up to the microsecond (the resolution of timestamptz)
// and reports the nanoseconds it added, so that for the database's clock,
// in whole microseconds, expires_at > now() exactly when now is before t.
func ceilMicro(t time.Time) (time.Time, int16) {
	r := t.Nanosecond() % 1000
	if r == 0 {
		return t, 0
	}
	d := 1000 - r
	return t.Add(time.Duration(d)), int16(d)
}

// encodeApproval is the approval column of a confirmation that needs a:
// a version byte (1), Required as a uvarint, then Requester, Question and
// each of the Approvers (after their number, a uvarint), each as a
// uvarint length and its bytes. Nil (NULL) for none.
func encodeApproval(a *ledger.Approval) ([]byte, error) {
	if a == nil {
		return nil, nil
	}
	if err := a.Check(); err != nil {
		return nil, err
	}
	b := binary.AppendUvarint([]byte{1}, uint64(a.Required))
	b = appendString(b, a.Requester)
	b = appendString(b, a.Question)
	b = binary.AppendUvarint(b, uint64(len(a.Approvers)))
	for _, n := range a.Approvers {
		b = appendString(b, n)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errEncoding = errors.New("bad encoding")

// reader reads what encodeApproval and encodeDecisions write.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint(limit uint64) uint64 {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > limit {
		r.err = errEncoding
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *reader) string() string {
	n := r.uvarint(uint64(len(r.b)))
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func decodeApproval(b []byte) (*ledger.Approval, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) == 0 || b[0] != 1 {
		return nil, errEncoding
	}
	r := &reader{b: b[1:]}
	a := &ledger.Approval{Required: int(r.uvarint(ledger.MaxRequired))}
	a.Requester, a.Question = r.string(), r.string()
	a.Approvers = make([]string, r.uvarint(ledger.MaxApprovers))
	for i := range a.Approvers {
		a.Approvers[i] = r.string()
	}
	if r.err != nil || len(r.b) != 0 || a.Check() != nil {
		return nil, errEncoding
	}
	return a, nil
}

// encodeDecisions is the decisions column: for each decision, '+'
// (approved) or '-' (declined), its time in unix microseconds (8 bytes,
// big-endian) and the approver, as a uvarint length and its bytes. Nil
// (NULL) for none.
func encodeDecisions(ds []ledger.Decision) []byte {
	var b []byte
	for _, d := range ds {
		sign := byte('-')
		if d.Approve {
			sign = '+'
		}
		b = binary.BigEndian.AppendUint64(append(b, sign), uint64(d.At.UnixMicro()))
		b = appendString(b, d.Approver)
	}
	return b
}

func decodeDecisions(b []byte) ([]ledger.Decision, error) {
	var ds []ledger.Decision
	for len(b) > 0 {
		if len(b) < 9 || b[0] != '+' && b[0] != '-' {
			return nil, errEncoding
		}
		d := ledger.Decision{Approve: b[0] == '+', At: time.UnixMicro(int64(binary.BigEndian.Uint64(b[1:9])))}
		r := &reader{b: b[9:]}
		d.Approver = r.string()
		if r.err != nil {
			return nil, errEncoding
		}
		ds, b = append(ds, d), r.b
	}
	return ds, nil
}
