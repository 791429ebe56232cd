package serve_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
)

// Which events go-sdk writes are answers, whose flush the front door holds
// until the response ends: responses, with a number or a string id; never
// a request or notification (an elicitation or progress during a call),
// however its id is spelt, nor anything else.
func TestIsAnswerEvent(t *testing.T) {
	for _, tt := range []struct {
		name  string
		event string
		want  bool
	}{
		{"result", "event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", true},
		{"error", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-1}}\n\n", true},
		{"string id", "event: message\nid: s_2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"a\\\",\\\"result\",\"result\":{}}\n\n", true},
		{"request", "event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{}}\n\n", false},
		{"request, id spelt like a result", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"x\\\",\\\"result\\\":\",\"method\":\"elicitation/create\"}\n\n", false},
		{"notification", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n", false},
		{"priming event", "event: prime\nid: s_1\ndata: \n\n", false},
		{"unterminated string id", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"abc", false},
		{"number id, nothing after", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":12", false},
		{"JSON body", "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", false},
		{"empty", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := serve.IsAnswerEvent([]byte(tt.event)); got != tt.want {
				t.Errorf("isAnswerEvent(%q) = %v, want %v", tt.event, got, tt.want)
			}
		})
	}
}

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// The answer to a call and the end of its response leave in one write
// (one system call, one packet), in both eras: so a client that reads the
// event stream up to the answer and closes the body, as many do, finds
// the end already there and keeps its connection. The control is go-sdk's
// handler alone, which flushes the answer first and ends the response in
// a second write (the client must then dial again when it closes before
// the end arrived).
func TestHTTPAnswerEndsResponse(t *testing.T) {
	server := func() *mcp.Server {
		s := newServer()
		s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		return s
	}
	listen := func(t *testing.T, h http.Handler) (string, *atomic.Int64) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		writes := &atomic.Int64{}
		hs := &http.Server{Handler: h}
		go hs.Serve(countingListener{ln, writes})
		t.Cleanup(func() { hs.Close() })
		return "http://" + ln.Addr().String(), writes
	}
	const calls = 20
	// run returns the writes per call.
	run := func(t *testing.T, url string, writes *atomic.Int64, era string) float64 {
		c := &http.Client{Transport: &http.Transport{}}
		session := ""
		if era < requeststate.ProtocolMRTR {
			session = initialize(t, c, url)
		}
		var total int64
		for i := range calls {
			body := `{"jsonrpc":"2.0","id":` + string(rune('1'+i%9)) + `,"method":"tools/call","params":{"name":"echo","arguments":{}`
			if era >= requeststate.ProtocolMRTR {
				body += `,` + mrtrMeta
			}
			body += `}}`
			before := writes.Load()
			resp := post(t, c, url, era, session, body)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("call %d: %s %s: %s", i, resp.Status, ct, b)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Contains(b, []byte(`"text":"ok"`)) {
				t.Fatalf("call %d: no answer (%q, %v)", i, b, err)
			}
			total += writes.Load() - before
		}
		return float64(total) / calls
	}
	for _, era := range []string{"2025-11-25", requeststate.ProtocolMRTR} {
		t.Run(era, func(t *testing.T) {
			h, err := serve.NewHTTP(server(), serve.HTTPOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			url, writes := listen(t, h)
			if n := run(t, url, writes, era); n != 1 {
				t.Errorf("%.2f writes per call, want 1", n)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		url, writes := listen(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server() }, nil))
		if n := run(t, url, writes, "2025-11-25"); n != 2 {
			t.Errorf("go-sdk's handler alone: %.2f writes per call; the control expects 2", n)
		}
	})
}
