package approve_test

import (
	"context"
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
// signs its approver in (no issuer involved) as passkey:NAME, who reads
// the question and approves: the ledger records that approver's one
// decision. The link enrols once: opened again it is refused, and a
// ceremony through it is refused too. A browser whose authenticator
// holds no passkey is not signed in (the control).
func TestApprovePasskeyInChromium(t *testing.T) {
	f := newFixture(t, fixtureOptions{passkeys: true})
	enrol, err := approve.EnrolLink(f.key, f.public, "dave", time.Hour)
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
