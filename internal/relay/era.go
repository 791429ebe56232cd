package relay

import (
	"context"
	"encoding/json"
	"errors"
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
func (r *Relay) rounds(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, call func(context.Context, mcp.Request) (mcp.Result, error)) (mcp.Result, error) {
	for round := 1; ; round++ {
		res, err := call(ctx, req)
		if err != nil {
			return nil, err
		}
		reqs, state := inputOf(res)
		if modernSession(ss) {
			return r.marks.mark(res, reqs != nil), nil
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

// marks holds results decoded once, at New, from {"resultType":"complete"}
// (index 0) and {"resultType":"input_required"} (index 1): go-sdk writes the
// result type of a 2026-07-28 result only for its own handlers, the field
// is unexported and only decoding sets it, and a copy of a decoded value
// keeps it. (Decoding a shell per result cost a 32 KiB go-sdk decode
// buffer each time.)
type marks struct {
	call   [2]mcp.CallToolResult
	prompt [2]mcp.GetPromptResult
	read   [2]mcp.ReadResourceResult
}

func newMarks() (*marks, error) {
	m := &marks{}
	for i, shell := range []string{`{"resultType":"complete"}`, `{"resultType":"input_required"}`} {
		if err := errors.Join(
			json.Unmarshal([]byte(shell), &m.call[i]),
			json.Unmarshal([]byte(shell), &m.prompt[i]),
			json.Unmarshal([]byte(shell), &m.read[i]),
		); err != nil {
			return nil, fmt.Errorf("relay: decoding the result type marks: %w", err)
		}
	}
	return m, nil
}

// mark returns a copy of res carrying its result type, input_required or
// complete, as go-sdk marks the results of its own handlers for clients of
// the 2026-07-28 era (which require it); the relay answers these methods
// itself.
func (m *marks) mark(res mcp.Result, inputRequired bool) mcp.Result {
	i := 0
	if inputRequired {
		i = 1
	}
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			out := m.call[i]
			out.Meta, out.Content, out.StructuredContent, out.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
			out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
			return &out
		}
	case *mcp.GetPromptResult:
		if r != nil {
			out := m.prompt[i]
			out.Meta, out.Description, out.Messages = r.Meta, r.Description, r.Messages
			out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
			return &out
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			out := m.read[i]
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
			if err = checkQuestion(q); err == nil {
				r, err = ss.Elicit(ctx, q)
			}
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
