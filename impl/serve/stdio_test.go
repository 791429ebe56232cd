package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// wire is one JSON-RPC message as read back from the server.
type wire struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// stdioPeer is the client end of a server run by run over pipes.
type stdioPeer struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func startStdio(t *testing.T, run func(ctx context.Context, in io.Reader, out io.Writer) error) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &stdioPeer{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	p.out.Buffer(nil, 1<<20)
	go func() {
		err := run(ctx, inR, outW)
		outW.CloseWithError(io.EOF)
		p.done <- err
	}()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close() })
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("write %.40q: %v", line, err)
	}
}

// next reads the server's next message, or fails after a few seconds.
func (p *stdioPeer) next() (wire, bool) {
	p.t.Helper()
	got := make(chan bool, 1)
	go func() { got <- p.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			return wire{}, false
		}
	case <-time.After(5 * time.Second):
		p.t.Fatal("no reply within 5s")
	}
	var w wire
	if err := json.Unmarshal(p.out.Bytes(), &w); err != nil {
		p.t.Fatalf("reply %q is not JSON: %v", p.out.Bytes(), err)
	}
	return w, true
}

// initialize opens an older-era session.
func (p *stdioPeer) initialize() {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if w, ok := p.next(); !ok || w.Error != nil || string(w.ID) != `"init"` {
		p.t.Fatalf("initialize: %+v", w)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// ping sends a ping with id n and wants its result.
func (p *stdioPeer) ping(n int) {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, n))
	w, ok := p.next()
	if !ok {
		p.t.Fatalf("ping %d: the server hung up", n)
	}
	if w.Error != nil || string(w.ID) != fmt.Sprint(n) || w.Result == nil {
		p.t.Fatalf("ping %d: got %+v", n, w)
	}
}

const testMax = 1024

// badLines are lines a stdio server must refuse, and the code each gets.
var badLines = []struct {
	name string
	line string
	code int
}{
	{"not JSON", `hello`, -32700},
	{"truncated", `{"jsonrpc":"2.0","id":1,`, -32700},
	{"two values", `{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}`, -32700},
	{"missing jsonrpc", `{"id":1,"method":"ping"}`, -32600},
	{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
	{"jsonrpc a number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, -32600},
	{"jsonrpc in capitals", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, -32600},
	{"empty batch", `[]`, -32600},
	{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600},
	{"number", `42`, -32600},
	{"null", `null`, -32600},
	{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600},
	{"neither request nor response", `{"jsonrpc":"2.0"}`, -32600},
	{"over the limit", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("s3cret", testMax/6) + `"}}}`, -32600},
	{"far over the buffer", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("s3cret", 200_000) + `"}}}`, -32600},
}

// Every malformed line gets its JSON-RPC error with id null, its content
// never reaches the log, and the next ping is answered.
func TestStdioSurvivesBadLines(t *testing.T) {
	var log mcptest.SyncBuffer
	p := startStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		return serve.Stdio(ctx, s, in, out, serve.StdioOptions{MaxMessageBytes: testMax, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	})
	p.initialize()
	for i, tt := range badLines {
		t.Run(tt.name, func(t *testing.T) {
			p.t = t
			p.send(tt.line)
			w, ok := p.next()
			if !ok {
				t.Fatal("the server hung up")
			}
			if w.Error == nil || w.Error.Code != tt.code || string(w.ID) != "null" || w.JSONRPC != "2.0" {
				t.Fatalf("got %+v (id %s), want error %d with id null", w, w.ID, tt.code)
			}
			p.ping(100 + i)
		})
	}
	p.t = t
	// Blank lines and CRLF endings are not errors.
	p.send("")
	p.send("   ")
	p.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\r")
	if w, _ := p.next(); string(w.ID) != "7" || w.Error != nil {
		t.Fatalf("CRLF ping: %+v", w)
	}
	// A line of exactly the limit is served.
	ping := `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"_meta":{"pad":"`
	ping += strings.Repeat("x", testMax-len(ping)-len(`"}}}`)) + `"}}}`
	p.send(ping)
	if w, _ := p.next(); string(w.ID) != "8" || w.Error != nil {
		t.Fatalf("ping of exactly %d bytes: %+v", len(ping), w)
	}
	if strings.Contains(log.String(), "s3cret") || strings.Contains(log.String(), "hello") {
		t.Fatalf("a refused line reached the log:\n%s", log.String())
	}
	if n := strings.Count(log.String(), "refused a malformed line"); n != len(badLines) {
		t.Fatalf("logged %d refusals, want %d:\n%s", n, len(badLines), log.String())
	}
	// End of input ends the session cleanly.
	p.in.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("Stdio returned %v at end of input", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stdio did not return at end of input")
	}
}

// Negative control: after each of the lines above but the over-long ones
// (its own limit is 16 MiB), go-sdk's own IOTransport answers no further
// ping — it ends the session, or waits for the rest of a truncated value —
// which is why Stdio checks lines first.
func TestStdioControlGoSDKEndsSession(t *testing.T) {
	for _, tt := range badLines {
		if strings.HasPrefix(tt.name, "over") || strings.HasPrefix(tt.name, "far") {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			p := startStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
				s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
				return s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopCloser{out}})
			})
			p.initialize()
			// The server may stop reading: write without waiting.
			go io.WriteString(p.in, tt.line+"\n"+`{"jsonrpc":"2.0","id":99,"method":"ping"}`+"\n")
			replies := make(chan string)
			go func() {
				for p.out.Scan() {
					replies <- p.out.Text()
				}
				close(replies)
			}()
			timeout := time.After(2 * time.Second)
			for {
				select {
				case r, ok := <-replies:
					if !ok {
						return // session ended
					}
					if strings.Contains(r, `"id":99`) {
						t.Fatalf("go-sdk's IOTransport answered the next ping (%s): the control no longer shows why Stdio is needed", r)
					}
				case <-timeout:
					return // no answer
				}
			}
		})
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
