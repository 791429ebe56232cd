package observe_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/otlptest"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

var (
	testKey = []byte("0123456789abcdef0123456789abcdef-observe-test")
	discard = slog.New(slog.DiscardHandler)
	eras    = []string{mcptest.EraMRTR, mcptest.EraLegacy}
)

// flushed exports what tp holds and returns the spans rcv received in
// the trace traceID, only those named name unless name is "".
func flushed(t *testing.T, tp *sdktrace.TracerProvider, rcv *otlptest.Receiver, traceID, name string) []otlptest.Span {
	t.Helper()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []otlptest.Span
	for _, s := range rcv.Trace(traceID) {
		if name == "" || s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// exporting returns a tracer provider that exports to a new in-process
// OTLP/HTTP receiver, configured as an operator would: by
// OTEL_EXPORTER_OTLP_ENDPOINT, through observe.FromEnv.
func exporting(t *testing.T) (*sdktrace.TracerProvider, *otlptest.Receiver) {
	t.Helper()
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "observe-test")
	tp, err := observe.FromEnv(context.Background(), "mcp-confirm", "test")
	if err != nil || tp == nil {
		t.Fatalf("FromEnv = %v, %v; want a provider", tp, err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, rcv
}

// A frontEnd is a running front end, its confirmed call, and what it
// takes to check one: the HTTP URL it serves, and for the proxy the
// traceparent the upstream received with the forwarded call.
type frontEnd struct {
	url      string
	call     func() *mcp.CallToolParams
	effects  func() int
	upstream func() []string // traceparents the upstream received; nil: the server
}

// referenceServer runs internal/server with setup, over streamable HTTP,
// deleting files of a temporary root.
func referenceServer(t *testing.T, setup confirm.Setup) frontEnd {
	t.Helper()
	root := t.TempDir()
	srv, err := server.New(server.Options{Setup: setup, Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	var n int
	var mu sync.Mutex
	return frontEnd{
		url: hs.URL,
		call: func() *mcp.CallToolParams {
			mu.Lock()
			defer mu.Unlock()
			n++
			path := filepath.Join(root, fmt.Sprintf("f%d.txt", n))
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			return &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}}
		},
		effects: func() int {
			mu.Lock()
			defer mu.Unlock()
			left, _ := filepath.Glob(filepath.Join(root, "*"))
			return n - len(left)
		},
	}
}

// proxied runs impl/proxy with setup in front of a go-sdk upstream with
// one tool, echo, over streamable HTTP; the upstream records the _meta
// traceparent of every call it receives.
func proxied(t *testing.T, setup confirm.Setup) frontEnd {
	t.Helper()
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	var mu sync.Mutex
	var parents []string
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		tp, _ := req.Params.GetMeta()[observe.MetaTraceparent].(string)
		parents = append(parents, tp)
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	url := serveProxy(t, setup, up)
	var n int
	return frontEnd{
		url: url,
		call: func() *mcp.CallToolParams {
			mu.Lock()
			defer mu.Unlock()
			n++
			return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint("call ", n)}}
		},
		effects: func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(parents)
		},
		upstream: func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(parents)
		},
	}
}

// serveProxy runs impl/proxy with setup in front of the upstream up
// (over an in-memory transport) and serves it over streamable HTTP at
// the URL it returns.
func serveProxy(t *testing.T, setup confirm.Setup, up *mcp.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := proxy.New(ctx, proxy.Options{
		Setup: setup,
		Connect: func(ctx context.Context) (mcp.Transport, error) {
			ct, st := mcp.NewInMemoryTransports()
			if _, err := up.Connect(ctx, st, nil); err != nil {
				return nil, err
			}
			return ct, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h, err := serve.NewHTTP(p.MCP(), serve.HTTPOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

var frontEnds = []struct {
	name string
	new  func(*testing.T, confirm.Setup) frontEnd
}{
	{"server", referenceServer},
	{"proxy", proxied},
}

// connect returns a real go-sdk client of era over streamable HTTP,
// answering every question with yes (in 2026-07-28, its own retry loop
// carries the answer).
func connect(t *testing.T, fe frontEnd, era string, answer *mcptest.Answerer) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "observe-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answer.Handle})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: fe.url}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// newTraceparent returns a fresh sampled W3C traceparent, and its trace and
// span ids: the client's span, which the server's spans must continue.
func newTraceparent() (tp, traceID, spanID string) {
	b := make([]byte, 24)
	rand.Read(b)
	traceID, spanID = hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	return "00-" + traceID + "-" + spanID + "-01", traceID, spanID
}

// confirmedCall makes one confirmed call carrying meta, answered yes,
// and checks that it acted.
func confirmedCall(t *testing.T, fe frontEnd, era string, meta mcp.Meta) {
	t.Helper()
	before := fe.effects()
	cs := connect(t, fe, era, mcptest.Accept())
	p := fe.call()
	p.Meta = meta
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError || res.NeedsInput() {
		t.Fatalf("confirmed call: %v %s", err, mcptest.Describe(res))
	}
	if fe.effects() != before+1 {
		t.Fatalf("the action took effect %d times, want once", fe.effects()-before)
	}
}

// checkTree checks the spans of one confirmed call, all of trace traceID,
// against the tree the package doc promises. With clientSpan, the span
// the client named in _meta.traceparent: confirm.ask, confirm.redeem,
// confirm.act and confirm.complete are its children, in both eras, and no
// span is made per request. Without (""), the call is one older-era
// request whose tools/call server span is the root, the steps beneath it.
// For the proxy, proxy.forward is under confirm.act, the span the
// upstream was told of.
func checkTree(spans []otlptest.Span, traceID, clientSpan string, upstream []string) error {
	byName := map[string][]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID != traceID {
			return fmt.Errorf("span %s is of trace %s, not the call's", s.Name, s.TraceID)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	want := map[string]int{"tools/call": 0, "confirm.ask": 1, "confirm.redeem": 1, "confirm.act": 1, "confirm.complete": 1, "proxy.forward": 0}
	if clientSpan == "" {
		want["tools/call"] = 1
	}
	if upstream != nil {
		want["proxy.forward"] = 1
	}
	n := 0
	for name, k := range want {
		if len(byName[name]) != k {
			return fmt.Errorf("%d %s spans, want %d", len(byName[name]), name, k)
		}
		n += k
	}
	if len(spans) != n {
		return fmt.Errorf("%d spans, want %d", len(spans), n)
	}
	parent := clientSpan
	if clientSpan == "" {
		root := byName["tools/call"][0]
		if root.ParentID != "" || root.Kind != "SPAN_KIND_SERVER" {
			return fmt.Errorf("tools/call span: parent %q kind %s, want a server root", root.ParentID, root.Kind)
		}
		parent = root.SpanID
	}
	ask, redeem := byName["confirm.ask"][0], byName["confirm.redeem"][0]
	act, complete := byName["confirm.act"][0], byName["confirm.complete"][0]
	for _, s := range []otlptest.Span{ask, redeem, act, complete} {
		if s.ParentID != parent {
			return fmt.Errorf("%s's parent is %s, want %s", s.Name, s.ParentID, parent)
		}
	}
	if ask.Attrs["mcp_confirm.id"] == "" || ask.Attrs["mcp_confirm.id"] != redeem.Attrs["mcp_confirm.id"] {
		return fmt.Errorf("ask and redeem name confirmations %q and %q", ask.Attrs["mcp_confirm.id"], redeem.Attrs["mcp_confirm.id"])
	}
	if redeem.Attrs["mcp_confirm.result"] != "ok" || act.Attrs["mcp_confirm.outcome"] != "done" || complete.Attrs["mcp_confirm.result"] != "ok" {
		return fmt.Errorf("redeem %v, act %v, complete %v", redeem.Attrs, act.Attrs, complete.Attrs)
	}
	if upstream != nil {
		fwd := byName["proxy.forward"][0]
		if fwd.ParentID != act.SpanID {
			return fmt.Errorf("proxy.forward's parent is %s, want confirm.act %s", fwd.ParentID, act.SpanID)
		}
		if fwd.Status == "STATUS_CODE_ERROR" {
			return fmt.Errorf("proxy.forward of a call that succeeded has status %s", fwd.Status)
		}
		if want := "00-" + traceID + "-" + fwd.SpanID + "-01"; len(upstream) != 1 || upstream[0] != want {
			return fmt.Errorf("the upstream was told %q, want [%s]", upstream, want)
		}
	}
	return nil
}

// TestTraceSpanTree: a confirmed call through each front end, in each
// protocol era, whose client names its span in _meta.traceparent, is
// exported over OTLP/HTTP to an in-process receiver as the span tree the
// package doc promises, under the client's trace id; the proxy's
// upstream is told of the proxy.forward span. The spans carry no
// argument (the path or text of the call).
func TestTraceSpanTree(t *testing.T) {
	for _, f := range frontEnds {
		for _, era := range eras {
			t.Run(f.name+"/"+era, func(t *testing.T) {
				tp, rcv := exporting(t)
				tel, err := observe.New(observe.Options{TracerProvider: tp})
				if err != nil {
					t.Fatal(err)
				}
				fe := f.new(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
				parent, traceID, clientSpan := newTraceparent()
				confirmedCall(t, fe, era, mcp.Meta{observe.MetaTraceparent: parent, observe.MetaTracestate: "vendor=1"})
				spans := flushed(t, tp, rcv, traceID, "")
				var upstream []string
				if fe.upstream != nil {
					upstream = fe.upstream()
				}
				if err := checkTree(spans, traceID, clientSpan, upstream); err != nil {
					t.Fatalf("%v; the spans:\n%s", err, otlptest.Tree(rcv.Spans()))
				}
				for _, s := range rcv.Spans() {
					for k, v := range s.Attrs {
						if strings.Contains(v, "f1.txt") || strings.Contains(v, "call 1") {
							t.Errorf("span %s attribute %s carries an argument: %q", s.Name, k, v)
						}
					}
					if s.Service != "observe-test" {
						t.Errorf("span %s of service %q, want OTEL_SERVICE_NAME's", s.Name, s.Service)
					}
				}
				if n, bad := rcv.Requests(); n == 0 || len(bad) > 0 {
					t.Fatalf("%d export requests, undecodable: %v", n, bad)
				}
			})
		}
	}
}

// TestTraceForwardFailed: a call the upstream fails (a JSON-RPC error,
// not a result) is a proxy.forward span with status error, in each era;
// TestTraceSpanTree's checker is the control (a forward that succeeded is
// not an error).
func TestTraceForwardFailed(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			tp, rcv := exporting(t)
			tel, err := observe.New(observe.Options{TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
			var calls atomic.Int32
			up.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				calls.Add(1)
				return nil, errors.New("the upstream's disk is full")
			})
			url := serveProxy(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel}, up)
			cs := connect(t, frontEnd{url: url}, era, mcptest.Accept())
			parent, traceID, _ := newTraceparent()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Meta: mcp.Meta{observe.MetaTraceparent: parent}})
			if err == nil && !res.IsError {
				t.Fatalf("a failed call answered as a success: %s", mcptest.Describe(res))
			}
			if calls.Load() != 1 {
				t.Fatalf("the upstream was called %d times, want once", calls.Load())
			}
			fwd := flushed(t, tp, rcv, traceID, "proxy.forward")
			if len(fwd) != 1 || fwd[0].Status != "STATUS_CODE_ERROR" {
				t.Fatalf("want one proxy.forward span with status error:\n%s", otlptest.Tree(rcv.Spans()))
			}
		})
	}
}

// TestTraceTreeChecker: the checker of TestTraceSpanTree fails on the
// trees of broken wiring: a front end that installs only the boundary
// (no span per request: the steps are roots of their own trace), and a
// client span the server did not continue.
func TestTraceTreeChecker(t *testing.T) {
	tp, rcv := exporting(t)
	tel, err := observe.New(observe.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := confirm.Assemble(confirm.Setup{Name: "broken", Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(parts.Implementation, nil)
	s.AddReceivingMiddleware(parts.Boundary.Middleware()) // the span middleware left out
	mcp.AddTool(s, &mcp.Tool{Name: "act", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		res, err := parts.Flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) { return confirm.Question{Message: "Act?"}, nil },
			Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			},
		})
		return res, nil, err
	})
	cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Answer: mcptest.Accept(), Era: mcptest.EraLegacy})
	parent, traceID, clientSpan := newTraceparent()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "act", Meta: mcp.Meta{observe.MetaTraceparent: parent}}); err != nil {
		t.Fatal(err)
	}
	tp.ForceFlush(context.Background())
	spans := rcv.Spans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want the 4 steps:\n%s", len(spans), otlptest.Tree(spans))
	}
	if err := checkTree(spans, traceID, clientSpan, nil); err == nil {
		t.Fatal("the checker passed the steps of an unwrapped front end")
	}

	// A good tree, checked against a client span it does not continue.
	fe := referenceServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
	parent, traceID, clientSpan = newTraceparent()
	confirmedCall(t, fe, mcptest.EraLegacy, mcp.Meta{observe.MetaTraceparent: parent})
	tp.ForceFlush(context.Background())
	if err := checkTree(rcv.Trace(traceID), traceID, clientSpan, nil); err != nil {
		t.Fatalf("control: %v", err)
	}
	_, _, otherSpan := newTraceparent()
	if err := checkTree(rcv.Trace(traceID), traceID, otherSpan, nil); err == nil {
		t.Fatal("the checker passed a tree that did not continue the client's span")
	}
}

// TestTraceparentInvalid: a traceparent that is not valid W3C Trace
// Context starts a new trace — the request span is a root of a trace
// other than the one the value names, marked
// mcp_confirm.traceparent_invalid — and the call is served as any other.
// No traceparent at all starts a new trace too, unmarked.
func TestTraceparentInvalid(t *testing.T) {
	_, traceID, spanID := newTraceparent()
	for _, tt := range []struct {
		name string
		tp   any // nil: no traceparent
	}{
		{"absent", nil},
		{"not a string", 42},
		{"upper-case hex", "00-" + strings.ToUpper(traceID) + "-" + spanID + "-01"},
		{"zero trace id", "00-" + strings.Repeat("0", 32) + "-" + spanID + "-01"},
		{"zero span id", "00-" + traceID + "-" + strings.Repeat("0", 16) + "-01"},
		{"version ff", "ff-" + traceID + "-" + spanID + "-01"},
		{"short trace id", "00-" + traceID[2:] + "-" + spanID + "-01"},
		{"trailing data in version 00", "00-" + traceID + "-" + spanID + "-01-extra"},
		{"not hex", "00-" + strings.Repeat("g", 32) + "-" + spanID + "-01"},
		{"huge", "00-" + traceID + "-" + spanID + "-01" + strings.Repeat("-x", 4096)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp, rcv := exporting(t)
			tel, err := observe.New(observe.Options{TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			fe := referenceServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
			var meta mcp.Meta
			if tt.tp != nil {
				meta = mcp.Meta{observe.MetaTraceparent: tt.tp}
			}
			confirmedCall(t, fe, mcptest.EraLegacy, meta)
			tp.ForceFlush(context.Background())
			spans := rcv.Spans()
			var request []otlptest.Span
			for _, s := range spans {
				if s.TraceID == traceID {
					t.Fatalf("span %s continued the invalid traceparent's trace", s.Name)
				}
				if s.Name == "tools/call" {
					request = append(request, s)
				}
			}
			if len(request) != 1 || request[0].ParentID != "" {
				t.Fatalf("want one root tools/call span:\n%s", otlptest.Tree(spans))
			}
			if got, want := request[0].Attrs["mcp_confirm.traceparent_invalid"], map[bool]string{true: "", false: "true"}[tt.tp == nil]; got != want {
				t.Fatalf("traceparent_invalid = %q, want %q", got, want)
			}
			if err := checkTree(rcv.Trace(request[0].TraceID), request[0].TraceID, "", nil); err != nil {
				t.Fatalf("the new trace is not the call's tree: %v\n%s", err, otlptest.Tree(spans))
			}
		})
	}
}

// TestTracestateBounded: a client's tracestate is carried on the call's
// spans up to 8,192 bytes and dropped past it (W3C allows 32 members of
// 256-byte values, more than that), the trace still continued: the bound
// on what is parsed of a client's trace context. "vendor=1" and 31 full
// members (8,090 bytes) are the controls.
func TestTracestateBounded(t *testing.T) {
	members := func(n int) string {
		m := make([]string, n)
		for i := range m {
			m[i] = fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", 256))
		}
		return strings.Join(m, ",")
	}
	for _, c := range []struct {
		name, state string
		kept        bool
	}{
		{"one member", "vendor=1", true},
		{"31 members, 8090 bytes", members(31), true},
		{"32 members, 8351 bytes", members(32), false},
	} {
		for _, era := range eras {
			t.Run(c.name+"/"+era, func(t *testing.T) {
				tp, rcv := exporting(t)
				tel, err := observe.New(observe.Options{TracerProvider: tp})
				if err != nil {
					t.Fatal(err)
				}
				fe := referenceServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
				parent, traceID, _ := newTraceparent()
				confirmedCall(t, fe, era, mcp.Meta{observe.MetaTraceparent: parent, observe.MetaTracestate: c.state})
				spans := flushed(t, tp, rcv, traceID, "")
				if len(spans) == 0 {
					t.Fatalf("the trace was not continued:\n%s", otlptest.Tree(rcv.Spans()))
				}
				want := ""
				if c.kept {
					want = c.state
				}
				for _, s := range spans {
					if s.TraceState != want {
						t.Fatalf("span %s carries a tracestate of %d bytes, want %d", s.Name, len(s.TraceState), len(want))
					}
				}
			})
		}
	}
}

// TestTracesOffByDefault: without an OTEL_* variable that names an
// exporter, FromEnv returns no provider, New returns no Telemetry, and
// the assembled parts are the boundary alone; with OTEL_TRACES_EXPORTER
// or OTEL_SDK_DISABLED saying so, an endpoint set does not turn them on;
// an exporter or protocol this build lacks is refused, not ignored.
func TestTracesOffByDefault(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	ctx := context.Background()
	if tp, err := observe.FromEnv(ctx, "s", "v"); tp != nil || err != nil {
		t.Fatalf("FromEnv with no OTEL_* = %v, %v; want nil, nil", tp, err)
	}
	if tel, err := observe.New(observe.Options{}); tel != nil || err != nil {
		t.Fatalf("New with nothing on = %v, %v; want nil, nil", tel, err)
	}
	parts, err := confirm.Assemble(confirm.Setup{Name: "off", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts.Middleware) != 1 {
		t.Fatalf("%d receiving middleware without telemetry, want the boundary alone", len(parts.Middleware))
	}
	rcv := otlptest.Start(t)
	for _, tt := range []struct {
		name    string
		env     map[string]string
		on      bool
		refused string
	}{
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.URL + "/v1/traces"}, true, ""},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"exporter console", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_TRACES_EXPORTER": "console"}, false, "OTEL_TRACES_EXPORTER"},
		{"protocol grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tp, err := observe.FromEnv(ctx, "s", "v")
			if tp != nil {
				defer tp.Shutdown(ctx)
			}
			switch {
			case tt.refused != "":
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err = %v, want one naming %s", err, tt.refused)
				}
			case err != nil || (tp != nil) != tt.on:
				t.Fatalf("FromEnv = %v, %v; want on=%v", tp, err, tt.on)
			}
		})
	}
	if n, _ := rcv.Requests(); n != 0 {
		t.Fatalf("the receiver got %d export requests from providers that made no spans", n)
	}
}

// TestTraceRefusal: a call the requestState boundary refuses is traced: in
// the client's trace as a span of its own, requeststate.refused, naming
// the class (here a forged state); without a traceparent, on the call's
// tools/call span, marked as an error. No step's span is made: nothing
// ran.
func TestTraceRefusal(t *testing.T) {
	tp, rcv := exporting(t)
	tel, err := observe.New(observe.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := actServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
	cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept()})
	parent, traceID, clientSpan := newTraceparent()
	for _, meta := range []mcp.Meta{{observe.MetaTraceparent: parent}, nil} {
		p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": "done", "n": 1}}
		res, err := cs.CallTool(context.Background(), p)
		if err != nil || !res.NeedsInput() {
			t.Fatalf("ask: %v %s", err, mcptest.Describe(res))
		}
		state := res.RequestState
		p.Meta, p.RequestState = meta, state[:len(state)/2]+"AAAA"+state[len(state)/2+4:]
		p.InputResponses = mcp.InputResponseMap{confirm.InputID: mcptest.Yes()}
		_, err = cs.CallTool(context.Background(), p)
		mcptest.WantBoundaryRefusal(t, nil, err)
	}
	tp.ForceFlush(context.Background())
	var inTrace, refused []otlptest.Span
	for _, s := range rcv.Spans() {
		if s.TraceID == traceID {
			inTrace = append(inTrace, s)
		}
		if s.Attrs["mcp_confirm.refused"] != "" {
			refused = append(refused, s)
		}
	}
	if len(inTrace) != 1 || inTrace[0].Name != "requeststate.refused" || inTrace[0].ParentID != clientSpan ||
		inTrace[0].Attrs["mcp_confirm.refused"] != "forged" || inTrace[0].Status != "STATUS_CODE_ERROR" {
		t.Fatalf("in the client's trace, want one requeststate.refused span (forged):\n%s", otlptest.Tree(rcv.Spans()))
	}
	if len(refused) != 2 || refused[1].Name != "tools/call" || refused[1].ParentID != "" || refused[1].Attrs["mcp_confirm.refused"] != "forged" || refused[1].Status != "STATUS_CODE_ERROR" {
		t.Fatalf("without a traceparent, want the tools/call root marked forged:\n%s", otlptest.Tree(rcv.Spans()))
	}
	if spans := rcv.Trace(refused[1].TraceID); len(spans) != 1 {
		t.Fatalf("a refused call has steps' spans:\n%s", otlptest.Tree(spans))
	}
}

// TestTraceActOutcome: confirm.act carries the action's outcome, and an
// action that failed or whose outcome is unknown is an error span; one
// done is not (the control). Both protocol eras.
func TestTraceActOutcome(t *testing.T) {
	for _, era := range eras {
		for _, outcome := range []string{"done", "failed", "unknown"} {
			t.Run(era+"/"+outcome, func(t *testing.T) {
				tp, rcv := exporting(t)
				tel, err := observe.New(observe.Options{TracerProvider: tp})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := actServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel})
				cl := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: era, Answer: &mcptest.Answerer{Action: "accept", Confirm: true}})
				parent, traceID, _ := newTraceparent()
				p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": outcome, "n": 1}, Meta: mcp.Meta{observe.MetaTraceparent: parent}}
				if _, err := cl.CallTool(context.Background(), p); err != nil {
					t.Fatal(err)
				}
				act := flushed(t, tp, rcv, traceID, "confirm.act")
				wantStatus := "STATUS_CODE_ERROR"
				if outcome == "done" {
					wantStatus = "STATUS_CODE_UNSET"
				}
				if len(act) != 1 || act[0].Attrs["mcp_confirm.outcome"] != outcome || act[0].Status != wantStatus {
					t.Fatalf("want one confirm.act, outcome %s, %s; the spans:\n%s", outcome, wantStatus, otlptest.Tree(rcv.Spans()))
				}
			})
		}
	}
}
