package confirm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// A Mode says who approves a confirmed call.
type Mode uint8

const (
	// InBand: the person asked in band, whose answer the client relays.
	InBand Mode = iota
	// OutOfBand: approvers reached outside the chat, on the approval
	// page, signed in there on their own; the client only relays the
	// page's link.
	OutOfBand
	// Both: the person's in-band yes, and the out-of-band approval.
	Both
)

func (m Mode) String() string {
	switch m {
	case InBand:
		return "in-band"
	case OutOfBand:
		return "out-of-band"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses the form [Mode.String] writes.
func ParseMode(s string) (Mode, error) {
	for m := InBand; m <= Both; m++ {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("confirm: approval mode %q: want in-band, out-of-band or both", s)
}

// Names of approvers, as the approval page names whoever signs in there
// (package approve): an approver signed in at the OpenID Connect issuer
// with subject S is SubjectPrefix+S, and a member of the group G of the
// configured group claim also GroupPrefix+G; one signed in with a passkey
// enrolled as N for the principal P (the principal of the holder's own
// calls) is SubjectPrefix+P and also PasskeyPrefix+N, or, enrolled for
// someone who makes no calls, PasskeyPrefix+N. A requester is named the
// first way.
const (
	SubjectPrefix = "sub:"
	GroupPrefix   = "group:"
	PasskeyPrefix = "passkey:"
)

// An Approval is who must approve a confirmed call. The zero value is
// the person asked in band alone.
type Approval struct {
	Mode Mode
	// Approvers may approve out of band: names of subjects and groups
	// (SubjectPrefix…, GroupPrefix…). Required unless Mode is InBand;
	// then there must be none.
	Approvers []string
	// Required is how many distinct approvers must approve (four-eyes:
	// 2 or more); 0 means 1. Never the requester: the caller's own
	// approval does not count, whatever the Approvers list.
	Required int
}

// required returns how many approvals a needs.
func (a Approval) required() int { return max(a.Required, 1) }

// Check reports an Approval that could never be given, or that names
// approvers in no form the page knows: the error says which field.
func (a Approval) Check() error {
	switch {
	case a.Mode > Both:
		return fmt.Errorf("confirm: approval mode %v", a.Mode)
	case a.Mode == InBand && (len(a.Approvers) > 0 || a.Required != 0):
		return errors.New("confirm: approvers and a number of approvals need out-of-band approval (mode out-of-band or both)")
	case a.Mode == InBand:
		return nil
	case len(a.Approvers) == 0:
		return fmt.Errorf("confirm: %v approval names no approvers", a.Mode)
	case len(a.Approvers) > ledger.MaxApprovers:
		return fmt.Errorf("confirm: %d approvers: at most %d", len(a.Approvers), ledger.MaxApprovers)
	case a.Required < 0 || a.Required > ledger.MaxRequired:
		return fmt.Errorf("confirm: %d approvals required: want 1 to %d", a.Required, ledger.MaxRequired)
	}
	subjects := map[string]bool{}
	groups := false
	for _, n := range a.Approvers {
		if err := CheckApproverName(n); err != nil {
			return err
		}
		if strings.HasPrefix(n, GroupPrefix) {
			groups = true
		} else {
			subjects[n] = true
		}
	}
	// Without a group, only the subjects listed can approve: more
	// approvals than subjects could never all be given.
	if !groups && a.required() > len(subjects) {
		return fmt.Errorf("confirm: %d approvals required of %d distinct approvers: it could never be approved", a.required(), len(subjects))
	}
	return nil
}

// CheckApproverName reports whether name names a subject
// (SubjectPrefix…), a group (GroupPrefix…) or a passkey
// (PasskeyPrefix…) that the approval page can match against a sign-in.
func CheckApproverName(name string) error {
	var rest string
	ok := false
	for _, p := range []string{SubjectPrefix, GroupPrefix, PasskeyPrefix} {
		if r, found := strings.CutPrefix(name, p); found {
			rest, ok = r, true
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("confirm: approver %s: want %sSUBJECT, %sGROUP or %sNAME", prompt.Value(name, prompt.Options{MaxWidth: 60}), SubjectPrefix, GroupPrefix, PasskeyPrefix)
	// A name a person would misread on the page or in a policy file
	// (controls, invisible or bidi characters) could be mistaken for
	// another approver's.
	case rest == "" || len(name) > ledger.MaxName || prompt.Quote(rest) != rest:
		return fmt.Errorf("confirm: approver %s: want 1 to %d bytes of visible text after the prefix", prompt.Value(name, prompt.Options{MaxWidth: 60}), ledger.MaxName)
	}
	return nil
}

// A Page is the approval page: where approvers, signed in there, see a
// confirmation's question and decide it ([ledger.Ledger.Decide]).
// Package approve's Handler is one.
type Page interface {
	// Link returns the URL of confirmation id's page. Anyone may see it:
	// it is sent to the client, which the agent drives.
	Link(id ledger.ID) string
}

// A Notice tells approvers that a call waits for them, for a
// notification (a chat webhook) besides the link the client shows.
type Notice struct {
	Link     string    // the approval page
	Question string    // the sanitized question, as the page shows it
	Tool     string    // the tool, as the requestState binds it (untrusted: escape it)
	Expires  time.Time // the deadline
	Required int       // approvals needed
}

// ApproveInputID is the key of the approval page's URL request in the
// input_required result's inputRequests, and of the client's answer to
// it in the retry's inputResponses. The answer says only whether the
// person went to the page (accept) or withdrew the call; it approves
// nothing.
const ApproveInputID = "approve"

// Where out-of-band approval stands, as the sealed requestState carries
// it after the confirmation's id (see [encodeState]).
const (
	suffixOutOfBand = ".oob"
	suffixBoth      = ".both"
	suffixBothYes   = ".both.yes" // the in-band yes was given, in an earlier round
)

// state is what a requestState of this package says.
type state struct {
	id   ledger.ID
	mode Mode
	yes  bool // Both: the in-band yes was given in an earlier round
}

// encodeState returns the requestState plaintext of st.
func encodeState(st state) string {
	s := statePrefix + st.id.String()
	switch {
	case st.mode == OutOfBand:
		s += suffixOutOfBand
	case st.mode == Both && st.yes:
		s += suffixBothYes
	case st.mode == Both:
		s += suffixBoth
	}
	return s
}

// parseState parses what encodeState wrote.
func parseState(s string) (state, bool) {
	rest, ok := strings.CutPrefix(s, statePrefix)
	if !ok || len(rest) < 2*len(ledger.ID{}) {
		return state{}, false
	}
	id, err := ledger.ParseID(rest[:2*len(ledger.ID{})])
	if err != nil {
		return state{}, false
	}
	st := state{id: id}
	switch rest[2*len(ledger.ID{}):] {
	case "":
	case suffixOutOfBand:
		st.mode = OutOfBand
	case suffixBoth:
		st.mode = Both
	case suffixBothYes:
		st.mode, st.yes = Both, true
	default:
		return state{}, false
	}
	return st, true
}

// approval returns the approval s needs.
func (f *Flow) approval(s Step) Approval {
	if s.Approval != nil {
		return *s.Approval
	}
	return f.approvalDefault
}

// requester names the caller principal for the ledger's four-eyes rule.
func (f *Flow) requester(principal string) string {
	if f.requesterOf != nil {
		return f.requesterOf(principal)
	}
	if principal == "" {
		return ""
	}
	return SubjectPrefix + principal
}

// urlRequest is the input request that sends the person to the approval
// page at link, with message.
func urlRequest(req *mcp.CallToolRequest, link, message string) *mcp.ElicitParams {
	p := &mcp.ElicitParams{Mode: "url", Message: message, URL: link}
	if !modern(req) {
		// 2025-11-25 requires an elicitationId on a URL elicitation;
		// 2026-07-28 removed it (the requestState correlates). Random,
		// so that it tells nothing of the confirmation.
		var id ledger.ID
		rand.Read(id[:])
		p.ElicitationID = id.String()
	}
	return p
}

// modern reports whether req's client speaks 2026-07-28 or later, and so
// retries with the requestState itself; go-sdk's reading (a session
// without an initialize is of the newest version).
func modern(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return true
	}
	ip := req.Session.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= requeststate.ProtocolMRTR
}

// askMessage is the URL request's message on the first round.
func askMessage(c ledger.Confirmation, q string) string {
	return fmt.Sprintf("This call needs out-of-band approval by %s on the approval page, before %s. Nothing has been done. The approvers sign in there; this dialog approves nothing.\n\n%s",
		approversNeeded(c.Approval.Required), c.Expires.UTC().Format(timeLayout), q)
}

// waitingMessage is the URL request's message on a retry before the
// decision.
func waitingMessage(rec ledger.Record) string {
	left := 1
	if rec.Approval != nil {
		left = max(rec.Approval.Required-rec.Approvals(), 1)
	}
	return fmt.Sprintf("Still waiting for out-of-band approval: %s more needed, on the approval page, before %s. Nothing has been done; continue once the approvers have decided.",
		approversNeeded(left), rec.Expires.UTC().Format(timeLayout))
}

func approversNeeded(n int) string {
	if n == 1 {
		return "1 approver"
	}
	return fmt.Sprintf("%d distinct approvers", n)
}

// timeLayout is how answers show instants: UTC, to the second, as the
// approval page does.
const timeLayout = "2006-01-02 15:04:05 UTC"

// ApprovedBy says who approved rec out of band, and when, as the tool
// result of an approved call begins: for a front end whose call ends in
// a later round (a proxy's upstream that asked a follow-up question).
func ApprovedBy(rec ledger.Record) string {
	var who []string
	for _, d := range rec.Decisions {
		if d.Approve {
			who = append(who, prompt.Value(d.Approver, prompt.Options{MaxWidth: 80})+" at "+d.At.UTC().Format(timeLayout))
		}
	}
	return "Approved out of band by " + strings.Join(who, " and ") + "."
}

// declinedBy answers a call an approver declined.
func declinedBy(rec ledger.Record) *mcp.CallToolResult {
	d, ok := rec.Declined()
	msg := "Not confirmed: an approver declined it out of band. Nothing was done."
	if ok {
		msg = fmt.Sprintf("Not confirmed: declined out of band by %s at %s. Nothing was done.",
			prompt.Value(d.Approver, prompt.Options{MaxWidth: 80}), d.At.UTC().Format(timeLayout))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// withdrawn answers a call whose client withdrew its approval request.
const msgWithdrawn = "Not confirmed: the approval request was withdrawn before it was approved. Nothing was done."

// Polling of a held older-era call: first after pollMin, doubling up to
// pollMax.
const (
	pollMin = 50 * time.Millisecond
	pollMax = time.Second
)

// await holds an older-era call, whose client cannot retry with the
// state, until confirmation id is decided, withdrawn or expired, or ctx
// ends, reading the record without changing it; then it redeems it and
// returns what Redeem returned. The client is told it is waiting, with
// the deadline, by a progress notification if it asked for progress.
func (f *Flow) await(ctx context.Context, req *mcp.CallToolRequest, id ledger.ID, rec ledger.Record) (ledger.Record, error) {
	f.progress(ctx, req, waitingMessage(rec))
	delay := pollMin
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return rec, fmt.Errorf("confirm: waiting for approval of %s: %w", id, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, pollMax)
		r, err := f.ledger.Lookup(ctx, id)
		if err == nil && r.State == ledger.Pending && !r.Approved() && f.now().Before(r.Expires) {
			if _, declined := r.Declined(); !declined {
				continue
			}
		}
		rec, err = f.ledger.Redeem(ctx, id)
		if !errors.Is(err, ledger.ErrAwaitingApproval) {
			return rec, err
		}
		// The store's clock says it has not expired yet: wait on.
	}
}

// progress tells a client that asked for progress notifications msg.
func (f *Flow) progress(ctx context.Context, req *mcp.CallToolRequest, msg string) {
	if req.Session == nil || req.Params.GetProgressToken() == nil {
		return
	}
	if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Message: msg}); err != nil {
		f.log.Debug("confirm: progress notification failed", "err", err)
	}
}

// notify tells the approvers of c, if a notifier is set.
func (f *Flow) notify(c ledger.Confirmation, link string) {
	if f.notifier == nil {
		return
	}
	f.notifier(Notice{Link: link, Question: c.Approval.Question, Tool: c.Tool, Expires: c.Expires, Required: c.Approval.Required})
}

// outOfBandApproval returns the ledger's Approval of a call by principal
// needing a, asking question.
func (f *Flow) outOfBandApproval(a Approval, principal, question string) *ledger.Approval {
	return &ledger.Approval{
		Required:  a.required(),
		Approvers: slices.Clone(a.Approvers),
		Requester: f.requester(principal),
		Question:  question,
	}
}
