package approve_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
	"github.com/mcp-confirm/mcp-confirm/internal/bearer/bearertest"
)

// Page texts that tell which layer answered.
const (
	signInText   = "Sign in to see this request and decide it."
	originText   = "A decision can only be sent from this page itself."
	tokenText    = "This form was not made for your session"
	selfText     = "You asked for this call: another approver must decide it."
	unlistedText = "You are not an approver of this request."
	decidedText  = "Your decision was not recorded: this request was decided already."
	expiredText  = "Your decision was not recorded: the request expired."
	formMarker   = `name="token"`
)

// secret is the question's value no one but an approver may see.
const secret = "/srv/payroll/secret-plan.xlsx"

// expect checks that res has status and holds every one of texts, and
// none of absent.
func expect(t *testing.T, what string, res response, status int, texts []string, absent ...string) {
	t.Helper()
	if res.status != status {
		t.Errorf("%s: status %d, want %d; body:\n%s", what, res.status, status, res.body)
	}
	for _, s := range texts {
		if !strings.Contains(res.body, s) {
			t.Errorf("%s: the page does not say %q; body:\n%s", what, s, res.body)
		}
	}
	for _, s := range absent {
		if strings.Contains(res.body, s) {
			t.Errorf("%s: the page shows %q; body:\n%s", what, s, res.body)
		}
	}
}

// expectNoDecision checks that id has no decision recorded.
func expectNoDecision(t *testing.T, f *fixture, id ledger.ID) {
	t.Helper()
	if d := f.decisions(t, id); len(d) != 0 {
		t.Errorf("decisions recorded: %+v, want none", d)
	}
}

// TestApproveCallerTokenCannotApprove: the MCP caller's bearer token,
// which the agent holds (here a real token of a real authorization
// server, accepted by the front door's MCP endpoint, naming "alice", who
// is an approver), neither shows the question nor decides: the page
// treats its holder as signed out. The same client, once alice signs in
// at the approvers' issuer, decides (the control: the refusal was the
// missing sign-in).
func TestApproveCallerTokenCannotApprove(t *testing.T) {
	as := bearertest.Start(t)
	var mcpURL string
	f := newFixture(t, fixtureOptions{also: func(mux *http.ServeMux, f *fixture) {
		mcpURL = f.public + "/mcp"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		j, err := bearer.NewJWT(ctx, bearer.JWTOptions{Issuer: as.Issuer, Audience: mcpURL})
		if err != nil {
			t.Fatal(err)
		}
		mw, err := bearer.Middleware(bearer.Options{Verify: j.Verify, Resource: mcpURL})
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/mcp", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "MCP caller %s", auth.TokenInfoFromContext(r.Context()).UserID)
		})))
	}})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	token := as.Token(t, "alice", "", mcpURL)
	c := &http.Client{Timeout: 30 * time.Second}
	bearerHeader := http.Header{"Authorization": {"Bearer " + token}}
	if res := do(t, c, http.MethodGet, mcpURL, bearerHeader, nil); res.status != http.StatusOK || res.body != "MCP caller alice" {
		t.Fatalf("the MCP endpoint does not accept the caller's token: %d %s", res.status, res.body)
	}
	res := do(t, c, http.MethodGet, link, bearerHeader, nil)
	expect(t, "GET with the caller's token", res, http.StatusOK, []string{signInText}, secret, formMarker)
	h := bearerHeader.Clone()
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("Origin", f.public)
	res = do(t, c, http.MethodPost, link, h, strings.NewReader("decision=approve&token="))
	expect(t, "POST with the caller's token", res, http.StatusForbidden, []string{signInText})
	expectNoDecision(t, f, id)

	alice := f.signIn(t, link, "alice")
	res = alice.post(t, link, f.public, alice.token(link), "approve")
	expect(t, "control: alice signed in", res, http.StatusOK, []string{"(you) approved"})
	if d := f.decisions(t, id); len(d) != 1 || d[0].Approver != "sub:alice" {
		t.Errorf("control: recorded %+v, want alice's approval", d)
	}
}

// TestApproveSelfApprovalRefused: the requester, though listed (by name
// and by group), sees nothing of the request and cannot decide it, even
// with a valid session, form token and origin: the ledger refuses
// (four-eyes), and the page says so. Another member of the group can
// (the control). The same across sign-in methods: the requester signed
// in with a passkey of their own, enrolled for the principal their calls
// carry (and listed by the passkey's name), is refused alike, and a
// passkey enrolled before passkeys named their holder signs no one in;
// another holder's passkey approves (the control).
func TestApproveSelfApprovalRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{passkeys: true})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice", "group:ops"}, Requester: "sub:alice", Question: deleteQuestion(secret)})
	alice := f.signIn(t, link, "alice")
	expect(t, "the requester's GET", alice.get(t, link), http.StatusForbidden, []string{selfText}, secret, formMarker)
	for _, d := range []string{"approve", "decline"} {
		expect(t, "the requester's "+d, alice.post(t, link, f.public, alice.token(link), d), http.StatusForbidden, []string{selfText}, secret)
	}
	expectNoDecision(t, f, id)

	carol := f.signIn(t, link, "carol")
	expect(t, "control: carol's GET", carol.get(t, link), http.StatusOK, []string{"secret-plan.xlsx", formMarker})
	expect(t, "control: carol approves", carol.post(t, link, f.public, carol.token(link), "approve"), http.StatusOK, []string{"(you) approved"})

	t.Run("passkey", func(t *testing.T) {
		id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice", "passkey:alice-phone", "passkey:dave"},
			Requester: "sub:alice", Question: deleteQuestion(secret)})
		ctx := approvetest.Browser(t)
		authenticator(t, ctx)
		said := enrolPasskey(t, ctx, f, approve.Holder{Name: "alice-phone", Principal: "alice"})
		if !strings.Contains(said, "you are sub:alice") {
			t.Errorf("the enrolment says %q, want it to name sub:alice", said)
		}
		// The sign-in page's button gone, the page it led to.
		approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")), chromedp.WaitNotPresent(chromedp.ID("passkey")),
			chromedp.WaitVisible(chromedp.CSS("#message, #question")))
		if got := approvetest.Get(t, ctx, chromedp.Evaluate[string](`(document.getElementById("message") || {textContent: "(the request is shown)"}).textContent`)); got != selfText {
			t.Errorf("the requester signed in with her passkey is shown %q, want %q", got, selfText)
		}
		if got := approvetest.Get(t, ctx, chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(got, "secret-plan") {
			t.Errorf("the requester signed in with her passkey is shown the question: %q", got)
		}
		// Her passkey's session, its form token, the page's origin: the
		// ledger refuses.
		c := chromeCookie(t, ctx, f)
		jar := approvetest.HTTPClient(t)
		u, _ := url.Parse(f.public)
		jar.Jar.SetCookies(u, []*http.Cookie{c})
		for _, d := range []string{"approve", "decline"} {
			expect(t, "the requester's passkey "+d, post(t, jar, link, f.public, f.h.FormToken(c, path.Base(link)), d), http.StatusForbidden, []string{selfText}, secret)
		}
		expectNoDecision(t, f, id)

		// A passkey that names no holder (its line as it was written
		// before holders were named) signs no one in.
		b, err := os.ReadFile(f.passkeys)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.passkeys, []byte(strings.Replace(string(b), `"principal":"alice",`, "", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")))
		if got := passkeyStatus(t, ctx); !strings.Contains(got, "names no holder") {
			t.Errorf("a passkey naming no holder: %q", got)
		}
		expectNoDecision(t, f, id)

		// The control: dave's passkey, enrolled for his own principal.
		dave := approvetest.Browser(t)
		authenticator(t, dave)
		enrolPasskey(t, dave, f, approve.Holder{Name: "dave", Principal: "dave"})
		approvetest.Do(t, dave, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")), chromedp.WaitVisible(chromedp.ID("question")))
		if got := approvetest.Get(t, dave, chromedp.Text(chromedp.ID("who"))); got != "«sub:dave»" {
			t.Errorf("control: dave signed in with his passkey as %q, want «sub:dave»", got)
		}
		approvetest.Do(t, dave, chromedp.Click(chromedp.ID("approve")), chromedp.WaitNotPresent(chromedp.ID("approve")))
		if d := f.decisions(t, id); len(d) != 1 || d[0].Approver != "sub:dave" || !d[0].Approve {
			t.Errorf("control: recorded %+v, want dave's approval", d)
		}
	})
}

// TestApproveUnlistedApproverRefused: someone who signs in at the issuer
// but is neither listed nor in a listed group sees nothing of the
// request and cannot decide it, even with a valid session, form token
// and origin: the ledger refuses. A member of a listed group can (the
// control).
func TestApproveUnlistedApproverRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice", "group:ops"}, Question: deleteQuestion(secret)})
	bob := f.signIn(t, link, "bob")
	expect(t, "bob's GET", bob.get(t, link), http.StatusForbidden, []string{unlistedText}, secret, formMarker)
	expect(t, "bob approves", bob.post(t, link, f.public, bob.token(link), "approve"), http.StatusForbidden, []string{unlistedText}, secret)
	expectNoDecision(t, f, id)

	carol := f.signIn(t, link, "carol")
	expect(t, "control: carol approves", carol.post(t, link, f.public, carol.token(link), "approve"), http.StatusOK, []string{"(you) approved"})
}

// A clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestApproveExpired: past its deadline (on the store's clock), the page
// shows the request as expired, offers no form, and a decision sent from
// a form loaded before is answered 410 with what was recorded (nothing).
// Before the deadline the same page offers the form (the control).
func TestApproveExpired(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFixture(t, fixtureOptions{now: clk.now})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	alice := f.signIn(t, link, "alice")
	expect(t, "control: before the deadline", alice.get(t, link), http.StatusOK, []string{"Decide before", formMarker})
	clk.add(ledger.DefaultTTL)
	expect(t, "GET at the deadline", alice.get(t, link), http.StatusOK, []string{"Expired at", "Expired: no decision can be recorded"}, formMarker)
	expect(t, "POST at the deadline", alice.post(t, link, f.public, alice.token(link), "approve"), http.StatusGone, []string{expiredText, "None yet."})
	expectNoDecision(t, f, id)
	if _, err := f.ledger.Redeem(context.Background(), id); !errors.Is(err, ledger.ErrExpired) {
		t.Errorf("Redeem after the deadline: %v, want ErrExpired", err)
	}
}

// A race's result: one POST's status and page.
type raced struct {
	who, decision string
	res           response
}

// checkOnce checks a race of decisions on one confirmation: exactly one
// was recorded, its sender's page shows it as theirs, and every other
// sender was answered 409 with the recorded decision shown.
func checkOnce(results []raced, recorded []ledger.Decision) error {
	if len(recorded) != 1 {
		return fmt.Errorf("%d decisions recorded, want 1: %+v", len(recorded), recorded)
	}
	d := recorded[0]
	won := 0
	for _, r := range results {
		switch r.res.status {
		case http.StatusOK:
			won++
			if "sub:"+r.who != d.Approver || (r.decision == "approve") != d.Approve {
				return fmt.Errorf("%s's %s was answered as recorded, but the record is %+v", r.who, r.decision, d)
			}
			if !strings.Contains(r.res.body, "(you) "+map[bool]string{true: "approved", false: "declined"}[d.Approve]) {
				return fmt.Errorf("the winner %s's page does not show its decision", r.who)
			}
		case http.StatusConflict:
			shown := fmt.Sprintf("«<bdi>%s</bdi>»", d.Approver) // the approver's name, isolated
			if !strings.Contains(r.res.body, decidedText) || !strings.Contains(r.res.body, shown) {
				return fmt.Errorf("%s's late %s: the page does not show what was recorded (%s)", r.who, r.decision, shown)
			}
		default:
			return fmt.Errorf("%s's %s: status %d", r.who, r.decision, r.res.status)
		}
	}
	if won != 1 {
		return fmt.Errorf("%d senders were told their decision was recorded, want 1", won)
	}
	return nil
}

// TestApproveDecisionOnce: approvals and declines sent at once, by two
// approvers and twice by one of them, on each of several requests, end
// in one decision recorded; the one whose decision it was sees it, and
// every other sender is answered on the page (409) with what was
// recorded. checkOnce fails on a race with two decisions, two winners, or
// a loser not shown the outcome (the controls).
func TestApproveDecisionOnce(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, first := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: "q"})
	people := map[string]*approver{"alice": f.signIn(t, first, "alice"), "carol": f.signIn(t, first, "carol")}
	senders := []struct{ who, decision string }{{"alice", "approve"}, {"carol", "decline"}, {"alice", "decline"}, {"carol", "approve"}}
	winners := map[string]int{}
	for round := range 12 {
		id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: deleteQuestion(secret)})
		results := make([]raced, len(senders))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, s := range senders {
			a := people[s.who]
			token := a.token(link)
			wg.Go(func() {
				<-start
				results[i] = raced{who: s.who, decision: s.decision, res: postNoFatal(a.client, link, f.public, token, s.decision)}
			})
		}
		close(start)
		wg.Wait()
		if err := checkOnce(results, f.decisions(t, id)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		d := f.decisions(t, id)[0]
		winners[fmt.Sprintf("%s %v", d.Approver, d.Approve)]++
	}
	t.Logf("winners: %v", winners)

	// Controls: the checker refuses what a broken page or store would give.
	ok := response{status: http.StatusOK, body: "«<bdi>sub:alice</bdi>» (you) approved"}
	late := response{status: http.StatusConflict, body: decidedText + " «<bdi>sub:alice</bdi>» approved"}
	alice := ledger.Decision{Approver: "sub:alice", Approve: true}
	carol := ledger.Decision{Approver: "sub:carol", Approve: false}
	for name, c := range map[string]struct {
		results  []raced
		recorded []ledger.Decision
	}{
		"two recorded":      {[]raced{{"alice", "approve", ok}, {"carol", "decline", late}}, []ledger.Decision{alice, carol}},
		"two winners":       {[]raced{{"alice", "approve", ok}, {"alice", "approve", ok}}, []ledger.Decision{alice}},
		"loser not told":    {[]raced{{"alice", "approve", ok}, {"carol", "decline", response{status: http.StatusConflict, body: "conflict"}}}, []ledger.Decision{alice}},
		"winner misled":     {[]raced{{"carol", "decline", response{status: http.StatusOK, body: "(you) declined"}}, {"alice", "approve", late}}, []ledger.Decision{alice}},
		"nothing recorded":  {[]raced{{"alice", "approve", ok}}, nil},
		"refusal unnoticed": {[]raced{{"alice", "approve", ok}, {"carol", "decline", response{status: http.StatusServiceUnavailable}}}, []ledger.Decision{alice}},
	} {
		if checkOnce(c.results, c.recorded) == nil {
			t.Errorf("control %q: checkOnce passed", name)
		}
	}
}

// postNoFatal is post for goroutines: an error becomes status 0.
func postNoFatal(c *http.Client, link, origin, token, decision string) response {
	req, err := http.NewRequest(http.MethodPost, link, strings.NewReader("decision="+decision+"&token="+token))
	if err != nil {
		return response{body: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	res, err := c.Do(req)
	if err != nil {
		return response{body: err.Error()}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{body: err.Error()}
	}
	return response{status: res.StatusCode, body: string(b), header: res.Header}
}
