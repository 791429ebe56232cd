package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// linkOpener is an MCP client's elicitation handler that hands each URL
// elicitation's link to the test (which opens it in Chromium) and
// answers what the test says once it is done there. The handler runs on
// the client's goroutines; the test drives Chromium on its own.
type linkOpener struct {
	asked   chan *mcp.ElicitParams
	answers chan string
	stop    chan struct{} // closed when the test ends: every dialog fails
}

func newLinkOpener() *linkOpener {
	return &linkOpener{asked: make(chan *mcp.ElicitParams, 1), answers: make(chan string, 1), stop: make(chan struct{})}
}

func (o *linkOpener) handle(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req.Params.Mode != "url" {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	select {
	case o.asked <- req.Params:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-o.stop:
		return nil, errors.New("the test ended")
	}
	select {
	case a := <-o.answers:
		return &mcp.ElicitResult{Action: a}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-o.stop:
		return nil, errors.New("the test ended")
	}
}

// stateRecorder is a client's HTTP transport that sends its bearer
// token and keeps the requestState of the last tools/call it sent: the
// retry that acted, for the test to replay.
type stateRecorder struct {
	token string
	mu    sync.Mutex
	state string
}

func (s *stateRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.token)
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		var m struct {
			Method string
			Params struct {
				RequestState string `json:"requestState"`
			}
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "tools/call" {
			s.mu.Lock()
			s.state = m.Params.RequestState
			s.mu.Unlock()
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (s *stateRecorder) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// virtualAuthenticator gives the Chromium tab ctx a virtual platform
// authenticator (CDP's WebAuthn domain): resident keys, user
// verification that succeeds, presence without a touch.
func virtualAuthenticator(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}}); err != nil {
		t.Fatal(err)
	}
}

// enrolInChromium has `mcp-confirm approvers add` print an enrolment
// link for name's passkey, held by principal, and creates the passkey in
// the tab ctx.
func enrolInChromium(t *testing.T, ctx context.Context, keys, base, principal, name string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"approvers", "add", "--key-file", keys, "--public-url", base, "--principal", principal, name}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("approvers add: exit %d: %s", code, stderr.String())
	}
	approvetest.Do(t, ctx, chromedp.Navigate(strings.TrimSpace(stdout.String())), chromedp.Click(chromedp.ID("passkey")))
	if got := pageStatus(t, ctx); !strings.HasPrefix(got, "Passkey created") {
		t.Fatalf("enrolment of %s: %q", name, got)
	}
}

// pageStatus waits for the passkey ceremony's outcome on the page.
func pageStatus(t *testing.T, ctx context.Context) string {
	t.Helper()
	return approvetest.Get(t, ctx, chromedp.Poll[string](`(() => {
  const s = document.getElementById("passkey-status");
  const text = s ? s.textContent : "";
  return text && !text.startsWith("Waiting") ? text : null;
})()`, chromedp.WithPollingTimeout(30*time.Second)))
}

// signedInMessage waits for the page the passkey sign-in leads to (the
// sign-in page's button gone), and returns its message.
func signedInMessage(t *testing.T, ctx context.Context) string {
	t.Helper()
	approvetest.Do(t, ctx, chromedp.WaitNotPresent(chromedp.ID("passkey")), chromedp.WaitVisible(chromedp.CSS("#message, #question")))
	return approvetest.Get(t, ctx, chromedp.Evaluate[string](`(document.getElementById("message") || {textContent: "(the request is shown)"}).textContent`))
}

// signOut forgets every cookie of the browser of the tab ctx (the
// page's session, the issuer's).
func signOut(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// onPage is a page's text as Chromium renders it: the question less
// its isolate characters, which the page turns into <bdi> elements.
func onPage(q string) string {
	return strings.NewReplacer("\u2066", "", "\u2067", "", "\u2068", "", "\u2069", "").Replace(q)
}

// TestBinaryApproveInChromium is out-of-band approval end to end, as it
// is lived: the built binary (boundary, ledger, page, OpenID Connect and
// passkey sign-in, as docs/operating.md runs it); carol's real go-sdk
// client over streamable HTTP, with her bearer token, in both eras,
// asks to delete a file whose name hides a zero-width space; its
// elicitation handler gets the URL elicitation and hands the link to a
// real headless Chromium. There the approver signs in -- alice at a real
// OpenID Connect provider (npm oidc-provider, authorization code with
// PKCE), or dave with a passkey of Chromium's virtual authenticator,
// enrolled through the link `mcp-confirm approvers add --principal`
// printed -- and the question read from the rendered page is the
// sanitized question the client was shown and that package prompt
// writes for that file; carol's own passkey, enrolled for her principal
// and listed, is refused on her call. The approver approves; the
// handler answers; the client's retry (2026-07-28) or the held call
// (2025-11-25) gets the deletion, naming the approver. The file is
// deleted once: a file of the same name made afterwards survives a
// replay of the retry that acted (answered with the recorded outcome)
// and a new call for it, whose link opens a request of its own that,
// unapproved, deletes nothing; the page of the link the approver used
// says it ran, and offers no form.
func TestBinaryApproveInChromium(t *testing.T) {
	port := freePort(t)
	base := "http://localhost:" + port // a passkey's relying party is a domain, never an IP address
	is := approvetest.StartIssuer(t, base+"/approve/callback", map[string][]string{"alice": {"ops"}, "carol": {"ops"}})
	alice := approvetest.Browser(t)
	dave := approvetest.Browser(t)
	virtualAuthenticator(t, dave)
	carol := approvetest.Browser(t)
	virtualAuthenticator(t, carol)

	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	shownRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if code := run(context.Background(), []string{"keygen", keys}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatalf("keygen: exit %d", code)
	}
	const token = carolToken
	tokens, secret := carolFiles(t, dir)
	p := startBinary(t, nil,
		"--root", root, "--http", "127.0.0.1:"+port, "--public-url", base, "--key-file", keys, "--auth-tokens", tokens,
		"--approval", "out-of-band", "--approvers", "group:ops,passkey:dave-phone,passkey:carol-phone",
		"--approve-issuer", is.URL, "--approve-client-id", approvetest.ClientID, "--approve-client-secret-file", secret,
		"--approve-groups-claim", "groups", "--approve-scopes", "groups", "--allow-http-approve-issuer",
		"--approve-passkeys", filepath.Join(dir, "passkeys"))
	enrolInChromium(t, dave, keys, base, "dave", "dave-phone")
	enrolInChromium(t, carol, keys, base, "carol", "carol-phone")

	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		for _, signIn := range []string{"oidc", "passkey"} {
			t.Run(era+"/"+signIn, func(t *testing.T) {
				name := fmt.Sprintf("q3\u200B-report-%s-%s.txt", era, signIn)
				file := filepath.Join(root, name)
				if err := os.WriteFile(file, []byte("twelve bytes"), 0o644); err != nil {
					t.Fatal(err)
				}
				shown := filepath.Join(shownRoot, name)
				want := fmt.Sprintf("Delete the file %s (12 bytes)? This cannot be undone.", prompt.Path(shown, prompt.Options{}))
				for _, w := range prompt.PathWarnings(shown) {
					want += " Note: the name " + strings.TrimPrefix(string(w), "it ") + "."
				}
				if !strings.Contains(want, `\u{200B}`) {
					t.Fatalf("the expected question %q does not show the hidden character", want)
				}

				opener := newLinkOpener()
				rec := &stateRecorder{token: token}
				client := mcp.NewClient(&mcp.Implementation{Name: "carol's agent", Version: "1"}, &mcp.ClientOptions{
					ElicitationHandler: opener.handle,
					Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
				})
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: rec}},
					&mcp.ClientSessionOptions{ProtocolVersion: era})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				// At the end, even on a failure: the dialogs, then the calls, end
				// before the session closes.
				defer cs.Close()
				defer cancel()
				defer close(opener.stop)
				params := &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": file}}
				type outcome struct {
					done chan struct{}
					res  *mcp.CallToolResult
					err  error
				}
				call := func() *outcome {
					o := &outcome{done: make(chan struct{})}
					go func() {
						defer close(o.done)
						o.res, o.err = cs.CallTool(ctx, params)
					}()
					return o
				}
				asked := func(done chan struct{}) *mcp.ElicitParams {
					select {
					case a := <-opener.asked:
						return a
					case <-done:
						t.Fatal("the call ended without a URL elicitation")
					case <-ctx.Done():
						t.Fatal("no URL elicitation within the deadline")
					}
					return nil
				}

				o := call()
				req := asked(o.done)
				if !strings.HasPrefix(req.URL, base+"/approve/") {
					t.Fatalf("the URL elicitation's link %q is not the approval page's", req.URL)
				}
				_, question, ok := strings.Cut(req.Message, "\n\n")
				if !ok || question != want {
					t.Fatalf("the client was shown %q, want the sanitized question %q", req.Message, want)
				}
				wantFile(t, file, true)

				var browser context.Context
				var approver string
				switch signIn {
				case "oidc":
					browser, approver = alice, "sub:alice"
					signOut(t, alice)
					approvetest.SignInBrowser(t, alice, req.URL, "alice")
				case "passkey":
					// Carol's own passkey, enrolled for her principal and
					// listed: refused on her call, shown nothing of it.
					signOut(t, carol)
					approvetest.Do(t, carol, chromedp.Navigate(req.URL), chromedp.Click(chromedp.ID("passkey")))
					if got := signedInMessage(t, carol); got != "You asked for this call: another approver must decide it." {
						t.Fatalf("carol signed in with her own passkey on her call's page is told %q", got)
					}
					if got := approvetest.Get(t, carol, chromedp.Evaluate[bool](`document.getElementById("question") !== null || document.getElementById("approve") !== null`)); got {
						t.Fatal("carol signed in with her own passkey is shown the question or the form")
					}
					browser, approver = dave, "sub:dave"
					signOut(t, dave)
					approvetest.Do(t, dave, chromedp.Navigate(req.URL), chromedp.Click(chromedp.ID("passkey")), chromedp.WaitVisible(chromedp.ID("question")))
				}
				if got := approvetest.Get(t, browser, chromedp.Evaluate[string](`document.getElementById("question").innerText`)); got != onPage(want) {
					t.Fatalf("the page shows the question as %q, want %q", got, onPage(want))
				}
				if got := approvetest.Get(t, browser, chromedp.Text(chromedp.ID("who"))); got != "«"+approver+"»" {
					t.Fatalf("signed in as %q, want «%s»", got, approver)
				}
				wantFile(t, file, true)
				approvetest.Do(t, browser, chromedp.Click(chromedp.ID("approve")), chromedp.WaitNotPresent(chromedp.ID("approve")))
				opener.answers <- "accept"
				<-o.done
				if o.err != nil || o.res.IsError || !strings.Contains(mcptest.Text(o.res), "Approved out of band by "+prompt.Value(approver, prompt.Options{})) {
					t.Fatalf("after the approval: want the deletion, approved by %s; got err=%v res=%s\n%s", approver, o.err, mcptest.Describe(o.res), p.stderr)
				}
				wantFile(t, file, false)
				first := mcptest.Text(o.res)

				// Once: a file of the same name, made afterwards.
				if err := os.WriteFile(file, []byte("a new file!!"), 0o644); err != nil {
					t.Fatal(err)
				}
				if era == mcptest.EraMRTR {
					state := rec.last()
					replay, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: params.Arguments, RequestState: state,
						InputResponses: mcp.InputResponseMap{confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}})
					if err != nil || !strings.Contains(mcptest.Text(replay), "this is the result of that earlier execution") || !strings.Contains(mcptest.Text(replay), first) {
						t.Fatalf("a replay of the retry that acted: want the recorded outcome %q; got err=%v res=%s", first, err, mcptest.Describe(replay))
					}
					wantFile(t, file, true)
				}
				o = call()
				again := asked(o.done)
				if again.URL == req.URL {
					t.Fatalf("a new call got the approved request's link %s", again.URL)
				}
				opener.answers <- "decline"
				<-o.done
				if o.err == nil && !o.res.IsError && strings.Contains(mcptest.Text(o.res), "Deleted") {
					t.Fatalf("a new call, unapproved, deleted: %s", mcptest.Describe(o.res))
				}
				wantFile(t, file, true)

				approvetest.Do(t, browser, chromedp.Navigate(req.URL), chromedp.WaitVisible(chromedp.ID("outcome")))
				if got := approvetest.Get(t, browser, chromedp.Text(chromedp.ID("outcome"))); got != "Approved: it ran." {
					t.Errorf("the approved request's page says %q, want %q", got, "Approved: it ran.")
				}
				if got := approvetest.Get(t, browser, chromedp.Evaluate[bool](`document.getElementById("approve") !== null`)); got {
					t.Error("the approved request's page still offers the form")
				}
			})
		}
	}
}
