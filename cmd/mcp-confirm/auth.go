package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
)

// authFlags are the HTTP front door's authentication, shared by the server
// and the proxy (through frontFlags). Without any of them, --http requires
// a bearer token generated at start.
type authFlags struct {
	issuer         string
	publicURL      string
	scopes         string
	claim          string
	tokens         string
	tokenDir       string
	insecureNoAuth bool
	out            io.Writer // where the connect instructions go: the flag set's output, stderr
}

func (a *authFlags) register(fs *flag.FlagSet) {
	a.out = fs.Output()
	fs.StringVar(&a.issuer, "auth-issuer", "", "HTTP: accept JWT access tokens of this OAuth 2.1 / OpenID Connect issuer (https URL), found by discovery;\nneeds --public-url, which tokens must name as their audience")
	fs.StringVar(&a.publicURL, "public-url", "", "HTTP: the URL clients connect to, e.g. https://mcp.example.com/mcp: the resource identifier of the\nprotected resource metadata and the audience (RFC 8707) a token must name")
	fs.StringVar(&a.scopes, "auth-scopes", "", "HTTP, with --auth-issuer: scopes every token must carry, space- or comma-separated (else 403 insufficient_scope)")
	fs.StringVar(&a.claim, "auth-principal-claim", bearer.DefaultPrincipalClaim, "HTTP, with --auth-issuer: the token claim naming the user, whose approvals and caps are theirs alone")
	fs.StringVar(&a.tokens, "auth-tokens", "", "HTTP: accept the bearer tokens listed in this file, one per line as sha256:HEX PRINCIPAL (HEX: the\ntoken's SHA-256, e.g. printf %s \"$TOKEN\" | sha256sum); the file must be private to its owner (0600)")
	fs.StringVar(&a.tokenDir, "auth-token-dir", "", "HTTP, without --auth-issuer or --auth-tokens: the directory (made 0700) for the generated token's file\n(default $XDG_RUNTIME_DIR/mcp-confirm, else ~/.local/state/mcp-confirm)")
	fs.BoolVar(&a.insecureNoAuth, "insecure-no-auth", false, "HTTP: serve WITHOUT authentication: every caller is one anonymous principal and can approve deletions.\nRefused unless --http is a loopback address; for tests behind an authenticating proxy only")
}

// check checks the flags against each other and against the --http
// address (empty: stdio).
func (a *authFlags) check(httpAddr string) error {
	set := map[string]bool{
		"--auth-issuer": a.issuer != "", "--public-url": a.publicURL != "", "--auth-scopes": a.scopes != "",
		"--auth-principal-claim": a.claim != bearer.DefaultPrincipalClaim, "--auth-tokens": a.tokens != "",
		"--auth-token-dir": a.tokenDir != "", "--insecure-no-auth": a.insecureNoAuth,
	}
	if httpAddr == "" {
		for name, on := range set {
			if on {
				return fmt.Errorf("%s applies to --http only: over stdio, the client that started the server is its only caller", name)
			}
		}
		return nil
	}
	if a.insecureNoAuth {
		for name, on := range set {
			if on && name != "--insecure-no-auth" {
				return fmt.Errorf("--insecure-no-auth with %s: choose one", name)
			}
		}
		// Anyone who can reach the port could approve deletions.
		if !loopbackAddr(httpAddr) {
			return fmt.Errorf("--insecure-no-auth refused on --http %s: without authentication, serve only on a loopback address (127.0.0.1, ::1, localhost)", httpAddr)
		}
		return nil
	}
	if a.issuer != "" && a.tokens != "" {
		return errors.New("--auth-issuer and --auth-tokens: choose one")
	}
	if a.issuer == "" && (set["--auth-scopes"] || set["--auth-principal-claim"]) {
		return errors.New("--auth-scopes and --auth-principal-claim apply to --auth-issuer tokens")
	}
	if a.issuer != "" && a.publicURL == "" {
		return errors.New("--auth-issuer needs --public-url: the URL clients connect to, which tokens must name as their audience")
	}
	if a.tokenDir != "" && (a.issuer != "" || a.tokens != "") {
		return errors.New("--auth-token-dir applies to the generated token, without --auth-issuer or --auth-tokens")
	}
	if a.publicURL != "" {
		u, err := url.Parse(a.publicURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" || u.RawQuery != "":
			return fmt.Errorf("--public-url %q: want an absolute https URL without query or fragment", a.publicURL)
		case u.Scheme == "http" && !loopbackAddr(u.Host):
			// Bearer tokens must not cross the network in the clear.
			return fmt.Errorf("--public-url %q: want https (http only on a loopback address)", a.publicURL)
		}
	}
	return nil
}

// loopbackAddr reports whether a host or host:port is a loopback address;
// an empty host (":8080": every interface) is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultTokenDir is where a generated token goes: the user's runtime
// directory (a tmpfs of theirs alone), else their state directory.
func defaultTokenDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "mcp-confirm"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcp-confirm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no $XDG_RUNTIME_DIR, $XDG_STATE_HOME or home directory for the generated token: give --auth-token-dir")
	}
	return filepath.Join(home, ".local", "state", "mcp-confirm"), nil
}

// middleware returns the HTTP authentication the flags ask for (nil with
// --insecure-no-auth), for the server at httpAddr, and a function that
// releases what it made (the generated token's file).
func (a *authFlags) middleware(ctx context.Context, httpAddr string, log *slog.Logger) (func(http.Handler) http.Handler, func(), error) {
	opts := bearer.Options{Resource: a.publicURL, Name: "mcp-confirm", Logger: log}
	done := func() {}
	switch {
	case a.insecureNoAuth:
		log.Warn("serving HTTP WITHOUT authentication (--insecure-no-auth): every local caller is the same anonymous principal and can approve deletions", "addr", httpAddr)
		return nil, done, nil
	case a.issuer != "":
		startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		j, err := bearer.NewJWT(startCtx, bearer.JWTOptions{Issuer: a.issuer, Audience: a.publicURL, PrincipalClaim: a.claim, Logger: log})
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-issuer: %w", err)
		}
		opts.Verify, opts.AuthorizationServers = j.Verify, []string{a.issuer}
		opts.Scopes = strings.FieldsFunc(a.scopes, func(r rune) bool { return r == ' ' || r == ',' })
		opts.Leeway = bearer.DefaultLeeway
		log.Info("HTTP clients authenticate with JWT access tokens", "issuer", a.issuer, "jwks_uri", j.JWKSURI(), "audience", a.publicURL, "scopes", opts.Scopes, "principal_claim", a.claim)
	case a.tokens != "":
		t, err := bearer.ReadTokens(a.tokens)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-tokens: %w", err)
		}
		opts.Verify = t.Verify
		log.Info("HTTP clients authenticate with the bearer tokens of --auth-tokens", "file", a.tokens, "tokens", t.Len())
	default:
		dir := a.tokenDir
		if dir == "" {
			var err error
			if dir, err = defaultTokenDir(); err != nil {
				return nil, nil, err
			}
		}
		t, path, remove, err := bearer.Generate(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("generated token (see --auth-token-dir): %w", err)
		}
		opts.Verify, done = t.Verify, remove
		a.instructions(httpAddr, path)
	}
	mw, err := bearer.Middleware(opts)
	if err != nil {
		done()
		return nil, nil, err
	}
	return mw, done, nil
}

// instructions tells the operator how to connect with the generated
// token: where it is, never the token itself (stderr may go to a log
// others read).
func (a *authFlags) instructions(httpAddr, path string) {
	where, url, eg := "http://"+httpAddr, shellQuote("http://"+httpAddr), "e.g."
	if _, port, err := net.SplitHostPort(httpAddr); err == nil && port == "0" {
		where, url, eg = "the address logged below", `"$URL"`, "e.g., with URL set to that address,"
	}
	fmt.Fprintf(a.out, `mcp-confirm: HTTP requires a bearer token, generated at this start and written to
    %s
  (readable by you alone; removed when the server stops). Connect to %s with the header
    Authorization: Bearer <the file's contents>
  %s
    curl -sS %s -H "Authorization: Bearer $(cat %s)" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' \
      -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
  For lasting tokens use --auth-tokens FILE, for an identity provider --auth-issuer URL.
`, path, where, eg, url, shellQuote(path))
}

// shellQuote quotes s for a POSIX shell, so that the command printed runs
// as it is whatever the path holds.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
