package relay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// middleware forwards every request to the upstream except what the
// downstream server must answer itself (initialize, ping, subscriptions,
// notifications); tools/call goes through Options.CallTool.
func (r *Relay) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// A request in flight upstream ends when the relay closes: go-sdk's
		// Close waits for every call in flight, and one the upstream never
		// answers would keep it from returning.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(r.life, cancel)()
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch method {
		case "initialize":
			params, _ := req.GetParams().(*mcp.InitializeParams)
			if err := r.attach(ctx, ss, params); err != nil {
				return nil, err
			}
			return next(ctx, method, req)
		case "logging/setLevel":
			// The downstream server filters what it relays by this level;
			// a connection of the session's own tells the upstream too, so
			// it need not send the rest. (On the shared connection, one
			// session's level would be every session's, and log messages
			// are not relayed there.)
			//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
			params, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
			if c := r.conn(ss); ok && params != nil && c.down != nil && !c.modern() {
				//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
				if err := c.cs.SetLoggingLevel(ctx, params); err != nil {
					return nil, upstreamError(err)
				}
			}
			return next(ctx, method, req)
		case "tools/list", "tools/call", "prompts/list", "prompts/get",
			"resources/list", "resources/templates/list", "resources/read", "completion/complete":
		default:
			return next(ctx, method, req)
		}
		c, err := r.live(ctx, ss)
		if err != nil {
			r.log.Error("relay: cannot connect to the upstream", "err", err)
			return nil, upstreamError(err)
		}
		defer c.track(ctx)()
		res, err := r.forward(ctx, c, ss, method, req)
		if err != nil {
			return nil, upstreamError(err)
		}
		// The protocol's own _meta keys describe the upstream's hop (its
		// serverInfo, say); go-sdk writes the relay's for this one.
		if m := res.GetMeta(); hasProtocolKey(m) {
			res.SetMeta(withoutProtocolKeys(m))
		}
		return res, nil
	}
}

func (r *Relay) forward(ctx context.Context, c *conn, ss *mcp.ServerSession, method string, req mcp.Request) (mcp.Result, error) {
	switch q := req.(type) {
	case *mcp.ListToolsRequest:
		up := &mcp.ListToolsParams{}
		if q.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(q.Params.Meta), q.Params.Cursor
		}
		// What the client reads is a read of the upstream's tools like the
		// gate's own: it refreshes the cache, and shows a change the
		// upstream did not announce.
		_, _, gen := c.tools.lookup("", Fresh)
		res, err := c.cs.ListTools(ctx, up)
		if err != nil {
			return nil, err
		}
		r.observed(c, gen, res.Tools, up.Cursor == "" && res.NextCursor == "")
		out := *res
		scoped(&out.Cacheable)
		if r.opts.Listed != nil {
			out.Tools = slices.DeleteFunc(slices.Clone(res.Tools), func(t *mcp.Tool) bool { return !r.opts.Listed(t) })
		}
		return &out, nil
	case *mcp.CallToolRequest:
		return r.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			return r.callTool(ctx, c, req.(*mcp.CallToolRequest))
		})
	case *mcp.ListPromptsRequest:
		up := &mcp.ListPromptsParams{}
		if q.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(q.Params.Meta), q.Params.Cursor
		}
		res, err := c.cs.ListPrompts(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.GetPromptRequest:
		return r.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			q := req.(*mcp.GetPromptRequest)
			meta, done := r.withProgress(ctx, ss, c.forwardMeta(q.Params.Meta))
			defer done()
			res, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: meta, Name: q.Params.Name, Arguments: q.Params.Arguments,
				InputResponses: q.Params.InputResponses, RequestState: q.Params.RequestState})
			if err != nil {
				return nil, err
			}
			return &mcp.GetPromptResult{Meta: res.Meta, Description: res.Description, Messages: res.Messages,
				InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		})
	case *mcp.ListResourcesRequest:
		up := &mcp.ListResourcesParams{}
		if q.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(q.Params.Meta), q.Params.Cursor
		}
		res, err := c.cs.ListResources(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.ListResourceTemplatesRequest:
		up := &mcp.ListResourceTemplatesParams{}
		if q.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(q.Params.Meta), q.Params.Cursor
		}
		res, err := c.cs.ListResourceTemplates(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.ReadResourceRequest:
		return r.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			q := req.(*mcp.ReadResourceRequest)
			meta, done := r.withProgress(ctx, ss, c.forwardMeta(q.Params.Meta))
			defer done()
			res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: meta, URI: q.Params.URI,
				InputResponses: q.Params.InputResponses, RequestState: q.Params.RequestState})
			if err != nil {
				return nil, err
			}
			scoped(&res.Cacheable)
			return &mcp.ReadResourceResult{Meta: res.Meta, Cacheable: res.Cacheable, Contents: res.Contents,
				InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		})
	case *mcp.CompleteRequest:
		cp := *q.Params
		cp.Meta = c.forwardMeta(q.Params.Meta)
		return c.cs.Complete(ctx, &cp)
	}
	return nil, fmt.Errorf("relay: %s: unexpected request %T", method, req)
}

// callTool answers one round of a tools/call: through Options.CallTool, or
// forwarded unchanged.
func (r *Relay) callTool(ctx context.Context, c *conn, req *mcp.CallToolRequest) (mcp.Result, error) {
	if r.opts.CallTool != nil {
		return r.opts.CallTool(ctx, c, req)
	}
	return c.CallTool(ctx, req, req.Params.Arguments, req.Params.RequestState, req.Params.InputResponses)
}

// scoped gives a result the upstream did not scope for caching the scope
// "private": the relay cannot tell whether an upstream's answer is the same
// for every user, and a shared cache must not serve one user's list to
// another. (go-sdk would default to "public".)
func scoped(c *mcp.Cacheable) {
	if c.CacheScope == "" {
		c.CacheScope = "private"
	}
}

// withoutProtocolKeys returns m, or a copy of it without the protocol's
// own keys if it holds any.
func withoutProtocolKeys(m mcp.Meta) mcp.Meta {
	if !hasProtocolKey(m) {
		return m
	}
	m = maps.Clone(m)
	maps.DeleteFunc(m, func(k string, _ any) bool { return strings.HasPrefix(k, metaPrefix) })
	return m
}

// hasProtocolKey reports whether m holds a key of the protocol's own
// namespace (most results hold none: nothing to copy then).
func hasProtocolKey(m mcp.Meta) bool {
	for k := range m {
		if strings.HasPrefix(k, metaPrefix) {
			return true
		}
	}
	return false
}

// upstreamError turns an error of a forwarded request into the error the
// downstream client gets: the upstream's own JSON-RPC errors pass through
// unchanged; anything else (the connection failed) says only that.
func upstreamError(err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream server did not answer"}
}
