package proxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// forward sends req's call upstream through up, with the arguments args,
// the upstream's state and the input responses for it: every call the
// proxy sends, allowed or approved, goes through here. With tracing on
// it is a proxy.forward span, and the upstream is told of that span in
// the call's _meta traceparent (replacing the client's, which names the
// span it is a child of), so that its own spans join the trace beneath.
func (p *Proxy) forward(ctx context.Context, up relay.Upstream, req *mcp.CallToolRequest, args json.RawMessage, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	if !p.obs.Tracing() {
		return up.CallTool(ctx, req, args, state, responses)
	}
	ctx, span := p.obs.Start(ctx, observe.Forward, req.Params.Name)
	cp := *req.Params
	cp.Meta = observe.Inject(ctx, cp.Meta)
	res, err := up.CallTool(ctx, &mcp.CallToolRequest{Session: req.Session, Params: &cp, Extra: req.Extra}, args, state, responses)
	span.EndForward(err)
	return res, err
}
