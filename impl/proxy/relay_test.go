package proxy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// addColor gives the upstream a tool that asks a question of its own
// (input_required, which go-sdk turns into an in-process elicitation for
// older clients) and records the call its answer completes.
func addColor(u *upstream) {
	empty := map[string]any{"type": "object"}
	u.server.AddTool(&mcp.Tool{Name: "color", InputSchema: empty}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
			u.record("color", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "painted " + r.Content["color"].(string)}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
			Message:         "Which color? (the upstream's own question)",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}},
		}}, RequestState: "upstream-state"}, nil
	})
}

const relayPolicy = `name = "files"
allow = ["read", "color"]
deny = ["delete"]
`

// The upstream's own question inside an allowed call reaches the client:
// in-band as input_required (an upstream of the 2026-07-28 era), or as an
// elicitation request relayed on the session's own upstream connection (an
// older upstream, older client). An older upstream cannot put its question
// to a 2026-07-28 client (which cannot receive server-initiated requests):
// the call fails cleanly and nothing runs.
func TestProxyRelaysUpstreamQuestion(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			for _, transport := range []string{inMemory, httpT} {
				t.Run("client "+down+"/upstream "+up+"/"+transport, func(t *testing.T) {
					u := newUpstream(t, up)
					addColor(u)
					e := newEnv(t, envOptions{up: u, policy: relayPolicy})
					var asked []string
					copts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked = append(asked, req.Params.Message)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}, nil
					}}
					cs := e.connect(clientOptions{era: down, copts: copts, transport: transport})
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color"})
					if down == eraMRTR && up == eraLegacy {
						if err == nil && !res.IsError {
							t.Fatalf("want a clean failure, got %s", mcptest.Describe(res))
						}
						u.wantCalls(t, "color", 0)
						return
					}
					wantResult(t, res, err, "painted blue")
					if len(asked) != 1 || asked[0] != "Which color? (the upstream's own question)" {
						t.Fatalf("the client was asked %q, want the upstream's question once", asked)
					}
					u.wantCalls(t, "color", 1)
				})
			}
		}
	}
}

// colorCall returns a call of the color tool on cs, carrying state and
// responses.
func colorCall(cs *mcp.ClientSession) func(state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	return func(state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color", Arguments: map[string]any{}, InputResponses: responses, RequestState: state})
	}
}

// askColor makes the first round of a color call through call and returns
// the state of the proxy's question.
func askColor(t *testing.T, call func(string, mcp.InputResponseMap) (*mcp.CallToolResult, error)) string {
	t.Helper()
	res, err := call("", nil)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
	}
	return res.RequestState
}

// An approved call whose upstream (2026-07-28) asks a follow-up question:
// the question reaches the client, the answer is forwarded once, and the
// round carrying it is single-use like the approval (a replay sends
// nothing).
func TestProxyFollowUpOnce(t *testing.T) {
	u := newUpstream(t, eraMRTR)
	addColor(u)
	e := newEnv(t, envOptions{up: u, policy: `ask = ["color"]`})
	cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
	call := colorCall(cs)
	res, err := call(askColor(t, call), mcp.InputResponseMap{"confirm": mcptest.Yes()})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("approved round: want the upstream's own question, got err=%v res=%s", err, mcptest.Describe(res))
	}
	q, ok := res.InputRequests["color"].(*mcp.ElicitParams)
	if !ok || q.Message != "Which color? (the upstream's own question)" {
		t.Fatalf("the upstream's question did not come through: %+v", res.InputRequests)
	}
	followUp := res.RequestState
	answer := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}
	res, err = call(followUp, answer)
	wantResult(t, res, err, "painted blue")
	u.wantCalls(t, "color", 1)
	res, err = call(followUp, answer)
	mcptest.WantToolRefusal(t, res, err, "already used")
	u.wantCalls(t, "color", 1)
}

// An approved call whose upstream (2026-07-28) asks a follow-up question
// the ledger cannot record (its store fails the follow-up's Add): the
// client is told so, plainly, and given no state to answer with, since a
// follow-up without its single-use record could be answered, and the call
// sent on, any number of times. The upstream is sent no answer (nothing
// is painted). The store failing nothing is TestProxyFollowUpOnce.
func TestProxyFollowUpUnrecordedRefused(t *testing.T) {
	u := newUpstream(t, eraMRTR)
	addColor(u)
	store := &failingAdds{Store: ledger.NewMemory(ledger.MemoryOptions{}), from: 2}
	e := newEnv(t, envOptions{up: u, policy: `ask = ["color"]`, store: store})
	cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
	call := colorCall(cs)
	res, err := call(askColor(t, call), mcp.InputResponseMap{"confirm": mcptest.Yes()})
	mcptest.WantToolRefusal(t, res, err, "could not record")
	if res.RequestState != "" {
		t.Fatalf("a state to answer an unrecorded follow-up with: %q", res.RequestState)
	}
	u.wantCalls(t, "color", 0)
	if !strings.Contains(e.log.String(), "cannot record the upstream's follow-up question") {
		t.Fatalf("the failure was not logged:\n%s", e.log.String())
	}
}

// failingAdds is a store whose Adds fail from the from-th on, as a store
// that went away between a call's question and the upstream's follow-up.
type failingAdds struct {
	ledger.Store
	mu         sync.Mutex
	from, adds int
}

func (s *failingAdds) Add(ctx context.Context, c ledger.Confirmation) error {
	s.mu.Lock()
	s.adds++
	fail := s.adds >= s.from
	s.mu.Unlock()
	if fail {
		return errors.New("failingAdds: the store went away")
	}
	return s.Store.Add(ctx, c)
}

// A follow-up question an upstream asks inside an approved call is put to
// the person like the proxy's own, and counted as a question asked: two
// questions for the call of TestProxyFollowUpOnce, each one issue in the
// ledger; the answer to the follow-up and its refused replay ask nothing.
func TestProxyFollowUpCounted(t *testing.T) {
	tel, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstream(t, eraMRTR)
	addColor(u)
	e := newEnv(t, envOptions{up: u, policy: `ask = ["color"]`, telemetry: tel})
	cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
	call := colorCall(cs)
	wantQuestions := func(when string, want float64) {
		t.Helper()
		if got := counterValue(t, tel, "mcp_confirm_questions_total"); got != want || e.issued() != int(want) {
			t.Fatalf("%s: mcp_confirm_questions_total = %v and %d issued, want %v of each", when, got, e.issued(), want)
		}
	}
	state := askColor(t, call)
	wantQuestions("the proxy's question", 1)
	res, err := call(state, mcp.InputResponseMap{"confirm": mcptest.Yes()})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("approved round: want the upstream's own question, got err=%v res=%s", err, mcptest.Describe(res))
	}
	wantQuestions("the upstream's follow-up question", 2)
	followUp := res.RequestState
	answer := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}
	res, err = call(followUp, answer)
	wantResult(t, res, err, "painted blue")
	res, err = call(followUp, answer)
	mcptest.WantToolRefusal(t, res, err, "already used")
	wantQuestions("the answer and its replay", 2)
	u.wantCalls(t, "color", 1)
}

// counterValue returns the value of the counter name (no labels) in tel's
// registry, or 0 if it has no sample.
func counterValue(t *testing.T, tel *observe.Telemetry, name string) float64 {
	t.Helper()
	mfs, err := tel.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}
