package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/notify"
)

// Bad out-of-band settings are start-up errors naming the flag; good ones
// resolve to the approval they say.
func TestApprovalFlags(t *testing.T) {
	dir := t.TempDir()
	tables := filepath.Join(dir, "tables.toml")
	if err := os.WriteFile(tables, []byte("[[approval]]\ntools = [\"delete\"]\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	http := []string{"--http", "127.0.0.1:0"}
	oob := []string{"--approval", "out-of-band", "--approvers", "group:ops"}
	page := []string{"--approve-issuer", "https://id.example.com", "--approve-client-id", "mcp-confirm"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown mode", []string{"--approval", "outofband"}, `--approval "outofband": want in-band, out-of-band or both`},
		{"approvers in band", []string{"--approvers", "group:ops"}, "--approvers and --approvals need --approval out-of-band or both"},
		{"approvals in band", []string{"--approvals", "2"}, "need --approval out-of-band or both"},
		{"no approvers", []string{"--approval", "out-of-band"}, "names no approvers"},
		{"approver without a prefix", []string{"--approval", "both", "--approvers", "alice"}, "want sub:SUBJECT, group:GROUP or passkey:NAME"},
		{"more approvals than approvers", []string{"--approval", "out-of-band", "--approvers", "sub:alice", "--approvals", "2"}, "could never be approved"},
		{"negative approvals", []string{"--approval", "out-of-band", "--approvers", "group:ops", "--approvals", "-1"}, "--approvals -1"},
		{"over stdio", oob, "needs --http"},
		{"no public URL", cat(oob, http, page), "needs --public-url"},
		{"no sign-in", cat(oob, http, []string{"--public-url", "http://127.0.0.1:1"}), "needs a way for approvers to sign in"},
		{"issuer without client", cat(oob, http, []string{"--public-url", "http://127.0.0.1:1", "--approve-issuer", "https://id.example.com"}), "go together"},
		{"passkeys without a key file", cat(oob, http, []string{"--public-url", "http://127.0.0.1:1", "--approve-passkeys", "/tmp/passkeys"}), "needs --key-file"},
		{"issuer in band", page, "--approve-issuer applies to out-of-band approval"},
		{"passkeys in band", []string{"--approve-passkeys", "/tmp/passkeys"}, "--approve-passkeys applies"},
		{"webhook in band", []string{"--notify-webhook", "https://hooks.example.com/x"}, "--notify-webhook"},
		{"webhook in clear", cat(oob, http, page, []string{"--public-url", "http://127.0.0.1:1", "--notify-webhook", "http://hooks.example.com/secret-token"}), "must be https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q: want 2 and %q", code, stderr.String(), tt.want)
			}
			if strings.Contains(stderr.String(), "secret-token") {
				t.Fatal("the error repeats the webhook's URL")
			}
		})
	}
	c, err := parse(cat([]string{"--approval", "both", "--approvers", "group:ops, sub:alice", "--approvals", "2", "--public-url", "http://127.0.0.1:1"}, http, page), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.approval.approval; a.Mode != confirm.Both || a.Required != 2 || !slices.Equal(a.Approvers, []string{"group:ops", "sub:alice"}) {
		t.Fatalf("resolved %+v", a)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"issuer without tables", cat(page, []string{"--", "true"}), "which the policy asks of no tool"},
		{"tables over stdio", []string{"--policy", tables, "--", "true"}, "needs --http"},
		{"tables without the page", cat([]string{"--policy", tables, "--public-url", "http://127.0.0.1:1"}, http, []string{"--", "true"}), "needs a way for approvers to sign in"},
	} {
		t.Run("proxy/"+tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{"proxy"}, tt.args...), strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q: want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// freePort returns a loopback port free a moment ago: the public URL,
// the issuer's redirect URI and the binary's --http must agree before
// it starts.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// webhook is a local receiver of the binary's notifications.
type webhook struct {
	*httptest.Server
	texts chan string
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{texts: make(chan string, 16)}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var m struct{ Text string }
		if err := json.NewDecoder(r.Body).Decode(&m); err == nil {
			w.texts <- m.Text
		}
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-w.texts:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30 s")
	}
	return ""
}

// approvalClient is carol's MCP client: her bearer token, and an
// elicitation handler that shows URLs as well as forms.
func approvalClient(t *testing.T, endpoint, token, era string, manual bool, answer *mcptest.Answerer) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		ElicitationHandler: answer.Handle,
		Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
	}
	if manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "carol's agent", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var formToken = regexp.MustCompile(`name="token" value="([^"]*)"`)

// decideOnPage signs account in at link's page, with a browser's cookie
// jar of its own, and, if the page offers the form, sends decision from
// the page's origin. It returns the page's status and body (the page
// after the decision, or the one without a form).
func decideOnPage(t *testing.T, link, origin, account, decision string) (int, string) {
	t.Helper()
	c := approvetest.HTTPClient(t)
	approvetest.SignInHTTP(t, c, link, account)
	res, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := formToken.FindStringSubmatch(string(body))
	if m == nil {
		return res.StatusCode, string(body)
	}
	req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(url.Values{"token": {html.UnescapeString(m[1])}, "decision": {decision}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	if res, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(body)
}

// TestBinaryApproveOutOfBand runs the binary as docs/operating.md says to
// require out-of-band approval, against a real OpenID Connect provider
// (npm oidc-provider): carol's agent, with carol's bearer token, asks to
// delete a file; the approval request is posted to the webhook, with the
// link the client got; a retry is told to wait and the file stays; carol,
// signed in on the page, may not approve her own call; alice, of group
// ops, signed in on the page, approves; the retry deletes the file once,
// naming alice. In the older era the call is held until alice approves.
func TestBinaryApproveOutOfBand(t *testing.T) {
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	is := approvetest.StartIssuer(t, base+"/approve/callback", map[string][]string{"alice": {"ops"}, "carol": {"ops"}})
	hook := newWebhook(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const token = carolToken
	tokens, secret := carolFiles(t, dir)
	p := startBinary(t, []string{notifyEnv + "=" + hook.URL + "/services/secret-token"},
		"--root", root, "--http", "127.0.0.1:"+port, "--public-url", base, "--auth-tokens", tokens,
		"--approval", "out-of-band", "--approvers", "group:ops",
		"--approve-issuer", is.URL, "--approve-client-id", approvetest.ClientID, "--approve-client-secret-file", secret,
		"--approve-groups-claim", "groups", "--approve-scopes", "groups", "--allow-http-approve-issuer")

	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		t.Run(era, func(t *testing.T) {
			file := filepath.Join(root, "report-"+era+".txt")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": file}}
			var res *mcp.CallToolResult
			var err error
			if era == mcptest.EraMRTR {
				cs := approvalClient(t, p.url, token, era, true, mcptest.Accept())
				res, err = cs.CallTool(context.Background(), params)
				req, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
				if err != nil || !ok || req.Mode != "url" || !strings.HasPrefix(req.URL, base+"/approve/") {
					t.Fatalf("first round: want the approval page's link, got err=%v res=%s", err, mcptest.Describe(res))
				}
				link := req.URL
				wantNotified(t, hook.next(t), link, filepath.Base(file))
				retry := *params
				retry.RequestState, retry.InputResponses = res.RequestState, mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
				res, err = cs.CallTool(context.Background(), &retry)
				if w, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams); err != nil || !ok || !strings.Contains(w.Message, "Still waiting") {
					t.Fatalf("retry before the approval: want to be told to wait, got err=%v res=%s", err, mcptest.Describe(res))
				}
				wantFile(t, file, true)
				approveOnPage(t, link, base)
				retry.RequestState = res.RequestState
				res, err = cs.CallTool(context.Background(), &retry)
			} else {
				shown := make(chan struct{}, 1)
				answer := mcptest.Accept()
				answer.Before = func() { shown <- struct{}{} }
				cs := approvalClient(t, p.url, token, era, false, answer)
				done := make(chan struct{})
				go func() {
					defer close(done)
					res, err = cs.CallTool(context.Background(), params)
				}()
				select {
				case <-shown:
				case <-done:
					t.Fatalf("the call returned before the approval: err=%v res=%s", err, mcptest.Describe(res))
				}
				link := answer.URLs()[0]
				wantNotified(t, hook.next(t), link, filepath.Base(file))
				wantFile(t, file, true)
				approveOnPage(t, link, base)
				<-done
			}
			if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "Approved out of band by") || !strings.Contains(mcptest.Text(res), "sub:alice") {
				t.Fatalf("after the approval: want the deletion, approved by alice; got err=%v res=%s\n%s", err, mcptest.Describe(res), p.stderr)
			}
			wantFile(t, file, false)
		})
	}
	if strings.Contains(p.stderr.String(), "secret-token") || strings.Contains(p.stderr.String(), approvetest.ClientSecret) {
		t.Fatal("the log holds the webhook's URL or the client secret")
	}
}

// approveOnPage has carol refused on her own call's page, then alice
// approve it.
func approveOnPage(t *testing.T, link, origin string) {
	t.Helper()
	if code, body := decideOnPage(t, link, origin, "carol", "approve"); code != http.StatusForbidden || !strings.Contains(body, "Not yours to decide") {
		t.Fatalf("carol on her own call's page: %d %s, want 403 Not yours to decide", code, body)
	}
	if code, body := decideOnPage(t, link, origin, "alice", "approve"); code != http.StatusOK || !strings.Contains(body, "sub:alice") {
		t.Fatalf("alice's approval: %d %s", code, body)
	}
}

// wantNotified asserts a notification's text: the link the client got,
// and the question, naming the file.
func wantNotified(t *testing.T, text, link, name string) {
	t.Helper()
	if !strings.Contains(text, "<"+link+"|") || !strings.Contains(text, notify.Escape(name)) {
		t.Fatalf("notification %q: want the link %s and the file %s", text, link, name)
	}
}

func wantFile(t *testing.T, path string, exists bool) {
	t.Helper()
	_, err := os.Lstat(path)
	if exists != (err == nil) || !exists && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: exists %v (err %v), want %v", path, err == nil, err, exists)
	}
}

// TestBinaryApprovePasskeyEnrolment: with --approve-passkeys, the page the
// binary serves takes the enrolment links `mcp-confirm approvers add`
// prints from the same --key-file and --public-url; one printed from
// another key file is refused (the control).
func TestBinaryApprovePasskeyEnrolment(t *testing.T) {
	port := freePort(t)
	base := "http://localhost:" + port // a passkey's relying party is a domain, never an IP address
	dir := t.TempDir()
	keys, other := filepath.Join(dir, "keys"), filepath.Join(dir, "other-keys")
	for _, k := range []string{keys, other} {
		if code := run(context.Background(), []string{"keygen", k}, nil, io.Discard, io.Discard); code != 0 {
			t.Fatalf("keygen %s: exit %d", k, code)
		}
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	startBinary(t, nil, "--root", root, "--http", "127.0.0.1:"+port, "--public-url", base, "--key-file", keys,
		"--approval", "out-of-band", "--approvers", "passkey:alice", "--approve-passkeys", filepath.Join(dir, "passkeys"))
	for _, tc := range []struct {
		keys   string
		status int
		want   string
	}{
		{keys, http.StatusOK, "Create a passkey to approve requests as passkey:alice"},
		{other, http.StatusNotFound, "invalid or has expired"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"approvers", "add", "--key-file", tc.keys, "--public-url", base, "--not-a-caller", "alice"}, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("approvers add: exit %d: %s", code, stderr.String())
		}
		link := strings.TrimSpace(stdout.String())
		res, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Fatalf("enrolment link of %s: %d %s, want %d %q", filepath.Base(tc.keys), res.StatusCode, body, tc.status, tc.want)
		}
	}
}

// TestBinaryProxyApproveOutOfBand runs the built binary as a proxy in
// front of the built reference server (over stdio), its policy's
// [[approval]] table naming delete_file, with a real OpenID Connect
// provider: carol's agent is sent to the proxy's approval page; once
// alice approves there (the person at the agent's side says so by
// answering the link), the call is forwarded once, the upstream asks its
// own question, and the file is deleted, the result naming alice. Both
// eras.
func TestBinaryProxyApproveOutOfBand(t *testing.T) {
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	is := approvetest.StartIssuer(t, base+"/approve/callback", map[string][]string{"alice": {"ops"}, "carol": {"ops"}})
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const token = carolToken
	tokens, secret := carolFiles(t, dir)
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("name = \"reference\"\n[[approval]]\ntools = [\"delete_file\"]\nmode = \"out-of-band\"\napprovers = [\"group:ops\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := binary(t)
	p := startBinary(t, nil, "proxy", "--policy", policy, "--http", "127.0.0.1:"+port, "--public-url", base, "--auth-tokens", tokens,
		"--approve-issuer", is.URL, "--approve-client-id", approvetest.ClientID, "--approve-client-secret-file", secret,
		"--approve-groups-claim", "groups", "--approve-scopes", "groups", "--allow-http-approve-issuer",
		"--", bin, "--root", root)

	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		t.Run(era, func(t *testing.T) {
			file := filepath.Join(root, "report-"+era+".txt")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			links := make(chan string, 1)
			approved := make(chan struct{})
			var forms int
			// The person beside the agent: the page's link is answered
			// once alice has approved; the upstream's own question yes.
			handler := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if req.Params.Mode != "url" {
					forms++
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				}
				select {
				case links <- req.Params.URL:
				default:
				}
				select {
				case <-approved:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "carol's agent", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: handler,
				Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
			})
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			var res *mcp.CallToolResult
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": file}})
			}()
			var link string
			select {
			case link = <-links:
			case <-done:
				t.Fatalf("the call returned before the approval: err=%v res=%s\n%s", err, mcptest.Describe(res), p.stderr)
			}
			wantFile(t, file, true)
			approveOnPage(t, link, base)
			close(approved)
			<-done
			if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "sub:alice") {
				t.Fatalf("after the approval: want the deletion, approved by alice; got err=%v res=%s\n%s", err, mcptest.Describe(res), p.stderr)
			}
			if forms != 1 {
				t.Fatalf("the upstream's own question was asked %d times, want once", forms)
			}
			wantFile(t, file, false)
		})
	}
}

// TestApproveAcrossReplicas runs two replicas of the built binary, one
// key file and one Redis or PostgreSQL ledger, their approval pages
// behind one public URL (a reverse proxy, as a load balancer would be,
// sending the browser to replica B), with a real OpenID Connect
// provider: carol's call is asked on replica A; her retry through B
// before the approval is told to wait; alice approves on B's page (carol
// herself is refused there); the retry through B deletes the file once,
// naming alice; the same state through A gets that result, marked as the
// earlier execution's, and nothing runs again.
func TestApproveAcrossReplicas(t *testing.T) {
	for _, st := range []struct{ kind, env string }{{"redis", "MCP_CONFIRM_REDIS_URL"}, {"postgres", "MCP_CONFIRM_POSTGRES_URL"}} {
		t.Run(st.kind, func(t *testing.T) {
			ledgerURL := os.Getenv(st.env)
			if ledgerURL == "" {
				t.Skipf("set %s to run against a real %s", st.env, st.kind)
			}
			var target atomic.Pointer[url.URL]
			lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target.Load())
				r.Out.Host = r.In.Host
			}})
			t.Cleanup(lb.Close)
			base := lb.URL
			is := approvetest.StartIssuer(t, base+"/approve/callback", map[string][]string{"alice": {"ops"}, "carol": {"ops"}})
			dir := t.TempDir()
			root, keys := filepath.Join(dir, "root"), filepath.Join(dir, "keys")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			if code := run(context.Background(), []string{"keygen", keys}, nil, io.Discard, io.Discard); code != 0 {
				t.Fatalf("keygen: exit %d", code)
			}
			const token = carolToken
			tokens, secret := carolFiles(t, dir)
			args := []string{"--root", root, "--key-file", keys, "--name", fmt.Sprintf("replicas-%d", time.Now().UnixNano()),
				"--public-url", base, "--auth-tokens", tokens, "--approval", "out-of-band", "--approvers", "group:ops",
				"--approve-issuer", is.URL, "--approve-client-id", approvetest.ClientID, "--approve-client-secret-file", secret,
				"--approve-groups-claim", "groups", "--approve-scopes", "groups", "--allow-http-approve-issuer", "--http", "127.0.0.1:0"}
			env := []string{"MCP_CONFIRM_LEDGER=" + ledgerURL}
			a, b := startBinary(t, env, args...), startBinary(t, env, args...)
			bu, err := url.Parse(b.url)
			if err != nil {
				t.Fatal(err)
			}
			target.Store(bu)

			file := filepath.Join(root, "report.txt")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": file}}
			onA := approvalClient(t, a.url, token, mcptest.EraMRTR, true, mcptest.Accept())
			onB := approvalClient(t, b.url, token, mcptest.EraMRTR, true, mcptest.Accept())
			res, err := onA.CallTool(context.Background(), params)
			req, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
			if err != nil || !ok || !strings.HasPrefix(req.URL, base+"/approve/") {
				t.Fatalf("asked on A: want the approval page's link, got err=%v res=%s", err, mcptest.Describe(res))
			}
			retry := *params
			retry.RequestState, retry.InputResponses = res.RequestState, mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
			res, err = onB.CallTool(context.Background(), &retry)
			if w, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams); err != nil || !ok || !strings.Contains(w.Message, "Still waiting") {
				t.Fatalf("retry through B before the approval: want to be told to wait, got err=%v res=%s", err, mcptest.Describe(res))
			}
			wantFile(t, file, true)
			approveOnPage(t, req.URL, base)
			retry.RequestState = res.RequestState
			res, err = onB.CallTool(context.Background(), &retry)
			if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "sub:alice") || !strings.Contains(mcptest.Text(res), "Deleted") {
				t.Fatalf("retry through B after the approval: want the deletion, approved by alice; got err=%v res=%s\nA:\n%s\nB:\n%s", err, mcptest.Describe(res), a.stderr, b.stderr)
			}
			wantFile(t, file, false)
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil { // a second deletion would show
				t.Fatal(err)
			}
			res, err = onA.CallTool(context.Background(), &retry)
			if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "result of that earlier execution") {
				t.Fatalf("the same state through A: want the recorded result, got err=%v res=%s", err, mcptest.Describe(res))
			}
			wantFile(t, file, true)
		})
	}
}

// carolToken is the bearer token carol's MCP calls carry in the
// out-of-band approval tests.
const carolToken = "carol-token-0123456789abcdef"

// carolFiles writes, into dir, a token file naming carolToken's holder
// carol (its SHA-256, as --auth-tokens reads it) and the approval page's
// OIDC client secret, and returns their paths.
func carolFiles(t *testing.T, dir string) (tokens, secret string) {
	t.Helper()
	sum := sha256.Sum256([]byte(carolToken))
	tokens, secret = filepath.Join(dir, "tokens"), filepath.Join(dir, "client-secret")
	if err := os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" carol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte(approvetest.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tokens, secret
}
