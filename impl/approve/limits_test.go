package approve_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// TestApproveOIDCOptionsRefused: New refuses an http:// issuer, whose ID
// tokens anyone on the path (or a local user on its port) could make,
// unless AllowHTTPIssuer says otherwise, a sign-in with no client ID, and
// a negative SessionTTL (sessions that end before they begin); the same
// issuer with AllowHTTPIssuer and a client ID is accepted, with the
// default SessionTTL or one of its own (the controls), so the refusals
// are not the issuer's answer.
func TestApproveOIDCOptionsRefused(t *testing.T) {
	public := "http://127.0.0.1:1"
	issuer := approvetest.StartIssuer(t, public+"/approve/callback", accounts)
	if !strings.HasPrefix(issuer.URL, "http://") {
		t.Fatalf("the test issuer is at %s, want http://", issuer.URL)
	}
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		oidc       approve.OIDC
		sessionTTL time.Duration
		refusal    string // "": accepted
	}{
		{"http issuer", approve.OIDC{Issuer: issuer.URL, ClientID: approvetest.ClientID}, 0, "AllowHTTPIssuer"},
		{"no client ID", approve.OIDC{Issuer: issuer.URL, AllowHTTPIssuer: true}, 0, "no client ID"},
		{"negative SessionTTL", approve.OIDC{Issuer: issuer.URL, ClientID: approvetest.ClientID, AllowHTTPIssuer: true}, -time.Minute, "negative SessionTTL"},
		{"control", approve.OIDC{Issuer: issuer.URL, ClientID: approvetest.ClientID, AllowHTTPIssuer: true}, 0, ""},
		{"control: a SessionTTL", approve.OIDC{Issuer: issuer.URL, ClientID: approvetest.ClientID, AllowHTTPIssuer: true}, time.Hour, ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := approve.New(ctx, approve.Options{Ledger: l, PublicURL: public, Key: make([]byte, approve.MinKeyLen), OIDC: c.oidc, SessionTTL: c.sessionTTL})
		cancel()
		if c.refusal == "" && err != nil || c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)) {
			t.Errorf("%s: New: %v; want refused for %q", c.name, err, c.refusal)
		}
	}
}

// TestApproveFormBounded: a decision's form past its 4 KiB bound is
// refused unread and records nothing, though its token and origin are
// right; the same form within the bound is recorded (the control).
func TestApproveFormBounded(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
	alice := f.signIn(t, link, "alice")
	form := func(pad int) string {
		return url.Values{"token": {alice.token(link)}, "decision": {"approve"}, "pad": {strings.Repeat("a", pad)}}.Encode()
	}
	h := http.Header{"Origin": {f.public}, "Content-Type": {"application/x-www-form-urlencoded"}}
	expect(t, "a 5 KiB form", do(t, alice.client, http.MethodPost, link, h, strings.NewReader(form(5<<10))), http.StatusBadRequest, []string{"The form could not be read."})
	expectNoDecision(t, f, id)
	expect(t, "control: a small form", do(t, alice.client, http.MethodPost, link, h, strings.NewReader(form(10))), http.StatusOK, []string{"(you) approved"})
}

// TestApproveSignInOfForgedLinkRefused: the sign-in of a link this key
// did not make is not started (no sign-in cookie, no trip to the issuer
// that would bring the browser back to a path of the caller's choosing);
// a real link's is (the control).
func TestApproveSignInOfForgedLinkRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		name   string
		link   string
		status int
	}{
		{"forged link", f.public + "/approve/" + strings.Repeat("A", 43), http.StatusNotFound},
		{"a path", f.public + "/approve/x/y", http.StatusNotFound},
		{"control", link, http.StatusSeeOther},
	} {
		res := do(t, noRedirect, http.MethodGet, c.link+"/signin", nil, nil)
		started := res.header.Get("Set-Cookie") != "" || strings.HasPrefix(res.header.Get("Location"), f.issuer.URL)
		if res.status != c.status || started != (c.status == http.StatusSeeOther) {
			t.Errorf("%s: %d, cookie %q, location %q; want %d", c.name, res.status, res.header.Get("Set-Cookie"), res.header.Get("Location"), c.status)
		}
	}
}

// stopAtCallback runs a sign-in at link's page as account up to the
// issuer's redirect back, and returns that redirect, not followed.
func stopAtCallback(t *testing.T, f *fixture, c *http.Client, link, account string) *url.URL {
	t.Helper()
	var callback *url.URL
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), f.public+"/approve/callback") {
			callback = r.URL
			return errStop
		}
		return nil
	}
	defer func() { c.CheckRedirect = nil }()
	res, err := c.Get(link + "/signin")
	if err == nil {
		res.Body.Close()
		res, err = c.PostForm(res.Request.URL.String()+"/login", url.Values{"login": {account}})
		if res != nil {
			res.Body.Close()
		}
	}
	if !errors.Is(err, errStop) || callback == nil {
		t.Fatalf("sign-in as %s: %v, stopped at %v", account, err, callback)
	}
	return callback
}

// TestApproveSignInAndSessionExpire: on the page's clock, a sign-in that
// comes back from the issuer after its ten minutes signs no one in (a
// sign-in cookie and code carried off and used later), and a session past
// its SessionTTL is a session no more: the page asks to sign in, shows
// nothing of the request and records no decision, even with the form's
// token. In time, both work (the controls).
func TestApproveSignInAndSessionExpire(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFixture(t, fixtureOptions{now: clk.now})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})

	late := approvetest.HTTPClient(t)
	callback := stopAtCallback(t, f, late, link, "alice")
	clk.add(10 * time.Minute)
	expect(t, "a sign-in back after 10 minutes", do(t, late, http.MethodGet, callback.String(), nil, nil),
		http.StatusBadRequest, []string{"took too long"}, secret)
	expect(t, "after the late sign-in", do(t, late, http.MethodGet, link, nil, nil), http.StatusOK, []string{signInText}, secret)

	_, link = f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	alice := f.signIn(t, link, "alice")
	expect(t, "control: signed in", alice.get(t, link), http.StatusOK, []string{"secret-plan.xlsx", formMarker})
	clk.add(approve.DefaultSessionTTL)
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	// The form token of the new link for alice's session, as the page
	// made it while the session lasted (the clock turned back to ask).
	clk.add(-time.Second)
	token := alice.token(link)
	clk.add(time.Second)
	if token == "" {
		t.Fatal("no form token for the session's last second")
	}
	expect(t, "GET after the session's end", alice.get(t, link), http.StatusOK, []string{signInText}, secret, formMarker)
	expect(t, "POST after the session's end", alice.post(t, link, f.public, token, "approve"), http.StatusForbidden, []string{signInText}, secret)
	expectNoDecision(t, f, id)
}
