package proxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
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

// BenchmarkProxyTools makes, call by call in one loop, the confirmed write
// of BenchmarkProxyRatio through two proxies, one in front of an upstream
// with 2 tools and one in front of an upstream with 1,002 (the same two
// and 1,000 more with a small schema each), both declaring
// tools.listChanged, and the same call direct to the first upstream. It
// reports confirmed-1002/confirmed-2 (what the upstream's tool count costs
// a confirmed call: the proxy answers both from its cache of definitions)
// and confirmed/direct at 2 tools.
func BenchmarkProxyTools(b *testing.B) {
	u2 := newUpstream(b, eraMRTR)
	u2.server.RemoveTools("delete")
	u1002 := newUpstream(b, eraMRTR)
	u1002.server.RemoveTools("delete")
	for i := range 1000 {
		mcp.AddTool(u1002.server, &mcp.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: "Reads one file and returns what it holds."},
			func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
	}
	direct := benchClient(b, u2.server)
	confirmed2 := benchClient(b, newEnv(b, envOptions{up: u2, policy: "ask = [\"write\"]", quiet: true}).proxy.MCP())
	confirmed1002 := benchClient(b, newEnv(b, envOptions{up: u1002, policy: "ask = [\"write\"]", quiet: true}).proxy.MCP())
	calls := []struct {
		name string
		cs   *mcp.ClientSession
		took time.Duration
	}{{"direct", direct, 0}, {"confirmed-2", confirmed2, 0}, {"confirmed-1002", confirmed1002, 0}}
	for b.Loop() {
		for i := range calls {
			t0 := time.Now()
			benchCall(b, calls[i].cs, "write")
			calls[i].took += time.Since(t0)
		}
	}
	for _, c := range calls {
		b.ReportMetric(float64(c.took.Nanoseconds())/float64(b.N), c.name+"-ns/call")
	}
	b.ReportMetric(float64(calls[2].took)/float64(calls[1].took), "confirmed-1002/confirmed-2")
	b.ReportMetric(float64(calls[1].took)/float64(calls[0].took), "confirmed/direct")
}

// argumentText returns about n bytes of text to write: prose in ASCII, or
// words of eight scripts (Latin, Cyrillic, Greek, Han, Hiragana, Arabic,
// Hebrew, Devanagari with its vowel signs and virama), one script a word,
// so that no warning ends the scan early. Neither holds a line break.
func argumentText(n int, mixed bool) string {
	line := "The quick brown fox jumps over the lazy dog; 0123456789 times. "
	if mixed {
		line = "Отчёт résumé Ελληνικά 中文文本 ひらがな العربية עברית हिन्दी "
	}
	return strings.Repeat(line, n/len(line)+1)[:n-len(line)] + line
}

// BenchmarkProxyArgumentSize measures the question for a write of 1 MiB of
// content, in ASCII and in mixed scripts: what the proxy does to ask about
// those bytes — canonicalize and digest the arguments (the boundary, once
// per round) and write the question (the gate: split the arguments, show
// each key and value through package prompt, with the value's warnings,
// size and digest, and check them against the tool's input schema). It reports question-1MiB-ms (wall clock), beside
// question-1MiB-cpu-ms (the CPU time of the thread that did it, which a
// loaded machine inflates less), and round-1MiB-ms: the whole first round
// through a go-sdk client and the proxy, in memory.
func BenchmarkProxyArgumentSize(b *testing.B) {
	for _, tt := range []struct {
		name  string
		mixed bool
	}{{"ascii", false}, {"mixed-scripts", true}} {
		b.Run(tt.name, func(b *testing.B) {
			content := argumentText(1<<20, tt.mixed)
			raw, err := json.Marshal(map[string]string{"path": "/tmp/report-2026/drafts/final.txt", "content": content})
			if err != nil {
				b.Fatal(err)
			}
			e := newEnv(b, envOptions{policy: "ask = [\"write\"]", quiet: true})
			cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
			tools, err := benchClient(b, e.up.server).ListTools(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			var def *mcp.Tool
			for _, t := range tools.Tools {
				if t.Name == "write" {
					def = t
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var question, cpu, round time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), threadCPU(b)
				canon, err := requeststate.CanonicalArguments(raw)
				if err != nil {
					b.Fatal(err)
				}
				sha256.Sum256(canon)
				q, err := e.proxy.QuestionFor(def, canon)
				if err != nil || !strings.Contains(q, "shortened: 1048576 bytes") {
					b.Fatalf("question: %v\n%s", err, q)
				}
				question += time.Since(t0)
				cpu += threadCPU(b) - c0
				t0 = time.Now()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: json.RawMessage(raw)})
				if err != nil || !res.NeedsInput() {
					b.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
				}
				round += time.Since(t0)
			}
			b.ReportMetric(question.Seconds()*1000/float64(b.N), "question-1MiB-ms")
			b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "question-1MiB-cpu-ms")
			b.ReportMetric(round.Seconds()*1000/float64(b.N), "round-1MiB-ms")
		})
	}
}

// threadCPU returns the CPU time the calling thread has used (lock it to
// its goroutine first).
func threadCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
