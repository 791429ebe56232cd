// Package approvetest runs the real parts the approval page's tests need:
// an OpenID Connect provider (npm oidc-provider, at the version pinned in
// .ci/clients/package.json, found through MCP_CONFIRM_NODE_MODULES) and a
// headless Chromium (Debian's chromium, driven by chromedp), and signs an
// approver in through either, or through a Go HTTP client.
//
// Without MCP_CONFIRM_NODE_MODULES, or without chromium on PATH, the
// tests that need them skip (and CI, which provides both, fails on a
// skip).
package approvetest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer/bearertest"
)

// ArtifactsEnv names the variable of a directory to which screenshots are
// copied (CI keeps them); without it they stay in the test's temp dir.
const ArtifactsEnv = "MCP_CONFIRM_ARTIFACTS"

// Client is the page's client at the test issuer.
const (
	ClientID     = "mcp-confirm-approve"
	ClientSecret = "test-client-secret-not-a-secret"
)

// An Issuer is a running OpenID Connect provider.
type Issuer struct {
	URL string // its issuer identifier, http://localhost:PORT
	in  io.WriteCloser
	cmd *exec.Cmd
}

// StartIssuer starts an OpenID Connect provider whose one client
// (ClientID, ClientSecret) redirects to redirect, with accounts (each
// with its groups), which stops when t ends; or skips t when
// MCP_CONFIRM_NODE_MODULES is not set.
func StartIssuer(t testing.TB, redirect string, accounts map[string][]string) *Issuer {
	t.Helper()
	node, modules := bearertest.Node(t)
	if _, err := os.Stat(filepath.Join(modules, "oidc-provider")); err != nil {
		t.Fatalf("%s holds no oidc-provider (npm ci in .ci/clients): %v", bearertest.NodeModulesEnv, err)
	}
	cfg, err := json.Marshal(map[string]any{"client_id": ClientID, "client_secret": ClientSecret,
		"redirect_uri": redirect, "accounts": accounts})
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command(node, filepath.Join(filepath.Dir(file), "testdata", "issuer.mjs"))
	cmd.Env = append(os.Environ(), bearertest.NodeModulesEnv+"="+modules, "MCP_CONFIRM_ISSUER_CONFIG="+string(cfg))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	is := &Issuer{in: in, cmd: cmd}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		var hello struct{ Issuer string }
		if !ok || json.Unmarshal([]byte(l), &hello) != nil || hello.Issuer == "" {
			t.Fatalf("issuer did not start: %q; stderr: %s", l, stderr.String())
		}
		is.URL = hello.Issuer
	case <-time.After(60 * time.Second):
		t.Fatalf("issuer: no answer in 60 s; stderr: %s", stderr.String())
	}
	return is
}

// HTTPClient returns a client with a cookie jar of its own, as a browser
// of its own would have, that does not follow redirects out of the
// loopback hosts.
func HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// SignInHTTP signs account in at the page of link, with client: the
// page's sign-in, the issuer's login form, consent, and back. It returns
// the body of the page it ends on (the page's "Signed in" page).
func SignInHTTP(t testing.TB, client *http.Client, link, account string) string {
	t.Helper()
	res, err := client.Get(link + "/signin")
	if err != nil {
		t.Fatalf("sign-in: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	login := res.Request.URL
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(login.Path, "/interaction/") {
		t.Fatalf("sign-in: ended at %s with %s, want the issuer's login form", login, res.Status)
	}
	res, err = client.PostForm(login.String()+"/login", url.Values{"login": {account}})
	if err != nil {
		t.Fatalf("sign-in: login: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "Signed in") {
		t.Fatalf("sign-in as %s: ended at %s with %s: %s", account, res.Request.URL, res.Status, body)
	}
	return string(body)
}

// Browser starts a headless Chromium (Debian's chromium, as root without
// its sandbox, an empty profile, no background networking) and returns
// the context of its first tab, which ends when t ends; or skips t when
// chromium is not on PATH.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH (Debian package chromium; .ci/run installs it)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1000, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium did not start: %v", err)
	}
	return ctx
}

// Do runs steps in the browser tab ctx, within a minute, and fails t on
// an error, saying where the tab was.
func Do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("chromium at %s: %v", loc, err)
	}
}

// Get runs action in the browser tab ctx, within a minute, and returns
// its value; it fails t on an error.
func Get[T any](t testing.TB, ctx context.Context, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("chromium at %s: %v", loc, err)
	}
	return v
}

// SignInBrowser signs account in from the page of link, in the browser
// tab ctx: it opens the link, follows its sign-in link to the issuer's
// login form, signs in, and waits until the page shows the request.
func SignInBrowser(t testing.TB, ctx context.Context, link, account string) {
	t.Helper()
	Do(t, ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("signin")),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("login"), account),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("question")),
	)
}

// Screenshot saves the tab's page as NAME.png in dir (a temp dir of t)
// and, when MCP_CONFIRM_ARTIFACTS is set, copies it there, and returns
// its path. Never into the source tree.
func Screenshot(t testing.TB, ctx context.Context, dir, name string) string {
	t.Helper()
	png := Get(t, ctx, chromedp.FullScreenshot(100))
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if art := os.Getenv(ArtifactsEnv); art != "" {
		if err := os.MkdirAll(art, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(art, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s", path)
	return path
}

// A Frame is a frame of a page that Chromium runs in a process of its
// own (a frame of another site than its parent's), as its document is.
type Frame struct {
	URL  string // the URL the frame was asked to show
	Doc  string // its document's URL: chrome-error://chromewebdata/ when Chromium refused to render the page
	Text string // its document's text
}

// Frames returns the out-of-process frames of the browser of the tab
// ctx, once their documents stay put (a frame whose page was refused
// navigates to the error page, detaching the target first seen).
func Frames(t testing.TB, ctx context.Context) []Frame {
	t.Helper()
	var last error
	for range 20 {
		frames, err := frames(ctx)
		if err == nil {
			return frames
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("frames: %v", last)
	return nil
}

func frames(ctx context.Context) ([]Frame, error) {
	targets, err := chromedp.Targets(ctx)
	if err != nil {
		return nil, err
	}
	var frames []Frame
	for _, tg := range targets {
		if tg.Type != "iframe" {
			continue
		}
		fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tg.TargetID), chromedp.WithDetachOnCancel())
		tctx, cancelT := context.WithTimeout(fctx, 10*time.Second)
		doc, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[document.URL, document.body ? document.body.innerText : ""]`))
		cancelT()
		cancel()
		if err != nil {
			return nil, err
		}
		frames = append(frames, Frame{URL: tg.URL, Doc: doc[0], Text: doc[1]})
	}
	return frames, nil
}
