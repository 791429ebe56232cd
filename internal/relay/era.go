package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// maxRounds bounds the input_required rounds the relay plays for an
// older-era client within one call, as go-sdk's own client does.
const maxRounds = 10

// rounds runs call; for a downstream client of the older protocol era it
// then plays the part go-sdk's server plays for a tool of its own: it puts
// an input_required result's requests to the client in-process and calls
// again with the answers. (The relay answers these methods itself, so
// go-sdk's own shim, which sits inside the relay's middleware, never
// runs.) Clients of the 2026-07-28 era get the input_required result and
// retry themselves.
func rounds(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, call func(context.Context, mcp.Request) (mcp.Result, error)) (mcp.Result, error) {
	for round := 1; ; round++ {
		res, err := call(ctx, req)
		if err != nil {
			return nil, err
		}
		reqs, state := inputOf(res)
		if modernSession(ss) {
			return markResultType(res, reqs != nil), nil
		}
		if reqs == nil {
			return res, nil
		}
		if len(reqs) == 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is busy, retry later"}
		}
		if round == maxRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("more than %d rounds of input requests", maxRounds)}
		}
		responses, err := fulfill(ctx, ss, reqs)
		if err != nil {
			return nil, err
		}
		req = withInput(req, responses, state)
	}
}

// markResultType returns a copy of res carrying its result type,
// input_required or complete, as go-sdk marks the results of its own
// handlers for clients of the 2026-07-28 era (which require it). The mark
// is unexported and only decoding sets it; the relay answers these methods
// itself, so it decodes a shell with the mark and copies every field in.
func markResultType(res mcp.Result, inputRequired bool) mcp.Result {
	shell := []byte(`{"resultType":"complete"}`)
	if inputRequired {
		shell = []byte(`{"resultType":"input_required"}`)
	}
	switch r := res.(type) {
	case *mcp.CallToolResult:
		var out mcp.CallToolResult
		if r != nil && json.Unmarshal(shell, &out) == nil {
			out.Meta, out.Content, out.StructuredContent, out.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
			out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
			return &out
		}
	case *mcp.GetPromptResult:
		var out mcp.GetPromptResult
		if r != nil && json.Unmarshal(shell, &out) == nil {
			out.Meta, out.Description, out.Messages = r.Meta, r.Description, r.Messages
			out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
			return &out
		}
	case *mcp.ReadResourceResult:
		var out mcp.ReadResourceResult
		if r != nil && json.Unmarshal(shell, &out) == nil {
			out.Meta, out.Cacheable, out.Contents = r.Meta, r.Cacheable, r.Contents
			out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
			return &out
		}
	}
	return res
}

// modernSession reports whether ss's client speaks 2026-07-28 or later.
func modernSession(ss *mcp.ServerSession) bool {
	if ss == nil {
		return true
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= requeststate.ProtocolMRTR
}

func inputOf(res mcp.Result) (mcp.InputRequestMap, string) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.GetPromptResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	}
	return nil, ""
}

// withInput returns req's next round: a copy carrying the answers and the
// state to echo (never a mutation of req).
func withInput(req mcp.Request, responses mcp.InputResponseMap, state string) mcp.Request {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		cp := *r.Params
		cp.InputResponses, cp.RequestState = responses, state
		return &mcp.CallToolRequest{Session: r.Session, Params: &cp, Extra: r.Extra}
	case *mcp.GetPromptRequest:
		cp := *r.Params
		cp.InputResponses, cp.RequestState = responses, state
		return &mcp.GetPromptRequest{Session: r.Session, Params: &cp, Extra: r.Extra}
	case *mcp.ReadResourceRequest:
		cp := *r.Params
		cp.InputResponses, cp.RequestState = responses, state
		return &mcp.ReadResourceRequest{Session: r.Session, Params: &cp, Extra: r.Extra}
	}
	return req
}

// fulfill puts input requests to an older-era client, one after another.
func fulfill(ctx context.Context, ss *mcp.ServerSession, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(reqs))
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		var (
			r   mcp.InputResponse
			err error
		)
		switch q := reqs[id].(type) {
		case *mcp.ElicitParams:
			r, err = ss.Elicit(ctx, q)
		//lint:ignore SA1019 an upstream's sampling input request (deprecated by SEP-2577) is put to an older-era client in-process
		case *mcp.CreateMessageParams:
			//lint:ignore SA1019 an upstream's sampling input request (deprecated by SEP-2577) is put to an older-era client in-process
			r, err = ss.CreateMessage(ctx, q)
		//lint:ignore SA1019 an upstream's sampling input request (deprecated by SEP-2577) is put to an older-era client in-process
		case *mcp.CreateMessageWithToolsParams:
			//lint:ignore SA1019 an upstream's sampling input request (deprecated by SEP-2577) is put to an older-era client in-process
			r, err = ss.CreateMessageWithTools(ctx, q)
		//lint:ignore SA1019 an upstream's roots input request (deprecated by SEP-2577) is put to an older-era client in-process
		case *mcp.ListRootsParams:
			//lint:ignore SA1019 an upstream's roots input request (deprecated by SEP-2577) is put to an older-era client in-process
			r, err = ss.ListRoots(ctx, q)
		default:
			err = fmt.Errorf("unknown input request %T", q)
		}
		if err != nil {
			return nil, fmt.Errorf("multi-round-trip: input request %q: %w", id, err)
		}
		out[id] = r
	}
	return out, nil
}
