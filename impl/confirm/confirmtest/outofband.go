package confirmtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// The out-of-band cases give every front end of a deployment the same
// approval page: a link naming the confirmation's id under pageBase. The
// approvers decide through the ledger that page was made over, with
// [ledger.Ledger.Decide], as the real page (package approve) does once
// its approver has signed in: what the suite checks is the front end's
// side — what it asks, what it tells a retry, when it acts — not the
// page's sign-in.
const pageBase = "https://approve.confirmtest.invalid/approve/"

// How confirm words its out-of-band answers, as far as the suite relies
// on it.
const (
	stillWaiting = "Still waiting for out-of-band approval"
	approvedBy   = "Approved out of band by "
	declinedOOB  = "declined out of band by "
	withdrawn    = "approval request was withdrawn"
	timeLayout   = "2006-01-02 15:04:05 UTC"
)

// testPage is the approval page of the suite's deployments.
type testPage struct{}

func (testPage) Link(id ledger.ID) string { return pageBase + id.String() }

// linkID returns the confirmation id a link of testPage names.
func linkID(t *testing.T, link string) ledger.ID {
	t.Helper()
	id, err := ledger.ParseID(strings.TrimPrefix(link, pageBase))
	if err != nil || !strings.HasPrefix(link, pageBase) {
		t.Fatalf("the approval link %q is not the deployment's page", link)
	}
	return id
}

// pages records the ledger each front end of a deployment made its page
// over, in the order they were made: the approvers of a replica's page
// decide through its ledger.
type pages struct {
	mu      sync.Mutex
	ledgers []*ledger.Ledger
}

func (p *pages) page(l *ledger.Ledger) (confirm.Page, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledgers = append(p.ledgers, l)
	return testPage{}, nil
}

// ledger returns the ledger of the i-th front end's page.
func (p *pages) ledger(t *testing.T, i int) *ledger.Ledger {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.ledgers) {
		t.Fatalf("front end %d made no approval page (it ignored Setup.Page?)", i)
	}
	return p.ledgers[i]
}

// The people of the out-of-band cases: carol calls (the requester);
// alice, bob and dave approve, in group ops, as carol is too.
const (
	caller   = "carol"
	opsGroup = confirm.GroupPrefix + "ops"
)

// approver is someone signed in at the page.
func approver(name string) ledger.Approver {
	return ledger.Approver{ID: confirm.SubjectPrefix + name, Groups: []string{opsGroup}}
}

// oobDeployment is a deployment whose front ends need approval a,
// approved on the suite's page; carol calls, authenticated by her bearer
// token over HTTP and named by her client in memory.
func oobDeployment(t *testing.T, f Factory, a confirm.Approval, transport string) *deployment {
	d := newDeployment(t, f)
	d.approval = &a
	d.pages = &pages{}
	d.principals = map[string]string{"carol-token": caller}
	d.byName = transport == mcptest.InMemory
	return d
}

// requester is the name of the caller as the ledger's four-eyes rule
// sees it: the principal the front end found (the bearer token's user
// over HTTP, the client's name in memory).
func requester(transport string) string {
	if transport == mcptest.InMemory {
		return confirm.SubjectPrefix + "client " + caller
	}
	return confirm.SubjectPrefix + caller
}

// oobSession connects carol's client, which can show URL elicitations.
func (d *deployment) oobSession(fe *FrontEnd, era, transport string, manual bool, answer *mcptest.Answerer) *mcp.ClientSession {
	d.t.Helper()
	return d.connect(fe, session{era: era, transport: transport, manual: manual, answer: answer, user: caller, url: true})
}

// askOutOfBand makes fe's call about subject, first round by hand on a
// 2026-07-28 session, and checks that it asks for approval on the page
// (and, for mode Both, in band too): it returns the sealed state and
// the page's link.
func askOutOfBand(t *testing.T, cs *mcp.ClientSession, fe *FrontEnd, subject string, mode confirm.Mode) (string, string) {
	t.Helper()
	res, err := call(cs, fe, subject)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: want input_required with a requestState, got %s", mcptest.Describe(res))
	}
	p, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
	if !ok || p.Mode != "url" || p.URL == "" {
		t.Fatalf("first round: no URL request for the approval page in %v", res.InputRequests)
	}
	_, form := res.InputRequests[confirm.InputID].(*mcp.ElicitParams)
	if form != (mode == confirm.Both) {
		t.Fatalf("first round of %v approval: in-band question asked = %v", mode, form)
	}
	if !strings.Contains(p.Message, "approval") {
		t.Fatalf("the URL request's message %q does not say what it is for", p.Message)
	}
	return res.RequestState, p.URL
}

// retryWith retries p with state and the answers.
func retryWith(cs *mcp.ClientSession, p *mcp.CallToolParams, state string, answers mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	q := *p
	q.InputResponses = answers
	q.RequestState = state
	return cs.CallTool(context.Background(), &q)
}

// wentToPage is the client's answer to the page's link: the person went.
func wentToPage() mcp.InputResponseMap {
	return mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
}

// wantWaiting asserts that a retry before the decision was told to wait:
// asked again for the page, with the deadline the ledger holds, and a
// state to retry with; it returns that state.
func wantWaiting(t *testing.T, l *ledger.Ledger, id ledger.ID, res *mcp.CallToolResult, err error) string {
	t.Helper()
	if err != nil || res == nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("a retry before the decision: want input_required (waiting), got err=%v res=%s", err, mcptest.Describe(res))
	}
	p, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
	if !ok || p.Mode != "url" {
		t.Fatalf("a retry before the decision: no URL request in %v", res.InputRequests)
	}
	if _, form := res.InputRequests[confirm.InputID]; form {
		t.Fatal("a retry before the decision was asked in band again")
	}
	rec, lerr := l.Lookup(context.Background(), id)
	if lerr != nil {
		t.Fatalf("Lookup: %v", lerr)
	}
	if deadline := rec.Expires.UTC().Format(timeLayout); !strings.Contains(p.Message, stillWaiting) || !strings.Contains(p.Message, deadline) {
		t.Fatalf("a retry before the decision was told %q, want %q and the deadline %s", p.Message, stillWaiting, deadline)
	}
	if rec.State != ledger.Pending {
		t.Fatalf("a retry before the decision left the confirmation %v, want pending: nothing spent", rec.State)
	}
	return res.RequestState
}

// wantApprovedBy asserts that a result names who approved it.
func wantApprovedBy(t *testing.T, text string, names ...string) {
	t.Helper()
	if !strings.Contains(text, approvedBy) {
		t.Fatalf("the result %q does not say it was approved out of band", text)
	}
	for _, n := range names {
		if !strings.Contains(text, confirm.SubjectPrefix+n) {
			t.Fatalf("the result %q does not name approver %s", text, n)
		}
	}
}

// wantRecorded asserts what the ledger recorded of confirmation id:
// state, and the decisions of who, in order, all approving unless
// declined names the last.
func wantRecorded(t *testing.T, l *ledger.Ledger, id ledger.ID, state ledger.State, declined bool, who ...string) {
	t.Helper()
	rec, err := l.Lookup(context.Background(), id)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if rec.State != state || len(rec.Decisions) != len(who) {
		t.Fatalf("the ledger holds %v with decisions %+v, want %v by %v", rec.State, rec.Decisions, state, who)
	}
	for i, d := range rec.Decisions {
		approve := !(declined && i == len(who)-1)
		if d.Approver != confirm.SubjectPrefix+who[i] || d.Approve != approve {
			t.Fatalf("decision %d is %+v, want %s approve=%v", i, d, who[i], approve)
		}
	}
}

// decide records who's decision through l.
func decide(t *testing.T, l *ledger.Ledger, id ledger.ID, who string, approve bool) {
	t.Helper()
	if _, err := l.Decide(context.Background(), id, approver(who), approve); err != nil {
		t.Fatalf("%s's decision: %v", who, err)
	}
}

// heldCall is an older-era call held by the front end until the
// decision: the client asked for progress, and is told it is waiting.
type heldCall struct {
	progress chan string
	done     chan struct{}
	res      *mcp.CallToolResult
	err      error
}

// holdCall makes fe's call about subject on a new older-era session of
// carol's, whose client answers with answer, and returns once the front
// end has told it, by a progress notification, that it waits for
// approval (and with what deadline: checked against id's record once the
// link is known).
func (d *deployment) holdCall(t *testing.T, fe *FrontEnd, transport, subject string, answer *mcptest.Answerer) *heldCall {
	t.Helper()
	h := &heldCall{progress: make(chan string, 16), done: make(chan struct{})}
	o := mcptest.ClientOptions{Era: mcptest.EraLegacy, Transport: transport, Answer: answer, URL: true, Name: caller,
		Client: &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case h.progress <- r.Params.Message:
			default:
			}
		}}}
	cs := d.connectWith(fe, transport, o)
	p := *fe.Call(subject)
	p.Meta = mcp.Meta{"progressToken": "confirmtest"}
	go func() {
		defer close(h.done)
		h.res, h.err = cs.CallTool(context.Background(), &p)
	}()
	select {
	case msg := <-h.progress:
		if !strings.Contains(msg, stillWaiting) {
			t.Fatalf("the held call was told %q, want %q", msg, stillWaiting)
		}
		if urls := answer.URLs(); len(urls) != 1 {
			t.Fatalf("the client was sent %d approval links, want 1", len(urls))
		}
		l := d.pages.ledger(t, 0)
		rec, err := l.Lookup(context.Background(), linkID(t, answer.URLs()[0]))
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if deadline := rec.Expires.UTC().Format(timeLayout); !strings.Contains(msg, deadline) {
			t.Fatalf("the held call was told %q, without the deadline %s", msg, deadline)
		}
	case <-h.done:
		t.Fatalf("the call returned before the decision: err=%v res=%s", h.err, mcptest.Describe(h.res))
	case <-time.After(noHang):
		t.Fatalf("the held call was not told it waits within %v", noHang)
	}
	return h
}

// wait returns the held call's answer.
func (h *heldCall) wait(t *testing.T) (*mcp.CallToolResult, error) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(noHang):
		t.Fatalf("the held call was not answered within %v of the decision", noHang)
	}
	return h.res, h.err
}

// ApproveOutOfBand checks a call that needs out-of-band approval: it is
// sent to the approval page (a URL request, no in-band question); a
// retry before the decision is told it is waiting, with the deadline,
// and nothing is spent or acted on; after an approver approves, the next
// retry acts once, and its result names the approver, as the ledger's
// record does; later retries get that one result. In the older era, which
// cannot retry, the call is held until the decision, the client told by
// a progress notification that it waits, with the deadline.
func ApproveOutOfBand(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := oobDeployment(t, f, confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{confirm.SubjectPrefix + "alice"}}, transport)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		l := d.pages.ledger(t, 0)
		if era == mcptest.EraLegacy {
			answer := mcptest.Accept()
			h := d.holdCall(t, fe, transport, "a", answer)
			wantEffects(t, fe, "a", 0)
			id := linkID(t, answer.URLs()[0])
			decide(t, l, id, "alice", true)
			res, err := h.wait(t)
			wantApprovedBy(t, wantActed(t, fe, "a", 1, res, err), "alice")
			wantRecorded(t, l, id, ledger.Done, false, "alice")
			return
		}
		cs := d.oobSession(fe, era, transport, true, mcptest.Accept())
		state, link := askOutOfBand(t, cs, fe, "a", confirm.OutOfBand)
		id := linkID(t, link)
		p := fe.Call("a")
		for range 2 {
			res, err := retryWith(cs, p, state, wentToPage())
			state = wantWaiting(t, l, id, res, err)
			wantEffects(t, fe, "a", 0)
		}
		if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
			t.Fatalf("redeemed %d times before the approval", n)
		}
		decide(t, l, id, "alice", true)
		res, err := retryWith(cs, p, state, wentToPage())
		first := wantActed(t, fe, "a", 1, res, err)
		wantApprovedBy(t, first, "alice")
		wantRecorded(t, l, id, ledger.Done, false, "alice")
		ready(fe, "a")
		res, err = retryWith(cs, p, state, wentToPage())
		wantReplayed(t, res, err, first)
		wantEffects(t, fe, "a", 1)
	})
}

// ApproveDeclined checks that an approver's decline acts on nothing and
// is the one answer every retry gets, naming who declined; and that a
// client that withdraws the request (its answer to the page's link is
// not accept) cancels it: nothing acts, and an approver can no longer
// decide it.
func ApproveDeclined(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		t.Run("by an approver", func(t *testing.T) {
			d := oobDeployment(t, f, confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{opsGroup}}, transport)
			fe := d.frontEnd(nil, 0)
			ready(fe, "a")
			l := d.pages.ledger(t, 0)
			if era == mcptest.EraLegacy {
				answer := mcptest.Accept()
				h := d.holdCall(t, fe, transport, "a", answer)
				id := linkID(t, answer.URLs()[0])
				decide(t, l, id, "bob", false)
				res, err := h.wait(t)
				wantDeclinedBy(t, res, err, "bob")
				wantEffects(t, fe, "a", 0)
				wantRecorded(t, l, id, ledger.Cancelled, true, "bob")
				return
			}
			cs := d.oobSession(fe, era, transport, true, mcptest.Accept())
			state, link := askOutOfBand(t, cs, fe, "a", confirm.OutOfBand)
			id := linkID(t, link)
			decide(t, l, id, "bob", false)
			for range 2 {
				res, err := retryWith(cs, fe.Call("a"), state, wentToPage())
				wantDeclinedBy(t, res, err, "bob")
				wantEffects(t, fe, "a", 0)
			}
			if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
				t.Fatalf("a declined confirmation was redeemed %d times", n)
			}
			wantRecorded(t, l, id, ledger.Cancelled, true, "bob")
		})
		// Anything but accept withdraws: decline, and cancel (the
		// person dismissed the link).
		for _, action := range []string{"decline", "cancel"} {
			t.Run("withdrawn by the client: "+action, func(t *testing.T) {
				d := oobDeployment(t, f, confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{opsGroup}}, transport)
				fe := d.frontEnd(nil, 0)
				ready(fe, "a")
				l := d.pages.ledger(t, 0)
				answer := &mcptest.Answerer{Action: action}
				res, err := call(d.oobSession(fe, era, transport, false, answer), fe, "a")
				if err != nil || res == nil || res.IsError || !strings.Contains(mcptest.Text(res), withdrawn) {
					t.Fatalf("a withdrawn request: want %q, got err=%v res=%s", withdrawn, err, mcptest.Describe(res))
				}
				if n := len(answer.URLs()); n != 1 {
					t.Fatalf("the client was sent %d approval links, want 1", n)
				}
				id := linkID(t, answer.URLs()[0])
				if _, err := l.Decide(context.Background(), id, approver("alice"), true); !errors.Is(err, ledger.ErrCancelled) {
					t.Fatalf("an approval after the client withdrew: %v, want ErrCancelled", err)
				}
				wantEffects(t, fe, "a", 0)
			})
		}
	})
}

// wantDeclinedBy asserts the answer to a call who declined.
func wantDeclinedBy(t *testing.T, res *mcp.CallToolResult, err error, who string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the decline, got err=%v res=%s", err, mcptest.Describe(res))
	}
	if text := mcptest.Text(res); !strings.Contains(text, notConfirmed) || !strings.Contains(text, declinedOOB) || !strings.Contains(text, confirm.SubjectPrefix+who) {
		t.Fatalf("the decline was answered %q, want %q naming %s", text, declinedOOB, who)
	}
}

// ApproveFourEyes checks four-eyes approval: two distinct approvers of
// group ops must approve; carol, who asked and is in ops, is refused on
// the page and counts for nothing; an approver's second approval is
// refused and counts once; someone outside the group is refused; after
// one approval a retry is still told to wait; after two, it acts once,
// its result naming both.
func ApproveFourEyes(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := oobDeployment(t, f, confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{opsGroup}, Required: 2}, transport)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		l := d.pages.ledger(t, 0)
		cs := d.oobSession(fe, mcptest.EraMRTR, transport, true, mcptest.Accept())
		state, link := askOutOfBand(t, cs, fe, "a", confirm.OutOfBand)
		id := linkID(t, link)
		ctx := context.Background()

		self := ledger.Approver{ID: requester(transport), Groups: []string{opsGroup}}
		if _, err := l.Decide(ctx, id, self, true); !errors.Is(err, ledger.ErrSelfApproval) {
			t.Fatalf("the requester's own approval: %v, want ErrSelfApproval", err)
		}
		if _, err := l.Decide(ctx, id, ledger.Approver{ID: confirm.SubjectPrefix + "mallory"}, true); !errors.Is(err, ledger.ErrNotApprover) {
			t.Fatalf("an approval from outside the group: %v, want ErrNotApprover", err)
		}
		decide(t, l, id, "alice", true)
		if _, err := l.Decide(ctx, id, approver("alice"), true); !errors.Is(err, ledger.ErrDecided) {
			t.Fatalf("alice's second approval: %v, want ErrDecided", err)
		}
		res, err := retryWith(cs, fe.Call("a"), state, wentToPage())
		state = wantWaiting(t, l, id, res, err)
		wantEffects(t, fe, "a", 0)
		wantRecorded(t, l, id, ledger.Pending, false, "alice")

		decide(t, l, id, "bob", true)
		res, err = retryWith(d.oobSession(fe, era, transport, true, mcptest.Accept()), fe.Call("a"), state, wentToPage())
		wantApprovedBy(t, wantActed(t, fe, "a", 1, res, err), "alice", "bob")
		wantRecorded(t, l, id, ledger.Done, false, "alice", "bob")
		if _, err := l.Decide(ctx, id, approver("dave"), false); !errors.Is(err, ledger.ErrDecided) {
			t.Fatalf("a decline after the approval: %v, want ErrDecided", err)
		}
	})
}

// ApproveBoth checks approval by both: the in-band yes and the
// out-of-band approval. An in-band no cancels the call; an in-band yes
// alone acts on nothing (the retry waits, asked only for the page); once
// approved out of band, the retry acts once.
func ApproveBoth(t *testing.T, f Factory) {
	both := confirm.Approval{Mode: confirm.Both, Approvers: []string{opsGroup}}
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		t.Run("declined in band", func(t *testing.T) {
			d := oobDeployment(t, f, both, transport)
			fe := d.frontEnd(nil, 0)
			ready(fe, "a")
			answer := &mcptest.Answerer{Action: "decline", URLAction: "accept"}
			res, err := call(d.oobSession(fe, era, transport, false, answer), fe, "a")
			wantNotConfirmed(t, res, err)
			wantEffects(t, fe, "a", 0)
			if n := d.count(ledger.ActionCancel, ledger.ResultOK); n != 1 {
				t.Fatalf("an in-band no cancelled %d confirmations, want 1", n)
			}
		})
		t.Run("yes in band, then approved", func(t *testing.T) {
			d := oobDeployment(t, f, both, transport)
			fe := d.frontEnd(nil, 0)
			ready(fe, "a")
			l := d.pages.ledger(t, 0)
			if era == mcptest.EraLegacy {
				answer := mcptest.Accept()
				h := d.holdCall(t, fe, transport, "a", answer)
				if n := len(answer.Questions()); n != 2 {
					t.Fatalf("asked %d times, want twice (in band, and the page's link)", n)
				}
				wantEffects(t, fe, "a", 0)
				id := linkID(t, answer.URLs()[0])
				decide(t, l, id, "alice", true)
				res, err := h.wait(t)
				wantApprovedBy(t, wantActed(t, fe, "a", 1, res, err), "alice")
				return
			}
			cs := d.oobSession(fe, era, transport, true, mcptest.Accept())
			state, link := askOutOfBand(t, cs, fe, "a", confirm.Both)
			id := linkID(t, link)
			answers := wentToPage()
			answers[confirm.InputID] = mcptest.Yes()
			res, err := retryWith(cs, fe.Call("a"), state, answers)
			state = wantWaiting(t, l, id, res, err)
			wantEffects(t, fe, "a", 0)
			decide(t, l, id, "alice", true)
			res, err = retryWith(cs, fe.Call("a"), state, wentToPage())
			wantApprovedBy(t, wantActed(t, fe, "a", 1, res, err), "alice")
		})
	})
}

// ApproveAcrossReplicas checks two replicas sharing one Redis or
// PostgreSQL store: a call asked on replica A, approved on replica B's
// page, is told to wait through B before that, acts once through B
// after, and its retry through A gets the recorded result.
func ApproveAcrossReplicas(t *testing.T, f Factory) {
	eachSharedStore(t, func(t *testing.T, url, era, transport string) {
		d := oobDeployment(t, f, confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{opsGroup}}, transport)
		d.clock = nil
		a := d.frontEnd(d.openStore(t, url), 0)
		b := d.replica(a, d.openStore(t, url), 0)
		onB := d.pages.ledger(t, 1)
		ready(a, "a")
		state, link := askOutOfBand(t, d.oobSession(a, mcptest.EraMRTR, transport, true, mcptest.Accept()), a, "a", confirm.OutOfBand)
		id := linkID(t, link)
		p := a.Call("a")
		res, err := retryWith(d.oobSession(b, mcptest.EraMRTR, transport, true, mcptest.Accept()), p, state, wentToPage())
		state = wantWaiting(t, onB, id, res, err)
		decide(t, onB, id, "alice", true)
		res, err = retryWith(d.oobSession(b, era, transport, true, mcptest.Accept()), p, state, wentToPage())
		first := wantActed(t, a, "a", 1, res, err)
		wantApprovedBy(t, first, "alice")
		wantRecorded(t, d.pages.ledger(t, 0), id, ledger.Done, false, "alice")
		ready(a, "a")
		res, err = retryWith(d.oobSession(a, era, transport, true, mcptest.Accept()), p, state, wentToPage())
		wantReplayed(t, res, err, first)
		wantEffects(t, b, "a", 1)
	})
}
