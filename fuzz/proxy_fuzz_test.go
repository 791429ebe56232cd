package fuzz

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// Limits of one input of FuzzProxyMessages.
const (
	fuzzMaxLines = 32               // client lines, and upstream lines, used
	fuzzLineMax  = 1 << 16          // the proxy's --max-message-bytes
	fuzzPatience = 10 * time.Second // for every answer, and for the proxy to stop
)

// fuzzHandshakes are the client's first lines, chosen by the input's mode:
// none, an older-era client that declares elicitation, sampling and roots,
// one that declares nothing, and a 2026-07-28 client's discovery.
var fuzzHandshakes = [][]string{
	nil,
	{`{"jsonrpc":"2.0","id":"h1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"fuzz","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`},
	{`{"jsonrpc":"2.0","id":"h1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`},
	{`{"jsonrpc":"2.0","id":"h1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"fuzz","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
}

// modern is the _meta a 2026-07-28 client puts on every request.
const modern = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"fuzz","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// fuzzUpstreamDefault is the well-formed reply of the scripted upstream to
// a request, after whatever the input made it send first: an older-era
// server with tools (write asked, read allowed, delete denied, peek
// marked read-only), prompts, resources and completions.
func fuzzUpstreamDefault(m mcptest.Incoming) []byte {
	switch m.Method {
	case "server/discover":
		return m.Error(-32601, "method not found")
	case "initialize":
		return m.Result(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"logging":{},"completions":{}},"serverInfo":{"name":"scripted","version":"1"},"instructions":"fuzz"}`)
	case "tools/list":
		return m.Result(`{"tools":[` +
			`{"name":"write","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}},` +
			`{"name":"read","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}},` +
			`{"name":"delete","inputSchema":{"type":"object"}},` +
			`{"name":"peek","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`)
	case "tools/call":
		return m.Result(`{"content":[{"type":"text","text":"done"}]}`)
	case "prompts/list":
		return m.Result(`{"prompts":[{"name":"p"}]}`)
	case "prompts/get":
		return m.Result(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`)
	case "resources/list":
		return m.Result(`{"resources":[{"uri":"file:///a","name":"a"}]}`)
	case "resources/templates/list":
		return m.Result(`{"resourceTemplates":[]}`)
	case "resources/read":
		return m.Result(`{"contents":[{"uri":"file:///a","text":"a"}]}`)
	case "completion/complete":
		return m.Result(`{"completion":{"values":["x"]}}`)
	case "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return m.Result(`{}`)
	}
	return m.Error(-32601, "method not found")
}

// fuzzPolicies are the proxy's policies, chosen by the input's mode.
var fuzzPolicies = []string{
	"name = \"fuzz\"\nallow = [\"read\"]\ndeny = [\"delete\"]\n",
	"name = \"fuzz\"\nallow_read_only_hint = true\nask = [\"write\"]\n",
}

// FuzzProxyMessages drives the proxy (impl/proxy behind serve.Stdio, its
// stdio front door) with JSON-RPC from both sides. The client lines go to
// its stdin one after another, after the handshake the mode picks. The
// upstream is scripted (mcptest.Scripted): for each line the proxy sends
// it, it writes the next of the upstream lines, "$ID" standing for the id
// of the request it read (so any line can become that request's answer,
// or come before it), and then, for a request, a well-formed default
// answer, so that every request of the proxy is answered. Requests the
// proxy puts to the client (elicitation: accepted; anything else: an
// error) are answered too.
//
// It fails on any panic (the worker dies) and on any hang: a client
// request the proxy does not answer within fuzzPatience, or a proxy that
// does not stop within it once its stdin ends.
func FuzzProxyMessages(f *testing.F) {
	for _, seed := range fuzzProxySeeds() {
		f.Add(seed.mode, seed.client, seed.upstream)
	}
	d := newProxyDriver(f, fuzzPatience, fuzzUpstreamDefault)
	f.Fuzz(func(t *testing.T, mode uint8, client, upstream string) {
		d.drive(t, mode, client, upstream)
	})
}

// A proxyDriver runs one input of FuzzProxyMessages.
type proxyDriver struct {
	patience time.Duration
	// answer is the scripted upstream's answer to a request, after the
	// input's line: fuzzUpstreamDefault, so that every request is answered.
	answer   func(mcptest.Incoming) []byte
	policies []*proxy.Policy
	log      *slog.Logger
}

func newProxyDriver(tb testing.TB, patience time.Duration, answer func(mcptest.Incoming) []byte) *proxyDriver {
	d := &proxyDriver{patience: patience, answer: answer, log: slog.New(slog.DiscardHandler)}
	for _, p := range fuzzPolicies {
		pol, err := proxy.ParsePolicy(strings.NewReader(p))
		if err != nil {
			tb.Fatal(err)
		}
		d.policies = append(d.policies, pol)
	}
	return d
}

// drive runs the proxy on one input and fails t on a hang.
func (d *proxyDriver) drive(t testing.TB, mode uint8, client, upstream string) {
	clientLines := append(append([]string(nil), fuzzHandshakes[mode%4]...), firstLines(client, fuzzMaxLines)...)
	upLines := firstLines(upstream, fuzzMaxLines)
	var mu sync.Mutex
	script := func(line []byte) [][]byte {
		m, _ := mcptest.Decode(line)
		id := string(m.ID)
		if id == "" {
			id = "0"
		}
		var out [][]byte
		mu.Lock()
		if len(upLines) > 0 {
			l := []byte(strings.ReplaceAll(upLines[0], "$ID", id))
			upLines = upLines[1:]
			if !json.Valid(l) {
				// A fair upstream's line is a whole message or garbage: a
				// control character ends any JSON value the line begins
				// with an error, so the proxy's decoder does not read the
				// next line as the rest of it (waiting for an answer the
				// upstream has sent).
				l = append(l, '\x01')
			}
			out = append(out, l)
		}
		mu.Unlock()
		if m.IsRequest() {
			if a := d.answer(m); a != nil {
				out = append(out, a)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.patience)
	p, err := proxy.New(ctx, proxy.Options{
		Setup:   confirm.Setup{Keys: [][]byte{[]byte(fuzzKeyOne)}, Logger: d.log},
		Connect: mcptest.Scripted(script),
		Policy:  d.policies[mode/4%2],
	})
	hung := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if hung {
			t.Fatalf("proxy.New hung: %v", err)
		}
		return // the upstream's start-up failed: refused, cleanly
	}
	defer func() {
		done := make(chan struct{})
		go func() { p.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(d.patience):
			t.Fatal("the proxy did not close")
		}
	}()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- serve.Stdio(context.Background(), p.MCP(), inR, outW, serve.StdioOptions{MaxMessageBytes: fuzzLineMax, Logger: d.log})
		outW.Close()
	}()
	var wmu sync.Mutex
	write := func(line string) {
		wmu.Lock()
		defer wmu.Unlock()
		inW.Write([]byte(line + "\n"))
	}

	// The client requests that must be answered: those go-sdk takes
	// (what serve's filter lets through), each id once, none cancelled.
	want := map[jsonrpc.ID]string{}
	seen := map[jsonrpc.ID]bool{}
	for _, l := range clientLines {
		id, ok := requestID(l)
		if !ok {
			continue
		}
		if seen[id] {
			delete(want, id) // a duplicate id: which one is answered is go-sdk's
			continue
		}
		seen[id] = true
		want[id] = l
	}
	for _, l := range clientLines {
		for _, id := range cancelledIDs(l) {
			delete(want, id)
		}
	}

	answered := make(chan jsonrpc.ID, 64)
	go func() {
		defer close(answered)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			msg, err := jsonrpc.DecodeMessage(sc.Bytes())
			if err != nil {
				continue // serve's own refusals have id null
			}
			switch m := msg.(type) {
			case *jsonrpc.Response:
				answered <- m.ID
			case *jsonrpc.Request:
				if !m.ID.IsValid() {
					continue
				}
				// The proxy asks the client: answer as a person would.
				reply := &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "not supported"}}
				if m.Method == "elicitation/create" {
					reply = &jsonrpc.Response{ID: m.ID, Result: json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
				}
				b, err := jsonrpc.EncodeMessage(reply)
				if err == nil {
					go write(string(b))
				}
			}
		}
	}()

	go func() {
		for _, l := range clientLines {
			write(l)
		}
	}()
	deadline := time.After(d.patience)
	for len(want) > 0 {
		select {
		case id, ok := <-answered:
			if !ok {
				t.Fatalf("the proxy closed stdout with requests unanswered: %q", values(want))
			}
			delete(want, id)
		case <-deadline:
			t.Fatalf("no answer within %v to %q", d.patience, values(want))
		}
	}
	inW.Close()
	select {
	case <-served:
	case <-time.After(d.patience):
		t.Fatal("serve.Stdio did not return at the end of stdin")
	}
	outR.Close()
}

// firstLines returns at most n lines of s, the empty ones dropped.
func firstLines(s string, n int) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimRight(l, "\r\n"); l != "" && len(out) < n {
			out = append(out, l)
		}
	}
	return out
}

// requestID returns the id of a client line that serve passes to go-sdk
// as a request (a call, not a notification).
func requestID(line string) (jsonrpc.ID, bool) {
	b := bytes.TrimSpace([]byte(line))
	if len(b) == 0 || len(b) > fuzzLineMax || b[0] != '{' || !json.Valid(b) {
		return jsonrpc.ID{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return jsonrpc.ID{}, false
	}
	var v string
	if json.Unmarshal(fields["jsonrpc"], &v) != nil || v != "2.0" {
		return jsonrpc.ID{}, false
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	r, ok := msg.(*jsonrpc.Request)
	if !ok || !r.ID.IsValid() {
		return jsonrpc.ID{}, false
	}
	return r.ID, true
}

// cancelledIDs returns the request ids a client line cancels.
func cancelledIDs(line string) []jsonrpc.ID {
	msg, err := jsonrpc.DecodeMessage([]byte(line))
	if err != nil {
		return nil
	}
	r, ok := msg.(*jsonrpc.Request)
	if !ok || r.Method != "notifications/cancelled" {
		return nil
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(r.Params, &p) != nil {
		return nil
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return nil
	}
	return []jsonrpc.ID{id}
}

func values(m map[jsonrpc.ID]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

type proxySeed struct {
	mode             uint8
	client, upstream string
}

// fuzzProxySeeds are sessions of both eras (as the go-sdk client writes
// them) and upstreams that misbehave in the ways that once crashed the
// proxy: a list change before the initialize reply, notifications
// without params, a call of a tool nobody lists.
func fuzzProxySeeds() []proxySeed {
	legacy := strings.Join([]string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/a","content":"x"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","arguments":{"path":"/tmp/a"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"delete","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"p"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"github/x","arguments":{}}}`,
	}, "\n")
	mrtr := strings.Join([]string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + modern + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{` + modern + `,"name":"write","arguments":{"path":"/tmp/a"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{` + modern + `,"name":"write","arguments":{"path":"/tmp/a"},"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}},"requestState":"v1.AAAA"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{` + modern + `,"name":"peek","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{` + modern + `,"name":"no_such_tool","arguments":{"x":1}}}`,
	}, "\n")
	early := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcp-confirm-proxy-1","progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/elicitation/complete"}`,
	}, "\n")
	noise := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"."}}`
	asking := strings.Join([]string{
		noise, noise, noise, noise,
		`{"jsonrpc":"2.0","id":"up1","method":"elicitation/create","params":{"message":"more?","requestedSchema":{"type":"object","properties":{}}}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[],"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"more?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"write","inputSchema":{"type":"object"}},{"name":"write","inputSchema":{"type":"string"}}]}}`,
		`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32603,"message":"boom"}}`,
		`not json`,
	}, "\n")
	// go-sdk's decoder dereferences a null input request.
	nullRequest := strings.Join([]string{noise, noise, noise, noise,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[],"inputRequests":{"q":null}}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"messages":[],"inputRequests":{"q":null}}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"contents":[],"inputRequests":{"q":null}}}`,
	}, "\n")
	var seeds []proxySeed
	for _, up := range []string{"", early, asking, nullRequest} {
		seeds = append(seeds,
			proxySeed{1, legacy, up}, proxySeed{2, legacy, up}, proxySeed{5, legacy, up},
			proxySeed{3, mrtr, up}, proxySeed{7, mrtr, up}, proxySeed{0, legacy, up})
	}
	return seeds
}

// hangRecorder is a testing.TB on which a failure is recorded, not
// reported.
type hangRecorder struct {
	*testing.T
	mu   sync.Mutex
	msgs []string
}

func (r *hangRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *hangRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *hangRecorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *hangRecorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// TestProxyFuzzCatchesHang is FuzzProxyMessages' negative control for
// hangs: with an upstream that never answers tools/call, the driver fails
// the input, naming the unanswered request; with the fair upstream, the
// same input passes. (Its control for panics is the committed crashers in
// testdata/fuzz/FuzzProxyMessages, each of which crashed the proxy before
// its fix.)
func TestProxyFuzzCatchesHang(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":"the-call","method":"tools/call","params":{"name":"read","arguments":{"path":"/a"}}}`
	silent := func(m mcptest.Incoming) []byte {
		if m.Method == "tools/call" {
			return nil
		}
		return fuzzUpstreamDefault(m)
	}
	for _, tt := range []struct {
		name   string
		answer func(mcptest.Incoming) []byte
		want   string
	}{
		{"silent upstream", silent, "the-call"},
		{"fair upstream", fuzzUpstreamDefault, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &hangRecorder{T: t}
			d := newProxyDriver(t, time.Second, tt.answer)
			done := make(chan struct{})
			go func() {
				defer close(done)
				d.drive(r, 2, call, "")
			}()
			<-done
			got := r.failures()
			t.Logf("reported: %s", got)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, "no answer within") || !strings.Contains(got, tt.want) {
				t.Fatalf("the driver reported %q, want a hang naming %q", got, tt.want)
			}
		})
	}
}
