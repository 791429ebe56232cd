package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

// Protocol eras under test.
const (
	eraMRTR   = "2026-07-28" // multi round-trip requests: the client retries
	eraLegacy = "2025-11-25" // the server elicits in-process
)

var testKey = []byte("0123456789abcdef0123456789abcdef-test-key")

// The real-client test support this package shares with the proxy's tests.
type (
	answerer   = mcptest.Answerer
	syncBuffer = mcptest.SyncBuffer
)

// env is one running server with its own root directory and ledger trace.
type env struct {
	t      *testing.T
	root   string
	srv    *server.Server
	log    *syncBuffer
	mu     sync.Mutex
	events []ledger.Event
}

type envOptions struct {
	roots     []string // nil: one fresh temporary root
	noRoots   bool
	walk      bool // resolve paths by the openat walk instead of openat2
	keys      [][]byte
	name      string
	lease     time.Duration
	store     ledger.Store
	principal func(context.Context, mcp.Request) (string, error)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, log: &syncBuffer{}}
	roots := o.roots
	if roots == nil && !o.noRoots {
		e.root = t.TempDir()
		roots = []string{e.root}
	}
	if o.keys == nil {
		o.keys = [][]byte{testKey}
	}
	srv, err := server.New(server.Options{
		Setup: confirm.Setup{
			Name:      o.name,
			Keys:      o.keys,
			Store:     o.store,
			Lease:     o.lease,
			Principal: o.principal,
			Logger:    slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Observe: func(ev ledger.Event) {
				e.mu.Lock()
				e.events = append(e.events, ev)
				e.mu.Unlock()
			},
		},
		Roots:   roots,
		Beneath: beneath.Options{Walk: o.walk},
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	e.srv = srv
	return e
}

// issued counts the confirmations this server's ledger issued.
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

// file creates a file under the root and returns its absolute path.
func (e *env) file(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func accept() *answerer  { return mcptest.Accept() }
func decline() *answerer { return mcptest.Decline() }

// transport kinds.
const (
	inMemory = "in-memory"
	httpT    = "http"
)

// eachEraAndTransport runs f as subtest era/transport for both protocol
// eras over both transports.
func eachEraAndTransport(t *testing.T, f func(t *testing.T, era, transport string)) {
	for _, era := range []string{eraMRTR, eraLegacy} {
		for _, transport := range []string{inMemory, httpT} {
			t.Run(era+"/"+transport, func(t *testing.T) { f(t, era, transport) })
		}
	}
}

type clientOptions struct {
	era       string
	transport string
	answer    *answerer // nil: the client declares no elicitation capability
	manual    bool      // MRTR only: return input_required to the test instead of retrying
	header    http.Header
}

// connect starts a real go-sdk client session to e's server.
func (e *env) connect(o clientOptions) *mcp.ClientSession {
	e.t.Helper()
	var h http.Handler
	if o.transport == httpT {
		h = e.srv.Handler()
	}
	return mcptest.Connect(e.t, e.srv.MCP(), h, mcptest.ClientOptions{
		Era: o.era, Transport: o.transport, Answer: o.answer, Manual: o.manual, Header: o.header,
	})
}

// call calls delete_file on path.
func call(cs *mcp.ClientSession, path string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}})
}

// retry answers an input_required result by hand, as an MRTR client does.
func retry(cs *mcp.ClientSession, path, state string, answer *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:           "delete_file",
		Arguments:      map[string]any{"path": path},
		InputResponses: mcp.InputResponseMap{"confirm": answer},
		RequestState:   state,
	})
}

func yes() *mcp.ElicitResult { return mcptest.Yes() }

// ask performs the first round by hand and returns the sealed state.
func ask(t *testing.T, cs *mcp.ClientSession, path string) string {
	t.Helper()
	res, err := call(cs, path)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: want input_required with a requestState, got %s", describe(res))
	}
	if _, ok := res.InputRequests["confirm"].(*mcp.ElicitParams); !ok {
		t.Fatalf("first round: no elicitation in %s", describe(res))
	}
	return res.RequestState
}

func describe(res *mcp.CallToolResult) string { return mcptest.Describe(res) }

func text(res *mcp.CallToolResult) string {
	return strings.TrimPrefix(strings.TrimPrefix(describe(res), "tool error: "), "result: ")
}

// wantBoundaryRefusal asserts that the requestState boundary refused the
// call: a JSON-RPC error with exactly the frozen code, message and data.
func wantBoundaryRefusal(t *testing.T, res *mcp.CallToolResult, err error) {
	t.Helper()
	mcptest.WantBoundaryRefusal(t, res, err)
}

// wantToolRefusal asserts that the tool (not the boundary) refused the
// call with an IsError result mentioning want.
func wantToolRefusal(t *testing.T, res *mcp.CallToolResult, err error, want string) {
	t.Helper()
	mcptest.WantToolRefusal(t, res, err, want)
}

func wantDeleted(t *testing.T, res *mcp.CallToolResult, err error, path string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want deletion, got err=%v res=%s", err, describe(res))
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists after a reported deletion (%v)", path, err)
	}
}

// wantReplayed asserts that a retry was answered with first, the result
// of the approval's one execution, marked as the earlier execution's.
func wantReplayed(t *testing.T, res *mcp.CallToolResult, err error, first string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the earlier result, got err=%v res=%s", err, describe(res))
	}
	if got := text(res); !strings.Contains(got, earlier) || !strings.HasSuffix(got, first) {
		t.Fatalf("retry answered %q, want %q marked as the earlier execution's", got, first)
	}
}

func wantExists(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s should not have been touched: %v", p, err)
		}
	}
}

// earlier marks the answer to a retry of an approval already acted on:
// the recorded result, given back.
const earlier = "result of that earlier execution"
