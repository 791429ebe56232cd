package confirm_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// linkPage is an approval page whose links name the id.
type linkPage struct{}

func (linkPage) Link(id ledger.ID) string { return "https://approve.invalid/approve/" + id.String() }

// TestApprovalPolicyChanged: an answer to a question asked under one
// approval, arriving once the step needs another (the operator changed
// the policy; another replica runs the new one), is refused and its
// confirmation cancelled, whichever way the change goes — in band to out
// of band (the yes alone must not act where approvers are now needed),
// out of band to in band, and even once the approvers have approved:
// nothing acts. Through a real go-sdk client, 2026-07-28.
func TestApprovalPolicyChanged(t *testing.T) {
	oob := &confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops"}}
	for _, tc := range []struct {
		name       string
		asked, now *confirm.Approval
		approved   bool // the approvers approved before the answer
	}{
		{"in band, then out of band", nil, oob, false},
		{"out of band, then in band", oob, nil, false},
		{"out of band, approved, then in band", oob, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			flow, err := confirm.New(confirm.Options{Ledger: l, Page: linkPage{}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var approval atomic.Pointer[confirm.Approval]
			approval.Store(tc.asked)
			var acted atomic.Int64
			s := newServer()
			s.AddReceivingMiddleware(newBoundary(t).Middleware())
			mcp.AddTool(s, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				res, err := flow.Run(ctx, req, confirm.Step{
					Ask: func(context.Context) (confirm.Question, error) { return confirm.Question{Message: "Act?"}, nil },
					Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
						acted.Add(1)
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted"}}}, nil
					},
					Approval: approval.Load(),
				})
				return res, nil, err
			})
			cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept(), URL: true})
			p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{}}
			res, err := cs.CallTool(context.Background(), p)
			if err != nil || !res.NeedsInput() {
				t.Fatalf("first round: %v %s", err, mcptest.Describe(res))
			}
			var id ledger.ID
			if u, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams); ok {
				if id, err = ledger.ParseID(strings.TrimPrefix(u.URL, "https://approve.invalid/approve/")); err != nil {
					t.Fatal(err)
				}
				if tc.approved {
					if _, err := l.Decide(context.Background(), id, ledger.Approver{ID: "sub:alice", Groups: []string{"group:ops"}}, true); err != nil {
						t.Fatal(err)
					}
				}
			}
			approval.Store(tc.now)
			retry := *p
			retry.RequestState = res.RequestState
			retry.InputResponses = mcp.InputResponseMap{confirm.InputID: mcptest.Yes(), confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
			res, err = cs.CallTool(context.Background(), &retry)
			mcptest.WantToolRefusal(t, res, err, "changed since the question was asked")
			res, err = cs.CallTool(context.Background(), &retry)
			mcptest.WantToolRefusal(t, res, err, "declined earlier")
			approval.Store(tc.asked) // back as it was: the confirmation is spent
			res, err = cs.CallTool(context.Background(), &retry)
			mcptest.WantToolRefusal(t, res, err, "declined earlier")
			if n := acted.Load(); n != 0 {
				t.Fatalf("acted %d times", n)
			}
		})
	}
}
