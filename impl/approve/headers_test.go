package approve_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// TestApprovePageHeaders: every answer of the page -- signed out, the
// request, a refusal, not found, a failed sign-in, a decision -- forbids
// framing, caching, sniffing and a Referer to other origins, and carries
// the strict CSP.
func TestApprovePageHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
	alice := f.signIn(t, link, "alice")
	c := &http.Client{}
	for name, res := range map[string]response{
		"signed out":       do(t, c, http.MethodGet, link, nil, nil),
		"the request":      alice.get(t, link),
		"not found":        do(t, c, http.MethodGet, f.public+"/approve/nothing-here", nil, nil),
		"forged link":      do(t, c, http.MethodGet, f.public+"/approve/"+strings.Repeat("A", 43), nil, nil),
		"failed sign-in":   do(t, c, http.MethodGet, f.public+"/approve/callback?code=x&state=y", nil, nil),
		"refused decision": post(t, c, link, "https://evil.example", "", "approve"),
		"decision":         alice.post(t, link, f.public, alice.token(link), "approve"),
		"method":           do(t, c, http.MethodPut, link, nil, nil),
	} {
		for k, want := range map[string]string{
			"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "same-origin",
			"X-Content-Type-Options": "nosniff", "Content-Type": "text/html; charset=utf-8",
		} {
			if got := res.header.Get(k); got != want {
				t.Errorf("%s (%d): %s: %q, want %q", name, res.status, k, got, want)
			}
		}
		csp := res.header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'", "style-src 'sha256-"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %q", name, csp, d)
			}
		}
		if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q allows a script (no passkeys configured) or something unsafe", name, csp)
		}
	}
}

// TestApprovePageCSPBlocksInjection: were a bug ever to let markup into
// the page, Chromium would run no script and apply no style of it: the
// page's own answer, with an inline script and style injected into its
// body, keeps its CSP, and the injection does nothing; its own hashed
// style still applies. The same page without the CSP runs them (the
// control).
func TestApprovePageCSPBlocksInjection(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
	const injected = `<script>document.title = "pwned"</script><style>body{background:rgb(255, 0, 0) !important}</style>`
	inject := func(keepCSP bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				if k == "Content-Security-Policy" && !keepCSP || k == "Content-Length" {
					continue
				}
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(bytes.Replace(rec.Body.Bytes(), []byte("<body>"), []byte("<body>"+injected), 1))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	ctx := approvetest.Browser(t)
	look := func(srv *httptest.Server) (title, background, margin string) {
		approvetest.Do(t, ctx, chromedp.Navigate(srv.URL+strings.TrimPrefix(link, f.public)), chromedp.WaitVisible(chromedp.ID("message")))
		v := approvetest.Get(t, ctx, chromedp.Evaluate[[]string](`[document.title, getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).marginTop]`))
		return v[0], v[1], v[2]
	}
	if title, bg, margin := look(inject(true)); title == "pwned" || bg == "rgb(255, 0, 0)" || margin != "32px" {
		t.Errorf("with the CSP: title %q, background %s, margin %s; want the injection inert and the page's own style (2em = 32px) applied", title, bg, margin)
	}
	if title, bg, _ := look(inject(false)); title != "pwned" || bg != "rgb(255, 0, 0)" {
		t.Errorf("control: without the CSP the injection did not run: title %q, background %s", title, bg)
	}
}

// TestApprovePasskeyPageCSP: with passkeys, the page runs one script, its
// own, by its URL: the CSP allows exactly that script and fetches to this
// origin, and nothing inline or unsafe (were markup ever injected, it
// could not run); the page names the script it allows (the control: the
// CSP is the one the page needs).
func TestApprovePasskeyPageCSP(t *testing.T) {
	f := newFixture(t, fixtureOptions{passkeys: true})
	_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"passkey:dave"}, Question: "q"})
	res := do(t, &http.Client{}, http.MethodGet, link, nil, nil)
	script := f.public + "/approve/passkey.js"
	expect(t, "signed out, with passkeys", res, http.StatusOK, []string{`src="/approve/passkey.js"`})
	csp := res.header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "frame-ancestors 'none'", "script-src " + script + ";", "connect-src 'self'"} {
		if !strings.Contains(csp+";", d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") || strings.Count(csp, "script-src") != 1 {
		t.Errorf("CSP %q allows more than the page's own script", csp)
	}
}
