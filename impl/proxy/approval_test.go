package proxy_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// TestPolicyApproval: an [[approval]] table names the tools whose calls
// need its out-of-band approval; a tool it names is asked even if
// allowed, and denied if denied; a tool no table names is approved in
// band (nil); a tool two tables name is an error.
func TestPolicyApproval(t *testing.T) {
	const policy = `
allow = ["read*", "remove"]
deny = ["drop*"]
[[approval]]
tools = ["delete*", "remove", "drop_table"]
mode = "out-of-band"
approvers = ["group:ops", "sub:alice"]
approvals = 2
[[approval]]
tools = ["move_*"]
mode = "both"
approvers = ["sub:bob"]
[[approval]]
tools = ["*_all"]
mode = "out-of-band"
approvers = ["group:admins"]
`
	p, err := proxy.ParsePolicy(strings.NewReader(policy))
	if err != nil {
		t.Fatal(err)
	}
	fourEyes := &confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops", "sub:alice"}, Required: 2}
	for _, tc := range []struct {
		tool     string
		action   proxy.Action
		approval *confirm.Approval
		overlap  bool
	}{
		{"delete_file", proxy.Ask, fourEyes, false},
		{"remove", proxy.Ask, fourEyes, false}, // allowed, but an approval table names it
		{"drop_table", proxy.Deny, fourEyes, false},
		{"move_file", proxy.Ask, &confirm.Approval{Mode: confirm.Both, Approvers: []string{"sub:bob"}, Required: 1}, false},
		{"read_file", proxy.Allow, nil, false},
		{"write_file", proxy.Ask, nil, false},
		{"delete_all", proxy.Ask, nil, true},
	} {
		if got := p.Decide(tc.tool, nil); got != tc.action {
			t.Errorf("Decide(%s) = %v, want %v", tc.tool, got, tc.action)
		}
		a, err := p.Approval(tc.tool)
		switch {
		case tc.overlap:
			if !errors.Is(err, proxy.ErrPolicy) || !strings.Contains(err.Error(), "tables 1 and 3") {
				t.Errorf("Approval(%s) = %v, want ErrPolicy naming tables 1 and 3", tc.tool, err)
			}
		case err != nil:
			t.Errorf("Approval(%s): %v", tc.tool, err)
		case (a == nil) != (tc.approval == nil) || a != nil && (a.Mode != tc.approval.Mode || a.Required != tc.approval.Required || !slices.Equal(a.Approvers, tc.approval.Approvers)):
			t.Errorf("Approval(%s) = %+v, want %+v", tc.tool, a, tc.approval)
		}
	}
	if !p.OutOfBand() {
		t.Error("OutOfBand() = false for a policy with approval tables")
	}
	if p, _ := proxy.ParsePolicy(strings.NewReader("[[approval]]\ntools = [\"move_*\"]\nmode = \"both\"\napprovers = [\"sub:bob\"]")); !p.OutOfBand() {
		t.Error("OutOfBand() = false for a policy with one approval table")
	}
	// The policy is immutable: changing the approvers it returned
	// changes nothing it returns next.
	a, _ := p.Approval("delete_file")
	a.Approvers[0] = "sub:mallory"
	if a, _ := p.Approval("delete_file"); !slices.Equal(a.Approvers, fourEyes.Approvers) {
		t.Errorf("after the caller changed a returned approval, Approval(delete_file) = %+v", a)
	}
	if p, _ := proxy.ParsePolicy(strings.NewReader(`ask = ["*"]`)); p.OutOfBand() {
		t.Error("OutOfBand() = true for a policy without approval tables")
	}
}

// Every bad approval table is refused at start-up, naming the table and
// the fault.
func TestPolicyApprovalErrors(t *testing.T) {
	const ok = "tools = [\"delete\"]\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]\n"
	for _, tc := range []struct{ table, want string }{
		{"mode = \"out-of-band\"\napprovers = [\"group:ops\"]", "tools is empty"},
		{"tools = []\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]", "tools is empty"},
		{"tools = [\"[x\"]\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]", "bad glob"},
		{"tools = [\"delete\", \"\"]\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]", "tools[1] is empty"},
		{"tools = [\"delete\"]\napprovers = [\"group:ops\"]", `mode = ""`},
		{"tools = [\"delete\"]\nmode = \"in-band\"\napprovers = [\"group:ops\"]", `mode = "in-band"`},
		{"tools = [\"delete\"]\nmode = \"out_of_band\"\napprovers = [\"group:ops\"]", `mode = "out_of_band"`},
		{"tools = [\"delete\"]\nmode = \"out-of-band\"", "names no approvers"},
		{"tools = [\"delete\"]\nmode = \"out-of-band\"\napprovers = [\"alice\"]", "want sub:SUBJECT, group:GROUP or passkey:NAME"},
		{"tools = [\"delete\"]\nmode = \"out-of-band\"\napprovers = [\"sub:al\u200bice\"]", "visible text"},
		{ok + "approvals = 0", "approvals = 0"},
		{ok + "approvals = -1", "approvals = -1"},
		{ok + "approvals = 17", "want 1 to 16"},
		{"tools = [\"delete\"]\nmode = \"out-of-band\"\napprovers = [\"sub:alice\"]\napprovals = 2", "could never be approved"},
		{ok + "approver = [\"sub:alice\"]", "unknown key approval.approver"},
		{ok + "approvals = \"2\"", "approvals"},
	} {
		policy := "[[approval]]\n" + ok + "\n[[approval]]\n" + tc.table
		_, err := proxy.ParsePolicy(strings.NewReader(policy))
		if !errors.Is(err, proxy.ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%q) = %v, want ErrPolicy mentioning %q", tc.table, err, tc.want)
		}
		if err != nil && !strings.Contains(tc.want, "unknown key") && tc.want != "approvals" && !strings.Contains(err.Error(), "approval table 2") {
			t.Errorf("ParsePolicy(%q) = %v: does not name table 2", tc.table, err)
		}
	}
	// Negative control: the good table alone parses.
	if _, err := proxy.ParsePolicy(strings.NewReader("[[approval]]\n" + ok + "approvals = 1")); err != nil {
		t.Fatalf("a good approval table: %v", err)
	}
}

// approvalPage is a test approval page: its links name the ledger id,
// and it keeps the ledger it was made over, for the approvers to decide
// through (as the real page does once they have signed in).
type approvalPage struct {
	mu sync.Mutex
	l  *ledger.Ledger
}

const approvalBase = "https://approve.proxy.invalid/approve/"

func (p *approvalPage) Link(id ledger.ID) string { return approvalBase + id.String() }

func (p *approvalPage) make(l *ledger.Ledger) (confirm.Page, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.l = l
	return p, nil
}

func (p *approvalPage) decide(t *testing.T, link, who string, approve bool) {
	t.Helper()
	id, err := ledger.ParseID(strings.TrimPrefix(link, approvalBase))
	if err != nil {
		t.Fatalf("link %q: %v", link, err)
	}
	p.mu.Lock()
	l := p.l
	p.mu.Unlock()
	if _, err := l.Decide(context.Background(), id, ledger.Approver{ID: "sub:" + who, Groups: []string{"group:ops"}}, approve); err != nil {
		t.Fatalf("%s's decision: %v", who, err)
	}
}

// newApprovalProxy is a proxy with policy and an approval page, in front
// of up.
func newApprovalProxy(t *testing.T, up *upstream, policy string, page *approvalPage) (*proxy.Proxy, error) {
	t.Helper()
	pol, err := proxy.ParsePolicy(strings.NewReader(policy))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	setup := confirm.Setup{Keys: [][]byte{testKey}, Logger: slog.New(slog.DiscardHandler)}
	if page != nil {
		setup.Page = page.make
	}
	p, err := proxy.New(ctx, proxy.Options{Setup: setup, Connect: up.connect, Policy: pol})
	if err == nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, err
}

// TestProxyApprovalPerTool: the policy's approval table applies to the
// tools it names, and to them alone. Through the proxy, a real go-sdk
// client of each era: write is asked in band; delete is sent to the
// approval page (no in-band question), acts on nothing until approved
// there, then once, its result naming the approver.
func TestProxyApprovalPerTool(t *testing.T) {
	const policy = `
[[approval]]
tools = ["delete"]
mode = "out-of-band"
approvers = ["group:ops"]
`
	for _, era := range []string{eraMRTR, eraLegacy} {
		t.Run(era, func(t *testing.T) {
			up := newUpstream(t, eraMRTR)
			page := &approvalPage{}
			p, err := newApprovalProxy(t, up, policy, page)
			if err != nil {
				t.Fatal(err)
			}
			answer := mcptest.Accept()
			cs := mcptest.Connect(t, p.MCP(), nil, mcptest.ClientOptions{Era: era, Answer: answer, URL: true})
			res, err := write(cs, "/tmp/a", "x")
			wantResult(t, res, err, "wrote /tmp/a")
			if n := len(answer.URLs()); n != 0 {
				t.Fatalf("write, approved in band, sent %d approval links", n)
			}

			if era == eraMRTR {
				manual := mcptest.Connect(t, p.MCP(), nil, mcptest.ClientOptions{Manual: true, Answer: answer, URL: true})
				params := &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"path": "/tmp/a"}}
				res, err := manual.CallTool(context.Background(), params)
				if err != nil || !res.NeedsInput() {
					t.Fatalf("delete: want input_required, got err=%v res=%s", err, mcptest.Describe(res))
				}
				link, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
				if _, form := res.InputRequests[confirm.InputID]; !ok || form || link.Mode != "url" {
					t.Fatalf("delete: want the approval page's link alone, got %v", res.InputRequests)
				}
				retry := *params
				retry.RequestState = res.RequestState
				retry.InputResponses = mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
				res, err = manual.CallTool(context.Background(), &retry)
				if err != nil || !res.NeedsInput() {
					t.Fatalf("delete before the approval: want input_required (waiting), got err=%v res=%s", err, mcptest.Describe(res))
				}
				up.wantCalls(t, "delete", 0)
				page.decide(t, link.URL, "alice", true)
				retry.RequestState = res.RequestState
				res, err = manual.CallTool(context.Background(), &retry)
				wantResult(t, res, err, "deleted /tmp/a")
				wantResult(t, res, err, "sub:alice")
				up.wantCalls(t, "delete", 1)
				return
			}
			// The older era's call is held until the decision.
			shown := make(chan struct{}, 1)
			answer = mcptest.Accept()
			answer.Before = func() { shown <- struct{}{} }
			cs = mcptest.Connect(t, p.MCP(), nil, mcptest.ClientOptions{Era: era, Answer: answer, URL: true})
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"path": "/tmp/a"}})
			}()
			select {
			case <-shown:
			case <-done:
				t.Fatalf("delete returned before the approval: err=%v res=%s", err, mcptest.Describe(res))
			}
			if len(answer.URLs()) != 1 {
				t.Fatalf("delete sent %d approval links, want 1", len(answer.URLs()))
			}
			up.wantCalls(t, "delete", 0)
			page.decide(t, answer.URLs()[0], "alice", true)
			<-done
			wantResult(t, res, err, "deleted /tmp/a")
			wantResult(t, res, err, "sub:alice")
			up.wantCalls(t, "delete", 1)
		})
	}
}

// TestProxyApprovalTablesOverlap: a tool two approval tables name stops
// the proxy at start-up if the upstream lists it then; one the upstream
// adds later is refused at every call, and never forwarded. An approval
// table without the approval page stops the proxy too.
func TestProxyApprovalTablesOverlap(t *testing.T) {
	const overlap = `
[[approval]]
tools = ["wr*"]
mode = "out-of-band"
approvers = ["group:ops"]
[[approval]]
tools = ["*ite", "remove"]
mode = "both"
approvers = ["group:ops"]
[[approval]]
tools = ["rem*"]
mode = "out-of-band"
approvers = ["sub:alice"]
`
	up := newUpstream(t, eraMRTR)
	if _, err := newApprovalProxy(t, up, overlap, &approvalPage{}); !errors.Is(err, proxy.ErrPolicy) || !strings.Contains(err.Error(), "tables 1 and 2") {
		t.Fatalf("proxy.New with tables overlapping on write = %v, want ErrPolicy naming tables 1 and 2", err)
	}
	if _, err := newApprovalProxy(t, up, strings.Replace(overlap, `"*ite", `, "", 1), nil); !errors.Is(err, proxy.ErrPolicy) || !strings.Contains(err.Error(), "approval page") {
		t.Fatalf("proxy.New with approval tables and no page = %v, want ErrPolicy naming the page", err)
	}
	// Negative control: without the overlap on write, it starts.
	p, err := newApprovalProxy(t, up, strings.Replace(overlap, `"*ite", `, "", 1), &approvalPage{})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	mcp.AddTool(up.server, &mcp.Tool{Name: "remove", Description: "Removes a file."},
		func(ctx context.Context, req *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			up.record("remove", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + in.Path}}}, nil, nil
		})
	for _, era := range []string{eraMRTR, eraLegacy} {
		answer := mcptest.Accept()
		cs := mcptest.Connect(t, p.MCP(), nil, mcptest.ClientOptions{Era: era, Answer: answer, URL: true})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "remove", Arguments: map[string]any{"path": "/tmp/a"}})
		mcptest.WantToolRefusal(t, res, err, "two approval tables")
		if n := len(answer.Questions()); n != 0 {
			t.Fatalf("%s: a call of a tool two tables name was asked %d times", era, n)
		}
	}
	up.wantCalls(t, "remove", 0)
}
