package observe_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// benchPath is the path the benchmark's question names, as in
// impl/confirm's call benchmarks.
const benchPath = "/srv/data/reports/2026/q3-summary.pdf"

// benchServer is a confirming server assembled from setup (its store in
// memory) whose one tool, delete_file, asks about a path, passed through
// prompt.Value, and acts with a stub: the confirmed call of impl/confirm's
// BenchmarkCallConfirmed, through the receiving middleware confirm.Assemble
// returns.
func benchServer(b *testing.B, setup confirm.Setup) *mcp.Server {
	b.Helper()
	setup.Name, setup.Keys, setup.Logger = "bench", [][]byte{testKey}, discard
	parts, err := confirm.Assemble(setup)
	if err != nil {
		b.Fatal(err)
	}
	s := mcp.NewServer(parts.Implementation, &mcp.ServerOptions{Logger: discard})
	s.AddReceivingMiddleware(parts.Middleware...)
	type args struct {
		Path string `json:"path"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delete_file"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		res, err := parts.Flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) {
				return confirm.Question{Message: fmt.Sprintf("Delete the file %s (48213 bytes)? This cannot be undone.", prompt.Value(in.Path, prompt.Options{})), Subject: "inode 1234567"}, nil
			},
			Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Deleted " + prompt.Value(in.Path, prompt.Options{}) + "."}}}, nil
			},
		})
		return res, nil, err
	})
	return s
}

// benchClient connects a 2026-07-28 client that answers yes to s over the
// in-memory transport.
func benchClient(b *testing.B, s *mcp.Server) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	yes := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: yes})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// benchCall makes the confirmed two-round call, naming the client's span
// in _meta.traceparent (sampled), and checks it acted.
func benchCall(cs *mcp.ClientSession, traceparent string) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "delete_file",
		Arguments: map[string]any{"path": benchPath},
		Meta:      mcp.Meta{observe.MetaTraceparent: traceparent},
	})
	if err != nil {
		return err
	}
	if res.IsError || res.NeedsInput() || len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "Deleted ") {
		return fmt.Errorf("call did not complete: %s", res.Content)
	}
	return nil
}

// BenchmarkObservabilityRatio alternates the same confirmed call (two
// rounds through a real go-sdk client and server, the boundary, the flow
// and the in-memory ledger, the action stubbed) through three servers,
// call by call in one loop, in a fresh random order each round, so that
// all see the same machine: off (no telemetry), metrics (Prometheus only)
// and on (metrics, and traces: every call sampled by its client's
// traceparent, four spans batched and exported over OTLP/HTTP by
// observe.FromEnv's provider to a loopback collector that reads and drops
// them, standing in for a remote one). It reports the median of each one's wall-clock times per call,
// and the ratios of the medians, on/off (the target is at most 1.05) and
// metrics/off: on a machine shared with other jobs a call descheduled for
// milliseconds would move a mean by more than the telemetry costs.
//
// Two runtime settings: library, Go's defaults, and binary, with the
// 16 MiB heap floor cmd/mcp-confirm keeps (see its heapFloor), under which
// the process collects a quarter as often: the call itself is cheaper
// there, so the spans' fixed cost weighs more in the ratio.
//
// "on" keeps the audit trail too: its memory ledger writes each record
// (three per call: asked, redeemed, outcome) to a file in the test's
// temporary directory, fsync'd before the step takes effect, as
// --audit-file does. A fourth server, on-tmpfs, is "on" with its trail on
// /dev/shm, where an fsync costs nothing: on-tmpfs/off is the trail's
// own cost, on/off adds the disk's fsyncs. The postgres run (with
// MCP_CONFIRM_POSTGRES_URL) compares a PostgreSQL ledger keeping no trail
// (off) with one keeping it, metrics and traces on (on): the deployment
// whose trail is shared by replicas, where the commit's fsync is paid
// either way. It also reports, for each PostgreSQL server, the median
// per call of the time spent in its store's statements (X-sql-ns/call)
// and of the rest of the call (X-rest-ns/call): on's extra in the first
// is its trail's records.
func BenchmarkObservabilityRatio(b *testing.B) {
	b.Run("library", func(b *testing.B) { observabilityRatio(b, memoryLedgers) })
	b.Run("binary", func(b *testing.B) {
		floor := make([]byte, 16<<20) // as cmd/mcp-confirm's heapFloor: never written
		observabilityRatio(b, memoryLedgers)
		runtime.KeepAlive(floor)
	})
	b.Run("postgres", func(b *testing.B) { observabilityRatio(b, postgresLedgers) })
}

// ledgers returns the stores of the off, metrics, on and (if not nil)
// on-tmpfs servers, and for PostgreSQL stores the clocks of the time each
// of the first three spends in its statements.
type ledgers func(b *testing.B) (off, metrics, on, onTmpfs ledger.Store, sql [3]*statementClock)

// memoryLedgers: memory stores, on's and on-tmpfs's keeping their trails.
func memoryLedgers(b *testing.B) (off, metrics, on, onTmpfs ledger.Store, sql [3]*statementClock) {
	trail := func(dir string) ledger.Store {
		f, err := audit.OpenFile(filepath.Join(dir, "audit.jsonl"), audit.FileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return ledger.NewMemory(ledger.MemoryOptions{Audit: f})
	}
	on = trail(b.TempDir())
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "mcp-confirm-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		onTmpfs = trail(dir)
	}
	return ledger.NewMemory(ledger.MemoryOptions{}), ledger.NewMemory(ledger.MemoryOptions{}), on, onTmpfs, sql
}

// postgresLedgers: PostgreSQL stores in fresh namespaces of a table of
// the benchmark's own (dropped after it: the test server runs without
// autovacuum, and on a shared table's dead rows the statements' plans and
// times drift from run to run), each on a pool of its own whose
// statements a statementClock times, on's keeping its trail.
func postgresLedgers(b *testing.B) (off, metrics, on, onTmpfs ledger.Store, sql [3]*statementClock) {
	u := os.Getenv("MCP_CONFIRM_POSTGRES_URL")
	if u == "" {
		b.Skip("set MCP_CONFIRM_POSTGRES_URL to run the PostgreSQL ledgers")
	}
	var r [8]byte
	rand.Read(r[:])
	table := "mcp_confirm_bench_" + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close(context.Background())
		var tables []string
		for _, suffix := range []string{"", "_audit", "_audit_head", "_audit_checkpoint"} {
			tables = append(tables, pgx.Identifier{table + suffix}.Sanitize())
		}
		if _, err := conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+strings.Join(tables, ", ")); err != nil {
			b.Error(err)
		}
	})
	open := func(audited bool, clock *statementClock) ledger.Store {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			b.Fatal(err)
		}
		cfg.ConnConfig.Tracer = clock
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		var r [8]byte
		rand.Read(r[:])
		s, err := pgledger.New(pool, pgledger.Options{Table: table, Namespace: "mcp-confirm-bench:" + hex.EncodeToString(r[:]), Audit: audited})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		if err := s.Migrate(context.Background()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	for i := range sql {
		sql[i] = new(statementClock)
	}
	return open(false, sql[0]), open(false, sql[1]), open(true, sql[2]), nil, sql
}

// statementClock adds up the wall-clock time of the statements and
// batches of the pool whose tracer it is, from the query's start to its
// last result read: the store's round trips, with the server's work and
// commits (the WAL's flush) and the waits for the CPU on both ends.
type statementClock struct{ total atomic.Int64 }

type statementStart struct{}

func (c *statementClock) start(ctx context.Context) context.Context {
	return context.WithValue(ctx, statementStart{}, time.Now())
}

func (c *statementClock) end(ctx context.Context) {
	if t0, ok := ctx.Value(statementStart{}).(time.Time); ok {
		c.total.Add(int64(time.Since(t0)))
	}
}

func (c *statementClock) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return c.start(ctx)
}
func (c *statementClock) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	c.end(ctx)
}
func (c *statementClock) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return c.start(ctx)
}
func (c *statementClock) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *statementClock) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	c.end(ctx)
}

func observabilityRatio(b *testing.B, stores ledgers) {
	var exported atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
	}))
	b.Cleanup(collector.Close)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	tp, err := observe.FromEnv(context.Background(), "bench", "bench")
	if err != nil || tp == nil {
		b.Fatalf("FromEnv: %v, %v", tp, err)
	}
	metrics, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		b.Fatal(err)
	}
	on, err := observe.New(observe.Options{Metrics: true, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	offStore, metricsStore, onStore, tmpfsStore, sql := stores(b)
	type server struct {
		name  string
		cs    *mcp.ClientSession
		calls []time.Duration
		sql   *statementClock // nil: not timed
		inSQL []time.Duration // per call, the time in the store's statements
		rest  []time.Duration // and the rest of the call
	}
	servers := []server{
		{name: "off", cs: benchClient(b, benchServer(b, confirm.Setup{Store: offStore})), sql: sql[0]},
		{name: "metrics", cs: benchClient(b, benchServer(b, confirm.Setup{Store: metricsStore, Telemetry: metrics})), sql: sql[1]},
		{name: "on", cs: benchClient(b, benchServer(b, confirm.Setup{Store: onStore, Telemetry: on})), sql: sql[2]},
	}
	if tmpfsStore != nil {
		servers = append(servers, server{name: "on-tmpfs", cs: benchClient(b, benchServer(b, confirm.Setup{Store: tmpfsStore, Telemetry: on}))})
	}
	parent, _, _ := newTraceparent()
	for range 100 { // first-use costs on no one's time
		for _, s := range servers {
			if err := benchCall(s.cs, parent); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A fresh random order each round: each server takes each place, and
	// follows each other one, about equally often. In a fixed rotation
	// each would always follow the same one — on-tmpfs the on server,
	// whose syncs leave the CPU idle for milliseconds (to the collector
	// and other processes), which made on-tmpfs/off anything from 0.65 to
	// 1.17 run to run — and the one after another's call would pay for
	// its garbage every time.
	rng := mrand.New(mrand.NewPCG(1, 2))
	order := make([]int, len(servers))
	for i := range order {
		order[i] = i
	}
	for b.Loop() {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			s := &servers[i]
			var sql0 int64
			if s.sql != nil {
				sql0 = s.sql.total.Load()
			}
			t0 := time.Now()
			if err := benchCall(s.cs, parent); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			s.calls = append(s.calls, d)
			if s.sql != nil {
				inSQL := time.Duration(s.sql.total.Load() - sql0)
				s.inSQL, s.rest = append(s.inSQL, inSQL), append(s.rest, d-inSQL)
			}
		}
	}
	b.StopTimer()
	if err := tp.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	if exported.Load() == 0 {
		b.Fatal("no span was exported")
	}
	median := make([]float64, len(servers))
	for i, s := range servers {
		slices.Sort(s.calls)
		median[i] = float64(s.calls[len(s.calls)/2])
		b.ReportMetric(median[i], s.name+"-ns/call")
		if s.sql != nil {
			slices.Sort(s.inSQL)
			slices.Sort(s.rest)
			b.ReportMetric(float64(s.inSQL[len(s.inSQL)/2]), s.name+"-sql-ns/call")
			b.ReportMetric(float64(s.rest[len(s.rest)/2]), s.name+"-rest-ns/call")
		}
	}
	b.ReportMetric(median[2]/median[0], "on/off")
	b.ReportMetric(median[1]/median[0], "metrics/off")
	if len(servers) > 3 {
		b.ReportMetric(median[3]/median[0], "on-tmpfs/off")
	}
}
