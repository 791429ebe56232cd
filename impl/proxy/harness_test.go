package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// Protocol eras under test, on either side of the proxy.
const (
	eraMRTR   = mcptest.EraMRTR
	eraLegacy = mcptest.EraLegacy
)

var eras = []string{eraMRTR, eraLegacy}

var testKey = []byte("0123456789abcdef0123456789abcdef-proxy-key")

// upstream is an in-process go-sdk MCP server that the proxy fronts. It
// counts every call each tool receives and keeps the arguments.
type upstream struct {
	t      testing.TB
	era    string
	server *mcp.Server
	mu     sync.Mutex
	calls  map[string][]map[string]any
	// loseWriteReply, when set, makes the next write's reply vanish: the
	// proxy's connection breaks as the reply arrives.
	loseWriteReply atomic.Bool
	cut            atomic.Bool
	writeDelay     time.Duration // how long write takes
	subscribed     atomic.Int32  // resources/subscribe calls received
	// sessions are the proxy's connections to this upstream.
	sessions atomic.Int32
	// lists counts the tools/list requests received (every page).
	lists  atomic.Int32
	lastSS atomic.Pointer[mcp.ServerSession]
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"the file to write"`
	Content string `json:"content" jsonschema:"what to write"`
}

type readArgs struct {
	Path string `json:"path"`
}

func newUpstream(t testing.TB, era string) *upstream {
	t.Helper()
	return newUpstreamWith(t, era, nil)
}

// newSilentUpstream is newUpstream for an upstream that does not declare
// tools.listChanged: it changes its tools without a word.
func newSilentUpstream(t testing.TB, era string) *upstream {
	t.Helper()
	return newUpstreamWith(t, era, &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}})
}

// newUpstreamWith is newUpstream with the capabilities caps (nil: go-sdk's,
// which declare tools.listChanged).
func newUpstreamWith(t testing.TB, era string, caps *mcp.ServerCapabilities) *upstream {
	t.Helper()
	u := &upstream{t: t, era: era, calls: map[string][]map[string]any{}}
	opts := &mcp.ServerOptions{
		Instructions: "upstream instructions",
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-completed"}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			u.subscribed.Add(1)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		Capabilities:       caps,
	}
	if era == eraLegacy {
		opts.SupportedProtocolVersions = []string{eraLegacy, "2025-06-18", "2025-03-26", "2024-11-05"}
	}
	u.server = mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, opts)
	u.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				u.lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	u.addWrite(nil)
	mcp.AddTool(u.server, &mcp.Tool{Name: "read", Description: "Reads a file.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			u.record("read", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + in.Path}}}, nil, nil
		})
	mcp.AddTool(u.server, &mcp.Tool{Name: "delete", Description: "Deletes a file."},
		func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			u.record("delete", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	return u
}

// addWrite (re)defines the write tool; a non-nil annotations changes its
// definition (and so its fingerprint).
func (u *upstream) addWrite(a *mcp.ToolAnnotations) {
	mcp.AddTool(u.server, &mcp.Tool{Name: "write", Description: "Writes a file.", Annotations: a},
		func(ctx context.Context, req *mcp.CallToolRequest, in writeArgs) (*mcp.CallToolResult, any, error) {
			if u.loseWriteReply.Load() {
				u.cut.Store(true)
			}
			time.Sleep(u.writeDelay)
			u.record("write", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
		})
}

func (u *upstream) record(tool string, req *mcp.CallToolRequest) {
	var args map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &args)
	u.mu.Lock()
	u.calls[tool] = append(u.calls[tool], args)
	u.mu.Unlock()
}

// count is how many times tool ran upstream.
func (u *upstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.calls[tool])
}

func (u *upstream) wantCalls(t *testing.T, tool string, n int) {
	t.Helper()
	if got := u.count(tool); got != n {
		t.Fatalf("upstream ran %s %d times, want %d", tool, got, n)
	}
}

// connect is the proxy's Options.Connect: a fresh in-memory connection.
func (u *upstream) connect(ctx context.Context) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := u.server.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	u.sessions.Add(1)
	u.lastSS.Store(ss)
	u.t.Cleanup(func() { ss.Close() })
	return cutTransport{ct, &u.cut}, nil
}

// cutTransport breaks its connection, dropping the message, when the first
// response arrives after cut is set.
type cutTransport struct {
	mcp.Transport
	cut *atomic.Bool
}

func (t cutTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return cutConn{c, t.cut}, err
}

type cutConn struct {
	mcp.Connection
	cut *atomic.Bool
}

func (c cutConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if _, ok := m.(*jsonrpc.Response); ok && err == nil && c.cut.CompareAndSwap(true, false) {
		c.Connection.Close()
		return nil, io.EOF
	}
	return m, err
}

// env is one proxy in front of one upstream.
type env struct {
	t      testing.TB
	up     *upstream
	proxy  *proxy.Proxy
	log    *mcptest.SyncBuffer
	mu     sync.Mutex
	events []ledger.Event
}

type envOptions struct {
	upstreamEra string // default eraMRTR
	up          *upstream
	policy      string // TOML; "" means the default test policy
	store       ledger.Store
	name        string
	quiet       bool // log nothing (benchmarks)
	maxSessions int
	lease       time.Duration
	telemetry   *observe.Telemetry // nil: none
}

const testPolicy = `
name = "files"
allow = ["read"]
deny = ["delete"]
`

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.upstreamEra == "" {
		o.upstreamEra = eraMRTR
	}
	if o.up == nil {
		o.up = newUpstream(t, o.upstreamEra)
	}
	if o.policy == "" {
		o.policy = testPolicy
	}
	pol, err := proxy.ParsePolicy(strings.NewReader(o.policy))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	e := &env{t: t, up: o.up, log: &mcptest.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.quiet {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := proxy.New(ctx, proxy.Options{
		Setup: confirm.Setup{
			Name:      o.name,
			Keys:      [][]byte{testKey},
			Store:     o.store,
			Logger:    logger,
			Lease:     o.lease,
			Telemetry: o.telemetry,
			Observe: func(ev ledger.Event) {
				e.mu.Lock()
				e.events = append(e.events, ev)
				e.mu.Unlock()
			},
		},
		Connect:     o.up.connect,
		Policy:      pol,
		MaxSessions: o.maxSessions,
	})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	e.proxy = p
	return e
}

// handler is the proxy behind the project's one HTTP front door, with its
// default limits.
func (e *env) handler() http.Handler {
	e.t.Helper()
	h, err := serve.NewHTTP(e.proxy.MCP(), serve.HTTPOptions{Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// issued counts the confirmations the proxy's ledger issued.
func (e *env) issued() int { return e.count(ledger.ActionIssue, ledger.ResultOK) }

// count counts the ledger's events of action a with result r.
func (e *env) count(a ledger.Action, r ledger.Result) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev.Action == a && ev.Result == r {
			n++
		}
	}
	return n
}

type clientOptions struct {
	era       string // default eraMRTR
	answer    *mcptest.Answerer
	manual    bool // MRTR only: return input_required to the test instead of retrying
	transport string
	copts     *mcp.ClientOptions
}

const (
	inMemory = mcptest.InMemory
	httpT    = mcptest.HTTP
)

// connect starts a real go-sdk client session to the proxy.
func (e *env) connect(o clientOptions) *mcp.ClientSession {
	e.t.Helper()
	var h http.Handler
	if o.transport == httpT {
		h = e.handler()
	}
	return mcptest.Connect(e.t, e.proxy.MCP(), h, mcptest.ClientOptions{
		Era: o.era, Transport: o.transport, Answer: o.answer, Manual: o.manual, Client: o.copts,
	})
}

func write(cs *mcp.ClientSession, path, content string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": path, "content": content}})
}

func retryWrite(cs *mcp.ClientSession, path, content, state string, answer *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:           "write",
		Arguments:      map[string]any{"path": path, "content": content},
		InputResponses: mcp.InputResponseMap{"confirm": answer},
		RequestState:   state,
	})
}

// askWrite performs the first round by hand and returns the sealed state
// and the question.
func askWrite(t *testing.T, cs *mcp.ClientSession, path, content string) (state, question string) {
	t.Helper()
	res, err := write(cs, path, content)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: want input_required with a requestState, got %s", mcptest.Describe(res))
	}
	q, ok := res.InputRequests["confirm"].(*mcp.ElicitParams)
	if !ok {
		t.Fatalf("first round: no elicitation in %s", mcptest.Describe(res))
	}
	return res.RequestState, q.Message
}

func wantResult(t *testing.T, res *mcp.CallToolResult, err error, want string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the upstream's result, got err=%v res=%s", err, mcptest.Describe(res))
	}
	if !strings.Contains(mcptest.Text(res), want) {
		t.Fatalf("result %q does not mention %q", mcptest.Text(res), want)
	}
}

// visible is s without the bidi isolates that prompt puts around values and
// path components (U+2066..U+2069), for tests that look for plain text.
func visible(s string) string {
	return strings.Map(func(r rune) rune {
		if '\u2066' <= r && r <= '\u2069' {
			return -1
		}
		return r
	}, s)
}
