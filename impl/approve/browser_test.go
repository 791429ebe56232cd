package approve_test

import (
	"context"
	"strings"
	"testing"

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
	q := deleteQuestion("/srv/reports/q3-final.pdf")
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
