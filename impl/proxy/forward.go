package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// The proxy's own requestState plaintexts (the boundary seals them), beside
// confirm's. An upstream's input_required round inside a call keeps the
// upstream's state after the prefix.
const (
	// askPrefix + fingerprint + "/" + confirm's state: the proxy's question.
	askPrefix = "proxy.v1.ask."
	// passPrefix + upstream state: an allowed call the upstream asked more of.
	passPrefix = "proxy.v1.pass."
	// continuePrefix + ledger id + "." + upstream state: an approved call the
	// upstream asked more of. The id is single-use, like the approval.
	continuePrefix = "proxy.v1.continue."
)

// maxRounds bounds the input_required rounds the proxy plays for an
// older-era client within one call, as go-sdk's own client does.
const maxRounds = 10

// middleware forwards every request to the upstream except what the
// downstream server must answer itself (initialize, ping, subscriptions,
// notifications), and gates tools/call by the policy.
func (p *Proxy) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch method {
		case "initialize":
			params, _ := req.GetParams().(*mcp.InitializeParams)
			if err := p.attach(ctx, ss, params); err != nil {
				return nil, err
			}
			return next(ctx, method, req)
		case "logging/setLevel":
			// The downstream server filters what it relays by this level;
			// the upstream learns it too, so it need not send the rest.
			//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
			if c, params := p.conn(ss), req.GetParams().(*mcp.SetLoggingLevelParams); !c.modern() {
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
		c, err := p.liveConn(ctx, ss)
		if err != nil {
			p.log.Error("proxy: cannot connect to the upstream", "err", err)
			return nil, upstreamError(err)
		}
		defer c.track(ctx)()
		res, err := p.forward(ctx, c, ss, method, req)
		if err != nil {
			return nil, upstreamError(err)
		}
		// The protocol's own _meta keys describe the upstream's hop (its
		// serverInfo, say); go-sdk writes the proxy's for this one.
		if m := res.GetMeta(); len(m) > 0 {
			m = maps.Clone(m)
			maps.DeleteFunc(m, func(k string, _ any) bool { return strings.HasPrefix(k, metaPrefix) })
			res.SetMeta(m)
		}
		return res, nil
	}
}

func (p *Proxy) forward(ctx context.Context, c *conn, ss *mcp.ServerSession, method string, req mcp.Request) (mcp.Result, error) {
	switch r := req.(type) {
	case *mcp.ListToolsRequest:
		up := &mcp.ListToolsParams{}
		if r.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(r.Params.Meta), r.Params.Cursor
		}
		res, err := c.cs.ListTools(ctx, up)
		if err != nil {
			return nil, err
		}
		out := *res
		scoped(&out.Cacheable)
		// A denied tool is not offered to the model at all.
		out.Tools = slices.DeleteFunc(slices.Clone(res.Tools), func(t *mcp.Tool) bool { return p.policy.Hidden(t.Name) })
		return &out, nil
	case *mcp.CallToolRequest:
		return p.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			return p.callTool(ctx, c, req.(*mcp.CallToolRequest))
		})
	case *mcp.ListPromptsRequest:
		up := &mcp.ListPromptsParams{}
		if r.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(r.Params.Meta), r.Params.Cursor
		}
		res, err := c.cs.ListPrompts(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.GetPromptRequest:
		return p.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			r := req.(*mcp.GetPromptRequest)
			meta, done := p.withProgress(ctx, ss, c.forwardMeta(r.Params.Meta))
			defer done()
			res, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: meta, Name: r.Params.Name, Arguments: r.Params.Arguments,
				InputResponses: r.Params.InputResponses, RequestState: r.Params.RequestState})
			if err != nil {
				return nil, err
			}
			return &mcp.GetPromptResult{Meta: res.Meta, Description: res.Description, Messages: res.Messages,
				InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		})
	case *mcp.ListResourcesRequest:
		up := &mcp.ListResourcesParams{}
		if r.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(r.Params.Meta), r.Params.Cursor
		}
		res, err := c.cs.ListResources(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.ListResourceTemplatesRequest:
		up := &mcp.ListResourceTemplatesParams{}
		if r.Params != nil {
			up.Meta, up.Cursor = c.forwardMeta(r.Params.Meta), r.Params.Cursor
		}
		res, err := c.cs.ListResourceTemplates(ctx, up)
		if err == nil {
			scoped(&res.Cacheable)
		}
		return res, err
	case *mcp.ReadResourceRequest:
		return p.rounds(ctx, ss, req, func(ctx context.Context, req mcp.Request) (mcp.Result, error) {
			r := req.(*mcp.ReadResourceRequest)
			meta, done := p.withProgress(ctx, ss, c.forwardMeta(r.Params.Meta))
			defer done()
			res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: meta, URI: r.Params.URI,
				InputResponses: r.Params.InputResponses, RequestState: r.Params.RequestState})
			if err != nil {
				return nil, err
			}
			scoped(&res.Cacheable)
			return &mcp.ReadResourceResult{Meta: res.Meta, Cacheable: res.Cacheable, Contents: res.Contents,
				InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
		})
	case *mcp.CompleteRequest:
		cp := *r.Params
		cp.Meta = c.forwardMeta(r.Params.Meta)
		return c.cs.Complete(ctx, &cp)
	}
	return nil, fmt.Errorf("proxy: %s: unexpected request %T", method, req)
}

// scoped gives a result the upstream did not scope for caching the scope
// "private": the proxy cannot tell whether an upstream's answer is the same
// for every user, and a shared cache must not serve one user's list to
// another. (go-sdk would default to "public".)
func scoped(c *mcp.Cacheable) {
	if c.CacheScope == "" {
		c.CacheScope = "private"
	}
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

// callTool runs one round of a tools/call.
func (p *Proxy) callTool(ctx context.Context, c *conn, req *mcp.CallToolRequest) (mcp.Result, error) {
	name, state := req.Params.Name, req.Params.RequestState
	// Denied by name: refused before anything else, whatever the call
	// carries (a denied tool must not become reachable through a state).
	if p.policy.Hidden(name) {
		return refusal("The tool %s is not available through this proxy. Nothing was done.", showValue(name, nameWidth)), nil
	}
	switch {
	case strings.HasPrefix(state, passPrefix):
		if a, _ := p.decide(ctx, c, name); a != Allow {
			return refusal("The tool %s now needs a confirmation; call it again. Nothing was done.", showValue(name, nameWidth)), nil
		}
		return p.passThrough(ctx, c, req, strings.TrimPrefix(state, passPrefix))
	case strings.HasPrefix(state, continuePrefix):
		return p.continueCall(ctx, c, req)
	case strings.HasPrefix(state, askPrefix):
		// The answer to the proxy's question: confirm redeems it, then acts.
		fp, inner, ok := strings.Cut(strings.TrimPrefix(state, askPrefix), "/")
		if !ok {
			return refusal("This confirmation is not valid. Nothing was done."), nil
		}
		cp := *req.Params
		cp.RequestState = inner
		return p.flow.Run(ctx, &mcp.CallToolRequest{Session: req.Session, Params: &cp, Extra: req.Extra}, p.step(c, req, nil, fp))
	case state != "":
		// Only the proxy writes the plaintext and the boundary
		// authenticates it, so this is a bug: act on nothing.
		p.log.Error("proxy: requestState plaintext is not the proxy's", "tool", name)
		return refusal("This confirmation is not valid. Nothing was done."), nil
	}
	a, def := p.decide(ctx, c, name)
	if a == Allow {
		return p.passThrough(ctx, c, req, "")
	}
	if def == nil {
		var err error
		if def, err = c.tool(ctx, name); err != nil {
			p.log.Warn("proxy: cannot read the upstream's tools", "err", err)
			return refusal("The upstream's tools could not be read, so the call was refused. Nothing was done."), nil
		}
	}
	fp := Fingerprint(def)
	res, err := p.flow.Run(ctx, req, p.step(c, req, def, fp))
	if err == nil && res != nil && res.InputRequests != nil {
		// The fingerprint travels in the sealed state too, beside the
		// ledger record's copy: either alone binds the approval to it.
		res.RequestState = askPrefix + fp + "/" + res.RequestState
	}
	return res, err
}

// decide returns the policy's action for a first call of name, and the
// tool's definition when it had to read it (only to trust a readOnlyHint
// the operator allowed).
func (p *Proxy) decide(ctx context.Context, c *conn, name string) (Action, *mcp.Tool) {
	a := p.policy.Decide(name, nil)
	if a != Ask || p.policy == nil || !p.policy.allowReadOnlyHint {
		return a, nil
	}
	def, err := c.tool(ctx, name)
	if err != nil {
		return Ask, nil
	}
	return p.policy.Decide(name, def), def
}

// passThrough forwards an allowed call unchanged.
func (p *Proxy) passThrough(ctx context.Context, c *conn, req *mcp.CallToolRequest, upState string) (mcp.Result, error) {
	res, err := p.send(ctx, c, req, req.Params.Arguments, upState, req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	if res.InputRequests != nil {
		res.RequestState = passPrefix + res.RequestState
	}
	return res, nil
}

// step is the confirmed call: def is the upstream's definition read for the
// question (nil on the answer round, where Ask does not run), sealed its
// fingerprint as the sealed state carries it.
func (p *Proxy) step(c *conn, req *mcp.CallToolRequest, def *mcp.Tool, sealed string) confirm.Step {
	name := req.Params.Name
	return confirm.Step{
		Ask: func(ctx context.Context) (confirm.Question, error) {
			if def == nil {
				return confirm.Question{}, confirm.Refuse("The upstream has no tool %s. Nothing was asked or done.", showValue(name, nameWidth))
			}
			fp := Fingerprint(def)
			if fp == "" {
				return confirm.Question{}, confirm.Refuse("The upstream's definition of %s cannot be fingerprinted, so it cannot be approved. Nothing was done.", showValue(name, nameWidth))
			}
			canon, err := requeststate.CanonicalArguments(req.Params.Arguments)
			if err != nil {
				return confirm.Question{}, confirm.Refuse("The call's arguments are not valid JSON, so it was refused. Nothing was done.")
			}
			args, err := splitArguments(canon)
			if err != nil {
				return confirm.Question{}, confirm.Refuse("The call was refused before asking: its %v. Nothing was done.", err)
			}
			return confirm.Question{Message: question(p.policy.Name(), name, args, p.policy.template(name)), Subject: fp}, nil
		},
		Act: func(ctx context.Context, approved ledger.Confirmation) (*mcp.CallToolResult, error) {
			// The upstream may have changed the tool since the question:
			// forward only to the definition the person approved.
			def, err := c.tool(ctx, name)
			if err != nil {
				p.log.Warn("proxy: cannot re-read the tool before forwarding", "tool", name, "err", err)
				return nil, confirm.Refuse("The upstream's definition of %s could not be re-checked, so the approved call was not sent. Nothing was done; ask again.", showValue(name, nameWidth))
			}
			if def == nil || Fingerprint(def) == "" || Fingerprint(def) != approved.Subject || sealed != approved.Subject {
				p.log.Warn("proxy: tool changed after the question; not forwarded", "tool", name, "id", approved.ID)
				return nil, confirm.Refuse("The upstream changed the tool %s after you were asked (its name, input schema or annotations differ from what was approved), so the call was not sent. Nothing was done; ask again.", showValue(name, nameWidth))
			}
			canon, err := requeststate.CanonicalArguments(req.Params.Arguments)
			if err != nil {
				return nil, confirm.Refuse("The call's arguments are not valid JSON. Nothing was done.")
			}
			// Exactly the arguments the digest covers, once, and never again.
			res, err := p.send(ctx, c, req, canon, "", nil)
			if err != nil {
				return nil, p.sendFailure(name, approved.ID, err)
			}
			return p.continuation(ctx, res, approved)
		},
	}
}

// send forwards one tools/call round to the upstream.
func (p *Proxy) send(ctx context.Context, c *conn, req *mcp.CallToolRequest, args json.RawMessage, upState string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	meta, done := p.withProgress(ctx, ss, c.forwardMeta(req.Params.Meta))
	defer done()
	var arguments any = args
	if len(args) == 0 {
		arguments = map[string]any{} // never "null"
	}
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: req.Params.Name, Arguments: arguments,
		InputResponses: responses, RequestState: upState})
	if err != nil {
		return nil, err
	}
	// A fresh result: the upstream's result type is for the upstream's hop.
	return &mcp.CallToolResult{Meta: res.Meta, Content: res.Content, StructuredContent: res.StructuredContent,
		IsError: res.IsError, InputRequests: res.InputRequests, RequestState: res.RequestState}, nil
}

// sendFailure is the answer when a confirmed call's forwarding failed. An
// error the upstream answered with is its answer (a [confirm.Refusal]);
// anything else means the request may have reached the upstream and acted
// and the reply was lost: the error wraps [confirm.ErrOutcomeUnknown].
func (p *Proxy) sendFailure(name string, id ledger.ID, err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		p.log.Info("proxy: the upstream refused an approved call", "tool", name, "id", id, "code", werr.Code)
		return confirm.Refuse("The upstream answered the approved call with an error: %s. It will not be sent again.", prompt.Value(werr.Message, prompt.Options{MaxWidth: 200}))
	}
	p.log.Error("proxy: outcome unknown: the upstream's reply to an approved call was lost", "tool", name, "id", id, "err", err)
	return fmt.Errorf("proxy: %s was forwarded once and its reply lost (%v): %w", name, err, confirm.ErrOutcomeUnknown)
}

// continuation lets a confirmed call's upstream ask for more input (an
// input_required result of the 2026-07-28 era): the round that carries the
// answer is recorded as a new single-use confirmation, so the sealed state
// cannot be replayed to send the call again.
func (p *Proxy) continuation(ctx context.Context, res *mcp.CallToolResult, approved ledger.Confirmation) (*mcp.CallToolResult, error) {
	if res.InputRequests == nil {
		return res, nil
	}
	next, err := p.ledger.Issue(ctx, ledger.Confirmation{Tool: approved.Tool, ArgsDigest: approved.ArgsDigest, Principal: approved.Principal, Subject: approved.Subject})
	if err != nil {
		p.log.Error("proxy: cannot record the upstream's follow-up question", "id", approved.ID, "err", err)
		return nil, confirm.Refuse("The upstream asked a follow-up question the proxy could not record; the call was sent once and did not finish. It will not be sent again.")
	}
	res.RequestState = continuePrefix + next.ID.String() + "." + res.RequestState
	return res, nil
}

// continueCall is the round after an approved call's upstream asked for
// more input: it spends the continuation and forwards the answers.
func (p *Proxy) continueCall(ctx context.Context, c *conn, req *mcp.CallToolRequest) (mcp.Result, error) {
	b, ok := requeststate.BindingFrom(ctx)
	rest := strings.TrimPrefix(req.Params.RequestState, continuePrefix)
	idText, upState, _ := strings.Cut(rest, ".")
	id, err := ledger.ParseID(idText)
	if !ok || err != nil {
		return refusal("This continuation is not valid. Nothing was done."), nil
	}
	rec, err := p.ledger.Redeem(ctx, id)
	if err != nil {
		p.log.Warn("proxy: continuation refused", "id", id, "err", err)
		if errors.Is(err, ledger.ErrSpent) {
			return refusal("This follow-up answer was already used. Nothing was sent again."), nil
		}
		return refusal("This follow-up answer has expired or is unknown. Nothing was sent."), nil
	}
	if rec.Tool != b.Target || rec.ArgsDigest != b.ArgsDigest || rec.Principal != b.Principal {
		res := refusal("This follow-up answer was given for a different call. Nothing was sent.")
		p.complete(ctx, id, ledger.OutcomeFailed, res)
		return res, nil
	}
	canon, err := requeststate.CanonicalArguments(req.Params.Arguments)
	if err != nil {
		res := refusal("The call's arguments are not valid JSON. Nothing was done.")
		p.complete(ctx, id, ledger.OutcomeFailed, res)
		return res, nil
	}
	res, err := p.send(ctx, c, req, canon, upState, req.Params.InputResponses)
	if err != nil {
		var r *confirm.Refusal
		if errors.As(p.sendFailure(req.Params.Name, id, err), &r) {
			res := refusal("%s", r.Reason)
			p.complete(ctx, id, ledger.OutcomeFailed, res)
			return res, nil
		}
		res := refusal("The answer was sent to the upstream once, but its reply was lost: the action may or may not have happened. Check before asking again.")
		p.complete(ctx, id, ledger.OutcomeUnknown, res)
		return res, nil
	}
	kind := ledger.OutcomeDone
	if res.IsError {
		kind = ledger.OutcomeFailed
	}
	p.complete(ctx, id, kind, res)
	res, err = p.continuation(ctx, res, rec.Confirmation)
	var r *confirm.Refusal
	if errors.As(err, &r) {
		return refusal("%s", r.Reason), nil
	}
	return res, err
}

// complete records what a follow-up round did as the outcome of its
// single-use record (the ledger keeps every redeemed approval's outcome,
// and one it never hears of ends in doubt). A failure to record changes
// nothing for this call; it is logged.
func (p *Proxy) complete(ctx context.Context, id ledger.ID, kind ledger.OutcomeKind, res *mcp.CallToolResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	b, err := json.Marshal(res)
	if err == nil {
		err = p.ledger.Complete(ctx, id, kind, b)
	}
	if err != nil {
		p.log.Error("proxy: the follow-up round's outcome could not be recorded", "id", id, "outcome", kind, "err", err)
	}
}

func refusal(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// template returns the operator's question template for tool, or nil.
func (p *Policy) template(tool string) template {
	if p == nil {
		return nil
	}
	return p.questions[tool]
}

// rounds runs call; for a downstream client of the older protocol era it
// then plays the part go-sdk's server plays for a tool of its own: it puts
// an input_required result's requests to the client in-process and calls
// again with the answers. (The proxy answers these methods itself, so
// go-sdk's own shim, which sits inside the proxy's middleware, never
// runs.) Clients of the 2026-07-28 era get the input_required result and
// retry themselves.
func (p *Proxy) rounds(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, call func(context.Context, mcp.Request) (mcp.Result, error)) (mcp.Result, error) {
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
// is unexported and only decoding sets it; the proxy answers these methods
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
	return ip != nil && ip.ProtocolVersion >= protocolMRTR
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
