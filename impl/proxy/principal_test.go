package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// principals are the users the bearer tokens of authHandler name.
var principals = map[string]string{"alice-token": "alice", "bob-token": "bob"}

// authHandler is the proxy behind the project's HTTP front door with
// go-sdk's bearer auth in its Auth slot: the principal is the token's
// user (the proxy's default principal source).
func (e *env) authHandler() http.Handler {
	e.t.Helper()
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := principals[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h, err := serve.NewHTTP(e.proxy.MCP(), serve.HTTPOptions{
		Logger: slog.New(slog.NewTextHandler(e.log, nil)),
		Auth:   auth.RequireBearerToken(verify, nil),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// The follow-up an upstream asks inside Alice's approved call
// (2026-07-28) is hers to answer, over HTTP with bearer tokens. Its state,
// replayed by Bob with an accepting answer, is refused by the boundary
// (it is sealed to Alice) before the ledger; re-sealed to Bob, as only a
// holder of the key could, it passes the boundary and is refused by the
// gate, whose ledger record of the follow-up names Alice. Nothing reaches
// the upstream; Alice's own answer then goes through, once (the control:
// what Bob tried spent nothing of hers). The older era has no state to
// replay: the follow-up is an elicitation request on Alice's own session,
// which go-sdk's HTTP handler keeps to the user who opened it.
func TestProxyFollowUpBoundToItsPrincipal(t *testing.T) {
	{
		u := newUpstream(t, eraMRTR)
		addColor(u)
		e := newEnv(t, envOptions{up: u, policy: `ask = ["color"]`})
		h := e.authHandler()
		connect := func(token string) *mcp.ClientSession {
			return mcptest.Connect(t, e.proxy.MCP(), h, mcptest.ClientOptions{Transport: httpT, Manual: true, Answer: mcptest.Accept(), Header: bearer(token)})
		}
		alice, bob := connect("alice-token"), connect("bob-token")
		call := func(cs *mcp.ClientSession, n int, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
			return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color", Arguments: map[string]any{"n": n}, RequestState: state, InputResponses: responses})
		}
		// followUp approves Alice's call n and returns the state of the
		// upstream's follow-up question.
		followUp := func(n int) string {
			t.Helper()
			res, err := call(alice, n, "", nil)
			if err != nil || !res.NeedsInput() {
				t.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
			}
			res, err = call(alice, n, res.RequestState, mcp.InputResponseMap{"confirm": mcptest.Yes()})
			if err != nil || !res.NeedsInput() || res.InputRequests["color"] == nil {
				t.Fatalf("approved round: want the upstream's question, got err=%v res=%s", err, mcptest.Describe(res))
			}
			return res.RequestState
		}
		first, second := followUp(1), followUp(2)
		redeemed := e.count(ledger.ActionRedeem, ledger.ResultOK)
		answer := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}

		res, err := call(bob, 1, first, answer)
		mcptest.WantBoundaryRefusal(t, res, err)
		u.wantCalls(t, "color", 0)
		if n := e.count(ledger.ActionRedeem, ledger.ResultOK); n != redeemed {
			t.Fatalf("%d redeemed after Bob's replay, want %d: the boundary must refuse before the ledger", n, redeemed)
		}

		ring, err := statetoken.NewRing([][]byte{testKey})
		if err != nil {
			t.Fatal(err)
		}
		claims, _, err := ring.Open(second)
		if err != nil {
			t.Fatal(err)
		}
		claims.Principal = ring.PrincipalClaim("bob")
		resealed, err := ring.Seal(claims)
		if err != nil {
			t.Fatal(err)
		}
		res, err = call(bob, 2, resealed, answer)
		mcptest.WantToolRefusal(t, res, err, "given for a different call")
		u.wantCalls(t, "color", 0)

		res, err = call(alice, 1, first, answer)
		wantResult(t, res, err, "painted blue")
		u.wantCalls(t, "color", 1)
	}
}
