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
//
// # Out-of-band approval
//
// A step whose [Approval] is out of band (or both) needs approvers the
// client cannot be: its first round issues the confirmation with a
// [ledger.Approval] — the approvers and how many must approve, the
// caller as its Requester (who can never approve their own call), the
// question as asked — and returns a URL request ([ApproveInputID]: an
// elicitation in mode "url") pointing at the approval page ([Page]),
// beside the in-band question for mode Both. The client's answer to the
// link approves nothing (anything but accept withdraws the call). A
// 2026-07-28 retry before the approvers have decided is answered with the
// same URL request, saying it is waiting and until when; nothing is spent,
// and the sealed state it retries with keeps an in-band yes already given.
// An older-era client cannot retry with the state: its call is held, the
// ledger polled without changing it, until the decision, the expiry or
// the call's end, and a client that asked for progress is told it is
// waiting, with the deadline. Once approved, the next retry redeems and
// acts once, and its result begins with who approved, and when, as the
// ledger's record says ([ledger.Record.Decisions]); once declined, every
// retry is told who declined, and nothing acts.
//
// What out-of-band approval guarantees, beyond the above: Act runs only
// after the ledger recorded the approvals the step needs, from approvers
// the page authenticated — a client that lies, or an agent that drives
// its own client, can no longer approve such a call. A question is asked
// under the approval in force when it is asked; an answer that arrives
// after the policy changed is refused and the call cancelled. What it does
// not: authenticate anyone (the page does; the approvers' sign-in is the
// trust root), or exclude a requester it cannot name — a caller with no
// principal (stdio, no authentication) excludes no one, though N distinct
// approvers are still needed; the requester is named SubjectPrefix +
// principal, which excludes them only if the caller's tokens and the
// approvers' sign-in name people alike ([Options.Requester]). A passkey
// enrolled for the caller's principal signs its holder in under that
// same name (package approve's Holder), so they are excluded there too;
// one enrolled for a holder who makes no calls is not.
package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
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
	// Approval is who must approve the call; nil means the Flow's
	// default ([Options.Approval]).
	Approval *Approval
}

// Options configures a [Flow].
type Options struct {
	// Ledger records and spends confirmations. Required.
	Ledger *ledger.Ledger
	// Logger receives the reasons for refusals. Default: discard.
	Logger *slog.Logger
	// Approval is who approves the calls of a Step whose Approval is
	// nil. Default: the person asked in band.
	Approval Approval
	// Page is the approval page; out-of-band approval needs it. A Step
	// that needs out-of-band approval without a Page is refused.
	Page Page
	// Notify, if set, tells approvers of a call that waits for them, once
	// per question. It must not block.
	Notify func(Notice)
	// Requester names the caller, given its principal, as the approval
	// page names whoever signs in, so that the caller can never approve
	// their own call. Default: SubjectPrefix + principal ("" for an
	// unauthenticated caller: then no one is excluded). Package approve
	// signs a passkey's holder in as SubjectPrefix + the principal it was
	// enrolled for: a Requester that names callers otherwise does not
	// exclude them there.
	Requester func(principal string) string
	// Now is the clock a held older-era call compares expiry on.
	// Default time.Now.
	Now func() time.Time
	// Telemetry, if set, counts and traces each step (package observe).
	Telemetry *observe.Telemetry
}

// Flow runs confirmed steps. It is safe for concurrent use.
type Flow struct {
	ledger          *ledger.Ledger
	log             *slog.Logger
	approvalDefault Approval
	page            Page
	notifier        func(Notice)
	requesterOf     func(string) string
	now             func() time.Time
	obs             *observe.Telemetry // nil: none
}

// New returns a Flow.
func New(opts Options) (*Flow, error) {
	if opts.Ledger == nil {
		return nil, errors.New("confirm: Options.Ledger is required")
	}
	if err := opts.Approval.Check(); err != nil {
		return nil, err
	}
	if opts.Approval.Mode != InBand && opts.Page == nil {
		return nil, fmt.Errorf("confirm: %v approval needs an approval page (Options.Page)", opts.Approval.Mode)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Flow{ledger: opts.Ledger, log: log, approvalDefault: opts.Approval, page: opts.Page,
		notifier: opts.Notify, requesterOf: opts.Requester, now: now, obs: opts.Telemetry}, nil
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
	ctx, span := f.obs.Start(ctx, observe.Ask, b.Target)
	issued := false
	defer func() {
		if !issued {
			span.EndRefused() // refused before the ledger was asked
		}
	}()
	a := f.approval(s)
	if err := a.Check(); err != nil || a.Mode != InBand && f.page == nil {
		f.log.Error("confirm: a step's approval cannot be asked for; refusing", "tool", b.Target, "mode", a.Mode, "err", err)
		return refusal("This server is misconfigured: this call's approval cannot be asked for. Nothing was done."), nil
	}
	form, url := elicitModes(req)
	switch {
	case a.Mode != OutOfBand && !form:
		// A client that cannot answer would hang (2026-07-28) or get an
		// opaque protocol error (older era): say why, and issue nothing.
		return refusal("This client cannot show a confirmation dialog (it declared no form elicitation capability), so the action was refused. Nothing was done."), nil
	case a.Mode != InBand && !url:
		return refusal("This call needs out-of-band approval, and this client cannot show the approval page's link (it declared no url elicitation capability), so the action was refused. Nothing was done."), nil
	}
	q, err := s.Ask(ctx)
	if err != nil {
		return f.refused(err, "ask")
	}
	c := ledger.Confirmation{
		Tool:       b.Target,
		ArgsDigest: b.ArgsDigest,
		Principal:  b.Principal,
		Subject:    q.Subject,
	}
	if a.Mode != InBand {
		c.Approval = f.outOfBandApproval(a, b.Principal, q.Message)
		if err := c.Approval.Check(); err != nil {
			f.log.Warn("confirm: the question cannot be sent for approval", "tool", b.Target, "err", err)
			return refusal("This call's question is too long to be sent for out-of-band approval, or its caller's name is, so the action was refused. Nothing was done."), nil
		}
	}
	// What the store's audit record needs that the ledger does not keep:
	// the question as shown. Only names, digests and text: never the
	// requestState.
	ctx = audit.WithCall(ctx, callOf(b, q.Message, ""))
	c, err = f.ledger.Issue(ctx, c)
	span.EndAsk(c, err)
	issued = true
	if err != nil {
		f.log.Warn("confirm: issue failed", "tool", b.Target, "err", err)
		if errors.Is(err, ledger.ErrFull) {
			return refusal("Too many confirmations are waiting for an answer; answer or let them expire, then try again. Nothing was done."), nil
		}
		return refusal("The confirmation ledger is unavailable, so the action was refused. Nothing was done."), nil
	}
	// Logged too: the ledger keeps only bindings, and a store may keep no
	// audit trail.
	f.log.Info("confirm: asked", "id", c.ID, "tool", b.Target, "approval", a.Mode, "question", q.Message)
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
	requests := mcp.InputRequestMap{}
	if a.Mode != OutOfBand {
		requests[InputID] = &mcp.ElicitParams{
			Mode:            "form",
			Message:         q.Message,
			RequestedSchema: requestedSchema(),
		}
	}
	if a.Mode != InBand {
		link := f.page.Link(c.ID)
		requests[ApproveInputID] = urlRequest(req, link, askMessage(c, q.Message))
		f.notify(c, link)
	}
	return &mcp.CallToolResult{
		InputRequests: requests,
		RequestState:  encodeState(state{id: c.ID, mode: a.Mode}),
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
	if _, err := f.ledger.Cancel(withAnswer(ctx, "call_failed"), id); err != nil {
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
	st, ok := parseState(req.Params.RequestState)
	if !ok {
		// Only this package writes the plaintext and the boundary
		// authenticates it, so this is a bug or another tool's state.
		f.log.Error("confirm: requestState plaintext is not a confirmation", "tool", b.Target)
		return refusal("This confirmation is not valid. Nothing was done."), nil
	}
	id := st.id
	// The audit record of each step of this round names the call.
	ctx = audit.WithCall(ctx, callOf(b, "", ""))
	// The approval the question asked for is the one answered; if the
	// policy has changed since (another replica, a restart), the call
	// is asked again under the policy in force.
	if cur := f.approval(s).Mode; cur != st.mode {
		f.log.Warn("confirm: the approval policy changed since the question", "id", id, "tool", b.Target, "asked", st.mode, "now", cur)
		if _, err := f.ledger.Cancel(withAnswer(ctx, "policy_changed"), id); err != nil {
			return f.spendRefusal(err), nil
		}
		return refusal("The approval this call needs changed since the question was asked, so the answer was not used; call again. Nothing was done."), nil
	}
	inputs := req.Params.InputResponses
	if st.mode != OutOfBand && !st.yes && !approved(inputs[InputID]) {
		f.obs.Answered(false)
		return f.decline(withAnswer(ctx, "decline"), id, b.Target, "Not confirmed: nothing was done.")
	}
	if st.mode != InBand && !accepted(inputs[ApproveInputID]) {
		// The answer to the page's link approves nothing, but anything
		// other than accept withdraws the request.
		f.obs.Answered(false)
		return f.decline(withAnswer(ctx, "withdrawn"), id, b.Target, msgWithdrawn)
	}
	if st.mode != OutOfBand && approved(inputs[InputID]) {
		f.obs.Answered(true) // this request carries the person's yes
	}
	_, span := f.obs.Start(ctx, observe.Redeem, b.Target)
	answer := "accept" // the person's yes, in this request or sealed in its state
	if st.mode == OutOfBand {
		answer = "" // the approvers' decisions are their own records
	}
	rec, err := f.ledger.Redeem(withAnswer(ctx, answer), id)
	if errors.Is(err, ledger.ErrAwaitingApproval) {
		if !f.matches(rec, b) {
			span.EndSpend(observe.Redeem, id, time.Time{}, err)
			f.log.Error("confirm: confirmation does not match the call", "id", id, "tool", b.Target)
			return refusal("This approval was given for a different action. Nothing was done."), nil
		}
		if modern(req) {
			// Nothing spent: the client retries with the same state
			// (the in-band yes, if any, now in it) once the approvers
			// have decided.
			span.EndSpend(observe.Redeem, id, time.Time{}, err)
			f.log.Info("confirm: retry before the out-of-band decision", "id", id)
			link := f.page.Link(id)
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{ApproveInputID: urlRequest(req, link, waitingMessage(rec))},
				RequestState:  encodeState(state{id: id, mode: st.mode, yes: st.mode == Both}),
			}, nil
		}
		// An older-era client never holds the state: the call is held
		// until the decision.
		rec, err = f.await(withAnswer(ctx, answer), req, id, rec)
		if ctx.Err() != nil {
			span.EndSpend(observe.Redeem, id, time.Time{}, err)
			return nil, err
		}
	}
	span.EndSpend(observe.Redeem, id, f.issued(rec.Expires), err)
	if errors.Is(err, ledger.ErrDeclined) && f.matches(rec, b) {
		f.log.Info("confirm: declined out of band", "id", id)
		return declinedBy(rec), nil
	}
	if err != nil && !errors.Is(err, ledger.ErrSpent) {
		f.log.Warn("confirm: redeem refused", "id", id, "err", err)
		return f.spendRefusal(err), nil
	}
	// The boundary binds the state to these already; checking the ledger's
	// own record too means a boundary bug cannot carry an approval, or the
	// answer to one, onto another call.
	c := rec.Confirmation
	if !f.matches(rec, b) {
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
	actCtx, span := f.obs.Start(ctx, observe.Act, b.Target)
	res, err := s.Act(actCtx, c)
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
	span.EndAct(kind)
	if c.Approval != nil {
		f.log.Info("confirm: approved out of band", "id", id, "decisions", len(rec.Decisions))
	}
	if c.Approval != nil && res.InputRequests == nil {
		// Who approved, in the result (and so in its record, which every
		// retry gets back): the ledger's record names them too. A result
		// that asks for more input (a proxy's upstream asking a follow-up
		// question) has no content: its front end names them at the end.
		cp := *res
		cp.Content = append([]mcp.Content{&mcp.TextContent{Text: ApprovedBy(rec)}}, res.Content...)
		res = &cp
	}
	f.record(ctx, id, kind, res)
	return res, nil
}

// issued returns when a confirmation that expires at expires was issued,
// for the time to decision; zero if expires is.
func (f *Flow) issued(expires time.Time) time.Time {
	if expires.IsZero() || f.obs == nil {
		return time.Time{}
	}
	return expires.Add(-f.ledger.TTL())
}

// matches reports whether rec is the confirmation of the call b binds.
func (f *Flow) matches(rec ledger.Record, b requeststate.Binding) bool {
	c := rec.Confirmation
	return c.Tool == b.Target && c.ArgsDigest == b.ArgsDigest && c.Principal == b.Principal
}

// decline cancels confirmation id, of a call of tool, which the client's
// answer did not approve, and answers msg.
func (f *Flow) decline(ctx context.Context, id ledger.ID, tool, msg string) (*mcp.CallToolResult, error) {
	_, span := f.obs.Start(ctx, observe.Cancel, tool)
	c, err := f.ledger.Cancel(ctx, id)
	span.EndSpend(observe.Cancel, id, f.issued(c.Expires), err)
	if err != nil {
		f.log.Info("confirm: cancel of an unusable confirmation", "id", id, "err", err)
		return f.spendRefusal(err), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
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
	ctx, span := f.obs.Start(ctx, observe.Complete, "")
	b, err := json.Marshal(res)
	if err == nil {
		err = f.ledger.Complete(ctx, id, kind, b)
	}
	span.EndComplete(kind, err)
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

// accepted reports whether the answer to the approval page's link is
// "accept": the person went, or will go, to the page.
func accepted(r mcp.InputResponse) bool {
	e, ok := r.(*mcp.ElicitResult)
	return ok && e != nil && e.Action == "accept"
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
	form, _ := elicitModes(req)
	return form
}

// elicitModes reports which elicitation modes the client declared.
func elicitModes(req *mcp.CallToolRequest) (form, url bool) {
	e, ok := metaElicitation(req)
	if !ok {
		caps := req.ClientCapabilities()
		if caps == nil {
			return false, false
		}
		e = caps.Elicitation
	}
	if e == nil {
		return false, false
	}
	// An empty elicitation capability means form mode (the spec's default).
	return e.Form != nil || e.URL == nil, e.URL != nil
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
	case ledger.ResultDeclined:
		return refusal("This confirmation was declined out of band by an approver and cannot be used. Nothing was done.")
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

// callOf is the audit.Call of the call b binds.
func callOf(b requeststate.Binding, question, answer string) audit.Call {
	return audit.Call{Principal: b.Principal, Tool: b.Target, ArgsDigest: b.ArgsDigest, Question: question, Answer: answer}
}

// withAnswer returns ctx whose audit.Call carries answer.
func withAnswer(ctx context.Context, answer string) context.Context {
	c, _ := audit.FromContext(ctx)
	c.Answer = answer
	return audit.WithCall(ctx, c)
}
