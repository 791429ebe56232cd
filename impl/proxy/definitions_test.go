package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// How often the proxy reads the upstream's tool list for a confirmed call.
// From an upstream that declares tools.listChanged, it reads it once per
// upstream connection and again only after an announced change; from one
// that does not, once per confirmed call, before forwarding (the question
// uses the definition read last). A call the policy allows reads nothing.
func TestProxyDefinitionReads(t *testing.T) {
	for _, tt := range []struct {
		name     string
		upstream func(testing.TB, string) *upstream
		era      string
		// reads per confirmed call: the first on this client's upstream
		// connection, and each after it
		first, then int32
	}{
		{"announced/" + eraMRTR, newUpstream, eraMRTR, 0, 0},        // the shared connection read at start-up
		{"announced/" + eraLegacy, newUpstream, eraLegacy, 1, 0},    // a connection of its own, read once
		{"silent/" + eraMRTR, newSilentUpstream, eraMRTR, 1, 1},     // the check before forwarding
		{"silent/" + eraLegacy, newSilentUpstream, eraLegacy, 2, 1}, // + the first question on a new connection
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{up: tt.upstream(t, eraMRTR)})
			cs := e.connect(clientOptions{era: tt.era, answer: mcptest.Accept()})
			for i := range 3 {
				before := e.up.lists.Load()
				res, err := write(cs, "/tmp/a.txt", "x")
				wantResult(t, res, err, "wrote /tmp/a.txt")
				want := tt.then
				if i == 0 {
					want = tt.first
				}
				if got := e.up.lists.Load() - before; got != want {
					t.Fatalf("confirmed call %d read the tool list %d times, want %d", i+1, got, want)
				}
			}
			before := e.up.lists.Load()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "/tmp/a.txt"}})
			wantResult(t, res, err, "contents of /tmp/a.txt")
			if got := e.up.lists.Load() - before; got != 0 {
				t.Fatalf("an allowed call read the tool list %d times", got)
			}
			e.up.wantCalls(t, "write", 3)
		})
	}
}

// An announced change empties the cache: the next confirmed call reads the
// new definition, asks about it and goes through; the call approved before
// the change is refused (TestProxyToolRedefinedAfterQuestion).
func TestProxyListChangedRefreshes(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			changed := make(chan struct{}, 10)
			cs := e.connect(clientOptions{era: era, answer: mcptest.Accept(), copts: &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			}})
			res, err := write(cs, "/tmp/a.txt", "x")
			wantResult(t, res, err, "wrote /tmp/a.txt")
			no := false
			e.up.addWrite(&mcp.ToolAnnotations{DestructiveHint: &no})
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("the proxy did not relay the upstream's tools/list_changed")
			}
			before := e.up.lists.Load()
			res, err = write(cs, "/tmp/b.txt", "y")
			wantResult(t, res, err, "wrote /tmp/b.txt")
			if got := e.up.lists.Load() - before; got != 1 {
				t.Fatalf("the first confirmed call after the change read the tool list %d times, want 1", got)
			}
			e.up.wantCalls(t, "write", 2)
		})
	}
}

// A definition cached before the upstream changed it without a word may
// only cause a refusal: the question is asked about the old definition,
// the check before forwarding reads the new one, refuses, and keeps it;
// asked again, the call goes through.
func TestProxyStaleDefinitionOnlyRefuses(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, envOptions{up: newSilentUpstream(t, eraMRTR)})
			cs := e.connect(clientOptions{era: era, answer: mcptest.Accept()})
			res, err := write(cs, "/tmp/a.txt", "x") // the connection has read the list
			wantResult(t, res, err, "wrote /tmp/a.txt")
			no := false
			e.up.addWrite(&mcp.ToolAnnotations{DestructiveHint: &no})
			res, err = write(cs, "/tmp/b.txt", "y")
			mcptest.WantToolRefusal(t, res, err, "changed the tool")
			e.up.wantCalls(t, "write", 1)
			res, err = write(cs, "/tmp/b.txt", "y")
			wantResult(t, res, err, "wrote /tmp/b.txt")
			e.up.wantCalls(t, "write", 2)
		})
	}
}

// The input schema a question is checked against is the tool's current
// one: compiled once per definition (keyed by its fingerprint), compiled
// again when the upstream changes it. A string for an integer is refused;
// once the upstream wants a string, the same call is asked and runs.
func TestProxySchemaFollowsDefinition(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			u := newUpstream(t, eraMRTR)
			typed := func(typ string) func() []string {
				return rawTool(u, "typed", map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": typ}}})
			}
			typed("integer")
			e := newEnv(t, envOptions{up: u})
			changed := make(chan struct{}, 10)
			cs := e.connect(clientOptions{era: era, answer: mcptest.Accept(), copts: &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			}})
			call := func() (*mcp.CallToolResult, error) {
				return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "typed", Arguments: map[string]any{"n": "x"}})
			}
			for range 2 { // the second time from the compiled schema
				res, err := call()
				mcptest.WantToolRefusal(t, res, err, "wants an integer")
			}
			got := typed("string")
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("the proxy did not relay the upstream's tools/list_changed")
			}
			res, err := call()
			wantResult(t, res, err, "ran")
			if n := len(got()); n != 1 {
				t.Fatalf("the upstream ran typed %d times, want 1", n)
			}
		})
	}
}
