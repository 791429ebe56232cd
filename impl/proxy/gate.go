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

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
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
	// continueApprovedPrefix + ledger id + "." + the approved call's ledger
	// id + "." + upstream state: the same, for a call approved out of
	// band, whose final result names its approvers.
	continueApprovedPrefix = "proxy.v1.continue-approved."
)

// callTool runs one round of a downstream tools/call (the relay's
// Options.CallTool): the policy decides, and what is forwarded goes through
// up.
func (p *Proxy) callTool(ctx context.Context, up relay.Upstream, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, state := req.Params.Name, req.Params.RequestState
	// Denied by name: refused before anything else, whatever the call
	// carries (a denied tool must not become reachable through a state).
	if p.policy.Hidden(name) {
		if p.policy.outsideNamingRule(name) {
			return refusal("The tool %s is not available through this proxy: its name is outside MCP's naming rule (1 to 128 ASCII letters, digits, _ - .) and the policy does not name it exactly. Nothing was done.", showValue(name, nameWidth)), nil
		}
		return refusal("The tool %s is not available through this proxy. Nothing was done.", showValue(name, nameWidth)), nil
	}
	switch {
	case strings.HasPrefix(state, passPrefix):
		if a, _ := p.decide(ctx, up, name); a != Allow {
			return refusal("The tool %s now needs a confirmation; call it again. Nothing was done.", showValue(name, nameWidth)), nil
		}
		return p.passThrough(ctx, up, req, strings.TrimPrefix(state, passPrefix))
	case strings.HasPrefix(state, continuePrefix), strings.HasPrefix(state, continueApprovedPrefix):
		return p.continueCall(ctx, up, req)
	case strings.HasPrefix(state, askPrefix):
		// The answer to the proxy's question: confirm redeems it, then acts.
		fp, inner, ok := strings.Cut(strings.TrimPrefix(state, askPrefix), "/")
		if !ok {
			return refusal("This confirmation is not valid. Nothing was done."), nil
		}
		approval, refused := p.approval(name)
		if refused != nil {
			return refused, nil
		}
		cp := *req.Params
		cp.RequestState = inner
		res, err := p.flow.Run(ctx, &mcp.CallToolRequest{Session: req.Session, Params: &cp, Extra: req.Extra}, p.step(up, req, nil, fp, approval))
		if err == nil && res != nil && res.InputRequests != nil && !continuing(res.RequestState) {
			// Still waiting for out-of-band approval: the state the
			// client retries with binds the same fingerprint. (An
			// upstream's follow-up question has a state of its own.)
			res.RequestState = askPrefix + fp + "/" + res.RequestState
		}
		return res, err
	case state != "":
		// Only the proxy writes the plaintext and the boundary
		// authenticates it, so this is a bug: act on nothing.
		p.log.Error("proxy: requestState plaintext is not the proxy's", "tool", name)
		return refusal("This confirmation is not valid. Nothing was done."), nil
	}
	a, def := p.decide(ctx, up, name)
	if a == Allow {
		return p.passThrough(ctx, up, req, "")
	}
	approval, refused := p.approval(name)
	if refused != nil {
		return refused, nil
	}
	if def == nil {
		// The question may use the definition read last: if the upstream
		// has changed it since, the check before forwarding refuses.
		var err error
		if def, err = up.Tool(ctx, name, relay.Cached); err != nil {
			p.log.Warn("proxy: cannot read the upstream's tools", "err", err)
			return refusal("The upstream's tools could not be read, so the call was refused. Nothing was done."), nil
		}
	}
	if def == nil {
		// A name the upstream does not list has no definition to show or
		// bind an approval to: refused before anything is asked or spent.
		return refusal("Unknown tool %s: the upstream does not list it. Nothing was asked or done.", showValue(name, nameWidth)), nil
	}
	fp := p.fingerprints.of(def)
	res, err := p.flow.Run(ctx, req, p.step(up, req, def, fp, approval))
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
func (p *Proxy) decide(ctx context.Context, up relay.Upstream, name string) (Action, *mcp.Tool) {
	a := p.policy.Decide(name, nil)
	if a != Ask || p.policy == nil || !p.policy.allowReadOnlyHint {
		return a, nil
	}
	// Allowing forwards without a question: only a current definition
	// may allow it.
	def, err := up.Tool(ctx, name, relay.Current)
	if err != nil {
		return Ask, nil
	}
	return p.policy.Decide(name, def), def
}

// passThrough forwards an allowed call unchanged.
func (p *Proxy) passThrough(ctx context.Context, up relay.Upstream, req *mcp.CallToolRequest, upState string) (*mcp.CallToolResult, error) {
	res, err := p.forward(ctx, up, req, req.Params.Arguments, upState, req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	if res.InputRequests != nil {
		res.RequestState = passPrefix + res.RequestState
	}
	return res, nil
}

// approval returns the out-of-band approval the policy's [[approval]]
// tables ask of the named tool (nil: the flow's default, in band), or
// the refusal of a call two tables name.
func (p *Proxy) approval(name string) (*confirm.Approval, *mcp.CallToolResult) {
	a, err := p.policy.Approval(name)
	if err != nil {
		p.log.Error("proxy: the policy's approval tables overlap; call refused", "tool", name, "err", err)
		return nil, refusal("The proxy's policy names the tool %s in two approval tables, so who must approve it is unclear and the call was refused; the operator must fix the policy. Nothing was done.", showValue(name, nameWidth))
	}
	return a, nil
}

// step is the confirmed call: def is the upstream's definition read for the
// question (nil on the answer round, where Ask does not run), sealed its
// fingerprint as the sealed state carries it, approval the out-of-band
// approval it needs (nil: the flow's default).
func (p *Proxy) step(up relay.Upstream, req *mcp.CallToolRequest, def *mcp.Tool, sealed string, approval *confirm.Approval) confirm.Step {
	name := req.Params.Name
	return confirm.Step{
		Approval: approval,
		Ask: func(ctx context.Context) (confirm.Question, error) {
			if def == nil {
				return confirm.Question{}, confirm.Refuse("The upstream has no tool %s. Nothing was asked or done.", showValue(name, nameWidth))
			}
			fp := sealed // Fingerprint(def), taken by callTool
			if fp == "" {
				return confirm.Question{}, confirm.Refuse("The upstream's definition of %s cannot be fingerprinted, so it cannot be approved. Nothing was done.", showValue(name, nameWidth))
			}
			canon, err := arguments(ctx, req)
			if err != nil {
				return confirm.Question{}, confirm.Refuse("The call's arguments are not valid JSON, so it was refused. Nothing was done.")
			}
			msg, err := p.ask(fp, def, canon)
			if err != nil {
				return confirm.Question{}, err
			}
			return confirm.Question{Message: msg, Subject: fp}, nil
		},
		Act: func(ctx context.Context, approved ledger.Confirmation) (*mcp.CallToolResult, error) {
			// The upstream may have changed the tool since the question:
			// forward only to the definition the person approved, as the
			// upstream lists it now (from the cache only while the
			// upstream announces its changes; a mismatch reads it again,
			// since the cache may be behind).
			fp, err := p.currentFingerprint(ctx, up, name, relay.Current)
			if err == nil && fp != approved.Subject && sealed == approved.Subject {
				fp, err = p.currentFingerprint(ctx, up, name, relay.Fresh)
			}
			if err != nil {
				p.log.Warn("proxy: cannot re-read the tool before forwarding", "tool", name, "err", err)
				return nil, confirm.Refuse("The upstream's definition of %s could not be re-checked, so the approved call was not sent. Nothing was done; ask again.", showValue(name, nameWidth))
			}
			if fp == "" || fp != approved.Subject || sealed != approved.Subject {
				p.log.Warn("proxy: tool changed after the question; not forwarded", "tool", name, "id", approved.ID)
				return nil, confirm.Refuse("The upstream changed the tool %s after you were asked (its name, input schema or annotations differ from what was approved), so the call was not sent. Nothing was done; ask again.", showValue(name, nameWidth))
			}
			canon, err := arguments(ctx, req)
			if err != nil {
				return nil, confirm.Refuse("The call's arguments are not valid JSON. Nothing was done.")
			}
			// Exactly the arguments the digest covers, once, and never again.
			res, err := p.forward(ctx, up, req, canon, "", nil)
			if err != nil {
				return nil, p.sendFailure(name, approved.ID, err)
			}
			return p.continuation(ctx, res, approved, approved.ID)
		},
	}
}

// question returns the question for a call of tool with the canonical
// arguments canon, or a [confirm.Refusal] of arguments it cannot show.
func (p *Policy) question(tool string, canon []byte) (string, []argument, error) {
	args, err := splitArguments(canon)
	if err != nil {
		return "", nil, confirm.Refuse("The call was refused before asking: its %v. Nothing was done.", err)
	}
	return question(p.Name(), tool, args, p.template(tool)), args, nil
}

// ask returns the question for a call of the tool def, whose fingerprint
// is fp, with the canonical arguments canon, once they match its input
// schema; or a [confirm.Refusal].
func (p *Proxy) ask(fp string, def *mcp.Tool, canon []byte) (string, error) {
	msg, args, err := p.policy.question(def.Name, canon)
	if err != nil {
		return "", err
	}
	if err := p.checkSchema(fp, def, args); err != nil {
		return "", err
	}
	return msg, nil
}

// arguments returns the canonical arguments of req, which the boundary
// computed and digested for this round (requeststate.Binding.Arguments):
// canonicalized and digested once per round, and exactly the bytes the
// digest covers.
func arguments(ctx context.Context, req *mcp.CallToolRequest) ([]byte, error) {
	if b, ok := requeststate.BindingFrom(ctx); ok && b.Arguments != nil && b.Target == req.Params.Name {
		return b.Arguments, nil
	}
	return requeststate.CanonicalArguments(req.Params.Arguments)
}

// currentFingerprint returns the fingerprint of the upstream's definition
// of name, read as f allows, or "" when it lists no such tool.
func (p *Proxy) currentFingerprint(ctx context.Context, up relay.Upstream, name string, f relay.Freshness) (string, error) {
	def, err := up.Tool(ctx, name, f)
	if err != nil || def == nil {
		return "", err
	}
	return p.fingerprints.of(def), nil
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

// continuing reports whether state is a continuation's.
func continuing(state string) bool {
	return strings.HasPrefix(state, continuePrefix) || strings.HasPrefix(state, continueApprovedPrefix)
}

// continuation lets a confirmed call's upstream ask for more input (an
// input_required result of the 2026-07-28 era): the round that carries the
// answer is recorded as a new single-use confirmation, so the sealed state
// cannot be replayed to send the call again. approved is the round's
// record, orig the call's first confirmation (whose record names any
// out-of-band approvers).
func (p *Proxy) continuation(ctx context.Context, res *mcp.CallToolResult, approved ledger.Confirmation, orig ledger.ID) (*mcp.CallToolResult, error) {
	if res.InputRequests == nil {
		return res, nil
	}
	// The audit record of the follow-up: the upstream's questions, as
	// the client is shown them.
	call, _ := audit.FromContext(ctx)
	call.Question, call.Answer = followUp(res.InputRequests), ""
	// A question put to the person like the proxy's own: counted and
	// traced as an ask.
	ctx, span := p.obs.Start(ctx, observe.Ask, approved.Tool)
	next, err := p.ledger.Issue(audit.WithCall(ctx, call), ledger.Confirmation{Tool: approved.Tool, ArgsDigest: approved.ArgsDigest, Principal: approved.Principal, Subject: approved.Subject})
	span.EndAsk(next, err)
	if err != nil {
		p.log.Error("proxy: cannot record the upstream's follow-up question", "id", approved.ID, "err", err)
		return nil, confirm.Refuse("The upstream asked a follow-up question the proxy could not record; the call was sent once and did not finish. It will not be sent again.")
	}
	if approved.Approval != nil || orig != approved.ID {
		res.RequestState = continueApprovedPrefix + next.ID.String() + "." + orig.String() + "." + res.RequestState
		return res, nil
	}
	res.RequestState = continuePrefix + next.ID.String() + "." + res.RequestState
	return res, nil
}

// continueCall is the round after an approved call's upstream asked for
// more input: it spends the continuation and forwards the answers.
func (p *Proxy) continueCall(ctx context.Context, up relay.Upstream, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	b, ok := requeststate.BindingFrom(ctx)
	rest, approvedOOB := strings.CutPrefix(req.Params.RequestState, continueApprovedPrefix)
	if !approvedOOB {
		rest = strings.TrimPrefix(req.Params.RequestState, continuePrefix)
	}
	idText, upState, _ := strings.Cut(rest, ".")
	id, err := ledger.ParseID(idText)
	orig := id
	if err == nil && approvedOOB {
		var origText string
		origText, upState, _ = strings.Cut(upState, ".")
		orig, err = ledger.ParseID(origText)
	}
	if !ok || err != nil {
		return refusal("This continuation is not valid. Nothing was done."), nil
	}
	ctx = audit.WithCall(ctx, audit.Call{Principal: b.Principal, Tool: b.Target, ArgsDigest: b.ArgsDigest, Answer: "follow_up"})
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
	canon, err := arguments(ctx, req)
	if err != nil {
		res := refusal("The call's arguments are not valid JSON. Nothing was done.")
		p.complete(ctx, id, ledger.OutcomeFailed, res)
		return res, nil
	}
	res, err := p.forward(ctx, up, req, canon, upState, req.Params.InputResponses)
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
	if approvedOOB && res.InputRequests == nil {
		// The call's final result names who approved it, as the first
		// round's would have.
		if orec, err := p.ledger.Lookup(ctx, orig); err == nil && orec.Approval != nil {
			cp := *res
			cp.Content = append([]mcp.Content{&mcp.TextContent{Text: confirm.ApprovedBy(orec)}}, res.Content...)
			res = &cp
		}
	}
	p.complete(ctx, id, kind, res)
	res, err = p.continuation(ctx, res, rec.Confirmation, orig)
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

// followUp returns the messages of an upstream's input requests, in the
// order of their keys: what its follow-up question showed.
func followUp(reqs mcp.InputRequestMap) string {
	var msgs []string
	for _, k := range slices.Sorted(maps.Keys(reqs)) {
		if e, ok := reqs[k].(*mcp.ElicitParams); ok && e != nil {
			msgs = append(msgs, e.Message)
		}
	}
	return strings.Join(msgs, "\n")
}
