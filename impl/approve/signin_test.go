package approve_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// errStop stops a client at the page's callback, to hold the issuer's
// answer.
var errStop = errors.New("stopped at the callback")

// TestApproveSignInRefused: the sign-in asks the issuer for a code with
// PKCE (S256), a state and a nonce; at the callback it refuses an answer
// whose state is not this browser's, an answer carried to another
// browser (login CSRF: an attacker's own code sent to the approver), an
// answer without its sign-in, and the same answer twice; none of them
// signs anyone in. The untouched answer signs in (the control).
func TestApproveSignInRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})
	c := approvetest.HTTPClient(t)
	var authorize, callback *url.URL
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), f.issuer.URL+"/auth") && authorize == nil {
			authorize = r.URL
		}
		if strings.HasPrefix(r.URL.String(), f.public+"/approve/callback") {
			callback = r.URL
			return errStop
		}
		return nil
	}
	res, err := c.Get(link + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if authorize == nil {
		t.Fatal("the sign-in did not go to the issuer's authorization endpoint")
	}
	q := authorize.Query()
	for k, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "client_id": approvetest.ClientID, "scope": "openid groups"} {
		if q.Get(k) != want {
			t.Errorf("authorization request: %s=%q, want %q", k, q.Get(k), want)
		}
	}
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 22 {
			t.Errorf("authorization request: %s=%q, want 128 bits or more", k, q.Get(k))
		}
	}
	res, err = c.PostForm(res.Request.URL.String()+"/login", url.Values{"login": {"alice"}})
	if res != nil {
		res.Body.Close()
	}
	if !errors.Is(err, errStop) || callback == nil {
		t.Fatalf("login: %v, callback %v", err, callback)
	}
	c.CheckRedirect = nil
	answer := callback.Query()
	at := func(v url.Values) string { return f.public + "/approve/callback?" + v.Encode() }
	get := func(c *http.Client, u string) response {
		res, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, body: string(b)}
	}
	signedIn := func(c *http.Client) bool {
		return strings.Contains(get(c, link).body, "secret-plan.xlsx")
	}

	forged := url.Values{"code": {answer.Get("code")}, "state": {"AAAA" + answer.Get("state")[4:]}, "iss": {answer.Get("iss")}}
	expect(t, "another state", get(c, at(forged)), http.StatusBadRequest, []string{"answer does not belong to this sign-in"})
	// The refusal spent the sign-in: start another, as the control below
	// needs a fresh code.
	other := approvetest.HTTPClient(t)
	expect(t, "the answer in another browser", get(other, callback.String()), http.StatusBadRequest, []string{"it was not started in this browser"})
	if signedIn(c) || signedIn(other) {
		t.Fatal("a refused answer signed someone in")
	}

	// The control: a whole sign-in; then its answer again.
	var again *url.URL
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), f.public+"/approve/callback") {
			again = r.URL
			return errStop
		}
		return nil
	}
	if res, err := c.Get(link + "/signin"); err == nil {
		res.Body.Close()
		// The issuer remembers alice: no login form this time.
		if strings.HasPrefix(res.Request.URL.Path, "/interaction/") {
			res, err = c.PostForm(res.Request.URL.String()+"/login", url.Values{"login": {"alice"}})
			if res != nil {
				res.Body.Close()
			}
		}
		if !errors.Is(err, errStop) {
			t.Fatalf("second sign-in: %v", err)
		}
	} else if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	c.CheckRedirect = nil
	expect(t, "control: the answer", get(c, again.String()), http.StatusOK, []string{"Signed in."})
	if !signedIn(c) {
		t.Fatal("control: the untouched answer did not sign in")
	}
	expect(t, "the same answer twice", get(c, again.String()), http.StatusBadRequest, []string{"it was not started in this browser"})
}

// TestApproveSignInTokenOfAnotherSignIn: an ID token of another sign-in
// (alice's, answered again by the issuer's token endpoint in mallory's
// exchange; mallory's own code and PKCE verifier are right) is refused by
// its nonce, and mallory's browser is signed in as no one: it neither
// sees nor can decide alice's request. The same token signed alice in
// (the control: it verifies, so the refusal is its nonce).
func TestApproveSignInTokenOfAnotherSignIn(t *testing.T) {
	sw := &tokenReplay{next: http.DefaultTransport}
	f := newFixture(t, fixtureOptions{issuerClient: &http.Client{Transport: sw, Timeout: 10 * time.Second}})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: deleteQuestion(secret)})

	alice := approvetest.HTTPClient(t)
	approvetest.SignInHTTP(t, alice, link, "alice")
	if got := do(t, alice, http.MethodGet, link, nil, nil); !strings.Contains(got.body, "secret-plan.xlsx") {
		t.Fatalf("control: alice's own sign-in does not show her the request: %d %s", got.status, got.body)
	}

	sw.armed.Store(true)
	mallory := approvetest.HTTPClient(t)
	res := signInRefused(t, f, mallory, link, "mallory")
	if n := sw.replayed.Load(); n != 1 {
		t.Fatalf("the issuer's answer was replaced %d times, want once", n)
	}
	expect(t, "alice's ID token in mallory's sign-in", res, http.StatusBadRequest, []string{"the ID token belongs to another sign-in"}, "Signed in.")
}

// TestApproveSessionTooLargeRefused: an approver whose groups would make
// the session cookie larger than a browser keeps (which would drop it,
// and the sign-in with it, without a word) is told so, and gets no
// cookie. One with a few groups signs in (the control).
func TestApproveSessionTooLargeRefused(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: deleteQuestion(secret)})
	res := signInRefused(t, f, approvetest.HTTPClient(t), link, "crowd")
	expect(t, "a session of 300 groups", res, http.StatusForbidden, []string{"too large for a cookie (too many groups)"}, "Signed in.")
	f.signIn(t, link, "carol")
}

// signInRefused runs account's sign-in at link's page with c, which must
// be refused: it returns the page the sign-in ends on, after checking
// that c holds no session and is not shown the request.
func signInRefused(t *testing.T, f *fixture, c *http.Client, link, account string) response {
	t.Helper()
	res, err := c.Get(link + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if !strings.HasPrefix(res.Request.URL.Path, "/interaction/") {
		t.Fatalf("%s's sign-in ended at %s, want the issuer's login form", account, res.Request.URL)
	}
	res, err = c.PostForm(res.Request.URL.String()+"/login", url.Values{"login": {account}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	u, _ := url.Parse(f.public)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == f.h.CookieName() {
			t.Errorf("%s holds a session cookie after a refused sign-in", account)
		}
	}
	if got := do(t, c, http.MethodGet, link, nil, nil); strings.Contains(got.body, "secret-plan.xlsx") {
		t.Errorf("%s is shown the request after a refused sign-in:\n%s", account, got.body)
	}
	return response{status: res.StatusCode, body: string(body)}
}

// tokenReplay is the pages' transport to the issuer: it keeps the first
// ID token the token endpoint answers with and, once armed, answers every
// later exchange with that one in place of the new one (an ID token
// injected into another sign-in).
type tokenReplay struct {
	next     http.RoundTripper
	armed    atomic.Bool
	first    atomic.Value // string
	replayed atomic.Int64
}

func (s *tokenReplay) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := s.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/token") {
		return res, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	var answer map[string]any
	if err := json.Unmarshal(b, &answer); err != nil {
		return nil, fmt.Errorf("the token endpoint's answer: %w", err)
	}
	if idt, ok := answer["id_token"].(string); ok {
		if !s.first.CompareAndSwap(nil, idt) && s.armed.Load() {
			answer["id_token"] = s.first.Load().(string)
			s.replayed.Add(1)
		}
	}
	if b, err = json.Marshal(answer); err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	res.ContentLength = int64(len(b))
	res.Header.Del("Content-Length")
	return res, nil
}
