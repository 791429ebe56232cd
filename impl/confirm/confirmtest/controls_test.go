package confirmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm/confirmtest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// A fault is a way a front end can get the contract wrong.
type fault string

const (
	sound fault = ""
	// skipRedeem acts on an approving answer without redeeming it: the
	// ledger is asked, never spent.
	skipRedeem fault = "acts without redeeming"
	// ownLedger ignores the store it is given and keeps a ledger of its
	// own, in memory.
	ownLedger fault = "keeps a ledger of its own"
	// approveAll takes any answer — declined, cancelled, without
	// confirm=true — for an approval.
	approveAll fault = "takes any answer for a yes"
	// actUnasked acts at once for a client that cannot be asked.
	actUnasked fault = "acts when it cannot ask"
	// anyone binds every approval to one principal, whoever calls.
	anyone fault = "ignores who is calling"
	// ownClock ignores the clock it is given and runs on the real one.
	ownClock fault = "ignores the clock"
	// dropArguments drops the arguments its tool does not know before
	// the boundary sees them, so the boundary binds what is left.
	dropArguments fault = "drops unknown arguments before the boundary"
	// actUnapproved acts on a retry once the client says it went to the
	// approval page, before anyone approved there.
	actUnapproved fault = "acts before the out-of-band approval"
	// inBandOnly ignores the out-of-band approval it is set up with, and
	// asks in band alone.
	inBandOnly fault = "ignores out-of-band approval"
)

// toy is what the toy front end acts on: a counter per subject.
type toy struct {
	mu    sync.Mutex
	acted map[string]int
}

func (y *toy) act(subject string) *mcp.CallToolResult {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.acted[subject]++
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Acted on %s.", subject)}}}
}

func (y *toy) Effects(subject string) int {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.acted[subject]
}

func call(subject string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"subject": subject}}
}

// toyFrontEnd is the smallest confirming front end: the boundary, a
// ledger and the flow of confirm.Assemble, and one confirmed tool, "act",
// whose action counts; with fault, broken in that one way.
func toyFrontEnd(t testing.TB, setup confirm.Setup, y *toy, f fault) *confirmtest.FrontEnd {
	switch f {
	case ownLedger:
		setup.Store = nil
	case anyone:
		setup.Principal = func(context.Context, mcp.Request) (string, error) { return "", nil }
	case ownClock:
		setup.Now = nil
	case inBandOnly:
		setup.Approval = confirm.Approval{}
	}
	parts, err := confirm.Assemble(setup)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(parts.Implementation, nil)
	s.AddReceivingMiddleware(parts.Boundary.Middleware())
	if f == dropArguments {
		s.AddReceivingMiddleware(dropUnknown) // outside the boundary: it runs first
	}
	s.AddTool(&mcp.Tool{Name: "act", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"subject": map[string]any{"type": "string"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Subject string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			retry := req.Params.RequestState != ""
			switch {
			case f == skipRedeem && retry && approved(req):
				return y.act(in.Subject), nil
			case f == approveAll && retry:
				req.Params.InputResponses = mcp.InputResponseMap{confirm.InputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}
			case f == actUnapproved && retry && wentToPage(req):
				return y.act(in.Subject), nil
			case f == actUnasked && !retry && (req.ClientCapabilities() == nil || req.ClientCapabilities().Elicitation == nil):
				return y.act(in.Subject), nil
			}
			return parts.Flow.Run(ctx, req, confirm.Step{
				Ask: func(context.Context) (confirm.Question, error) {
					return confirm.Question{Message: "Act on " + in.Subject + "?", Subject: in.Subject}, nil
				},
				Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) { return y.act(in.Subject), nil },
			})
		})
	return &confirmtest.FrontEnd{Server: s, Call: call, Effects: y.Effects}
}

// approved reports whether a retry answers yes.
func approved(req *mcp.CallToolRequest) bool {
	e, ok := req.Params.InputResponses[confirm.InputID].(*mcp.ElicitResult)
	return ok && e.Action == "accept" && e.Content["confirm"] == true
}

// wentToPage reports whether a retry answers the approval page's link
// with accept.
func wentToPage(req *mcp.CallToolRequest) bool {
	e, ok := req.Params.InputResponses[confirm.ApproveInputID].(*mcp.ElicitResult)
	return ok && e.Action == "accept"
}

// dropUnknown keeps only the subject argument of a tools/call.
func dropUnknown(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok {
			var args map[string]any
			if json.Unmarshal(r.Params.Arguments, &args) == nil {
				r.Params.Arguments, _ = json.Marshal(map[string]any{"subject": args["subject"]})
			}
		}
		return next(ctx, method, req)
	}
}

// toyFactory makes toy front ends with fault.
func toyFactory(f fault) confirmtest.Factory {
	var mu sync.Mutex
	targets := map[*confirmtest.FrontEnd]*toy{}
	start := func(t testing.TB, setup confirm.Setup, y *toy) *confirmtest.FrontEnd {
		fe := toyFrontEnd(t, setup, y, f)
		mu.Lock()
		targets[fe] = y
		mu.Unlock()
		return fe
	}
	return confirmtest.Factory{
		New: func(t testing.TB, setup confirm.Setup) *confirmtest.FrontEnd {
			return start(t, setup, &toy{acted: map[string]int{}})
		},
		Replica: func(t testing.TB, fe *confirmtest.FrontEnd, setup confirm.Setup) *confirmtest.FrontEnd {
			mu.Lock()
			y := targets[fe]
			mu.Unlock()
			return start(t, setup, y)
		},
	}
}

// The toy front end keeps the contract: every failure of a broken one
// below is its fault's.
func TestSoundFrontEndPasses(t *testing.T) { confirmtest.Run(t, toyFactory(sound)) }

// controls are the broken front ends, and the cases each must fail: all
// of them and no other. Replicas, CrashShared and ApproveAcrossReplicas
// need a shared store.
var controls = []struct {
	fault fault
	fails []string
}{
	{skipRedeem, []string{"SpentTwice", "ConcurrentRedeem", "LostReply", "Crash", "CrashShared", "Replicas", "PrincipalMismatch", "Declined", "ApproveBoth"}},
	{ownLedger, []string{"ConcurrentRedeem", "Crash", "CrashShared", "Replicas", "ApproveAcrossReplicas"}},
	// Its yes replaces every answer, the page link's accept included:
	// the out-of-band cases are refused as withdrawn.
	{approveAll, []string{"Declined", "LostReply", "ApproveOutOfBand", "ApproveDeclined", "ApproveFourEyes", "ApproveBoth", "ApproveAcrossReplicas"}},
	{actUnasked, []string{"WithoutElicitation"}},
	{anyone, []string{"PrincipalMismatch", "ApproveFourEyes"}},
	{ownClock, []string{"Expired"}},
	{dropArguments, []string{"ReplayOntoOtherArguments"}},
	{actUnapproved, []string{"ApproveOutOfBand", "ApproveDeclined", "ApproveFourEyes", "ApproveBoth", "ApproveAcrossReplicas"}},
	{inBandOnly, []string{"ApproveOutOfBand", "ApproveDeclined", "ApproveFourEyes", "ApproveBoth", "ApproveAcrossReplicas"}},
}

const controlEnv = "CONFIRMTEST_CONTROL"

var failedCase = regexp.MustCompile(`(?m)^    --- FAIL: TestSuiteCatchesBrokenFrontEnds/(\w+) `)

// TestSuiteCatchesBrokenFrontEnds is the suite's negative control: each
// broken front end runs the whole suite in a test process of its own (the
// cases run subtests, which fail their parent), which must fail exactly
// the cases that catch its fault.
func TestSuiteCatchesBrokenFrontEnds(t *testing.T) {
	if name := os.Getenv(controlEnv); name != "" { // the child
		confirmtest.Run(t, toyFactory(fault(name)))
		return
	}
	shared := os.Getenv("MCP_CONFIRM_REDIS_URL") != "" && os.Getenv("MCP_CONFIRM_POSTGRES_URL") != ""
	for _, c := range controls {
		t.Run(string(c.fault), func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSuiteCatchesBrokenFrontEnds$", "-test.count=1")
			cmd.Env = append(os.Environ(), controlEnv+"="+string(c.fault))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a front end that %s (%v):\n%s", c.fault, err, out)
			}
			var failed []string
			for _, m := range failedCase.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			want := slices.DeleteFunc(slices.Clone(c.fails), func(name string) bool {
				return !shared && (name == "Replicas" || name == "CrashShared" || name == "ApproveAcrossReplicas")
			})
			slices.Sort(failed)
			slices.Sort(want)
			if !slices.Equal(failed, want) {
				t.Fatalf("a front end that %s failed %v, want %v:\n%s", c.fault, failed, want, out)
			}
		})
	}
	if !shared {
		t.Skip("set MCP_CONFIRM_REDIS_URL and MCP_CONFIRM_POSTGRES_URL to check that Replicas, CrashShared and ApproveAcrossReplicas catch their faults")
	}
}

// Every case fails for some broken front end.
func TestControlsCoverEveryCase(t *testing.T) {
	caught := map[string]bool{}
	for _, c := range controls {
		for _, name := range c.fails {
			caught[name] = true
		}
	}
	for _, name := range []string{"SpentTwice", "ReplayOntoOtherArguments", "ConcurrentRedeem", "LostReply", "Crash", "CrashShared", "Replicas", "PrincipalMismatch", "Declined", "WithoutElicitation", "Expired", "ApproveOutOfBand", "ApproveDeclined", "ApproveFourEyes", "ApproveBoth", "ApproveAcrossReplicas"} {
		if !caught[name] {
			t.Errorf("no broken front end shows that %s can fail", name)
		}
	}
}
