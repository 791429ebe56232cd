package pgledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/internal/failover"
)

// TestReadsWaitForStandby: with a synchronous standby whose link is
// stalled, a Spend waits for its acknowledgement and its backend is
// terminated (pg_terminate_backend): the writer gets an error, never an
// answer, and its commit, finished locally, is visible on the primary
// though the standby never received it. The control (answers not
// waiting, as before) then answers a retried Spend "in progress" and a
// Lookup "acting" from that commit, which the standby (still "pending")
// contradicts after a failover. With reads waiting (detected at
// Migrate), the retry and the Lookup get no answer, only their
// deadline's error (the caller's "in doubt"), and nothing is acted on.
func TestReadsWaitForStandby(t *testing.T) {
	p := failover.StartPostgres(t, true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.readsWait.Load() {
		t.Fatal("Migrate did not detect the synchronous standby")
	}
	if err := s.CheckDurability(ctx); err != nil {
		t.Fatal(err)
	}
	c := ledgertest.Fresh(t)
	if err := s.Add(ctx, c); err != nil {
		t.Fatal(err)
	}

	p.Relay.Stall()
	spent := make(chan error, 1)
	go func() {
		_, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long)
		spent <- err
	}()
	var terminated bool
	for !terminated {
		err := pool.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)
			FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&terminated)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-spent; err == nil {
		t.Fatal("the writer was told its Spend succeeded, with the standby's link stalled")
	}
	standby, err := pgx.Connect(ctx, p.StandbyURL())
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close(context.Background())
	var onStandby string
	if err := standby.QueryRow(ctx, `SELECT state FROM `+DefaultTable+` WHERE id = $1`, c.ID[:]).Scan(&onStandby); err != nil {
		t.Fatal(err)
	}
	if onStandby != "pending" {
		t.Fatalf("the standby holds %q: the stalled Spend reached it", onStandby)
	}

	for _, wait := range []bool{false, true} {
		s.readsWait.Store(wait)
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		rec, lerr := s.Lookup(short, c.ID)
		_, serr := s.Spend(short, c.ID, ledger.Acting, ledgertest.Long)
		cancel()
		t.Logf("reads wait %v: Lookup %v, %v; Spend %v", wait, rec.State, lerr, serr)
		if serr == nil {
			t.Fatal("a retried Spend succeeded: acted on twice")
		}
		if !wait {
			// The control: answered from a commit the standby never got.
			if lerr != nil || rec.State != ledger.Acting || !errors.Is(serr, ledger.ErrInProgress) {
				t.Fatalf("control: Lookup %v, %v and Spend %v; want acting and in progress, answered", rec.State, lerr, serr)
			}
			continue
		}
		for _, err := range []error{lerr, serr} {
			if err == nil || !errors.Is(err, context.DeadlineExceeded) && ledger.ResultOf(err) != ledger.ResultError {
				t.Fatalf("answered %v from a commit the standby never got (it holds %q)", err, onStandby)
			}
		}
	}
}

// BenchmarkRefusedSpendWaits measures a refused Spend (of a confirmation
// already acting: the change applies to nothing, then the row is read
// to answer "in progress") on a primary with a synchronous standby
// (internal/failover, loopback), with its read waiting for the standby
// (waitSQL, as the store runs there) beside the same Spend not waiting,
// interleaved (the order alternating each iteration), each call timed on
// its own. It also times the alternative rejected in the package doc:
// the read plus a check that every synchronous standby has flushed the
// primary's WAL insert position (pg_stat_replication), one round trip
// more per check, repeated at once until it passes ("checks/op": the
// standby's reports lag the waiting reads' own commits). It reports the ratios of the medians as
// "wait/nowait" and "lsncheck/nowait" (BENCHMARKS.md).
func BenchmarkRefusedSpendWaits(b *testing.B) {
	p := failover.StartPostgres(b, true)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, p.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	c := ledgertest.Fresh(b)
	if err := s.Add(ctx, c); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); err != nil {
		b.Fatal(err)
	}
	refused := func(wait bool) time.Duration {
		s.readsWait.Store(wait)
		start := time.Now()
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrInProgress) {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var checks int
	lsnCheck := func() time.Duration {
		start := time.Now()
		s.readsWait.Store(false)
		if _, err := s.Spend(ctx, c.ID, ledger.Acting, ledgertest.Long); !errors.Is(err, ledger.ErrInProgress) {
			b.Fatal(err)
		}
		for ok := false; !ok; checks++ {
			if err := pool.QueryRow(ctx, `SELECT coalesce(bool_and(flush_lsn >= pg_current_wal_insert_lsn()), false)
				FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&ok); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var w, n, l []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			w, n, l = append(w, refused(true)), append(n, refused(false)), append(l, lsnCheck())
		} else {
			l, n, w = append(l, lsnCheck()), append(n, refused(false)), append(w, refused(true))
		}
	}
	for _, d := range [][]time.Duration{w, n, l} {
		slices.Sort(d)
	}
	med := func(d []time.Duration) float64 { return float64(d[len(d)/2]) }
	b.ReportMetric(med(w)/med(n), "wait/nowait")
	b.ReportMetric(med(l)/med(n), "lsncheck/nowait")
	b.ReportMetric(float64(checks)/float64(len(l)), "checks/op")
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	b.ReportMetric(float64(sum)/float64(len(l))/1e3, "lsncheck-mean-µs")
	b.ReportMetric(med(w)/1e3, "wait-µs")
	b.ReportMetric(med(n)/1e3, "nowait-µs")
}

// TestStandbyConformance runs the conformance suite (ledgertest.Run, and
// the audited store's) on stores whose answers wait for a synchronous
// standby, on a primary with one: every path that reads to answer (a
// refused Spend, Complete or Decide, Lookup, an Add refused) commits its
// wait, audited or not.
func TestStandbyConformance(t *testing.T) {
	p := failover.StartPostgres(t, true)
	for _, audited := range []bool{false, true} {
		t.Run(fmt.Sprint("audit=", audited), func(t *testing.T) {
			var n atomic.Int64
			// Two pools, as two server replicas (New and Replica).
			pools := [2]*pgxpool.Pool{}
			for i := range pools {
				cfg, err := pgxpool.ParseConfig(p.URL())
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 8 // the standby harness's server takes 40
				if pools[i], err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pools[i].Close)
			}
			store := func(t testing.TB, pool *pgxpool.Pool, ns string) ledger.Store {
				s, err := New(pool, Options{Namespace: ns, Audit: audited})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !s.readsWait.Load() {
					t.Fatal("Migrate did not detect the synchronous standby")
				}
				return s
			}
			ledgertest.Run(t, ledgertest.Namespaced(
				func(t testing.TB) (ledger.Store, string) {
					ns := fmt.Sprintf("standby:%d", n.Add(1))
					return store(t, pools[0], ns), ns
				},
				func(t testing.TB, ns string) ledger.Store { return store(t, pools[1], ns) },
			))
		})
	}
}
