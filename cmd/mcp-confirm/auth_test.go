package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
	"github.com/mcp-confirm/mcp-confirm/internal/bearer/bearertest"
)

// TestAuthFlags: what the authentication flags refuse, before anything is
// served.
func TestAuthFlags(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(bearer.Line(bearer.NewToken(), "alice")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"auth on stdio", []string{"--auth-tokens", tokens}, 2, "--auth-tokens applies to --http only"},
		{"no auth on stdio", []string{"--insecure-no-auth"}, 2, "--insecure-no-auth applies to --http only"},
		{"no auth on every interface", []string{"--http", "0.0.0.0:0", "--insecure-no-auth"}, 2, "--insecure-no-auth refused on --http 0.0.0.0:0"},
		{"no auth on every interface, v6", []string{"--http", "[::]:0", "--insecure-no-auth"}, 2, "refused"},
		{"no auth on an empty host", []string{"--http", ":0", "--insecure-no-auth"}, 2, "refused"},
		{"no auth on a named host", []string{"--http", "example.com:0", "--insecure-no-auth"}, 2, "refused"},
		{"no auth and tokens", []string{"--http", "127.0.0.1:0", "--insecure-no-auth", "--auth-tokens", tokens}, 2, "choose one"},
		{"issuer and tokens", []string{"--http", "127.0.0.1:0", "--auth-issuer", "https://auth.example.com", "--public-url", "https://mcp.example.com", "--auth-tokens", tokens}, 2, "choose one"},
		{"issuer without public URL", []string{"--http", "127.0.0.1:0", "--auth-issuer", "https://auth.example.com"}, 2, "--auth-issuer needs --public-url"},
		{"public URL in the clear", []string{"--http", "127.0.0.1:0", "--auth-issuer", "https://auth.example.com", "--public-url", "http://mcp.example.com"}, 2, "want https"},
		{"public URL not a URL", []string{"--http", "127.0.0.1:0", "--public-url", "mcp.example.com"}, 2, "--public-url"},
		{"scopes without issuer", []string{"--http", "127.0.0.1:0", "--auth-scopes", "mcp:tools"}, 2, "apply to --auth-issuer"},
		{"claim without issuer", []string{"--http", "127.0.0.1:0", "--auth-principal-claim", "email"}, 2, "apply to --auth-issuer"},
		{"token dir with tokens", []string{"--http", "127.0.0.1:0", "--auth-tokens", tokens, "--auth-token-dir", t.TempDir()}, 2, "--auth-token-dir applies"},
		{"token file others can read", []string{"--http", "127.0.0.1:0", "--auth-tokens", tokens}, 1, "others can read or write it"},
		{"issuer in the clear", []string{"--http", "127.0.0.1:0", "--auth-issuer", "http://auth.example.com", "--public-url", "https://mcp.example.com"}, 1, "want https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), io.Discard, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, want %d with %q; stderr:\n%s", code, tt.code, tt.want, stderr.String())
			}
		})
	}
}

// connect connects a go-sdk client that sends token (if any) to url.
func connect(t *testing.T, url, token, era string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
	})
	hc := &http.Client{Transport: bearerTransport{token}}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// deleteConfirmed has cs delete a new file in root, the question answered
// yes, and checks it is gone.
func deleteConfirmed(t *testing.T, cs *mcp.ClientSession, root string) {
	t.Helper()
	f := filepath.Join(root, "a.txt")
	if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f}})
	if err != nil || res.IsError {
		t.Fatalf("delete_file: %v %+v", err, res)
	}
	if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s not deleted: %v", f, err)
	}
}

// challenge posts an initialize with token and returns the status and the
// WWW-Authenticate header.
func challenge(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get("WWW-Authenticate")
}

var tokenFileLine = regexp.MustCompile(`written to\n\s+(\S+)`)

// generatedToken returns the token file the binary p named on stderr and
// the token in it.
func generatedToken(t *testing.T, p *proc) (path, token string) {
	t.Helper()
	m := tokenFileLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no token file named on stderr:\n%s", p.stderr.String())
	}
	b, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return m[1], strings.TrimSpace(string(b))
}

// TestBinaryHTTPRequiresGeneratedToken: with --http and no auth flag, the
// binary makes a token, writes it to a file only its user can read, says
// where on stderr (never the token itself), and refuses every request
// without it; a real client with it completes a confirmed delete in both
// eras; the file is removed when the server stops.
func TestBinaryHTTPRequiresGeneratedToken(t *testing.T) {
	runtimeDir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	p := startBinary(t, []string{"XDG_RUNTIME_DIR=" + runtimeDir}, "--root", root, "--http", "127.0.0.1:0")
	m := tokenFileLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no token file named on stderr:\n%s", p.stderr.String())
	}
	path := m[1]
	if filepath.Dir(path) != filepath.Join(runtimeDir, "mcp-confirm") {
		t.Fatalf("token file %s, want it in $XDG_RUNTIME_DIR/mcp-confirm", path)
	}
	for f, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v %v, want mode %#o", f, fi.Mode(), err, want)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if strings.Contains(p.stderr.String(), token) {
		t.Fatal("the token itself was printed on stderr")
	}

	code, wa := challenge(t, p.url, "")
	if code != http.StatusUnauthorized || wa != `Bearer resource_metadata="`+p.url+bearer.MetadataPath+`"` {
		t.Fatalf("no token: %d %q", code, wa)
	}
	if code, wa := challenge(t, p.url, token+"x"); code != http.StatusUnauthorized || !strings.Contains(wa, `error="invalid_token"`) {
		t.Fatalf("wrong token: %d %q", code, wa)
	}
	if _, err := connect(t, p.url, "", "2025-11-25"); err == nil {
		t.Fatal("a client without the token connected")
	}
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		cs, err := connect(t, p.url, token, era)
		if err != nil {
			t.Fatalf("%s: connect with the token: %v", era, err)
		}
		deleteConfirmed(t, cs, root)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token file left after the server stopped: %v", err)
	}
}

// TestBinaryRefusesNoAuthOffLoopback: serving without authentication on an
// address others can reach is refused before anything listens; the same
// address without any auth flag is served, behind the generated token.
func TestBinaryRefusesNoAuthOffLoopback(t *testing.T) {
	out, err := exec.Command(binary(t), "--http", "0.0.0.0:0", "--insecure-no-auth").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--insecure-no-auth refused") {
		t.Fatalf("--http 0.0.0.0:0 --insecure-no-auth: %v\n%s", err, out)
	}
	runtimeDir := filepath.Join(t.TempDir(), "run")
	p := startBinary(t, []string{"XDG_RUNTIME_DIR=" + runtimeDir}, "--http", "0.0.0.0:0")
	url := strings.Replace(p.url, "0.0.0.0", "127.0.0.1", 1)
	if code, _ := challenge(t, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("--http 0.0.0.0:0 without a token: %d, want 401", code)
	}
}

// TestBinaryBehindIdentityProvider runs the binary as docs/operating.md says to
// put it behind an identity provider, against a real one
// (oauth2-mock-server): alice's access token completes a confirmed delete;
// a token issued for another resource is refused (401 invalid_token), one
// without the required scope too (403 insufficient_scope); the metadata
// names the issuer.
func TestBinaryBehindIdentityProvider(t *testing.T) {
	as := bearertest.Start(t)
	const public = "https://mcp.example.com/mcp"
	root := t.TempDir()
	p := startBinary(t, nil, "--root", root, "--http", "127.0.0.1:0",
		"--auth-issuer", as.Issuer, "--public-url", public, "--auth-scopes", "mcp:tools")

	cs, err := connect(t, p.url, as.Token(t, "alice", "mcp:tools", public), "2026-07-28")
	if err != nil {
		t.Fatalf("alice's token: %v\n%s", err, p.stderr.String())
	}
	deleteConfirmed(t, cs, root)

	const meta = `resource_metadata="https://mcp.example.com` + bearer.MetadataPath + `/mcp"`
	for _, tt := range []struct {
		name, token string
		code        int
		challenge   string
	}{
		{"no token", "", 401, `Bearer ` + meta + `, scope="mcp:tools"`},
		{"another resource's token", as.Token(t, "alice", "mcp:tools", "https://other.example.com/mcp"), 401, `Bearer ` + meta + `, scope="mcp:tools", error="invalid_token"`},
		{"without the scope", as.Token(t, "alice", "openid", public), 403, `Bearer ` + meta + `, scope="mcp:tools", error="insufficient_scope"`},
	} {
		if code, wa := challenge(t, p.url, tt.token); code != tt.code || wa != tt.challenge {
			t.Errorf("%s: %d %q, want %d %q", tt.name, code, wa, tt.code, tt.challenge)
		}
	}

	res, err := http.Get(p.url + bearer.MetadataPath + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || m.Resource != public || len(m.Servers) != 1 || m.Servers[0] != as.Issuer {
		t.Fatalf("metadata: %+v, %v", m, err)
	}
}
