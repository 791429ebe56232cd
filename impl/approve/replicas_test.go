package approve_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// sharedStores opens two handles, as two replicas would, on one fresh
// namespace of the store kind names, or skips without its URL.
func sharedStores(t *testing.T, kind string) []ledger.Store {
	t.Helper()
	env := map[string]string{"redis": "MCP_CONFIRM_REDIS_URL", "postgres": "MCP_CONFIRM_POSTGRES_URL"}[kind]
	u := os.Getenv(env)
	if u == "" {
		t.Skipf("set %s to run the replicas over %s", env, kind)
	}
	var b [6]byte
	rand.Read(b[:])
	ns := "approve-test-" + hex.EncodeToString(b[:])
	var stores []ledger.Store
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var s ledger.Store
		var err error
		switch kind {
		case "redis":
			var r *redisledger.Store
			r, err = redisledger.Open(ctx, u, redisledger.Options{Namespace: "mcp-confirm-test:{" + ns + "}:"})
			if err == nil {
				t.Cleanup(func() { r.Close() })
				s = r
			}
		case "postgres":
			var p *pgledger.Store
			p, err = pgledger.Open(ctx, u, pgledger.Options{Namespace: ns})
			if err == nil {
				t.Cleanup(p.Close)
				s = p
			}
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	return stores
}

// TestApprovePageAcrossReplicas: two replicas with the same key, each with
// its own handle on one Redis or PostgreSQL store, behind a front door
// that sends each request to the next replica: the sign-in started on one
// ends on the other, the page one shows the other decides, each replica
// makes the same link, and the decision is recorded once, read and
// redeemed through the replica that did not record it.
func TestApprovePageAcrossReplicas(t *testing.T) {
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{stores: sharedStores(t, kind)})
			id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"group:ops"}, Question: deleteQuestion(secret)})
			if other := f.replicas[1].h.Link(id); other != link {
				t.Fatalf("the replicas make different links: %s and %s", link, other)
			}
			alice := f.signIn(t, link, "alice")
			carol := f.signIn(t, link, "carol")
			expect(t, "alice's GET", alice.get(t, link), http.StatusOK, []string{"secret-plan.xlsx", formMarker})
			expect(t, "alice approves", alice.post(t, link, f.public, alice.token(link), "approve"), http.StatusOK, []string{"(you) approved"})
			expect(t, "carol declines late", carol.post(t, link, f.public, carol.token(link), "decline"), http.StatusConflict, []string{decidedText, "approved"})
			for i := range f.replicas {
				if n := f.replicas[i].served.Load(); n < 3 {
					t.Errorf("replica %d served %d requests: the front door did not spread them", i, n)
				}
			}
			r, err := f.replicas[1].ledger.Lookup(context.Background(), id)
			if err != nil || len(r.Decisions) != 1 || r.Decisions[0].Approver != "sub:alice" || !r.Decisions[0].Approve {
				t.Fatalf("the other replica reads %+v, %v; want alice's one approval", r.Decisions, err)
			}
			if _, err := f.replicas[1].ledger.Redeem(context.Background(), id); err != nil {
				t.Errorf("Redeem through the other replica: %v", err)
			}
		})
	}
}

// TestApproveSessionCookieSecure: over https the sign-in and session
// cookies are Secure, HttpOnly, __Host- (no Domain, Path /), the session
// SameSite=Strict and the sign-in Lax (it must come back with the
// issuer's cross-site redirect), and a whole sign-in and decision work;
// over http (loopback) the same cookies are not Secure (the control).
func TestApproveSessionCookieSecure(t *testing.T) {
	for _, tls := range []bool{true, false} {
		var mu sync.Mutex
		var set []*http.Cookie
		f := newFixture(t, fixtureOptions{tls: tls, wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				for _, line := range w.Header().Values("Set-Cookie") {
					c, err := http.ParseSetCookie(line)
					if err != nil {
						t.Errorf("Set-Cookie %q: %v", line, err)
					} else if c.MaxAge >= 0 { // not a removal
						mu.Lock()
						set = append(set, c)
						mu.Unlock()
					}
				}
			})
		}})
		id, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
		alice := f.signIn(t, link, "alice")
		expect(t, "alice approves", alice.post(t, link, f.public, alice.token(link), "approve"), http.StatusOK, []string{"(you) approved"})
		if d := f.decisions(t, id); len(d) != 1 {
			t.Errorf("tls %v: recorded %+v", tls, d)
		}
		prefix := map[bool]string{true: "__Host-", false: ""}[tls]
		want := map[string]http.SameSite{prefix + "mcp-confirm-signin": http.SameSiteLaxMode, prefix + "mcp-confirm-session": http.SameSiteStrictMode}
		mu.Lock()
		for _, c := range set {
			same, ok := want[c.Name]
			if !ok {
				t.Errorf("tls %v: cookie %q set, want only %v", tls, c.Name, want)
				continue
			}
			delete(want, c.Name)
			if c.Secure != tls || !c.HttpOnly || c.SameSite != same || c.Path != "/" || c.Domain != "" {
				t.Errorf("tls %v: %s: Secure %v, HttpOnly %v, SameSite %v, Path %q, Domain %q", tls, c.Name, c.Secure, c.HttpOnly, c.SameSite, c.Path, c.Domain)
			}
		}
		mu.Unlock()
		if len(want) != 0 {
			t.Errorf("tls %v: cookies never set: %v", tls, want)
		}
	}
}
