// Package confirm runs the "are you sure?" exchange for a destructive MCP
// tool: ask, record the question in a ledger, act at most once on an
// explicit approval, and answer every retry of that approval with what the
// one execution did.
//
// A tool handler calls [Flow.Run] with two functions: Ask, which validates
// the call and writes the question, and Act, which performs the action. The
// first round records a pending confirmation ([ledger.Ledger.Issue]) and
// returns an input_required result whose elicitation shows the question and
// whose requestState names the confirmation. On the retry carrying the
// person's answer, the confirmation is spent — redeemed on an explicit
// accept, cancelled otherwise — before Act runs, so the same approval can
// never act twice. After Act returns, its result is recorded on the
// confirmation ([ledger.Ledger.Complete]): done, failed (a refusal or an
// error), or unknown (Act's error wraps [ErrOutcomeUnknown]).
//
// It works in both protocol eras: with 2026-07-28 multi round-trip requests
// the retry comes from the client; with older clients the go-sdk elicits
// in-process and calls the handler again, and the flow is the same.
//
// What it guarantees: Act runs only after a successful redemption of a
// confirmation this ledger issued for the same tool, argument digest and
// principal, answered with action "accept" and confirm=true; a declined,
// cancelled, replayed, expired or unknown confirmation never reaches Act.
// A retry of an approval already redeemed — a client that lost the reply
// and sends the same requestState again, or many at once — runs nothing
// and is answered from the ledger's record: while Act runs, "in progress";
// once its result is recorded, that result, marked as the result of the
// earlier execution (a failure as the earlier failure); if the outcome is
// unknown, or was never recorded (the process crashed, or Act outlasted
// the ledger's lease), that the action may or may not have happened and
// to check before asking again. A retry is answered so only if the record
// binds the same tool, argument digest and principal. A client that
// declared no elicitation capability is refused before anything is issued.
// A question whose call ends in an error before its answer came back — in
// the older era, a client whose dialog failed inside the call — is
// cancelled, so it holds no pending slot until it expires.
//
// What it does not do: seal the requestState (install
// [requeststate.Boundary] — Run refuses to work without it), sanitize the
// question (Ask must build it with package prompt), or re-check the object
// acted on (Act must, against Question.Subject). Nor can it see a 2026-07-28
// client fail after the question reached it: that confirmation stays
// pending until it expires, like any question left unanswered. A result
// is recorded only if Complete reaches the ledger within the lease: the
// person still gets this call's own result if it does not, and later
// retries are told the action is in doubt. The record keeps results up to
// the ledger's MaxResult; a retry of a larger one gets its size and
// SHA-256 only. Nor can it tell a lying client from the person: the client
// relays the answer, so a client that reports "accept" when the person
// declined is, to the flow, the person accepting.
package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// InputID is the key of the confirmation question in the input_required
// result's inputRequests, and of the answer in the retry's inputResponses.
const InputID = "confirm"

// statePrefix marks the requestState plaintext this package writes; the
// boundary seals it, so a client never sees it.
const statePrefix = "confirm.v1."

// A Question is what the person is asked and what it is about.
type Question struct {
	// Message is the question exactly as shown. Untrusted values in it must
	// have been passed through package prompt.
	Message string
	// Subject identifies the object the action will touch, so Act can check
	// it has not changed since the question (e.g. a file's device, inode,
	// size and modification time).
	Subject string
}

// A Refusal is an error Ask or Act returns to refuse the call with a message
// meant for the client; any other error is reported generically.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// Refuse returns a [Refusal] with a formatted reason.
func Refuse(format string, args ...any) error { return &Refusal{Reason: fmt.Sprintf(format, args...)} }

// ErrOutcomeUnknown is what Act wraps in its error when it cannot tell
// whether the action happened: a proxy that forwarded the call and lost
// the upstream's reply, say. The person is told that the action may or may
// not have happened and to check before asking again, rather than that it
// failed: "failed" would invite a retry of an action that may have run.
var ErrOutcomeUnknown = errors.New("confirm: the outcome of the action is unknown")

// Step is one confirmed action.
type Step struct {
	// Ask validates the call before anything is issued and returns the
	// question. An error refuses the call; nothing is recorded.
	Ask func(ctx context.Context) (Question, error)
	// Act performs the action once the confirmation c is redeemed. It runs
	// at most once per confirmation. c.Subject is the Question's Subject.
	// A [Refusal] is shown to the person; an error wrapping
	// [ErrOutcomeUnknown] says Act cannot tell whether the action happened;
	// any other error is a failure, reported generically.
	Act func(ctx context.Context, c ledger.Confirmation) (*mcp.CallToolResult, error)
}

// Options configures a [Flow].
type Options struct {
	// Ledger records and spends confirmations. Required.
	Ledger *ledger.Ledger
	// Logger receives the reasons for refusals. Default: discard.
	Logger *slog.Logger
}

// Flow runs confirmed steps. It is safe for concurrent use.
type Flow struct {
	ledger *ledger.Ledger
	log    *slog.Logger
}

// New returns a Flow.
func New(opts Options) (*Flow, error) {
	if opts.Ledger == nil {
		return nil, errors.New("confirm: Options.Ledger is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Flow{ledger: opts.Ledger, log: log}, nil
}

// Run executes one round of the exchange for a tools/call request.
func (f *Flow) Run(ctx context.Context, req *mcp.CallToolRequest, s Step) (*mcp.CallToolResult, error) {
	b, ok := requeststate.BindingFrom(ctx)
	if !ok {
		// Without the boundary the requestState is whatever the client sent:
		// refuse rather than trust it (the seed's tests hid exactly this).
		f.log.Error("confirm: requestState boundary is not installed; refusing")
		return refusal("This server is misconfigured: confirmations are disabled. Nothing was done."), nil
	}
	if req.Params.RequestState == "" {
		return f.ask(ctx, req, b, s)
	}
	return f.answer(ctx, req, b, s)
}

// ask is the first round: validate, record, and put the question.
func (f *Flow) ask(ctx context.Context, req *mcp.CallToolRequest, b requeststate.Binding, s Step) (*mcp.CallToolResult, error) {
	if !canElicit(req) {
		// A client that cannot answer would hang (2026-07-28) or get an
		// opaque protocol error (older era): say why, and issue nothing.
		return refusal("This client cannot show a confirmation dialog (it declared no form elicitation capability), so the action was refused. Nothing was done."), nil
	}
	q, err := s.Ask(ctx)
	if err != nil {
		return f.refused(err, "ask")
	}
	c, err := f.ledger.Issue(ctx, ledger.Confirmation{
		Tool:       b.Target,
		ArgsDigest: b.ArgsDigest,
		Principal:  b.Principal,
		Subject:    q.Subject,
	})
	if err != nil {
		f.log.Warn("confirm: issue failed", "tool", b.Target, "err", err)
		if errors.Is(err, ledger.ErrFull) {
			return refusal("Too many confirmations are waiting for an answer; answer or let them expire, then try again. Nothing was done."), nil
		}
		return refusal("The confirmation ledger is unavailable, so the action was refused. Nothing was done."), nil
	}
	// The audit record of what was asked: the ledger keeps only bindings.
	f.log.Info("confirm: asked", "id", c.ID, "tool", b.Target, "question", q.Message)
	// A call that ends in an error never delivered this question, or lost
	// the answer: in the older era go-sdk's shim asks in-process and, when
	// the client's dialog fails, ends the call without calling back. Cancel
	// it, so that failing dialogs cannot pile up pending confirmations
	// against the caps until they expire.
	requeststate.AfterCall(ctx, func(err error) {
		if err != nil {
			f.cancelUnanswered(ctx, c.ID, err)
		}
	})
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{InputID: &mcp.ElicitParams{
			Mode:            "form",
			Message:         q.Message,
			RequestedSchema: requestedSchema(),
		}},
		RequestState: statePrefix + c.ID.String(),
	}, nil
}

// cancelTimeout bounds the Cancel of a question whose call failed: the
// call's own context may be done by then.
const cancelTimeout = 5 * time.Second

// cancelUnanswered cancels confirmation id, whose call ended in callErr
// before an answer could redeem or cancel it. A confirmation the call did
// spend (an approval whose action then failed) stays as it is.
func (f *Flow) cancelUnanswered(ctx context.Context, id ledger.ID, callErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	if _, err := f.ledger.Cancel(ctx, id); err != nil {
		f.log.Debug("confirm: call failed after its confirmation was spent", "id", id, "call_err", callErr, "err", err)
		return
	}
	f.log.Info("confirm: cancelled: the call failed before an answer came back", "id", id, "call_err", callErr)
}

// requestedSchema returns the form the question asks the person to fill in:
// one required boolean, confirm. It asks for an explicit yes: an "accept"
// without confirm=true (a client that auto-submits an empty form) is not an
// approval.
func requestedSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{
				"type":        "boolean",
				"title":       "Confirm",
				"description": "Check to approve exactly the action described above.",
			},
		},
		"required": []string{"confirm"},
	}
}

// answer is the retry: spend the confirmation, then act on an approval.
func (f *Flow) answer(ctx context.Context, req *mcp.CallToolRequest, b requeststate.Binding, s Step) (*mcp.CallToolResult, error) {
	id, err := ledger.ParseID(strings.TrimPrefix(req.Params.RequestState, statePrefix))
	if err != nil || !strings.HasPrefix(req.Params.RequestState, statePrefix) {
		// Only this package writes the plaintext and the boundary
		// authenticates it, so this is a bug or another tool's state.
		f.log.Error("confirm: requestState plaintext is not a confirmation", "tool", b.Target)
		return refusal("This confirmation is not valid. Nothing was done."), nil
	}
	if !approved(req.Params.InputResponses[InputID]) {
		if _, err := f.ledger.Cancel(ctx, id); err != nil {
			f.log.Info("confirm: cancel of an unusable confirmation", "id", id, "err", err)
			return f.spendRefusal(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: "Not confirmed: nothing was done.",
		}}}, nil
	}
	rec, err := f.ledger.Redeem(ctx, id)
	if err != nil && !errors.Is(err, ledger.ErrSpent) {
		f.log.Warn("confirm: redeem refused", "id", id, "err", err)
		return f.spendRefusal(err), nil
	}
	// The boundary binds the state to these already; checking the ledger's
	// own record too means a boundary bug cannot carry an approval, or the
	// answer to one, onto another call.
	c := rec.Confirmation
	if c.Tool != b.Target || c.ArgsDigest != b.ArgsDigest || c.Principal != b.Principal {
		f.log.Error("confirm: confirmation does not match the call", "id", id, "tool", b.Target)
		res := refusal("This approval was given for a different action. Nothing was done.")
		if err == nil {
			f.record(ctx, id, ledger.OutcomeFailed, res)
		}
		return res, nil
	}
	if err != nil {
		// A retry of an approval already redeemed: answered from the
		// record, and nothing runs.
		f.log.Info("confirm: retry answered from the record", "id", id, "state", rec.State)
		return f.replay(id, rec, err), nil
	}
	res, err := s.Act(ctx, c)
	kind := ledger.OutcomeDone
	switch {
	case err != nil && errors.Is(err, ErrOutcomeUnknown):
		kind = ledger.OutcomeUnknown
		res, _ = f.refused(err, "act")
	case err != nil:
		kind = ledger.OutcomeFailed
		res, _ = f.refused(err, "act")
	case res == nil:
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	case res.IsError:
		kind = ledger.OutcomeFailed
	}
	f.record(ctx, id, kind, res)
	return res, nil
}

// recordTimeout bounds the Complete that records an outcome: the call's
// own context may be done by then (a client that hung up), and the
// outcome must still be recorded.
const recordTimeout = 5 * time.Second

// record records res, what this call returns, as the outcome of the
// redeemed confirmation id, so that every retry gets it back. If that
// fails, the caller still gets res; retries will be told the action is in
// doubt (the lease ends with no outcome), never run it again.
func (f *Flow) record(ctx context.Context, id ledger.ID, kind ledger.OutcomeKind, res *mcp.CallToolResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	b, err := json.Marshal(res)
	if err == nil {
		err = f.ledger.Complete(ctx, id, kind, b)
	}
	if err != nil {
		f.log.Error("confirm: the outcome could not be recorded: retries will be told it is in doubt", "id", id, "outcome", kind, "err", err)
		return
	}
	f.log.Info("confirm: outcome recorded", "id", id, "outcome", kind)
}

// Messages that answer a retry of an approval already redeemed.
const (
	earlierNote   = "This approval was already used: this is the result of that earlier execution. Nothing was run again."
	msgInProgress = "This approval is being acted on right now, by an earlier request. Nothing was run again; retry in a moment for its result."
	msgInDoubt    = "This approval was already used, and the action may or may not have happened — check before asking again. Nothing was run again."
)

// replay answers a retry of confirmation id, redeemed before, from its
// record rec (err says which state it is in).
func (f *Flow) replay(id ledger.ID, rec ledger.Record, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, ledger.ErrInProgress):
		return refusal(msgInProgress)
	case !errors.Is(err, ledger.ErrDone):
		return refusal(msgInDoubt)
	}
	o := rec.Outcome
	failed := o.Kind == ledger.OutcomeFailed
	if !o.Kept() {
		return &mcp.CallToolResult{IsError: failed, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"This approval was already used. The result of that earlier execution was %d bytes, SHA-256 %x, too large to keep. Nothing was run again.",
			o.Size, o.SHA256)}}}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(o.Result, &res); err != nil {
		f.log.Error("confirm: recorded outcome does not parse", "id", id, "err", err)
		return refusal("This approval was already used, but the result of that earlier execution could not be read. Nothing was run again.")
	}
	// Marked, so that neither the person nor the model takes it for a
	// second execution.
	res.Content = append([]mcp.Content{&mcp.TextContent{Text: earlierNote}}, res.Content...)
	res.IsError = failed
	return &res
}

// approved reports whether the answer is an explicit yes.
func approved(r mcp.InputResponse) bool {
	e, ok := r.(*mcp.ElicitResult)
	if !ok || e == nil || e.Action != "accept" {
		return false
	}
	yes, ok := e.Content["confirm"].(bool)
	return ok && yes
}

// canElicit reports whether the client declared form elicitation.
func canElicit(req *mcp.CallToolRequest) bool {
	e, ok := metaElicitation(req)
	if !ok {
		caps := req.ClientCapabilities()
		if caps == nil {
			return false
		}
		e = caps.Elicitation
	}
	if e == nil {
		return false
	}
	// An empty elicitation capability means form mode (the spec's default).
	return e.Form != nil || e.URL == nil
}

// metaElicitation reads the elicitation capability (nil if none) that a
// 2026-07-28 request declares in its _meta, when that has the shape decoded
// JSON has. ok is false when the request has no such _meta, or another
// shape: then req.ClientCapabilities decides. That reads the same value,
// but re-encodes all of _meta's capabilities as JSON and decodes them, at
// about 17 µs a call (BENCHMARKS.md); it also ignores them all if any other
// capability is malformed, where this reads elicitation alone.
func metaElicitation(req *mcp.CallToolRequest) (_ *mcp.ElicitationCapabilities, ok bool) {
	if req.Params == nil {
		return nil, false
	}
	caps, ok := req.Params.GetMeta()[mcp.MetaKeyClientCapabilities].(map[string]any)
	if !ok {
		return nil, false
	}
	raw := caps["elicitation"]
	if raw == nil {
		return nil, true
	}
	modes, ok := raw.(map[string]any)
	if !ok {
		return nil, false
	}
	form, okForm := declared(modes["form"])
	url, okURL := declared(modes["url"])
	if !okForm || !okURL {
		return nil, false
	}
	var e mcp.ElicitationCapabilities
	if form {
		e.Form = &mcp.FormElicitationCapabilities{}
	}
	if url {
		e.URL = &mcp.URLElicitationCapabilities{}
	}
	return &e, true
}

// declared reads one elicitation mode's capability as decoded JSON: an
// object declares the mode, absence or null does not; ok is false for
// anything else.
func declared(v any) (yes, ok bool) {
	switch v.(type) {
	case nil:
		return false, true
	case map[string]any:
		return true, true
	}
	return false, false
}

// spendRefusal answers a Redeem or Cancel that the ledger refused.
func (f *Flow) spendRefusal(err error) *mcp.CallToolResult {
	switch ledger.ResultOf(err) {
	case ledger.ResultInProgress:
		return refusal("This confirmation was already approved, and the action is in progress; declining it now changes nothing.")
	case ledger.ResultDone:
		return refusal("This confirmation was already approved and acted on; declining it now changes nothing.")
	case ledger.ResultInDoubt:
		return refusal("This confirmation was already approved, and the action may or may not have happened — check before asking again; declining it now changes nothing.")
	case ledger.ResultCancelled:
		return refusal("This confirmation was declined earlier and cannot be used. Nothing was done.")
	case ledger.ResultExpired:
		return refusal("This confirmation has expired; ask again. Nothing was done.")
	case ledger.ResultUnknown:
		return refusal("This server has no record of this confirmation (it was issued by another server instance, or this one restarted, or it expired long ago); ask again. Nothing was done.")
	}
	return refusal("The confirmation ledger is unavailable, so the action was refused. Nothing was done.")
}

func (f *Flow) refused(err error, stage string) (*mcp.CallToolResult, error) {
	var r *Refusal
	if errors.As(err, &r) {
		return refusal(r.Reason), nil
	}
	f.log.Error("confirm: "+stage+" failed", "err", err)
	if stage == "act" && errors.Is(err, ErrOutcomeUnknown) {
		return refusal(msgOutcomeUnknown), nil
	}
	if stage == "ask" {
		return refusal("The call could not be checked, so it was refused. Nothing was done."), nil
	}
	return refusal("The approved action failed; see the server log."), nil
}

// msgOutcomeUnknown answers an action whose outcome cannot be known.
const msgOutcomeUnknown = "The approved action was started, but its outcome is unknown: it may or may not have happened. Check before asking again."

func refusal(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
