package server_test

// Attacks by other HTTP callers who hold valid tokens of their own.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// bearerServer serves e over HTTP behind the server's own authentication
// (package bearer), with a token file of users: token → principal.
func bearerServer(t *testing.T, e *env, users map[string]string) *httptest.Server {
	t.Helper()
	var lines strings.Builder
	for token, user := range users {
		lines.WriteString(bearer.Line(token, user) + "\n")
	}
	tokens, err := bearer.ParseTokens(strings.NewReader(lines.String()))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := bearer.Middleware(bearer.Options{Verify: tokens.Verify})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mw(e.srv.Handler()))
	t.Cleanup(hs.Close)
	return hs
}

// bearerSession connects a real go-sdk client to url with token, answering
// questions by hand (MRTR) so that they stay pending until answered.
func bearerSession(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: mcptest.HeaderTransport{Header: http.Header{"Authorization": {"Bearer " + token}}, Next: http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: accept().Handle,
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Layer: ledger (per-principal cap). Mallory, who holds a valid token,
// asks question after question and never answers, to lock everyone else
// out until they expire. She fills her own cap and is refused; Alice still
// gets her question, and her approval deletes her file. On every store the
// binary can use, with its default caps.
func TestAttackCapExhaustion(t *testing.T) {
	stores := map[string]string{"memory": "memory:"}
	for kind, url := range sharedStores(t) {
		stores[kind] = url
	}
	for kind, url := range stores {
		t.Run(kind, func(t *testing.T) {
			if kind != "memory" {
				url = storeURL(t, kind, url)
			}
			root := t.TempDir()
			e := replica(t, url, uniqueName(t), root)
			e.root = root
			hs := bearerServer(t, e, map[string]string{"mallory-token": "mallory", "alice-token": "alice"})
			mallory := bearerSession(t, hs.URL, "mallory-token")

			const perPrincipal = ledger.DefaultMaxPendingPerPrincipal
			var bait []string
			for i := range perPrincipal {
				f := e.file(fmt.Sprintf("bait-%d.txt", i), "x")
				ask(t, mallory, f)
				bait = append(bait, f)
			}
			res, err := call(mallory, e.file("one-more.txt", "x"))
			wantToolRefusal(t, res, err, "Too many confirmations are waiting")
			if n := e.count(ledger.ActionIssue, ledger.ResultFull); n != 1 {
				t.Fatalf("ledger refused %d issues as full, want 1 (the refusal must come from the ledger's cap)", n)
			}

			alice := bearerSession(t, hs.URL, "alice-token")
			f := e.file("alice.txt", "a")
			state := ask(t, alice, f)
			res, err = retry(alice, f, state, yes())
			wantDeleted(t, res, err, f)
			wantExists(t, bait...)
			if n := e.issued(); n != perPrincipal+1 {
				t.Fatalf("ledger issued %d, want Mallory's %d and Alice's one", n, perPrincipal)
			}
		})
	}
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// removeBinary removes what binary built, when the tests are done.
func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// binary builds the mcp-confirm binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "mcp-confirm-server-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "mcp-confirm")
		if out, err := exec.Command("go", "build", "-o", binPath, "github.com/mcp-confirm/mcp-confirm/cmd/mcp-confirm").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var servingAddr = regexp.MustCompile(`addr=(http://\S+)`)

// serveBinary runs the built binary with args and --http 127.0.0.1:0, and
// returns the URL it serves and its stderr.
func serveBinary(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd := exec.Command(binary(t), append(args, "--http", "127.0.0.1:0")...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := servingAddr.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stderr
		}
	}
	t.Fatalf("the binary logged no address:\n%s", stderr.String())
	return "", nil
}

// Layer: boundary (principal). Alice's approval replayed by Bob: two users
// with tokens of their own (--auth-tokens), on the built binary over HTTP.
// Bob's replay is refused with the boundary's one error, the binary's log
// says the principal differed, the file stays; Alice's own answer deletes
// it.
func TestAttackPrincipalMismatch(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "a.txt")
	if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliceToken, bobToken := bearer.NewToken(), bearer.NewToken()
	tokens := filepath.Join(t.TempDir(), "tokens")
	lines := bearer.Line(aliceToken, "alice") + "\n" + bearer.Line(bobToken, "bob") + "\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	url, stderr := serveBinary(t, "--root", root, "--auth-tokens", tokens)
	alice, bob := bearerSession(t, url, aliceToken), bearerSession(t, url, bobToken)
	state := ask(t, alice, f)

	res, err := retry(bob, f, state, yes())
	wantBoundaryRefusal(t, res, err)
	wantExists(t, f)
	// The log reaches us through a pipe: give it a moment.
	const why = `reason="requeststate: token bound to a different request: principal"`
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr.String(), why) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), why) {
		t.Fatalf("the binary's log does not say the principal differed:\n%s", stderr.String())
	}

	res, err = retry(alice, f, state, yes())
	wantDeleted(t, res, err, f)
}
