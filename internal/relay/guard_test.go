package relay_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// nullRequests is an older-era upstream, written line by line, whose
// every tools/call, prompts/get and resources/read result has a null input
// request: go-sdk v1.8.0's decoder dereferences it.
func nullRequests(line []byte) [][]byte {
	m, ok := mcptest.Decode(line)
	if !ok || !m.IsRequest() {
		return nil
	}
	switch m.Method {
	case "initialize":
		return [][]byte{m.Result(mcptest.InitializeResult)}
	case "tools/list":
		return [][]byte{m.Result(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)}
	case "tools/call":
		return [][]byte{m.Result(`{"content":[],"inputRequests":{"q":null}}`)}
	case "prompts/get":
		return [][]byte{m.Result(`{"messages":[],"inputRequests":{"ok":{"method":"roots/list"},"q":null}}`)}
	case "resources/read":
		return [][]byte{m.Result(`{"contents":[],"inputRequests":{"q":null}}`)}
	}
	return [][]byte{m.Error(jsonrpc.CodeMethodNotFound, "method not found")}
}

// nullRequestsHTTP serves nullRequests over streamable HTTP: each answer
// as a JSON body, or as a server-sent event whose data is split over two
// data lines (as the format allows; go-sdk joins them).
func nullRequestsHTTP(t *testing.T, sse bool) string {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		out := nullRequests(body)
		if len(out) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			w.Write(out[0])
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		data := "data: " + string(out[0])
		if first, rest, ok := strings.Cut(string(out[0]), `"result":`); ok {
			data = "data: " + first + "\ndata: \"result\":" + rest
		}
		io.WriteString(w, "event: message\r\n"+data+"\n\n")
	})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestRelayMalformedUpstreamResult: an upstream result with a null input
// request, which go-sdk's decoder dereferences, reaches the client as a
// JSON-RPC error, over stdio and streamable HTTP (JSON bodies, and events
// with split data); the relay lives on and serves the next request.
// (Without the guard the process dies.)
func TestRelayMalformedUpstreamResult(t *testing.T) {
	for _, up := range []string{"stdio", "http json", "http sse"} {
		for _, era := range eras {
			t.Run(up+"/"+era, func(t *testing.T) {
				connect := mcptest.Scripted(nullRequests)
				if up != "stdio" {
					url := nullRequestsHTTP(t, up == "http sse")
					connect = func(context.Context) (mcp.Transport, error) {
						return &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil
					}
				}
				e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
				cs := mcptest.Connect(t, e.relay.Server(), nil, mcptest.ClientOptions{Era: era})
				ctx := context.Background()
				for name, call := range map[string]func() error{
					"tools/call": func() error {
						_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
						return err
					},
					"prompts/get": func() error {
						_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p"})
						return err
					},
					"resources/read": func() error {
						_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///a"})
						return err
					},
				} {
					var werr *jsonrpc.Error
					if err := call(); !errors.As(err, &werr) || !strings.Contains(werr.Message, "an input request is null") {
						t.Fatalf("%s: %v, want the guard's JSON-RPC error", name, err)
					}
				}
				if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 1 {
					t.Fatalf("tools/list after: %v, %v", tools, err)
				}
			})
		}
	}
}

// TestRelayUpstreamMissingParams: requests and notifications an upstream
// sends without their params — elicitation/create, resources/updated,
// elicitation/complete, which go-sdk v1.8.0 lets through and then
// dereferences — are refused (a request: invalid params) or dropped (a
// notification) by the relay; the call they arrive within completes.
// An older-era client that declares elicitation, so that the upstream's
// connection declares it too.
func TestRelayUpstreamMissingParams(t *testing.T) {
	var mu sync.Mutex
	var answers []string
	script := func(line []byte) [][]byte {
		m, ok := mcptest.Decode(line)
		if !ok {
			return nil
		}
		if !m.IsRequest() {
			if len(m.ID) > 0 && strings.Contains(string(m.ID), "bare") {
				mu.Lock()
				answers = append(answers, string(line))
				mu.Unlock()
			}
			return nil
		}
		switch m.Method {
		case "initialize":
			return [][]byte{m.Result(mcptest.InitializeResult)}
		case "tools/list":
			return [][]byte{m.Result(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)}
		case "tools/call":
			return [][]byte{
				[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`),
				[]byte(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":null}`),
				[]byte(`{"jsonrpc":"2.0","method":"notifications/message"}`),
				[]byte(`{"jsonrpc":"2.0","id":"bare-elicit","method":"elicitation/create"}`),
				[]byte(`{"jsonrpc":"2.0","id":"bare-roots","method":"roots/list"}`),
				m.Result(`{"content":[{"type":"text","text":"called"}]}`),
			}
		}
		return [][]byte{m.Error(jsonrpc.CodeMethodNotFound, "method not found")}
	}
	e := newEnv(t, nil, func(o *relay.Options) { o.Connect = mcptest.Scripted(script) })
	cs := mcptest.Connect(t, e.relay.Server(), nil, mcptest.ClientOptions{Era: eraLegacy, Answer: mcptest.Accept()})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
	if err != nil || mcptest.Text(res) != "called" {
		t.Fatalf("the call: %v %s", err, mcptest.Describe(res))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got := slices.Clone(answers)
		mu.Unlock()
		if len(got) == 2 {
			for _, a := range got {
				if strings.Contains(a, "bare-elicit") && !strings.Contains(a, `"code":-32602`) {
					t.Fatalf("elicitation/create without params answered %s, want invalid params", a)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay answered %q, want both bare requests answered", got)
		}
	}
}

// TestRelayCloseWithCallInFlight: Close returns while an upstream that
// never answers holds a call (go-sdk's own Close waits for every call in
// flight: the relay ends them first), and the caller gets an error.
func TestRelayCloseWithCallInFlight(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			silent := func(line []byte) [][]byte {
				m, ok := mcptest.Decode(line)
				if !ok || !m.IsRequest() || m.Method == "tools/call" {
					return nil
				}
				return nullRequests(line)
			}
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = mcptest.Scripted(silent) })
			cs := mcptest.Connect(t, e.relay.Server(), nil, mcptest.ClientOptions{Era: era})
			called := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
				called <- err
			}()
			time.Sleep(100 * time.Millisecond) // the call reaches the upstream
			closed := make(chan struct{})
			go func() { e.relay.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return with a call in flight")
			}
			select {
			case err := <-called:
				if err == nil {
					t.Fatal("the call in flight succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call in flight did not end")
			}
		})
	}
}
