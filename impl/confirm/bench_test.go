package confirm_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// The two benchmarks below make the same two-round call — tools/call,
// input_required with one form elicitation, the client's answer, tools/call
// again with the answer and the echoed requestState, the result — through a
// real go-sdk client and server over the in-memory transport. The client's
// own multi round-trip loop answers and retries. They differ only in what
// the server does:
//
//   - bare: a tool that asks and then returns. Its requestState is
//     plaintext and trusted; nothing is recorded, nothing is sanitized.
//   - confirmed: the same tool through the full mcp-confirm stack: the
//     requestState boundary as receiving middleware (seal on the way out,
//     open and check on the way back), confirm.Flow with a ledger over the
//     in-memory store (issue, then redeem), and the path in the question
//     passed through prompt.Value. The action itself is stubbed (no file
//     I/O), as in bare.
//
// Both ask the same question about the same path and return results of the
// same shape, so the difference is what safety costs.

const (
	protocolMRTR = "2026-07-28"
	toolName     = "delete_file"
	benchPath    = "/srv/data/reports/2026/q3-summary.pdf"
	// subject stands for the file identity delete_file records.
	subject = `{"dev":2049,"ino":1234567,"mode":420,"mtime_ns":1780000000123456789,"size":48213}`
)

type pathInput struct {
	Path string `json:"path" jsonschema:"absolute path of the file to delete"`
}

func question(shownPath string) string {
	return fmt.Sprintf("Delete the file %s (48213 bytes)? This cannot be undone.", shownPath)
}

func done(shownPath string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Deleted " + shownPath + "."}}}
}

func newServer() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{
		Logger: slog.New(slog.DiscardHandler),
	})
}

// bareServer asks once and returns; its requestState is a plaintext id of
// the same length as confirm.Flow's.
func bareServer(effects *atomic.Int64) *mcp.Server {
	s := newServer()
	var n atomic.Uint64
	mcp.AddTool(s, &mcp.Tool{Name: toolName}, func(_ context.Context, req *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == "" {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{confirm.InputID: &mcp.ElicitParams{
					Mode:            "form",
					Message:         question(in.Path),
					RequestedSchema: confirm.RequestedSchema(),
				}},
				RequestState: fmt.Sprintf("confirm.v1.%032x", n.Add(1)),
			}, nil, nil
		}
		effects.Add(1)
		return done(in.Path), nil, nil
	})
	return s
}

// boundaryServer is bareServer behind the requestState boundary alone:
// the state is sealed and verified, nothing is recorded or sanitized.
func boundaryServer(tb testing.TB) *mcp.Server {
	s := bareServer(new(atomic.Int64))
	s.AddReceivingMiddleware(newBoundary(tb).Middleware())
	return s
}

func newBoundary(tb testing.TB) *requeststate.Boundary {
	tb.Helper()
	b, err := requeststate.New(requeststate.Options{
		Keys:     [][]byte{[]byte("0123456789abcdef0123456789abcdef-bench-key")},
		Audience: "bench",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// confirmedServer runs the same tool through the boundary, confirm.Flow, a
// ledger over the in-memory store, and prompt.Value.
func confirmedServer(tb testing.TB, effects *atomic.Int64) (*mcp.Server, *ledger.Memory) {
	tb.Helper()
	discard := slog.New(slog.DiscardHandler)
	boundary := newBoundary(tb)
	store := ledger.NewMemory(ledger.MemoryOptions{})
	l, err := ledger.New(store, ledger.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	flow, err := confirm.New(confirm.Options{Ledger: l, Logger: discard})
	if err != nil {
		tb.Fatal(err)
	}
	s := newServer()
	s.AddReceivingMiddleware(boundary.Middleware())
	mcp.AddTool(s, &mcp.Tool{Name: toolName}, func(ctx context.Context, req *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
		res, err := flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) {
				return confirm.Question{Message: question(prompt.Value(in.Path, prompt.Options{})), Subject: subject}, nil
			},
			Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
				effects.Add(1)
				return done(prompt.Value(in.Path, prompt.Options{})), nil // the effect, stubbed
			},
		})
		return res, nil, err
	})
	return s, store
}

// accept answers every question with an explicit yes, and counts them.
type accept struct{ asked atomic.Int64 }

func (a *accept) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.asked.Add(1)
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

// connect starts a real go-sdk client session to s over the in-memory
// transport, speaking 2026-07-28 so that the client retries (MRTR).
func connect(tb testing.TB, s *mcp.Server, a *accept) *mcp.ClientSession {
	tb.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: a.handle})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocolMRTR})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// call makes the two-round call and checks it ended in the stubbed effect.
func call(cs *mcp.ClientSession) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      toolName,
		Arguments: map[string]any{"path": benchPath},
	})
	if err != nil {
		return err
	}
	if res.IsError || res.NeedsInput() || len(res.Content) != 1 {
		return fmt.Errorf("call did not complete: %+v", res)
	}
	if t, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.HasPrefix(t.Text, "Deleted ") {
		return fmt.Errorf("unexpected result %+v", res.Content[0])
	}
	return nil
}

// cpuNanos returns the CPU time the process has used (user and system, all
// threads: client, server and garbage collector). On a machine shared with
// other jobs wall-clock ns/op grows with the load; CPU time per op does
// not, so the benchmarks report both.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// numGC returns how many garbage collections the process has completed:
// the call benchmarks report collections per call (gcs/op), since the
// collector's share of a call is most of what moves it from run to run.
func numGC() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

// warmup is how many untimed calls runCalls makes first, so that the
// process's first-use costs (go-sdk's schema and JSON caches, the heap's
// growth) fall on neither benchmark, rather than on whichever runs first.
const warmup = 100

func runCalls(b *testing.B, cs *mcp.ClientSession, a *accept) {
	for range warmup {
		if err := call(cs); err != nil {
			b.Fatal(err)
		}
	}
	// Start from a collected heap: the garbage an earlier benchmark left
	// is not collected on this one's time.
	runtime.GC()
	gcs := numGC()
	start := cpuNanos()
	for b.Loop() {
		if err := call(cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(numGC()-gcs)/float64(b.N), "gcs/op")
	if got := a.asked.Load(); got != int64(warmup+b.N) {
		b.Fatalf("the client answered %d questions in %d calls", got, warmup+b.N)
	}
}

// BenchmarkCallBare: one two-round MRTR tools/call, no boundary, no
// ledger, no sanitizer.
func BenchmarkCallBare(b *testing.B) {
	a := &accept{}
	cs := connect(b, bareServer(new(atomic.Int64)), a)
	runCalls(b, cs, a)
}

// BenchmarkCallConfirmed: the same call through the boundary, the flow,
// the in-memory ledger and the sanitizer.
func BenchmarkCallConfirmed(b *testing.B) {
	a := &accept{}
	s, store := confirmedServer(b, new(atomic.Int64))
	cs := connect(b, s, a)
	runCalls(b, cs, a)
	// Every call issued and redeemed one confirmation.
	if remembered, pending := store.Len(); remembered != warmup+b.N || pending != 0 {
		b.Fatalf("store remembers %d (%d pending) after %d calls, want %d (0)", remembered, pending, warmup+b.N, warmup+b.N)
	}
}

// BenchmarkCallRatio alternates three calls in one loop — bare, bare
// behind the requestState boundary only, and confirmed — so that all see
// the same machine load, and reports each one's wall-clock time per call
// and the ratios to bare (the target for confirmed/bare is at most 1.15).
func BenchmarkCallRatio(b *testing.B) {
	servers := []struct {
		name string
		cs   *mcp.ClientSession
		took time.Duration
	}{
		{name: "bare", cs: connect(b, bareServer(new(atomic.Int64)), &accept{})},
		{name: "boundary", cs: connect(b, boundaryServer(b), &accept{})},
		{name: "confirmed", cs: connect(b, func() *mcp.Server { s, _ := confirmedServer(b, new(atomic.Int64)); return s }(), &accept{})},
	}
	for b.Loop() {
		for i := range servers {
			t0 := time.Now()
			if err := call(servers[i].cs); err != nil {
				b.Fatal(err)
			}
			servers[i].took += time.Since(t0)
		}
	}
	for _, s := range servers {
		b.ReportMetric(float64(s.took.Nanoseconds())/float64(b.N), s.name+"-ns/call")
	}
	for _, s := range servers[1:] {
		b.ReportMetric(float64(s.took)/float64(servers[0].took), s.name+"/bare")
	}
}

// TestCallBareAndConfirmed runs each benchmark's call once, so a broken
// setup fails in an ordinary test run, and checks what the extra cost
// buys: a replayed approval runs the bare server's action again, while the
// confirmed server runs it once and answers the replay with the recorded
// result, marked as the earlier execution's.
func TestCallBareAndConfirmed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		server  func(effects *atomic.Int64) *mcp.Server
		effects int64 // after the call and a replayed retry
	}{
		{"bare", bareServer, 3},
		{"confirmed", func(effects *atomic.Int64) *mcp.Server { s, _ := confirmedServer(t, effects); return s }, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &accept{}
			var effects atomic.Int64
			s := tt.server(&effects)
			if err := call(connect(t, s, a)); err != nil {
				t.Fatal(err)
			}
			// By hand: first round, then the same approved retry twice.
			manual := mcp.NewClient(&mcp.Implementation{Name: "manual", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: a.handle,
				MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
			})
			ct, st := mcp.NewInMemoryTransports()
			ss, err := s.Connect(t.Context(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Close()
			cs, err := manual.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: protocolMRTR})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			args := map[string]any{"path": benchPath}
			first, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: toolName, Arguments: args})
			if err != nil || !first.NeedsInput() {
				t.Fatalf("first round: %v, %+v", err, first)
			}
			retry := &mcp.CallToolParams{
				Name: toolName, Arguments: args, RequestState: first.RequestState,
				InputResponses: mcp.InputResponseMap{confirm.InputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}},
			}
			var texts []string
			for i := range 2 {
				res, err := cs.CallTool(t.Context(), retry)
				if err != nil || res.IsError {
					t.Fatalf("retry %d: err=%v res=%+v; want success", i+1, err, res)
				}
				var b strings.Builder
				for _, c := range res.Content {
					b.WriteString(c.(*mcp.TextContent).Text)
				}
				texts = append(texts, b.String())
			}
			if n := effects.Load(); n != tt.effects {
				t.Fatalf("the action ran %d times, want %d", n, tt.effects)
			}
			if marked := strings.Contains(texts[1], "earlier execution"); marked != (tt.name == "confirmed") || !strings.Contains(texts[1], texts[0]) {
				t.Fatalf("the replay answered %q after %q", texts[1], texts[0])
			}
		})
	}
}
