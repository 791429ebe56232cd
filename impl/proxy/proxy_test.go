package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// A confirmed call, in every pairing of protocol eras (client ↔ proxy ↔
// upstream) and over both downstream transports: asked once, forwarded
// once, the upstream's result returned.
func TestProxyConfirmedCall(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			for _, transport := range []string{inMemory, httpT} {
				t.Run("client "+down+"/upstream "+up+"/"+transport, func(t *testing.T) {
					e := newEnv(t, envOptions{upstreamEra: up})
					a := mcptest.Accept()
					cs := e.connect(clientOptions{era: down, answer: a, transport: transport})
					res, err := write(cs, "/tmp/a.txt", "hello")
					wantResult(t, res, err, "wrote /tmp/a.txt")
					e.up.wantCalls(t, "write", 1)
					if got := e.up.lastSS.Load().InitializeParams().ProtocolVersion; got != up {
						t.Fatalf("the proxy speaks %s to the upstream, want %s", got, up)
					}
					q := a.Questions()
					if len(q) != 1 {
						t.Fatalf("asked %d times, want once: %q", len(q), q)
					}
					t.Logf("question:\n%s", q[0])
					for _, want := range []string{"write", "files", "path", "/tmp/a.txt", "content", "hello"} {
						if !strings.Contains(visible(q[0]), want) {
							t.Errorf("question %q does not mention %q", q[0], want)
						}
					}
				})
			}
		}
	}
}

// An allowed tool passes through unchanged: no question, one call.
func TestProxyAllowedPassThrough(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			a := mcptest.Accept()
			cs := e.connect(clientOptions{era: down, answer: a})
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "/tmp/x"}})
			wantResult(t, res, err, "contents of /tmp/x")
			e.up.wantCalls(t, "read", 1)
			if q := a.Questions(); len(q) != 0 || e.issued() != 0 {
				t.Fatalf("an allowed call was asked: %q, %d issued", q, e.issued())
			}
		})
	}
}

// A 2026-07-28 client requires resultType on every tools/call result; go-sdk
// writes it only for its own handlers, so the proxy must. (The TypeScript
// client rejects a result without it; the go-sdk client does not check.)
// Results carry the proxy's serverInfo, not the upstream's.
func TestProxyResultTypeOnTheWire(t *testing.T) {
	e := newEnv(t, envOptions{upstreamEra: eraLegacy})
	hs := httptest.NewServer(e.handler())
	t.Cleanup(hs.Close)
	post := func(method, name, params string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
		req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", eraMRTR)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		res, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	for _, tc := range []struct{ method, name, params, want string }{
		{"tools/call", "read", `{"name":"read","arguments":{"path":"/x"},` + meta + `}`, `"resultType":"complete"`},
		{"tools/call", "write", `{"name":"write","arguments":{"path":"/x","content":"y"},` + meta + `}`, `"resultType":"input_required"`},
		{"tools/call", "delete", `{"name":"delete","arguments":{"path":"/x"},` + meta + `}`, `"resultType":"complete"`},
		{"tools/list", "", `{` + meta + `}`, `"io.modelcontextprotocol/serverInfo":{"name":"mcp-confirm-proxy"`},
	} {
		if got := post(tc.method, tc.name, tc.params); !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: response lacks %s:\n%s", tc.method, tc.params, tc.want, got)
		}
	}
}

// An upstream reached over streamable HTTP (--upstream URL) works like one
// over stdio: a confirmed call, asked once and forwarded once, in both
// eras on both sides.
func TestProxyUpstreamOverHTTP(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			t.Run("client "+down+"/upstream "+up, func(t *testing.T) {
				u := newUpstream(t, up)
				handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)
				if up == eraMRTR {
					handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, &mcp.StreamableHTTPOptions{Stateless: true})
				}
				hs := httptest.NewServer(handler)
				t.Cleanup(hs.Close)
				pol, _ := proxy.ParsePolicy(strings.NewReader(testPolicy))
				p, err := proxy.New(t.Context(), proxy.Options{
					Connect: func(context.Context) (mcp.Transport, error) {
						return &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hs.Client()}, nil
					},
					Policy: pol,
					Setup:  confirm.Setup{Logger: slog.New(slog.DiscardHandler)},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				e := &env{t: t, up: u, proxy: p, log: &mcptest.SyncBuffer{}}
				a := mcptest.Accept()
				cs := e.connect(clientOptions{era: down, answer: a})
				res, err := write(cs, "/tmp/a.txt", "x")
				wantResult(t, res, err, "wrote /tmp/a.txt")
				u.wantCalls(t, "write", 1)
				if len(a.Questions()) != 1 {
					t.Fatalf("asked %d times", len(a.Questions()))
				}
			})
		}
	}
}

// Each older-era session holds an upstream connection (a process, for a
// command upstream): beyond MaxSessions, initialize is refused with a
// clear error and nothing is started; when a session ends, its connection
// closes and the slot is free again. 2026-07-28 clients share one
// connection and are not counted.
func TestProxySessionCap(t *testing.T) {
	e := newEnv(t, envOptions{maxSessions: 1})
	first := e.connect(clientOptions{era: eraLegacy, answer: mcptest.Accept()})
	before := e.up.sessions.Load()

	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.proxy.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "second", Version: "1"}, nil)
	if _, err := client.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: eraLegacy}); err == nil || !strings.Contains(err.Error(), "too many sessions") {
		t.Fatalf("a second session past the cap: err=%v, want \"too many sessions\"", err)
	}
	if got := e.up.sessions.Load(); got != before {
		t.Fatalf("the refused session opened %d upstream connections", got-before)
	}
	modern := e.connect(clientOptions{era: eraMRTR, answer: mcptest.Accept()})
	res, err := write(modern, "/tmp/a.txt", "x")
	wantResult(t, res, err, "wrote")

	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		third := mcp.NewClient(&mcp.Implementation{Name: "third", Version: "1"}, nil)
		ct, st := mcp.NewInMemoryTransports()
		ss, err := e.proxy.MCP().Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := third.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: eraLegacy})
		if err == nil {
			cs.Close()
			ss.Close()
			break
		}
		ss.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the slot of a closed session was never freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
