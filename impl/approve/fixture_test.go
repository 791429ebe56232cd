package approve_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// accounts are the test issuer's people and their groups.
var accounts = map[string][]string{
	"alice":   {"ops"},
	"bob":     {"sales"},
	"carol":   {"ops", "audit"},
	"mallory": {},
	"crowd":   crowd(300),
}

// crowd returns n groups, "ops" among them: too many for a session
// cookie.
func crowd(n int) []string {
	g := []string{"ops"}
	for i := 1; i < n; i++ {
		g = append(g, fmt.Sprintf("department-%04d", i))
	}
	return g
}

// A fixture is the page of a front door on a loopback port, over an
// in-memory ledger, signing approvers in at a real OpenID Connect
// provider; or the pages of several replicas (the same key, a ledger
// each over stores that may be shared) behind one front door that sends
// each request to the next replica in turn.
type fixture struct {
	ledger    *ledger.Ledger   // the first replica's
	h         *approve.Handler // the first replica's
	replicas  []replica
	public    string // the front door's base URL
	issuer    *approvetest.Issuer
	transport http.RoundTripper // nil: the default; over TLS, one that trusts the front door
	key       []byte            // the pages' Options.Key
	passkeys  string            // the passkeys file, with fixtureOptions.passkeys
}

type replica struct {
	ledger *ledger.Ledger
	h      *approve.Handler
	served atomic.Int64 // requests served
}

type fixtureOptions struct {
	now    func() time.Time                // the ledger's, store's and page's clock
	wrap   func(http.Handler) http.Handler // the front door around the mux
	also   func(*http.ServeMux, *fixture)  // more of the front door
	stores []ledger.Store                  // one per replica; default one in-memory store
	tls    bool                            // serve https (httptest's certificate)
	// issuerClient is the pages' client to the issuer (OIDC.HTTPClient);
	// nil: the default.
	issuerClient *http.Client
	// passkeys lets approvers sign in with passkeys too; the page is then
	// at http://localhost:PORT (WebAuthn refuses an IP address as the
	// relying party's ID).
	passkeys bool
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	var next atomic.Int64
	var muxes []*http.ServeMux
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)-1) % len(muxes)
		muxes[i].ServeHTTP(w, r)
	}))
	scheme := "http://"
	if o.tls {
		scheme = "https://"
	}
	public := scheme + front.Listener.Addr().String()
	var pk *approve.Passkeys
	if o.passkeys {
		public = strings.Replace(public, "127.0.0.1", "localhost", 1)
		pk = &approve.Passkeys{File: filepath.Join(t.TempDir(), "passkeys")}
	}
	f := &fixture{public: public}
	if pk != nil {
		f.passkeys = pk.File
	}
	f.issuer = approvetest.StartIssuer(t, public+"/approve/callback", accounts)
	if len(o.stores) == 0 {
		o.stores = []ledger.Store{ledger.NewMemory(ledger.MemoryOptions{Now: o.now})}
	}
	key := make([]byte, 32)
	rand.Read(key)
	f.key = key
	f.replicas = make([]replica, len(o.stores))
	for i, store := range o.stores {
		r := &f.replicas[i]
		var err error
		if r.ledger, err = ledger.New(store, ledger.Options{Now: o.now}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r.h, err = approve.New(ctx, approve.Options{
			Ledger: r.ledger, PublicURL: public, Key: key, Now: o.now, Passkeys: pk,
			OIDC: approve.OIDC{Issuer: f.issuer.URL, ClientID: approvetest.ClientID, ClientSecret: approvetest.ClientSecret,
				GroupsClaim: "groups", Scopes: []string{"groups"}, AllowHTTPIssuer: true, HTTPClient: o.issuerClient},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.h.RedirectURL(); got != public+"/approve/callback" {
			t.Fatalf("RedirectURL() = %s", got)
		}
		mux := http.NewServeMux()
		mux.Handle(r.h.Prefix(), counted(&r.served, r.h))
		if o.also != nil {
			o.also(mux, f)
		}
		muxes = append(muxes, mux)
	}
	f.ledger, f.h = f.replicas[0].ledger, f.replicas[0].h
	if o.wrap != nil {
		h := front.Config.Handler
		front.Config.Handler = o.wrap(h)
	}
	front.Config.ReadHeaderTimeout = 10 * time.Second
	if o.tls {
		front.StartTLS()
		f.transport = front.Client().Transport
	} else {
		front.Start()
	}
	t.Cleanup(front.Close)
	return f
}

// counted counts the requests h serves in n.
func counted(n *atomic.Int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}

// issue records a confirmation needing approval a and returns its id and
// the link to its page.
func (f *fixture) issue(t *testing.T, a ledger.Approval) (ledger.ID, string) {
	t.Helper()
	c, err := f.ledger.Issue(context.Background(), ledger.Confirmation{Tool: "delete_file", ArgsDigest: "d", Principal: "agent", Approval: &a})
	if err != nil {
		t.Fatal(err)
	}
	link := f.h.Link(c.ID)
	if !strings.HasPrefix(link, f.public+"/approve/") {
		t.Fatalf("Link = %s, want under %s/approve/", link, f.public)
	}
	return c.ID, link
}

// decisions returns the decisions recorded on id.
func (f *fixture) decisions(t *testing.T, id ledger.ID) []ledger.Decision {
	t.Helper()
	r, err := f.ledger.Lookup(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Decisions
}

// deleteQuestion is the question delete_file asks about name (see
// internal/filetool): the path component by component, and the notes.
func deleteQuestion(name string) string {
	q := fmt.Sprintf("Delete the file %s (12 bytes)? This cannot be undone.", prompt.Path(name, prompt.Options{}))
	for _, w := range prompt.PathWarnings(name) {
		q += " Note: the name " + strings.TrimPrefix(string(w), "it ") + "."
	}
	return q
}

// visible is question q as a page shows it: without its isolate
// characters, which the page turns into <bdi> elements.
func visible(q string) string {
	return strings.NewReplacer("\u2066", "", "\u2067", "", "\u2068", "", "\u2069", "").Replace(q)
}

// an approver signed in through a Go HTTP client.
type approver struct {
	client *http.Client
	cookie *http.Cookie
	token  func(link string) string
}

// signIn signs account in at link's page through a Go HTTP client.
func (f *fixture) signIn(t *testing.T, link, account string) *approver {
	t.Helper()
	c := approvetest.HTTPClient(t)
	if f.transport != nil {
		c.Transport = f.transport
	}
	approvetest.SignInHTTP(t, c, link, account)
	u, _ := url.Parse(f.public)
	a := &approver{client: c}
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == f.h.CookieName() {
			a.cookie = ck
		}
	}
	if a.cookie == nil {
		t.Fatalf("%s signed in, but holds no session cookie %s", account, f.h.CookieName())
	}
	a.token = func(link string) string { return f.h.FormToken(a.cookie, path.Base(link)) }
	return a
}

// A response, read.
type response struct {
	status int
	body   string
	header http.Header
}

// get fetches link as a.
func (a *approver) get(t *testing.T, link string) response {
	t.Helper()
	return do(t, a.client, http.MethodGet, link, nil, nil)
}

// post sends decision on link's page as a, from origin, with token.
func (a *approver) post(t *testing.T, link, origin, token, decision string) response {
	t.Helper()
	return post(t, a.client, link, origin, token, decision)
}

func post(t *testing.T, c *http.Client, link, origin, token, decision string) response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	if origin != "" {
		h.Set("Origin", origin)
	}
	return do(t, c, http.MethodPost, link, h, strings.NewReader(url.Values{"token": {token}, "decision": {decision}}.Encode()))
}

func do(t *testing.T, c *http.Client, method, link string, h http.Header, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequest(method, link, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, body: string(b), header: res.Header}
}

// The page is what impl/confirm sends clients to.
var _ confirm.Page = (*approve.Handler)(nil)
