package confirm_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// TestRefusesWithoutBoundary: a Flow on a server whose chain lacks the
// requestState boundary refuses every call, first rounds and retries
// carrying a state the client made up, in both eras: without the boundary
// the state is whatever the client sent, so an agent could name any
// confirmation. Nothing is issued and nothing runs. The negative control
// is the same server with the boundary: the call is asked and acted on.
func TestRefusesWithoutBoundary(t *testing.T) {
	const misconfigured = "This server is misconfigured: confirmations are disabled. Nothing was done."
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		for _, withBoundary := range []bool{false, true} {
			name := era + "/no boundary"
			if withBoundary {
				name = era + "/control: boundary"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				mem := ledger.NewMemory(ledger.MemoryOptions{})
				l, err := ledger.New(mem, ledger.Options{})
				if err != nil {
					t.Fatal(err)
				}
				flow, err := confirm.New(confirm.Options{Ledger: l, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				var effects atomic.Int64
				s := newServer()
				if withBoundary {
					s.AddReceivingMiddleware(newBoundary(t).Middleware())
				}
				mcp.AddTool(s, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
					Target string `json:"target"`
				}) (*mcp.CallToolResult, any, error) {
					res, err := flow.Run(ctx, req, confirm.Step{
						Ask: func(context.Context) (confirm.Question, error) {
							return confirm.Question{Message: "Act on " + in.Target + "?", Subject: in.Target}, nil
						},
						Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
							effects.Add(1)
							return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted"}}}, nil
						},
					})
					return res, nil, err
				})
				cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: era, Answer: mcptest.Accept()})
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"target": "x"}})
				if withBoundary {
					if err != nil || res.IsError || mcptest.Text(res) != "acted" || effects.Load() != 1 {
						t.Fatalf("control: %v %s, acted %d times", err, mcptest.Describe(res), effects.Load())
					}
					return
				}
				mcptest.WantToolRefusal(t, res, err, misconfigured)
				// A retry carrying a state the client made up.
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"target": "x"},
					InputResponses: mcp.InputResponseMap{confirm.InputID: mcptest.Yes()}, RequestState: "made-up"})
				mcptest.WantToolRefusal(t, res, err, misconfigured)
				if n := effects.Load(); n != 0 {
					t.Fatalf("acted %d times without the boundary", n)
				}
				if remembered, pending := mem.Len(); remembered != 0 || pending != 0 {
					t.Fatalf("ledger holds %d confirmations (%d pending); want none issued", remembered, pending)
				}
			})
		}
	}
}

// TestPendingRecordForAnotherAction: an out-of-band redemption that the
// store answers with another action's record, still awaiting its
// approvers, is refused at once ("given for a different action"): the
// call neither waits on, nor is told the status or link of, a
// confirmation that is not its own, and nothing runs. Both eras. The
// negative control is the same store answering with the call's own
// pending record: the 2026-07-28 client is told to wait.
func TestPendingRecordForAnotherAction(t *testing.T) {
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		controls := []bool{false}
		if era == mcptest.EraMRTR {
			// An older-era call on its own pending record waits for the
			// approvers: the control is the 2026-07-28 client's.
			controls = append(controls, true)
		}
		for _, control := range controls {
			name := era + "/another tool"
			if control {
				name = era + "/control: own record"
			}
			t.Run(name, func(t *testing.T) {
				change := func(c *ledger.Confirmation) { c.Tool = "another_tool" }
				if control {
					change = func(*ledger.Confirmation) {}
				}
				store := &swapped{Store: ledger.NewMemory(ledger.MemoryOptions{}), change: change}
				s, acted := oobServer(t, store)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{}}
				if era == mcptest.EraLegacy {
					cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: era, Answer: mcptest.Accept(), URL: true})
					res, err := cs.CallTool(ctx, p)
					mcptest.WantToolRefusal(t, res, err, "This approval was given for a different action. Nothing was done.")
				} else {
					res, err := acceptedRetry(t, ctx, s, p)
					if control {
						if err != nil || !res.NeedsInput() || res.InputRequests[confirm.ApproveInputID] == nil {
							t.Fatalf("control: want to be told to wait, got %v %s", err, mcptest.Describe(res))
						}
					} else {
						mcptest.WantToolRefusal(t, res, err, "This approval was given for a different action. Nothing was done.")
					}
				}
				if n := acted.Load(); n != 0 {
					t.Fatalf("acted %d times", n)
				}
			})
		}
	}
}

// acceptedRetry calls p on s through a 2026-07-28 client that answers by
// hand: the first round must ask; it returns the retry with the state the
// first round sealed and an "accept".
func acceptedRetry(t *testing.T, ctx context.Context, s *mcp.Server, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	t.Helper()
	cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept(), URL: true})
	first, err := cs.CallTool(ctx, p)
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %v %s", err, mcptest.Describe(first))
	}
	retry := *p
	retry.RequestState = first.RequestState
	retry.InputResponses = mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
	return cs.CallTool(ctx, &retry)
}

// oobServer is a real go-sdk server with the boundary in its chain and one
// tool, "act", needing out-of-band approval by group:ops, its confirmations
// kept in store; acted counts its actions.
func oobServer(t *testing.T, store ledger.Store) (s *mcp.Server, acted *atomic.Int64) {
	t.Helper()
	oob := &confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops"}}
	acted = new(atomic.Int64)
	l, err := ledger.New(store, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	flow, err := confirm.New(confirm.Options{Ledger: l, Page: linkPage{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s = newServer()
	s.AddReceivingMiddleware(newBoundary(t).Middleware())
	mcp.AddTool(s, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) { return confirm.Question{Message: "Act?"}, nil },
			Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
				acted.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted"}}}, nil
			},
			Approval: oob,
		})
		return res, nil, err
	})
	return s, acted
}

// declining is a swapped store whose decoy an approver, sub:bob, declines
// as soon as it is added.
type declining struct{ *swapped }

func (s declining) Add(ctx context.Context, c ledger.Confirmation) error {
	if err := s.swapped.Add(ctx, c); err != nil {
		return err
	}
	_, err := s.Decide(ctx, s.decoyID(), ledger.Approver{ID: "sub:bob", Groups: []string{"group:ops"}}, false)
	return err
}

// TestDeclinedRecordForAnotherAction: an out-of-band redemption that the
// store answers with another action's record, declined by its approver,
// is refused without naming who declined that other action; nothing
// runs. Both eras. The negative control is the call's own record
// declined: the answer names the approver.
func TestDeclinedRecordForAnotherAction(t *testing.T) {
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		for _, control := range []bool{false, true} {
			name := era + "/another tool"
			if control {
				name = era + "/control: own record"
			}
			t.Run(name, func(t *testing.T) {
				change := func(c *ledger.Confirmation) { c.Tool = "another_tool" }
				if control {
					change = func(*ledger.Confirmation) {}
				}
				s, acted := oobServer(t, declining{&swapped{Store: ledger.NewMemory(ledger.MemoryOptions{}), change: change}})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{}}
				var (
					res *mcp.CallToolResult
					err error
				)
				if era == mcptest.EraLegacy {
					cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: era, Answer: mcptest.Accept(), URL: true})
					res, err = cs.CallTool(ctx, p)
				} else {
					res, err = acceptedRetry(t, ctx, s, p)
				}
				if control {
					if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "declined out of band by") || !strings.Contains(mcptest.Text(res), "sub:bob") {
						t.Fatalf("control: %v %s", err, mcptest.Describe(res))
					}
				} else {
					mcptest.WantToolRefusal(t, res, err, "Nothing was done.")
					if strings.Contains(mcptest.Text(res), "sub:bob") {
						t.Fatalf("named who declined another action: %s", mcptest.Text(res))
					}
				}
				if n := acted.Load(); n != 0 {
					t.Fatalf("acted %d times", n)
				}
			})
		}
	}
}
