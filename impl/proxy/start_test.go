package proxy_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// unasked are the notifications an upstream may send at any time, even
// before it answers initialize.
func unasked() [][]byte {
	return [][]byte{
		[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///early"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"early"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"early","progress":1}}`),
	}
}

// earlyUpstream is a scripted upstream of the older era that sends every
// unasked notification before its initialize reply and again as soon as it
// is initialized, and whose one tool, echo, counts its calls.
func earlyUpstream(calls *atomic.Int32) mcptest.Script {
	return func(line []byte) [][]byte {
		m, ok := mcptest.Decode(line)
		if !ok {
			return nil
		}
		switch m.Method {
		case "server/discover":
			return [][]byte{m.Error(-32601, "method not found")}
		case "initialize":
			return append(unasked(), m.Result(mcptest.InitializeResult))
		case "notifications/initialized":
			return unasked()
		case "tools/list":
			return [][]byte{m.Result(`{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`)}
		case "tools/call":
			calls.Add(1)
			return [][]byte{m.Result(`{"content":[{"type":"text","text":"echoed"}]}`)}
		}
		if m.IsRequest() {
			return [][]byte{m.Error(-32601, "method not found")}
		}
		return nil
	}
}

// TestProxyListChangedDuringStart: an upstream that announces list changes
// (and sends every other unasked notification) while the proxy is still
// connecting to it does not crash the proxy, which starts, lists the
// upstream's tools and forwards an approved call; and the real
// @modelcontextprotocol/server-everything, which announces its tools as
// soon as it is initialized, runs behind the proxy over stdio and
// streamable HTTP, its features reaching the client. (The relay used to
// announce the change on a downstream server that did not exist yet.)
func TestProxyListChangedDuringStart(t *testing.T) {
	t.Run("scripted", func(t *testing.T) {
		for range 5 { // the notifications race the start: try it more than once
			var calls atomic.Int32
			log := &mcptest.SyncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			p, err := proxy.New(ctx, proxy.Options{
				Setup:   confirm.Setup{Keys: [][]byte{testKey}, Logger: slog.New(slog.NewTextHandler(log, nil))},
				Connect: mcptest.Scripted(earlyUpstream(&calls)),
			})
			cancel()
			if err != nil {
				t.Fatalf("proxy.New: %v\n%s", err, log.String())
			}
			t.Cleanup(func() { p.Close() })
			e := &env{t: t, proxy: p, log: log}
			for _, era := range eras {
				for _, transport := range []string{inMemory, httpT} {
					answer := mcptest.Accept()
					cs := e.connect(clientOptions{era: era, transport: transport, answer: answer})
					tools, err := cs.ListTools(context.Background(), nil)
					if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
						t.Fatalf("%s/%s: tools/list = %v, %v", era, transport, tools, err)
					}
					before := calls.Load()
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
					if err != nil || res.IsError || mcptest.Text(res) != "echoed" || calls.Load() != before+1 || len(answer.Questions()) != 1 {
						t.Fatalf("%s/%s: echo: err=%v res=%s, %d calls upstream, asked %q", era, transport, err, mcptest.Describe(res), calls.Load()-before, answer.Questions())
					}
				}
			}
			if strings.Contains(log.String(), "panic") {
				t.Fatalf("log:\n%s", log.String())
			}
		}
	})

	for _, upTransport := range []string{"stdio", "http"} {
		t.Run("server-everything/"+upTransport, func(t *testing.T) {
			connect := everythingServer(t, upTransport)
			for _, era := range eras {
				t.Run(era, func(t *testing.T) { everythingThroughProxy(t, connect, era) })
			}
		})
	}
}

// everythingServer starts the real @modelcontextprotocol/server-everything
// (the version pinned in .ci/clients/package.json) and returns the proxy's
// Options.Connect for it: a process per connection over stdio, or one
// process serving streamable HTTP. It skips saying what to set.
func everythingServer(t *testing.T, transport string) func(context.Context) (mcp.Transport, error) {
	t.Helper()
	nm := os.Getenv("MCP_CONFIRM_NODE_MODULES")
	if nm == "" {
		t.Skip("set MCP_CONFIRM_NODE_MODULES to a node_modules holding @modelcontextprotocol/server-everything (npm ci in .ci/clients)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("install node (>= 20) to run server-everything")
	}
	entry := filepath.Join(nm, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("MCP_CONFIRM_NODE_MODULES is set but has no server-everything: %v", err)
	}
	stderr := &mcptest.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server-everything's stderr:\n%s", stderr.String())
		}
	})
	if transport == "stdio" {
		return func(context.Context) (mcp.Transport, error) {
			cmd := exec.Command(node, entry, "stdio")
			cmd.Stderr = stderr
			return &mcp.CommandTransport{Command: cmd}, nil
		}
	}
	// A free port for it (it cannot report one it chose itself).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "listening on port"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen:\n%s", stderr.String())
		}
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	return func(context.Context) (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: url}, nil
	}
}

// everythingThroughProxy starts the proxy in front of server-everything and
// drives it with a go-sdk client of era over streamable HTTP: its tools
// are listed, an asked echo passes once approved; progress reaches the
// caller; for an older-era client, which declares elicitation and
// sampling, the server's own elicitation and sampling requests reach it.
func everythingThroughProxy(t *testing.T, connect func(context.Context) (mcp.Transport, error), era string) {
	log := &mcptest.SyncBuffer{}
	pol, err := proxy.ParsePolicy(strings.NewReader("name = \"everything\"\nallow = [\"trigger-long-running-operation\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	p, err := proxy.New(ctx, proxy.Options{
		Setup:   confirm.Setup{Keys: [][]byte{testKey}, Logger: slog.New(slog.NewTextHandler(log, nil))},
		Connect: connect,
		Policy:  pol,
	})
	cancel()
	if err != nil {
		t.Fatalf("proxy.New in front of server-everything: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { p.Close() })
	e := &env{t: t, proxy: p, log: log}

	var (
		mu        sync.Mutex
		upstreams []string // the upstream's own elicitation questions
		progress  []float64
	)
	proxyAsked := 0
	copts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(visible(req.Params.Message), "of «everything»") {
				proxyAsked++
				return mcptest.Yes(), nil
			}
			upstreams = append(upstreams, req.Params.Message)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	}
	if era == eraLegacy {
		//lint:ignore SA1019 sampling (deprecated by SEP-2577) is what server-everything asks of an older-era client
		copts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			//lint:ignore SA1019 sampling (deprecated by SEP-2577) is what server-everything asks of an older-era client
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the test client"}}, nil
		}
	}
	cs := e.connect(clientOptions{era: era, transport: httpT, copts: copts})

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, log.String())
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	want := []string{"echo", "get-sum", "trigger-long-running-operation"}
	if era == eraLegacy {
		want = append(want, "trigger-elicitation-request", "trigger-sampling-request")
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Fatalf("tools/list %v lacks %s", names, w)
		}
	}

	res, err := callTool(cs, "echo", map[string]any{"message": "through the proxy"})
	wantResult(t, res, err, "Echo: through the proxy")
	if proxyAsked != 1 {
		t.Fatalf("the proxy asked %d times for echo, want 1", proxyAsked)
	}

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{"progressToken": "p1"},
		Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.6, "steps": 3}})
	wantResult(t, res, err, "Long running operation completed")
	// The relay's progress is best effort: the last step's, sent just
	// before the result, may arrive after the caller's stream has ended.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := slices.Clone(progress)
		mu.Unlock()
		if len(got) >= 2 {
			if got[0] != 1 || got[1] != 2 {
				t.Fatalf("progress reaching the client: %v, want 1, 2 (and maybe 3)", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress reaching the client: %v, want 1, 2 (and maybe 3)", got)
		}
	}

	if era != eraLegacy {
		return
	}
	res, err = callTool(cs, "trigger-elicitation-request", map[string]any{})
	if err != nil || res.IsError {
		t.Fatalf("trigger-elicitation-request: err=%v res=%s", err, mcptest.Describe(res))
	}
	mu.Lock()
	got := slices.Clone(upstreams)
	mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], "Please provide inputs") {
		t.Fatalf("the upstream's elicitations reaching the client: %q", got)
	}
	res, err = callTool(cs, "trigger-sampling-request", map[string]any{"prompt": "say hi"})
	wantResult(t, res, err, "sampled by the test client")
}
