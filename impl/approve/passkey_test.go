package approve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// authenticator gives the Chromium tab ctx a virtual platform
// authenticator (CDP's WebAuthn domain): resident keys, user
// verification that succeeds, presence without a touch.
func authenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return res.AuthenticatorID
}

// TestApprovePasskeyInChromium: a passkey enrolled through the one-time
// link EnrolLink makes, in a real Chromium with a virtual authenticator,
// for a holder who makes no MCP calls, signs its approver in (no issuer
// involved) as passkey:NAME, who reads
// the question and approves: the ledger records that approver's one
// decision. The link enrols once: opened again it is refused, and a
// ceremony through it is refused too. A browser whose authenticator
// holds no passkey is not signed in (the control).
func TestApprovePasskeyInChromium(t *testing.T) {
	f := newFixture(t, fixtureOptions{passkeys: true})
	enrol, err := approve.EnrolLink(f.key, f.public, approve.Holder{Name: "dave", NotCaller: true}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q := deleteQuestion("/srv/reports/q4.pdf")
	id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"passkey:dave"}, Question: q})
	ctx := approvetest.Browser(t)
	auth := authenticator(t, ctx)
	approvetest.Do(t, ctx, chromedp.Navigate(enrol), chromedp.Click(chromedp.ID("passkey")))
	if got := passkeyStatus(t, ctx); got != "Passkey created: you can approve requests as passkey:dave." {
		t.Fatalf("enrolment: %q", got)
	}
	creds, err := chromedp.Call(ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: auth})
	if err != nil || len(creds.Credentials) != 1 || !creds.Credentials[0].IsResidentCredential {
		t.Fatalf("the authenticator holds %+v, %v; want one resident passkey", creds, err)
	}
	if b, err := os.ReadFile(f.passkeys); err != nil || strings.Count(string(b), "\n") != 1 || !strings.Contains(string(b), `"name":"dave"`) {
		t.Fatalf("the passkeys file: %q, %v", b, err)
	}

	// One-time: the link again, in the page and as a ceremony.
	approvetest.Do(t, ctx, chromedp.Navigate(enrol), chromedp.WaitVisible(chromedp.ID("message")))
	if got := approvetest.Get(t, ctx, chromedp.Text(chromedp.ID("message"))); !strings.Contains(got, "used already") {
		t.Errorf("the enrolment link opened again says %q", got)
	}
	res := do(t, http.DefaultClient, http.MethodPost, enrol+"/begin", http.Header{"Origin": {f.public}, "Content-Type": {"application/json"}}, strings.NewReader("{}"))
	expect(t, "a ceremony through the used link", res, http.StatusGone, []string{"used already"})

	// Sign in with the passkey, read, approve.
	approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")), chromedp.WaitVisible(chromedp.ID("question")))
	if got := approvetest.Get(t, ctx, chromedp.Evaluate[string](`document.getElementById("question").innerText`)); got != visible(q) {
		t.Errorf("the page shows %q, want %q", got, visible(q))
	}
	if got := approvetest.Get(t, ctx, chromedp.Text(chromedp.ID("who"))); got != "«passkey:dave»" {
		t.Errorf("signed in as %q, want «passkey:dave»", got)
	}
	approvetest.Do(t, ctx, chromedp.Click(chromedp.ID("approve")), chromedp.WaitNotPresent(chromedp.ID("approve")))
	if d := f.decisions(t, id); len(d) != 1 || d[0].Approver != "passkey:dave" || !d[0].Approve {
		t.Fatalf("recorded %+v, want passkey:dave's approval", d)
	}

	// The control: another browser, its authenticator empty.
	other := approvetest.Browser(t)
	authenticator(t, other)
	approvetest.Do(t, other, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")))
	if got := passkeyStatus(t, other); !strings.HasPrefix(got, "Failed") {
		t.Errorf("control: a browser without the passkey: %q", got)
	}
	if got := approvetest.Get(t, other, chromedp.Evaluate[bool](`document.getElementById("question") !== null`)); got {
		t.Error("control: a browser without the passkey was shown the question")
	}
}

// passkeyStatus waits for the passkey ceremony's outcome on the page and
// returns it.
func passkeyStatus(t *testing.T, ctx context.Context) string {
	t.Helper()
	return approvetest.Get(t, ctx, chromedp.Poll[string](`(() => {
  const s = document.getElementById("passkey-status");
  const text = s ? s.textContent : "";
  return text && !text.startsWith("Waiting") ? text : null;
})()`, chromedp.WithPollingTimeout(30*time.Second)))
}

// enrolPasskey enrols a passkey for h in the browser tab ctx (whose
// virtual authenticator keeps it) and returns what the page said.
func enrolPasskey(t *testing.T, ctx context.Context, f *fixture, h approve.Holder) string {
	t.Helper()
	enrol, err := approve.EnrolLink(f.key, f.public, h, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	approvetest.Do(t, ctx, chromedp.Navigate(enrol), chromedp.Click(chromedp.ID("passkey")))
	got := passkeyStatus(t, ctx)
	if !strings.HasPrefix(got, "Passkey created") {
		t.Fatalf("enrolment of %+v: %q", h, got)
	}
	return got
}

// TestEnrolLinkRefused: EnrolLink makes no link for a holder it could not
// tell from the requester of their own calls (neither a principal nor
// NotCaller), nor for an ambiguous or oversized one, nor with a TTL that
// is not positive; a holder with a principal, or who makes no calls, gets
// one (the controls).
func TestEnrolLinkRefused(t *testing.T) {
	key := make([]byte, 32)
	for _, tc := range []struct {
		name string
		h    approve.Holder
		want string
	}{
		{"neither principal nor NotCaller", approve.Holder{Name: "dave"}, "name the principal"},
		{"both", approve.Holder{Name: "dave", Principal: "dave", NotCaller: true}, "choose one"},
		{"no name", approve.Holder{Principal: "dave"}, "passkey name"},
		{"principal too long", approve.Holder{Name: "dave", Principal: strings.Repeat("p", ledger.MaxName)}, "principal of"},
		{"principal not UTF-8", approve.Holder{Name: "dave", Principal: "\xff"}, "principal of"},
		{"name too long", approve.Holder{Name: strings.Repeat("n", 129), Principal: "dave"}, "passkey name"},
		{"name not UTF-8", approve.Holder{Name: "\xff", Principal: "dave"}, "passkey name"},
		{"control: a principal", approve.Holder{Name: "dave", Principal: "dave"}, ""},
		{"control: not a caller", approve.Holder{Name: "dave", NotCaller: true}, ""},
	} {
		if tc.want == "" {
			// A link that never expires, or never worked, is refused too.
			for _, ttl := range []time.Duration{0, -time.Hour} {
				if link, err := approve.EnrolLink(key, "https://mcp.example.com", tc.h, ttl); err == nil || link != "" {
					t.Errorf("%s, TTL %v: %q, %v; want refused", tc.name, ttl, link, err)
				}
			}
		}
		link, err := approve.EnrolLink(key, "https://mcp.example.com", tc.h, time.Hour)
		switch {
		case tc.want == "" && (err != nil || !strings.HasPrefix(link, "https://mcp.example.com/approve/enrol/")):
			t.Errorf("%s: %q, %v", tc.name, link, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || link != ""):
			t.Errorf("%s: %q, %v; want an error saying %q", tc.name, link, err, tc.want)
		}
	}
}

// TestPasskeyUserVerificationRequired: a passkey approves only with its
// user verified (a PIN or a biometric; a touch alone is what anyone at an
// unlocked device can give). The page asks for it at both ceremonies'
// begin; an authenticator that cannot verify its user enrols nothing; a
// passkey whose authenticator stops verifying signs no one in; a
// ceremony on a link that is no approval link does not begin. With
// verification on, the same link enrols and the passkey signs in (the
// controls).
func TestPasskeyUserVerificationRequired(t *testing.T) {
	f := newFixture(t, fixtureOptions{passkeys: true})
	q := deleteQuestion("/srv/reports/q4.pdf")
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"passkey:dave"}, Question: q})
	enrol, err := approve.EnrolLink(f.key, f.public, approve.Holder{Name: "dave", NotCaller: true}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	begin := func(u string) map[string]any {
		t.Helper()
		res := do(t, http.DefaultClient, http.MethodPost, u, http.Header{"Origin": {f.public}, "Content-Type": {"application/json"}}, strings.NewReader("{}"))
		var opts struct {
			PublicKey map[string]any `json:"publicKey"`
		}
		if res.status != http.StatusOK || json.Unmarshal([]byte(res.body), &opts) != nil {
			t.Fatalf("POST %s: %d %s", u, res.status, res.body)
		}
		return opts.PublicKey
	}
	if sel, _ := begin(enrol + "/begin")["authenticatorSelection"].(map[string]any); sel["userVerification"] != "required" {
		t.Errorf("enrolment asks for authenticatorSelection %v, want userVerification required", sel)
	}
	if uv := begin(link + "/passkey/begin")["userVerification"]; uv != "required" {
		t.Errorf("sign-in asks for userVerification %v, want required", uv)
	}
	notALink := f.public + "/approve/" + strings.Repeat("A", 43) + "/passkey/begin"
	res := do(t, http.DefaultClient, http.MethodPost, notALink, http.Header{"Origin": {f.public}, "Content-Type": {"application/json"}}, strings.NewReader("{}"))
	expect(t, "a sign-in ceremony on no approval link", res, http.StatusNotFound, []string{"no such request"}, "challenge")

	ctx := approvetest.Browser(t)
	auth := authenticator(t, ctx)
	verified := func(v bool) {
		t.Helper()
		if _, err := chromedp.Call(ctx, webauthn.SetUserVerified, webauthn.SetUserVerifiedParams{AuthenticatorID: auth, IsUserVerified: v}); err != nil {
			t.Fatal(err)
		}
	}
	verified(false)
	approvetest.Do(t, ctx, chromedp.Navigate(enrol), chromedp.Click(chromedp.ID("passkey")))
	if got := passkeyStatus(t, ctx); !strings.HasPrefix(got, "Failed") {
		t.Errorf("enrolment without user verification: %q, want it refused", got)
	}
	if b, err := os.ReadFile(f.passkeys); len(b) != 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a passkey enrolled without user verification was kept: %q, %v", b, err)
	}

	verified(true)
	approvetest.Do(t, ctx, chromedp.Navigate(enrol), chromedp.Click(chromedp.ID("passkey")))
	if got := passkeyStatus(t, ctx); !strings.HasPrefix(got, "Passkey created") {
		t.Fatalf("control: enrolment with user verification: %q", got)
	}

	verified(false)
	approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")))
	if got := passkeyStatus(t, ctx); !strings.HasPrefix(got, "Failed") {
		t.Errorf("sign-in without user verification: %q, want it refused", got)
	}
	if got := approvetest.Get(t, ctx, chromedp.Evaluate[bool](`document.getElementById("question") !== null`)); got {
		t.Error("a sign-in without user verification was shown the question")
	}

	verified(true)
	approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.Click(chromedp.ID("passkey")), chromedp.WaitVisible(chromedp.ID("question")))
	if got := approvetest.Get(t, ctx, chromedp.Text(chromedp.ID("who"))); got != "«passkey:dave»" {
		t.Errorf("control: signed in as %q, want «passkey:dave»", got)
	}
}
