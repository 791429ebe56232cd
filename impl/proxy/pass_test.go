package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// addPaint gives the upstream a tool like addColor's, with the readOnlyHint
// readOnly, that asks a question of its own before it runs.
func addPaint(u *upstream, readOnly bool) {
	u.server.AddTool(&mcp.Tool{Name: "paint", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
				u.record("paint", req)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "painted " + r.Content["color"].(string)}}}, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
				Message:         "Which color?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}},
			}}, RequestState: "upstream-state"}, nil
		})
}

// A call the policy allowed only on the upstream's readOnlyHint, whose
// upstream (2026-07-28) asked a question of its own: if the upstream drops
// the hint before the answer comes back, the answer round is decided
// again and refused (the proxy's pass state is no approval), and nothing
// reaches the upstream. With the hint kept, the answer goes through (the
// control).
func TestProxyPassStateDecidedAgain(t *testing.T) {
	for _, change := range []bool{false, true} {
		u := newSilentUpstream(t, eraMRTR)
		addPaint(u, true)
		e := newEnv(t, envOptions{up: u, policy: testPolicy + "allow_read_only_hint = true\n"})
		cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "paint", Arguments: map[string]any{}})
		if err != nil || !res.NeedsInput() || res.InputRequests["color"] == nil {
			t.Fatalf("first round: want the upstream's question, got err=%v res=%s", err, mcptest.Describe(res))
		}
		if e.issued() != 0 {
			t.Fatalf("the allowed call issued %d confirmations", e.issued())
		}
		if change {
			addPaint(u, false)
		}
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "paint", Arguments: map[string]any{}, RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}})
		if change {
			mcptest.WantToolRefusal(t, res, err, "now needs a confirmation")
			u.wantCalls(t, "paint", 0)
		} else {
			wantResult(t, res, err, "painted blue")
			u.wantCalls(t, "paint", 1)
		}
	}
}

// With allow_read_only_hint, a call is allowed only on a definition read
// now: if the upstream's tools cannot be read (a silent upstream, read
// before every decision, whose tools/list fails), the call is not
// forwarded unasked; whatever the proxy then answers, nothing reaches the
// upstream. The same call with the list readable asks (the control:
// write is not read-only).
func TestProxyUnreadableDefinitionNotAllowed(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			u := newSilentUpstream(t, eraMRTR)
			var failList atomic.Bool
			u.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "tools/list" && failList.Load() {
						return nil, errors.New("tools/list is down")
					}
					return next(ctx, method, req)
				}
			})
			e := newEnv(t, envOptions{up: u, policy: testPolicy + "allow_read_only_hint = true\n"})
			answer := mcptest.Accept()
			cs := e.connect(clientOptions{era: era, manual: era == eraMRTR, answer: answer})
			res, err := write(cs, "/tmp/a.txt", "x")
			if era == eraMRTR && (err != nil || !res.NeedsInput()) {
				t.Fatalf("control: want a question, got err=%v res=%s", err, mcptest.Describe(res))
			}
			u.wantCalls(t, "write", map[string]int{eraMRTR: 0, eraLegacy: 1}[era])
			failList.Store(true)
			res, err = write(cs, "/tmp/b.txt", "x")
			if err == nil && !res.IsError && !res.NeedsInput() {
				t.Errorf("with the upstream's tools unreadable: %s, want a question or a refusal", mcptest.Describe(res))
			}
			u.wantCalls(t, "write", map[string]int{eraMRTR: 0, eraLegacy: 1}[era])
		})
	}
}

// The continuation of an approved call (its upstream asked a follow-up)
// is a single-use approval bound, in the ledger, to the call approved. A
// continuation state re-sealed (with the proxy's own key, as only a holder
// of the key could) to stand for another call (another tool that needs a
// confirmation, with the same arguments; or other arguments) passes the
// boundary for that call and is refused by the gate: nothing is
// forwarded. The same state re-sealed unchanged goes through (the
// control: the re-sealing itself is sound).
func TestProxyContinuationBoundToItsCall(t *testing.T) {
	ring, err := statetoken.NewRing([][]byte{testKey})
	if err != nil {
		t.Fatal(err)
	}
	digest := func(args map[string]any) string {
		b, _ := json.Marshal(args)
		d, err := requeststate.ArgumentsDigest(b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	answer := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"another tool", "paint", map[string]any{}},
		{"other arguments", "color", map[string]any{"shade": "dark"}},
		{"control", "color", map[string]any{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t, eraMRTR)
			addColor(u)
			addPaint(u, false)
			e := newEnv(t, envOptions{up: u, policy: "name = \"files\"\nask = [\"color\", \"paint\"]\n"})
			cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color", Arguments: map[string]any{}})
			if err != nil || !res.NeedsInput() {
				t.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
			}
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color", Arguments: map[string]any{}, RequestState: res.RequestState,
				InputResponses: mcp.InputResponseMap{"confirm": mcptest.Yes()}})
			if err != nil || !res.NeedsInput() || res.InputRequests["color"] == nil {
				t.Fatalf("approved round: want the upstream's question, got err=%v res=%s", err, mcptest.Describe(res))
			}
			claims, _, err := ring.Open(res.RequestState)
			if err != nil {
				t.Fatal(err)
			}
			claims.Target, claims.ArgsDigest = c.tool, digest(c.args)
			state, err := ring.Seal(claims)
			if err != nil {
				t.Fatal(err)
			}
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args, RequestState: state, InputResponses: answer})
			if c.name == "control" {
				wantResult(t, res, err, "painted blue")
				u.wantCalls(t, "color", 1)
				return
			}
			mcptest.WantToolRefusal(t, res, err, "given for a different call")
			u.wantCalls(t, "color", 0)
			u.wantCalls(t, "paint", 0)
		})
	}
}
