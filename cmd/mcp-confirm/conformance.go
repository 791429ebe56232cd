//go:build conformance

// This file exists only in a binary built with `go build -tags conformance`,
// for the MCP conformance suite's input-required-result scenarios: they call
// tools by fixed names. Those names are served here by the real confirmation
// flow (package confirm) on the server's own ledger store and behind the
// server's own requestState boundary, so the suite exercises what production
// runs; only the action is a no-op instead of a deletion. No flag of a
// production build can register these tools.

package main

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

// fixtureDone is the text of a fixture's approved action.
const fixtureDone = "state-ok: the approved no-op action ran."

// newServer assembles the server and registers the fixture tools on it.
func newServer(opts server.Options) (*server.Server, error) {
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	// The fixtures run on the server's own flow, ledger and boundary.
	flow := srv.Flow()
	// The tool names the suite's scenarios call.
	fixtures := []string{
		"test_input_required_result_request_state",  // input-required-result-request-state
		"test_input_required_result_tampered_state", // input-required-result-tampered-state
		"test_input_required_result_capabilities",   // input-required-result-capability-check
		"test_input_required_result_elicitation",    // result-type, missing-input-response, validate-input, ...
	}
	for _, name := range fixtures {
		addFixture(srv.MCP(), flow, name)
	}
	if opts.Logger != nil {
		opts.Logger.Warn("built with -tags conformance: conformance fixture tools are registered; do not deploy this binary", "tools", fixtures)
	}
	return srv, nil
}

// addFixture registers one fixture tool that takes no arguments and runs a
// no-op action through flow, exactly as delete_file runs its deletion.
func addFixture(s *mcp.Server, flow *confirm.Flow, name string) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        name,
		Description: "Conformance fixture (test builds only): asks for confirmation through the real flow, then does nothing.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) {
				return confirm.Question{
					Message: "Conformance fixture " + name + ": approve a no-op action?",
					Subject: name,
				}, nil
			},
			Act: func(_ context.Context, c ledger.Confirmation) (*mcp.CallToolResult, error) {
				if c.Subject != name {
					return nil, confirm.Refuse("This approval was given for another fixture. Nothing was done.")
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fixtureDone}}}, nil
			},
		})
		return res, nil, err
	})
}
