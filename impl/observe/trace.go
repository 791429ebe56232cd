package observe

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// The _meta keys a client names its trace with: the W3C Trace Context
// headers, as MCP carries them.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Attribute keys of the spans.
const (
	attrMethod       = attribute.Key("mcp.method.name")
	attrTool         = attribute.Key("gen_ai.tool.name")
	attrID           = attribute.Key("mcp_confirm.id")
	attrResult       = attribute.Key("mcp_confirm.result")
	attrOutcome      = attribute.Key("mcp_confirm.outcome")
	attrRefused      = attribute.Key("mcp_confirm.refused")
	attrBadParent    = attribute.Key("mcp_confirm.traceparent_invalid")
	attrRPCErrorCode = attribute.Key("rpc.jsonrpc.error_code")
)

// maxTool bounds the tool name a span carries: MCP's naming rule allows
// 128 characters, and an upstream's longer name is cut.
const maxTool = 128

// Middleware returns the receiving middleware that puts every tools/call
// in the trace its _meta names, or in a trace of its own; nil without
// traces. Install it outside the requestState boundary (confirm.Assemble
// does, in Parts.Middleware), so that the boundary's refusals are traced.
//
// A call whose _meta names a valid traceparent runs in the client's span:
// the steps' spans are its children, and no span is made for the request
// itself (the client's span stands for it; a span per request would cost
// a third of the spans of a confirmed call). A call without one, or with
// a malformed one, gets a server span, tools/call, the root of a trace of
// its own, so that its steps stay together.
func (t *Telemetry) Middleware() mcp.Middleware {
	if !t.Tracing() {
		return nil
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			parent, invalid := remoteParent(ctx, req)
			if !invalid && trace.SpanContextFromContext(parent).IsValid() {
				return next(parent, method, req)
			}
			ctx, span := t.tracer.Start(ctx, "tools/call", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attrMethod.String(method)))
			defer span.End()
			if invalid {
				span.SetAttributes(attrBadParent.Bool(true))
			}
			res, err := next(ctx, method, req)
			var werr *jsonrpc.Error
			switch {
			case errors.As(err, &werr):
				span.SetAttributes(attrRPCErrorCode.Int64(werr.Code))
				span.SetStatus(codes.Error, "JSON-RPC error")
			case err != nil:
				span.SetStatus(codes.Error, "error")
			default:
				if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
					span.SetStatus(codes.Error, "tool error")
				}
			}
			return res, err
		}
	}
}

// remoteParent returns ctx carrying the span context the request's _meta
// names, if its traceparent is valid W3C Trace Context (version, ids and
// flags in lower-case hex, neither id zero); invalid reports one given but
// refused, which then starts a new trace. The propagator parses only
// strings of a traceparent's length and a bounded tracestate (32 members).
func remoteParent(ctx context.Context, req mcp.Request) (_ context.Context, invalid bool) {
	p := req.GetParams()
	if p == nil {
		return ctx, false
	}
	meta := p.GetMeta()
	raw, given := meta[MetaTraceparent]
	if !given {
		return ctx, false
	}
	tp, ok := raw.(string)
	if !ok || len(tp) > maxTraceparent {
		return ctx, true
	}
	carrier := &metaCarrier{traceparent: tp}
	if ts, ok := meta[MetaTracestate].(string); ok && len(ts) <= maxTracestate {
		carrier.tracestate = ts
	}
	out := propagation.TraceContext{}.Extract(ctx, carrier)
	if !trace.SpanContextFromContext(out).IsRemote() {
		return ctx, true
	}
	return out, false
}

// metaCarrier hands the propagator a request's traceparent and
// tracestate: a struct, not a propagation.MapCarrier, which would build a
// map for every call to read two strings from.
type metaCarrier struct{ traceparent, tracestate string }

func (c *metaCarrier) Get(key string) string {
	switch key {
	case MetaTraceparent:
		return c.traceparent
	case MetaTracestate:
		return c.tracestate
	}
	return ""
}

// Set is never called by Extract; it sets what Get reads.
func (c *metaCarrier) Set(key, value string) {
	switch key {
	case MetaTraceparent:
		c.traceparent = value
	case MetaTracestate:
		c.tracestate = value
	}
}

func (c *metaCarrier) Keys() []string { return []string{MetaTraceparent, MetaTracestate} }

// Bounds on what is parsed of a client's trace context: a version-00
// traceparent is 55 bytes (later versions may append fields); W3C caps a
// tracestate at 32 members of at most 256 bytes each (512 is what it
// requires be propagated).
const (
	maxTraceparent = 256
	maxTracestate  = 8192
)

// Inject returns meta with the traceparent and tracestate of ctx's span,
// for a request sent on behalf of it (the proxy's call upstream): a copy,
// never meta itself changed. Without a valid span in ctx it returns meta.
func Inject(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	out := make(mcp.Meta, len(meta)+2)
	for k, v := range meta {
		if k != MetaTraceparent && k != MetaTracestate {
			out[k] = v
		}
	}
	for k, v := range carrier {
		out[k] = v
	}
	return out
}

// A Stage is a step of a confirmed call that is timed and traced.
type Stage uint8

// The stages, and the names of their spans.
const (
	Ask      Stage = iota // confirm.ask: the question validated and issued
	Redeem                // confirm.redeem: an approval spent
	Cancel                // confirm.cancel: a decline spent
	Act                   // confirm.act: the approved action
	Complete              // confirm.complete: the outcome recorded
	Forward               // proxy.forward: a call sent upstream
)

var stageNames = [...]string{"confirm.ask", "confirm.redeem", "confirm.cancel", "confirm.act", "confirm.complete", "proxy.forward"}

func (s Stage) String() string { return stageNames[s] }

// A Span is a stage in progress. End it with the method of its stage; a
// Span of a nil Telemetry (its zero value) does nothing.
type Span struct {
	t     *Telemetry
	span  trace.Span // nil without traces
	tool  string     // the span's gen_ai.tool.name, set when it ends; "" none
	start time.Time  // an Act's start, for its duration; zero for the others
}

// Start begins stage s of a call of tool, as a child span of ctx's when
// tracing, and returns the context to run it in.
func (t *Telemetry) Start(ctx context.Context, s Stage, tool string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	sp := Span{t: t}
	if t.m != nil && s == Act { // the only stage whose duration is observed
		sp.start = time.Now()
	}
	if t.tracer != nil {
		// The tool's name is set with the other attributes when the span
		// ends: one SetAttributes a span, which takes the span's lock and
		// grows its attributes once.
		ctx, sp.span = t.tracer.Start(ctx, s.String())
		sp.tool = tool[:min(len(tool), maxTool)]
	}
	return ctx, sp
}

// setAttributes sets the span's attributes as it ends: the tool's name,
// if any, then a and b, if set.
func (s Span) setAttributes(a, b attribute.KeyValue) {
	var kv [3]attribute.KeyValue
	n := 0
	if s.tool != "" {
		kv[n] = attrTool.String(s.tool)
		n++
	}
	for _, x := range [2]attribute.KeyValue{a, b} {
		if x.Key != "" {
			kv[n] = x
			n++
		}
	}
	s.span.SetAttributes(kv[:n]...)
}

// end ends the span with the ledger's result r (its words, a fixed set)
// and attribute a, if set.
func (s Span) end(r ledger.Result, a attribute.KeyValue) {
	if s.span == nil {
		return
	}
	s.setAttributes(attrResult.String(string(r)), a)
	if r == ledger.ResultError {
		s.span.SetStatus(codes.Error, "ledger error")
	}
	s.span.End()
}

// EndAsk ends an Ask whose Issue returned c and err: nil, the question
// was issued; ErrFull, a cap refused it; any other, the ledger failed.
func (s Span) EndAsk(c ledger.Confirmation, err error) {
	if s.t == nil {
		return
	}
	r := ledger.ResultOf(err)
	if m := s.t.m; m != nil {
		switch r {
		case ledger.ResultOK:
			m.questions.Inc()
		case ledger.ResultFull:
			m.capRefusals.Inc()
		}
	}
	if r == ledger.ResultOK {
		s.end(r, attrID.String(c.ID.String()))
		return
	}
	s.end(r, attribute.KeyValue{})
}

// resultRefused is the result of a step that refused the call before the
// ledger was asked.
const resultRefused ledger.Result = "refused"

// EndRefused ends a span whose step refused the call before asking the
// ledger anything (Ask's refusal, a client that cannot be asked).
func (s Span) EndRefused() { s.end(resultRefused, attribute.KeyValue{}) }

// EndSpend ends a Redeem (an approval spent, or tried) or a Cancel (a
// decline): id is the confirmation, issued when it was asked (zero if
// unknown: no time to decision is recorded), err the ledger's answer.
// A Redeem that succeeded is a redemption; one that found the
// confirmation redeemed already, a replay answered from the record; one
// that found it expired, an expiry.
func (s Span) EndSpend(stage Stage, id ledger.ID, issued time.Time, err error) {
	if s.t == nil {
		return
	}
	r := ledger.ResultOf(err)
	if m := s.t.m; m != nil {
		answer := answerApprove
		if stage == Cancel {
			answer = answerDecline
		}
		switch {
		case r == ledger.ResultOK:
			if stage == Redeem {
				m.redemptions.Inc()
			}
			if !issued.IsZero() {
				m.decision[answer].Observe(max(time.Since(issued), 0).Seconds())
			}
		case r == ledger.ResultExpired:
			m.expiries[layerLedger].Inc()
		case stage == Redeem && m.replays[r] != nil:
			m.replays[r].Inc()
		}
	}
	s.end(r, attrID.String(id.String()))
}

// Answered counts an in-band answer the client relayed: yes, an explicit
// yes (confirm=true) to the question; otherwise a decline (or a link
// to the approval page withdrawn). Retries that carry the same yes count
// again: the client sent it again.
func (t *Telemetry) Answered(yes bool) {
	if !t.Metrics() {
		return
	}
	if yes {
		t.m.approvals[viaInBand].Inc()
	} else {
		t.m.declines[viaInBand].Inc()
	}
}

// EndAct ends an Act with the kind of outcome it had.
func (s Span) EndAct(kind ledger.OutcomeKind) {
	if s.t == nil {
		return
	}
	if m := s.t.m; m != nil && kind >= ledger.OutcomeDone && kind <= ledger.OutcomeUnknown {
		m.action[kind].Observe(time.Since(s.start).Seconds())
	}
	if s.span != nil {
		s.setAttributes(attrOutcome.String(kind.String()), attribute.KeyValue{})
		if kind != ledger.OutcomeDone {
			s.span.SetStatus(codes.Error, kind.String())
		}
		s.span.End()
	}
}

// EndComplete ends a Complete that recorded an outcome of kind, with the
// ledger's answer err. An unknown outcome, or one not recorded, leaves
// the approval in doubt.
func (s Span) EndComplete(kind ledger.OutcomeKind, err error) {
	if s.t == nil {
		return
	}
	if m := s.t.m; m != nil && (kind == ledger.OutcomeUnknown || err != nil) {
		m.inDoubt.Inc()
	}
	s.end(ledger.ResultOf(err), attrOutcome.String(kind.String()))
}

// EndForward ends a Forward; err is the call's error, if any.
func (s Span) EndForward(err error) {
	if s.span == nil {
		return
	}
	s.setAttributes(attribute.KeyValue{}, attribute.KeyValue{})
	if err != nil {
		s.span.SetStatus(codes.Error, "upstream call failed")
	}
	s.span.End()
}

// Refused counts a call the requestState boundary refused, for
// requeststate.Options.Refused; a refusal for expiry is also an expiry.
// With traces, the refusal is noted on the call's tools/call span, or,
// in a client's trace, is a span of its own, requeststate.refused (when
// [Telemetry.Middleware] runs outside the boundary).
func (t *Telemetry) Refused(ctx context.Context, _ string, class requeststate.Refusal) {
	if t == nil {
		return
	}
	if m := t.m; m != nil {
		if c := m.refusals[class]; c != nil {
			c.Inc()
		}
		if class == requeststate.RefusedExpired {
			m.expiries[layerBoundary].Inc()
		}
	}
	if t.tracer == nil {
		return
	}
	switch span := trace.SpanFromContext(ctx); {
	case span.IsRecording():
		span.SetAttributes(attrRefused.String(string(class)))
	case span.SpanContext().IsValid(): // the client's span
		_, s := t.tracer.Start(ctx, "requeststate.refused", trace.WithAttributes(attrRefused.String(string(class))))
		s.SetStatus(codes.Error, "requestState refused")
		s.End()
	}
}

// LedgerEvent counts what only the ledger sees: approvers' decisions
// (ledger.Decide), for ledger.Options.Observe. The flow's own steps are
// counted by their spans.
func (t *Telemetry) LedgerEvent(e ledger.Event) {
	if !t.Metrics() || e.Action != ledger.ActionDecide || e.Result != ledger.ResultOK {
		return
	}
	if e.Decision == "approve" {
		t.m.approvals[viaApprover].Inc()
	} else {
		t.m.declines[viaApprover].Inc()
	}
}
