package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// benchClient connects a 2026-07-28 go-sdk client that answers every
// question yes to s over an in-memory transport.
func benchClient(tb testing.TB, s *mcp.Server) *mcp.ClientSession {
	tb.Helper()
	a := mcptest.Accept()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: a.Action, Content: map[string]any{"confirm": true}}, nil
	}})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ss.Close() })
	cs, err := client.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: eraMRTR})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// benchCall makes one call and fails on anything but the upstream's result.
func benchCall(tb testing.TB, cs *mcp.ClientSession, tool string) {
	args := map[string]any{"path": "/tmp/report-2026/drafts/final.pdf"}
	if tool == "write" {
		args["content"] = "the quarterly numbers"
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError || res.NeedsInput() {
		tb.Fatalf("%s: err=%v res=%s", tool, err, mcptest.Describe(res))
	}
}

// BenchmarkProxyRatio makes, call by call in one loop, the same tools/call
// three ways against one in-process go-sdk upstream (in-memory transports,
// 2026-07-28 on both sides): direct to the upstream; through the proxy as
// an allowed (pass-through) call; and through the proxy as a confirmed call
// (two rounds with the client answering yes; the proxy reads the tool's
// definition when asking and again before forwarding, issues and redeems
// in the in-memory ledger, seals and opens the state). It reports each
// call's time and the two ratios to the direct call.
func BenchmarkProxyRatio(b *testing.B) {
	u := newUpstream(b, eraMRTR)
	direct := benchClient(b, u.server)
	allowed := benchClient(b, newEnv(b, envOptions{up: u, policy: "allow = [\"read\"]", quiet: true}).proxy.MCP())
	confirmed := benchClient(b, newEnv(b, envOptions{up: u, policy: "ask = [\"write\"]", quiet: true}).proxy.MCP())
	calls := []struct {
		name string
		cs   *mcp.ClientSession
		tool string
		took time.Duration
	}{
		{"direct", direct, "read", 0},
		{"passthrough", allowed, "read", 0},
		{"direct-write", direct, "write", 0},
		{"confirmed", confirmed, "write", 0},
	}
	for b.Loop() {
		for i := range calls {
			t0 := time.Now()
			benchCall(b, calls[i].cs, calls[i].tool)
			calls[i].took += time.Since(t0)
		}
	}
	for _, c := range calls {
		b.ReportMetric(float64(c.took.Nanoseconds())/float64(b.N), c.name+"-ns/call")
	}
	b.ReportMetric(float64(calls[1].took)/float64(calls[0].took), "passthrough/direct")
	b.ReportMetric(float64(calls[3].took)/float64(calls[2].took), "confirmed/direct")
}

// TestProxyBenchCalls runs the benchmark's calls once, so a broken setup
// fails an ordinary test run, and checks what the confirmed call's cost
// buys: it is asked, and the upstream runs it once.
func TestProxyBenchCalls(t *testing.T) {
	u := newUpstream(t, eraMRTR)
	benchCall(t, benchClient(t, u.server), "write")
	e := newEnv(t, envOptions{up: u, policy: "ask = [\"write\"]"})
	benchCall(t, benchClient(t, e.proxy.MCP()), "write")
	if e.issued() != 1 {
		t.Fatalf("the confirmed call issued %d confirmations, want 1", e.issued())
	}
	u.wantCalls(t, "write", 2)
	a := newEnv(t, envOptions{up: u, policy: "allow = [\"read\"]"})
	benchCall(t, benchClient(t, a.proxy.MCP()), "read")
	if a.issued() != 0 {
		t.Fatalf("the pass-through call issued %d confirmations", a.issued())
	}
}
