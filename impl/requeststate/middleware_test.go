package requeststate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// clock is a settable time source shared by test and server goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// logBuffer collects slog output written by server goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

// seen is what one handler invocation observed.
type seen struct {
	State     string
	Responses int
	Binding   requeststate.Binding
	HasBind   bool
}

// recorder is the test server's handlers: each asks once, then reports
// what it was given.
type recorder struct {
	mu    sync.Mutex
	calls []seen
}

func (r *recorder) record(ctx context.Context, state string, responses int) {
	b, ok := requeststate.BindingFrom(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, seen{state, responses, b, ok})
}

func (r *recorder) last(t *testing.T) seen {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		t.Fatal("handler never ran")
	}
	return r.calls[len(r.calls)-1]
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.calls) }

const plaintext = "pending:confirm-42"

func ask() mcp.InputRequestMap {
	return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
		Message:         "Delete the file?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
	}}
}

func (r *recorder) tool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
	if req.Params.RequestState == "" {
		return &mcp.CallToolResult{InputRequests: ask(), RequestState: plaintext}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done:" + req.Params.RequestState}}}, nil
}

// shed asks with an empty input map and an empty state (load shedding).
func (r *recorder) shed(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
	b, _ := requeststate.BindingFrom(ctx)
	if !b.Verified {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "resumed"}}}, nil
}

// plain never asks.
func (r *recorder) plain(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}}, nil
}

func (r *recorder) prompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	r.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
	if req.Params.RequestState == "" {
		return &mcp.GetPromptResult{InputRequests: ask(), RequestState: plaintext}, nil
	}
	return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: req.Params.RequestState}}}}, nil
}

func (r *recorder) resource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	r.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
	if req.Params.RequestState == "" {
		return &mcp.ReadResourceResult{InputRequests: ask(), RequestState: plaintext}, nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: req.Params.RequestState}}}, nil
}

type fixture struct {
	clk  *clock
	logs *logBuffer
	rec  *recorder
	srv  *mcp.Server
}

func newFixture(t *testing.T, opts requeststate.Options) *fixture {
	t.Helper()
	f := &fixture{clk: &clock{t: time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)}, logs: &logBuffer{}, rec: &recorder{}}
	if opts.Audience == "" {
		opts.Audience = "mcp-confirm-test"
	}
	if opts.Keys == nil {
		opts.Keys = [][]byte{[]byte("0123456789abcdef0123456789abcdef-test-key")}
	}
	opts.Now = f.clk.Now
	opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	b, err := requeststate.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = mcp.NewServer(&mcp.Implementation{Name: "mcp-confirm-test", Version: "v0"}, nil)
	f.srv.AddReceivingMiddleware(b.Middleware())
	schema := map[string]any{"type": "object"}
	f.srv.AddTool(&mcp.Tool{Name: "delete_file", InputSchema: schema}, f.rec.tool)
	f.srv.AddTool(&mcp.Tool{Name: "delete_all", InputSchema: schema}, f.rec.tool)
	f.srv.AddTool(&mcp.Tool{Name: "shed", InputSchema: schema}, f.rec.shed)
	f.srv.AddTool(&mcp.Tool{Name: "plain", InputSchema: schema}, f.rec.plain)
	f.srv.AddPrompt(&mcp.Prompt{Name: "greet"}, f.rec.prompt)
	f.srv.AddResource(&mcp.Resource{URI: "file:///secret.txt", Name: "secret"}, f.rec.resource)
	f.srv.AddResource(&mcp.Resource{URI: "file:///other.txt", Name: "other"}, f.rec.resource)
	return f
}

// connect opens a real client session over in-memory transports. An empty
// version means the latest (2026-07-28, multi round-trip); the client's own
// retry loop is off so that tests see and handle every token.
func (f *fixture) connect(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := f.srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var accept = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}}

// args returns raw JSON arguments; "" means none.
func args(s string) any {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// firstRound calls delete_file with arguments and returns the sealed token.
func firstRound(t *testing.T, cs *mcp.ClientSession, arguments string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: args(arguments)})
	if err != nil {
		t.Fatalf("round 1: %v", err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("round 1: NeedsInput=%v state=%q", res.NeedsInput(), res.RequestState)
	}
	return res.RequestState
}

// wantRejection checks err is exactly the frozen wire error.
func wantRejection(t *testing.T, err error) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("err = %v (%T), want a JSON-RPC error", err, err)
	}
	if werr.Code != -32602 || werr.Message != "Invalid or expired requestState" ||
		string(werr.Data) != `{"reason":"invalid_request_state"}` {
		t.Fatalf("wire error = {%d %q %s}, want the frozen rejection", werr.Code, werr.Message, werr.Data)
	}
}

func TestMiddlewareRoundTrip(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "")
	ctx := context.Background()

	tok := firstRound(t, cs, `{"path":"a.txt"}`)
	if !strings.HasPrefix(tok, "v1.") || strings.Contains(tok, "pending") || strings.Contains(tok, "confirm-42") {
		t.Fatalf("token %q is not sealed", tok)
	}
	first := f.rec.last(t)
	if !first.HasBind || first.Binding.Verified || first.Binding.Method != "tools/call" ||
		first.Binding.Target != "delete_file" || first.State != "" {
		t.Fatalf("round 1 handler saw %+v", first)
	}
	if want, _ := requeststate.ArgumentsDigest(json.RawMessage(`{"path":"a.txt"}`)); first.Binding.ArgsDigest != want {
		t.Fatalf("binding digest %s, want %s", first.Binding.ArgsDigest, want)
	}

	// Same arguments spelled differently: same canonical digest, accepted.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(` { "path" : "a\u002etxt" } `), InputResponses: accept, RequestState: tok})
	if err != nil {
		t.Fatalf("round 2: %v", err)
	}
	if res.NeedsInput() || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "done:"+plaintext {
		t.Fatalf("round 2 result: %+v", res)
	}
	second := f.rec.last(t)
	if second.State != plaintext || !second.Binding.Verified || second.Responses != 1 {
		t.Fatalf("round 2 handler saw %+v", second)
	}
	// Within its TTL the same token is accepted again: the boundary does not
	// make state single-use (that is impl/ledger's job).
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), InputResponses: accept, RequestState: tok}); err != nil {
		t.Fatalf("replay within TTL: %v", err)
	}
}

func TestMiddlewareRejects(t *testing.T) {
	f := newFixture(t, requeststate.Options{TTL: 10 * time.Minute})
	cs := f.connect(t, "")
	ctx := context.Background()
	tok := firstRound(t, cs, `{"path":"a.txt"}`)

	other := newFixture(t, requeststate.Options{Keys: [][]byte{[]byte("another-secret-another-secret-another")}})
	otherTok := firstRound(t, other.connect(t, ""), `{"path":"a.txt"}`)
	otherAud := newFixture(t, requeststate.Options{Audience: "someone-else"})
	otherAudTok := firstRound(t, otherAud.connect(t, ""), `{"path":"a.txt"}`)

	// A token for the prompt, used on the tool.
	pres, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || pres.RequestState == "" {
		t.Fatalf("prompt round 1: %v %+v", err, pres)
	}

	flip := func(i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	tests := []struct {
		name, tool, arguments, token string
	}{
		{"plaintext echoed", "delete_file", `{"path":"a.txt"}`, plaintext},
		{"tampered start", "delete_file", `{"path":"a.txt"}`, flip(3)},
		{"tampered middle", "delete_file", `{"path":"a.txt"}`, flip(len(tok) / 2)},
		{"tampered end", "delete_file", `{"path":"a.txt"}`, flip(len(tok) - 2)},
		{"truncated", "delete_file", `{"path":"a.txt"}`, tok[:len(tok)-4]},
		{"CRLF inserted", "delete_file", `{"path":"a.txt"}`, tok[:20] + "\r\n" + tok[20:]},
		{"padding appended", "delete_file", `{"path":"a.txt"}`, tok + "="},
		{"wrong prefix", "delete_file", `{"path":"a.txt"}`, "v2." + tok[3:]},
		{"other key", "delete_file", `{"path":"a.txt"}`, otherTok},
		{"other audience", "delete_file", `{"path":"a.txt"}`, otherAudTok},
		{"other target", "delete_all", `{"path":"a.txt"}`, tok},
		{"other arguments", "delete_file", `{"path":"b.txt"}`, tok},
		{"extra argument", "delete_file", `{"path":"a.txt","force":true}`, tok},
		{"arguments dropped", "delete_file", ``, tok},
		{"other method", "delete_file", `{}`, pres.RequestState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.rec.count()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: args(tt.arguments), InputResponses: accept, RequestState: tt.token})
			if res != nil {
				t.Fatalf("got a result (IsError=%v), want a JSON-RPC error", res.IsError)
			}
			wantRejection(t, err)
			if f.rec.count() != before {
				t.Fatal("handler ran on a rejected call")
			}
		})
	}

	// Expiry: the genuine token works until the TTL runs out.
	f.clk.Add(10*time.Minute - time.Millisecond)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), RequestState: tok}); err != nil {
		t.Fatalf("control just before expiry: %v", err)
	}
	f.clk.Add(time.Millisecond)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), RequestState: tok})
	wantRejection(t, err)

	// The log names the reasons and never a token.
	logs := f.logs.String()
	for _, reason := range []string{"malformed", "authentication", "unknown key", "target", "arguments", "method", "audience", "expired"} {
		if !strings.Contains(logs, reason) {
			t.Errorf("log lacks reason %q", reason)
		}
	}
	for _, secret := range []string{tok[3:23], otherTok[3:23], plaintext} {
		if strings.Contains(logs, secret) {
			t.Errorf("log shows %q", secret)
		}
	}
}

// TestMiddlewareRejectsBadArguments: duplicate keys (which value would the
// handler act on?) are refused before the handler runs. A first round,
// which carries no requestState, is told what is wrong, the key escaped;
// a call that carries one gets the frozen rejection, whatever is wrong.
func TestMiddlewareRejectsBadArguments(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "")
	ctx := context.Background()
	quoted := func(q string) string { return "«\u2068" + q + "\u2069»" }
	tests := []struct {
		name, arguments string
		want            string // in the message, after ArgumentsMessage
	}{
		{"duplicate key", `{"path":"a.txt","path":"/etc/passwd"}`, "the key " + quoted("path") + " is given twice"},
		{"duplicate key, once escaped", `{"path":"a.txt","p\u0061th":"/etc/passwd"}`, quoted("path")},
		{"duplicate nested key", `{"opts":{"mode":1,"mode":2}}`, quoted("mode")},
		{"duplicate key with a line break and an override", `{"a\nb` + "\u202e" + `":1,"a\nb` + "\u202e" + `":2}`, quoted(`a\nb\u{202E}`)},
		{"duplicate key, not UTF-8", "{\"a\xff\":1,\"a\xff\":2}", quoted(`a\xFF`)},
		{"duplicate key, a lone surrogate", `{"a\ud800":1,"a\ud800":2}`, quoted(`a\xED\xA0\x80`)},
		{"nesting too deep", strings.Repeat(`{"a":`, requeststate.MaxDepth+1) + "1" + strings.Repeat("}", requeststate.MaxDepth+1), "nesting deeper than 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(tt.arguments)})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(werr.Message, requeststate.ArgumentsMessage) {
				t.Fatalf("first round = %v, want a -32602 error beginning %q", err, requeststate.ArgumentsMessage)
			}
			if !strings.Contains(werr.Message, tt.want) {
				t.Errorf("message %q lacks %q", werr.Message, tt.want)
			}
			if strings.ContainsAny(werr.Message, "\n\u202e\ufffd") || !utf8.ValidString(werr.Message) {
				t.Errorf("message %q holds a raw line break, override or invalid byte", werr.Message)
			}
			if f.rec.count() != 0 {
				t.Fatal("handler ran")
			}
		})
	}
	if !strings.Contains(f.logs.String(), "duplicate") {
		t.Errorf("log lacks the reason: %s", f.logs.String())
	}
	// With a requestState, the frozen rejection: a genuine token for the
	// call, sent back with a duplicate key, tells nothing of why.
	tok := firstRound(t, cs, `{"path":"a.txt"}`)
	before := f.rec.count()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt","path":"a.txt"}`), InputResponses: accept, RequestState: tok})
	wantRejection(t, err)
	if f.rec.count() != before {
		t.Fatal("handler ran on the retry with a duplicate key")
	}
	// Control: the same retry without the duplicate reaches the handler.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), InputResponses: accept, RequestState: tok}); err != nil || f.rec.count() != before+1 {
		t.Fatalf("control retry: %v", err)
	}
}

func TestMiddlewarePrincipal(t *testing.T) {
	var mu sync.Mutex
	user, fail := "alice", false
	f := newFixture(t, requeststate.Options{Principal: func(ctx context.Context, req mcp.Request) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return "", errors.New("identity provider unreachable")
		}
		return user, nil
	}})
	set := func(u string, failing bool) { mu.Lock(); user, fail = u, failing; mu.Unlock() }
	cs := f.connect(t, "")
	ctx := context.Background()
	call := func(tok string) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), RequestState: tok})
		return err
	}
	tok := firstRound(t, cs, `{"path":"a.txt"}`)
	if f.rec.last(t).Binding.Principal != "alice" {
		t.Fatalf("binding principal = %q", f.rec.last(t).Binding.Principal)
	}
	set("bob", false)
	wantRejection(t, call(tok))
	set("", false)
	wantRejection(t, call(tok))
	set("alice", true)
	wantRejection(t, call(tok))
	// A failing principal also refuses a first round (fail closed).
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`)})
	wantRejection(t, err)
	if !strings.Contains(f.logs.String(), "identity provider unreachable") {
		t.Error("log lacks the principal failure")
	}
	set("alice", false)
	if err := call(tok); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestMiddlewarePromptAndResource(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "")
	ctx := context.Background()

	pargs := map[string]string{"name": "Ada"}
	p1, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: pargs})
	if err != nil || !p1.NeedsInput() || !strings.HasPrefix(p1.RequestState, "v1.") {
		t.Fatalf("prompt round 1: %v %+v", err, p1)
	}
	if b := f.rec.last(t).Binding; b.Method != "prompts/get" || b.Target != "greet" {
		t.Fatalf("prompt binding %+v", b)
	}
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Eve"}, RequestState: p1.RequestState})
	wantRejection(t, err)
	p2, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: pargs, InputResponses: accept, RequestState: p1.RequestState})
	if err != nil || p2.NeedsInput() || f.rec.last(t).State != plaintext || !f.rec.last(t).Binding.Verified {
		t.Fatalf("prompt round 2: %v %+v %+v", err, p2, f.rec.last(t))
	}

	r1, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///secret.txt"})
	if err != nil || !r1.NeedsInput() || !strings.HasPrefix(r1.RequestState, "v1.") {
		t.Fatalf("resource round 1: %v %+v", err, r1)
	}
	if b := f.rec.last(t).Binding; b.Method != "resources/read" || b.Target != "file:///secret.txt" {
		t.Fatalf("resource binding %+v", b)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///other.txt", RequestState: r1.RequestState})
	wantRejection(t, err)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///secret.txt", RequestState: p1.RequestState})
	wantRejection(t, err)
	r2, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///secret.txt", InputResponses: accept, RequestState: r1.RequestState})
	if err != nil || r2.NeedsInput() || r2.Contents[0].Text != plaintext {
		t.Fatalf("resource round 2: %v %+v", err, r2)
	}
}

// TestMiddlewareEmptyStateAndPassThrough: an input_required result is sealed
// even with an empty state; other results and methods pass untouched.
func TestMiddlewareEmptyStateAndPassThrough(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "")
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shed"})
	if err != nil || !res.NeedsInput() || !strings.HasPrefix(res.RequestState, "v1.") {
		t.Fatalf("shed round 1: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "shed", RequestState: res.RequestState})
	if err != nil || res.NeedsInput() {
		t.Fatalf("shed round 2: %v %+v", err, res)
	}
	if s := f.rec.last(t); s.State != "" || !s.Binding.Verified {
		t.Fatalf("shed round 2 handler saw %+v", s)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "plain", Arguments: map[string]any{"x": 1}})
	if err != nil || res.RequestState != "" || res.Content[0].(*mcp.TextContent).Text != "plain" {
		t.Fatalf("plain: %v %+v", err, res)
	}
	if s := f.rec.last(t); !s.HasBind || s.Binding.Verified || s.Binding.Target != "plain" {
		t.Fatalf("plain handler saw %+v", s)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	// An unknown tool is still go-sdk's own error, not the rejection.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Message == requeststate.RejectMessage {
		t.Fatalf("unknown tool: %v", err)
	}
}

// TestMiddlewareOlderEra: with a client on 2025-11-25, go-sdk's shim (inside
// the boundary) elicits in-process and re-invokes the handler with its
// plaintext state; the boundary never sees that round, so nothing is sealed
// and nothing is refused. A requestState a client puts on the wire is still
// verified.
func TestMiddlewareOlderEra(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "2025-11-25")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput() || res.RequestState != "" || res.Content[0].(*mcp.TextContent).Text != "done:"+plaintext {
		t.Fatalf("older-era result: %+v", res)
	}
	if n := f.rec.count(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (ask, then the shim's re-invocation)", n)
	}
	// The shim's round carries the handler's own plaintext, unverified: it
	// never crossed the wire.
	if s := f.rec.last(t); s.State != plaintext || s.Responses != 1 || s.Binding.Verified || !s.HasBind {
		t.Fatalf("shim round handler saw %+v", s)
	}
	if strings.Contains(f.logs.String(), "rejected") {
		t.Fatalf("boundary refused something in the older era: %s", f.logs.String())
	}

	// A forged state sent on the wire by an older client is refused.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), InputResponses: accept, RequestState: plaintext})
	wantRejection(t, err)
}

// TestMiddlewareOverHTTPWithAuth binds the principal through go-sdk's own
// bearer-token middleware and streamable HTTP transport: bob cannot replay
// alice's token, even with her exact arguments.
func TestMiddlewareOverHTTPWithAuth(t *testing.T) {
	f := newFixture(t, requeststate.Options{}) // default principal: TokenInfo.UserID
	verifier := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := strings.CutPrefix(token, "token-of-")
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	handler := auth.RequireBearerToken(verifier, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)

	connect := func(user string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{"token-of-" + user, http.DefaultTransport}}
		client := mcp.NewClient(&mcp.Implementation{Name: user, Version: "v0"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := connect("alice"), connect("bob")
	if v := alice.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	tok := firstRound(t, alice, `{"path":"a.txt"}`)
	if p := f.rec.last(t).Binding.Principal; p != "alice" {
		t.Fatalf("principal = %q, want alice", p)
	}
	params := &mcp.CallToolParams{Name: "delete_file", Arguments: args(`{"path":"a.txt"}`), InputResponses: accept, RequestState: tok}
	_, err := bob.CallTool(context.Background(), params)
	wantRejection(t, err)
	if !strings.Contains(f.logs.String(), "principal") {
		t.Errorf("log lacks the principal reason")
	}
	res, err := alice.CallTool(context.Background(), params)
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "done:"+plaintext {
		t.Fatalf("control (alice): %v %+v", err, res)
	}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestRejection(t *testing.T) {
	a, b := requeststate.Rejection(), requeststate.Rejection()
	if a == b {
		t.Fatal("Rejection returns a shared value")
	}
	got, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"code":-32602,"message":"Invalid or expired requestState","data":{"reason":"invalid_request_state"}}`; string(got) != want {
		t.Fatalf("rejection = %s, want %s", got, want)
	}
}

// TestMiddlewareExactArguments: arguments that encoding/json would read as
// equal (float64 rounding, U+FFFD for a lone surrogate) are different
// requests to the boundary, end to end.
func TestMiddlewareExactArguments(t *testing.T) {
	f := newFixture(t, requeststate.Options{})
	cs := f.connect(t, "")
	ctx := context.Background()
	for _, pair := range [][2]string{
		{`{"n":10000000000000000000001}`, `{"n":1e22}`},
		{`{"path":"\ud800"}`, `{"path":"\ufffd"}`},
		{`{"path":"\ud800"}`, "{\"path\":\"\uFFFD\"}"},
	} {
		tok := firstRound(t, cs, pair[0])
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(pair[1]), InputResponses: accept, RequestState: tok})
		wantRejection(t, err)
		// Control: the exact arguments are accepted.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(pair[0]), InputResponses: accept, RequestState: tok}); err != nil {
			t.Fatalf("control %s: %v", pair[0], err)
		}
	}
}

// TestAfterCall checks that a function registered with AfterCall runs once,
// after the call, with the error the call ended in: nil for a result and
// for an input_required one (whose state the boundary sealed), the error for
// a failed call. Outside the middleware AfterCall refuses.
func TestAfterCall(t *testing.T) {
	if requeststate.AfterCall(context.Background(), func(error) { t.Error("ran") }) {
		t.Fatal("AfterCall accepted a context that never passed the boundary")
	}
	f := newFixture(t, requeststate.Options{})
	var (
		mu   sync.Mutex
		got  []error
		late context.Context // a handler's context, kept past its call
	)
	f.srv.AddTool(&mcp.Tool{Name: "hook", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ Mode string }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		if !requeststate.AfterCall(ctx, func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() }) {
			return nil, errors.New("no boundary in the handler's context")
		}
		mu.Lock()
		late = ctx
		mu.Unlock()
		switch in.Mode {
		case "ask":
			return &mcp.CallToolResult{InputRequests: ask(), RequestState: plaintext}, nil
		case "fail":
			return nil, errors.New("the handler failed")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	ctx := context.Background()
	cs := f.connect(t, "")
	for _, tc := range []struct {
		mode    string
		callErr bool // the call, and the registered function, see an error
	}{{"result", false}, {"ask", false}, {"fail", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hook", Arguments: args(`{"mode":"` + tc.mode + `"}`)})
			failed := err != nil || res.IsError
			if failed != tc.callErr {
				t.Fatalf("call failed = %v (err %v, result %+v), want %v", failed, err, res, tc.callErr)
			}
			if tc.mode == "ask" && (!res.NeedsInput() || res.RequestState == plaintext || res.RequestState == "") {
				t.Fatalf("input_required result not sealed: %+v", res)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("the registered function ran %d times, want once", len(got))
			}
			if (got[0] != nil) != tc.callErr || (got[0] != nil) != (err != nil) {
				t.Fatalf("the registered function saw %v; the call ended in %v", got[0], err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if late == nil || requeststate.AfterCall(late, func(error) { t.Error("ran after its call") }) {
		t.Fatal("AfterCall accepted a function after its call had returned")
	}
}

// TestMiddlewareNeverSendsUnsealedState: a handler's requestState that
// cannot be sealed (not UTF-8) ends the call in an internal error; the
// plaintext never reaches the client, which could otherwise forge the
// next round's state. In the older era the shim keeps the state in
// process, so nothing is sealed and nothing leaks either.
func TestMiddlewareNeverSendsUnsealedState(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("era="+version, func(t *testing.T) {
			f := newFixture(t, requeststate.Options{})
			f.srv.AddTool(&mcp.Tool{Name: "bad_state", InputSchema: map[string]any{"type": "object"}},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					f.rec.record(ctx, req.Params.RequestState, len(req.Params.InputResponses))
					if req.Params.RequestState == "" {
						return &mcp.CallToolResult{InputRequests: ask(), RequestState: "pending:\xff"}, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
				})
			cs := f.connect(t, version)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bad_state"})
			if version == "2025-11-25" {
				if err != nil || res.RequestState != "" || strings.Contains(f.logs.String(), "not sealed") {
					t.Fatalf("older era: %v %+v; log %s", err, res, f.logs.String())
				}
				return
			}
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || strings.Contains(werr.Error(), "pending") {
				t.Fatalf("err = %v, result %+v; want an internal error and no plaintext", err, res)
			}
			if n := f.rec.count(); n != 1 || !strings.Contains(f.logs.String(), "requestState not sealed") {
				t.Fatalf("handler ran %d times; log %s", n, f.logs.String())
			}
			// Negative control: a UTF-8 state from the same fixture is sealed.
			if tok := firstRound(t, cs, `{"path":"a.txt"}`); !strings.HasPrefix(tok, "v1.") {
				t.Fatalf("control: token %q", tok)
			}
		})
	}
}
