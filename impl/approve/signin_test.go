package approve_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

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
