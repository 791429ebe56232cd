package approve_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// TestApproveEnrolmentBounded: over HTTP, without an authenticator, the
// limits of an enrolment link on the page's clock. Its page and its
// ceremony answer while the link is valid (the controls); a ceremony step
// sent from another origin, or none, is refused (cross-site request
// forgery: another site's page enrolling its own passkey through a link
// it saw); a ceremony answered after its five minutes is refused before
// the answer is read; and past the link's TTL neither its page nor its
// ceremony answers. A page without passkeys has no enrolment.
func TestApproveEnrolmentBounded(t *testing.T) {
	clk := &clock{t: time.Now()}
	f := newFixture(t, fixtureOptions{now: clk.now, passkeys: true})
	enrol, err := approve.EnrolLink(f.key, f.public, approve.Holder{Name: "dave", NotCaller: true}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := approvetest.HTTPClient(t)
	step := func(origin, step string) response {
		h := http.Header{"Content-Type": {"application/json"}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return do(t, c, http.MethodPost, enrol+"/"+step, h, strings.NewReader("{}"))
	}
	expect(t, "control: the enrolment page", do(t, c, http.MethodGet, enrol, nil, nil), http.StatusOK, []string{"Create a passkey"})
	expect(t, "begin from another origin", step("https://evil.example", "begin"), http.StatusForbidden, []string{"only be used from this page"})
	expect(t, "begin without an Origin", step("", "begin"), http.StatusForbidden, []string{"only be used from this page"})
	expect(t, "control: begin", step(f.public, "begin"), http.StatusOK, []string{`"challenge"`})
	clk.add(5 * time.Minute)
	expect(t, "finish after five minutes", step(f.public, "finish"), http.StatusBadRequest, []string{"took too long"})
	clk.add(time.Hour - 5*time.Minute + 2*time.Second) // EnrolLink took its TTL from time.Now, a moment after clk's start
	expect(t, "the page past the link's TTL", do(t, c, http.MethodGet, enrol, nil, nil), http.StatusNotFound, []string{"invalid or has expired"})
	expect(t, "begin past the link's TTL", step(f.public, "begin"), http.StatusNotFound, []string{"invalid or has expired"})

	g := newFixture(t, fixtureOptions{})
	enrol, err = approve.EnrolLink(g.key, g.public, approve.Holder{Name: "dave", NotCaller: true}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "an enrolment link where passkeys are off", do(t, c, http.MethodGet, enrol, nil, nil), http.StatusNotFound, []string{"invalid or has expired"})
}
