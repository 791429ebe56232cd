package approve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// TestApproveInChromium is an approver's whole way through a real
// headless Chromium: the link, the sign-in at a real OpenID Connect
// provider (authorization code with PKCE), the question read from the
// rendered page, Approve; the ledger records the one decision, and the
// confirmation can then be redeemed, once.
func TestApproveInChromium(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	q := deleteQuestion("/srv/reports/q3\u200B-final.pdf")
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Requester: "sub:mallory", Question: q})
	ctx := approvetest.Browser(t)
	approvetest.SignInBrowser(t, ctx, link, "alice")
	shots := t.TempDir()
	if got := approvetest.Get(t, ctx, chromedp.Evaluate[string](`document.getElementById("question").innerText`)); got != visible(q) {
		t.Errorf("the page shows the question as %q, want %q", got, visible(q))
	}
	approvetest.Screenshot(t, ctx, shots, "approve-page")
	approvetest.Do(t, ctx, chromedp.Click(chromedp.ID("approve")), chromedp.WaitNotPresent(chromedp.ID("approve")))
	shown := approvetest.Get(t, ctx, chromedp.Text(chromedp.ID("decisions")))
	if want := "«sub:alice» (you) approved at"; !strings.Contains(shown, want) {
		t.Errorf("after Approve, the page lists the decisions as %q, want %q", shown, want)
	}
	approvetest.Screenshot(t, ctx, shots, "approve-page-approved")
	d := f.decisions(t, id)
	if len(d) != 1 || d[0].Approver != "sub:alice" || !d[0].Approve {
		t.Fatalf("recorded %+v, want one approval by sub:alice", d)
	}
	if _, err := f.ledger.Redeem(context.Background(), id); err != nil {
		t.Fatalf("Redeem after the approval: %v", err)
	}
}

// chromeCookie returns the session cookie Chromium holds for the page.
func chromeCookie(t *testing.T, ctx context.Context, f *fixture) *http.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{f.public + "/approve/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == f.h.CookieName() {
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie: HttpOnly %v, SameSite %q; want HttpOnly, Strict", c.HTTPOnly, c.SameSite)
			}
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("Chromium holds no session cookie %s", f.h.CookieName())
	return nil
}

// otherSite serves html at http://localhost:PORT: another site than the
// page's 127.0.0.1 (a site is a scheme and a host; ports do not count).
func otherSite(t *testing.T, html func() string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, html())
	}))
	t.Cleanup(srv.Close)
	return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
}

// A request, as the front door received it.
type seenRequest struct {
	origin, site string
	cookie       bool
}

// TestApproveCrossSiteRefused: a page of another site that submits a
// decision form to the approval page -- in a real Chromium where the
// approver is signed in, and even with the approver's valid form token --
// records nothing: Chromium sends the POST without the session cookie
// (SameSite=Strict) and with the other site's Origin, which the page
// refuses first. Over HTTP, each layer alone refuses what gets past the
// others: a foreign, absent or null Origin, or a cross-site
// Sec-Fetch-Site, with a valid cookie and token; no cookie with a valid
// token and Origin; a token of another link or another session. The same
// form from the page itself is recorded (the control).
func TestApproveCrossSiteRefused(t *testing.T) {
	var mu sync.Mutex
	var seen []seenRequest
	f := newFixture(t, fixtureOptions{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				_, err := r.Cookie("mcp-confirm-session")
				mu.Lock()
				seen = append(seen, seenRequest{r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), err == nil})
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: deleteQuestion(secret)})
	ctx := approvetest.Browser(t)
	approvetest.SignInBrowser(t, ctx, link, "alice")
	token := f.h.FormToken(chromeCookie(t, ctx, f), path.Base(link))
	evil := otherSite(t, func() string {
		return `<!doctype html><title>Win a prize</title><form id="f" method="post" action="` + link + `">
<input type="hidden" name="token" value="` + token + `"><input type="hidden" name="decision" value="approve"></form>
<script>document.getElementById("f").submit()</script>`
	})
	approvetest.Do(t, ctx, chromedp.Navigate(evil), chromedp.WaitVisible(chromedp.ID("message")))
	if got := approvetest.Get(t, ctx, chromedp.Text(chromedp.ID("message"))); got != originText {
		t.Errorf("the forged form's answer says %q, want %q (the Origin check)", got, originText)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].cookie || seen[0].origin != evil || seen[0].site != "cross-site" {
		t.Errorf("the front door saw %+v, want one POST from %s, cross-site, without the session cookie", seen, evil)
	}
	mu.Unlock()
	expectNoDecision(t, f, id)

	// Each layer alone, over HTTP, with alice's own session.
	alice := f.signIn(t, link, "alice")
	bob := f.signIn(t, link, "bob")
	_, other := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: "another"})
	form := func(token string) string { return url.Values{"token": {token}, "decision": {"approve"}}.Encode() }
	for _, c := range []struct {
		name   string
		client *http.Client
		header http.Header
		body   string
		status int
		text   string
	}{
		{"foreign Origin", alice.client, http.Header{"Origin": {evil}}, form(alice.token(link)), http.StatusForbidden, originText},
		{"no Origin", alice.client, http.Header{}, form(alice.token(link)), http.StatusForbidden, originText},
		{"Origin null", alice.client, http.Header{"Origin": {"null"}}, form(alice.token(link)), http.StatusForbidden, originText},
		{"Origin of another port", alice.client, http.Header{"Origin": {"http://127.0.0.1:1"}}, form(alice.token(link)), http.StatusForbidden, originText},
		{"cross-site fetch", alice.client, http.Header{"Origin": {f.public}, "Sec-Fetch-Site": {"cross-site"}}, form(alice.token(link)), http.StatusForbidden, originText},
		{"same-site fetch", alice.client, http.Header{"Origin": {f.public}, "Sec-Fetch-Site": {"same-site"}}, form(alice.token(link)), http.StatusForbidden, originText},
		{"no session cookie", http.DefaultClient, http.Header{"Origin": {f.public}}, form(alice.token(link)), http.StatusForbidden, signInText},
		{"no token", alice.client, http.Header{"Origin": {f.public}}, form(""), http.StatusForbidden, tokenText},
		{"token of another link", alice.client, http.Header{"Origin": {f.public}}, form(alice.token(other)), http.StatusForbidden, tokenText},
		{"token of another session", alice.client, http.Header{"Origin": {f.public}}, form(bob.token(link)), http.StatusForbidden, tokenText},
		{"not a form", alice.client, http.Header{"Origin": {f.public}, "Content-Type": {"text/plain"}}, form(alice.token(link)), http.StatusUnsupportedMediaType, "A decision is sent by the page"},
	} {
		h := c.header.Clone()
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		expect(t, c.name, do(t, c.client, http.MethodPost, link, h, strings.NewReader(c.body)), c.status, []string{c.text})
	}
	expectNoDecision(t, f, id)

	// The control: the page's own form, in Chromium.
	approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("approve")), chromedp.WaitNotPresent(chromedp.ID("approve")))
	if d := f.decisions(t, id); len(d) != 1 || d[0].Approver != "sub:alice" {
		t.Errorf("control: the page's own form recorded %+v, want alice's approval", d)
	}
}

// frameRefused reports whether the only frame shows Chromium's error
// page and nothing of the approval page: the page was refused, not
// rendered.
func frameRefused(frames []approvetest.Frame) error {
	if len(frames) != 1 {
		return fmt.Errorf("%d frames, want 1: %+v", len(frames), frames)
	}
	if fr := frames[0]; fr.Doc != "chrome-error://chromewebdata/" || strings.Contains(fr.Text, "mcp-confirm") ||
		strings.Contains(fr.Text, "Sign in") || strings.Contains(fr.Text, "Approve") {
		return fmt.Errorf("the frame shows %s: %q", fr.Doc, fr.Text)
	}
	return nil
}

// TestApprovePageNotFramable: a page of another site that frames the
// approval page, signed in or not, gets Chromium's error page in the
// frame, never the page (clickjacking: an Approve button under a
// decoy). The control: the same handler with its CSP and X-Frame-Options
// removed is rendered in the frame, and frameRefused says so.
func TestApprovePageNotFramable(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	framed := link
	evil := otherSite(t, func() string {
		return `<!doctype html><title>Click to win</title><iframe id="frame" src="` + framed + `" width="800" height="600"></iframe>`
	})
	ctx := approvetest.Browser(t)
	shots := t.TempDir()
	load := func() []approvetest.Frame {
		approvetest.Do(t, ctx, chromedp.Navigate(evil), chromedp.WaitReady(chromedp.ID("frame")), chromedp.Sleep(500*time.Millisecond))
		return approvetest.Frames(t, ctx)
	}
	if err := frameRefused(load()); err != nil {
		t.Errorf("signed out: %v", err)
	}
	approvetest.SignInBrowser(t, ctx, link, "alice")
	if err := frameRefused(load()); err != nil {
		t.Errorf("signed in: %v", err)
	}
	approvetest.Screenshot(t, ctx, shots, "approve-framed-refused")

	// The control: the page without its framing headers.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.h.ServeHTTP(stripFraming{w}, r)
	}))
	t.Cleanup(bare.Close)
	framed = bare.URL + strings.TrimPrefix(link, f.public)
	frames := load()
	if err := frameRefused(frames); err == nil {
		t.Errorf("control: the page without CSP and X-Frame-Options was refused too: %+v", frames)
	} else if len(frames) != 1 || frames[0].Doc != framed || !strings.Contains(frames[0].Text, signInText) {
		t.Errorf("control: frames %+v, want the page %s rendered", frames, framed)
	}
	approvetest.Screenshot(t, ctx, shots, "approve-framed-control")
}

// stripFraming removes the page's framing defences from its response.
type stripFraming struct{ http.ResponseWriter }

func (s stripFraming) WriteHeader(code int) {
	s.Header().Del("Content-Security-Policy")
	s.Header().Del("X-Frame-Options")
	s.ResponseWriter.WriteHeader(code)
}

func (s stripFraming) Write(b []byte) (int, error) {
	s.Header().Del("Content-Security-Policy")
	s.Header().Del("X-Frame-Options")
	return s.ResponseWriter.Write(b)
}

// TestApproveLinkFromAnotherSite: an approver signed in who follows the
// link from another site (a chat, a mail) sees the request: that
// navigation comes without the SameSite=Strict session cookie, so the
// page reloads itself once from its own site, which sends it. The front
// door sees exactly that: a cross-site GET without the cookie, then a
// same-origin GET with it.
func TestApproveLinkFromAnotherSite(t *testing.T) {
	var mu sync.Mutex
	var seen []seenRequest
	f := newFixture(t, fixtureOptions{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && !strings.Contains(r.URL.Path, "signin") && !strings.Contains(r.URL.Path, "callback") {
				_, err := r.Cookie("mcp-confirm-session")
				mu.Lock()
				seen = append(seen, seenRequest{r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), err == nil})
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}})
	q := deleteQuestion("/srv/reports/q3.pdf")
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: q})
	ctx := approvetest.Browser(t)
	approvetest.SignInBrowser(t, ctx, link, "alice")
	chat := otherSite(t, func() string {
		return `<!doctype html><title>Chat</title><a id="go" href="` + link + `">please approve</a>`
	})
	mu.Lock()
	seen = nil
	mu.Unlock()
	approvetest.Do(t, ctx, chromedp.Navigate(chat), chromedp.Click(chromedp.ID("go")), chromedp.WaitVisible(chromedp.ID("question")))
	if got := approvetest.Get(t, ctx, chromedp.Evaluate[string](`document.getElementById("question").innerText`)); got != visible(q) {
		t.Errorf("the page shows %q, want %q", got, visible(q))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].site != "cross-site" || seen[0].cookie || seen[1].site != "same-origin" || !seen[1].cookie {
		t.Errorf("the front door saw %+v, want a cross-site GET without the session cookie, then a same-origin GET with it", seen)
	}
}
