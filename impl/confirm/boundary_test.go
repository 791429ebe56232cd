package confirm_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

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
