package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/serve"
)

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	shortKeys := filepath.Join(dir, "short.keys")
	if err := os.WriteFile(shortKeys, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"help", []string{"--help"}, 0, "--root"},
		{"unknown flag", []string{"--rot", dir}, 2, "flag provided but not defined: -rot"},
		{"stray argument", []string{"--root", dir, "extra"}, 2, `unexpected argument "extra"`},
		{"bad ttl", []string{"--ttl", "soon"}, 2, "invalid value"},
		{"negative ttl", []string{"--ttl", "-1s"}, 2, "must be positive"},
		{"empty root", []string{"--root", ""}, 2, "empty directory"},
		{"missing root", []string{"--root", filepath.Join(dir, "nope")}, 2, "no such file"},
		{"root is a file", []string{"--root", notDir}, 2, "not a directory"},
		{"missing key file", []string{"--key-file", filepath.Join(dir, "nope")}, 2, "--key-file"},
		{"short key", []string{"--key-file", shortKeys}, 2, "line 1"},
		{"bad ledger", []string{"--ledger", "ftp://x"}, 2, "--ledger"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "invalid value"},
		{"unreachable ledger", []string{"--ledger", "redis://:s3cret@127.0.0.1:1/0"}, 1, "--ledger"},
		{"zero max-sessions", []string{"--max-sessions", "0"}, 2, "--max-sessions 0: must be positive"},
		{"negative max-conns", []string{"--max-conns", "-1"}, 2, "--max-conns -1: must be positive"},
		{"zero session-timeout", []string{"--session-timeout", "0s"}, 2, "--session-timeout 0s: must be positive"},
		{"zero request-timeout", []string{"--request-timeout", "0s"}, 2, "--request-timeout 0s: must be positive"},
		{"zero read-timeout", []string{"--read-timeout", "0s"}, 2, "--read-timeout 0s: must be positive"},
		{"zero read-header-timeout", []string{"--read-header-timeout", "0s"}, 2, "must be positive"},
		{"zero idle-timeout", []string{"--idle-timeout", "0s"}, 2, "must be positive"},
		{"zero max-header-bytes", []string{"--max-header-bytes", "0"}, 2, "must be positive"},
		{"zero max-message-bytes", []string{"--max-message-bytes", "0"}, 2, "must be positive"},
		{"huge max-message-bytes", []string{"--max-message-bytes", "2000000000"}, 2, "at most 1 GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr does not mention %q:\n%s", tt.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "too short") || strings.Contains(stderr.String(), "s3cret") {
				t.Fatal("an error echoed key material")
			}
		})
	}
}

// Every flag is documented in --help.
func TestHelpDocumentsEveryFlag(t *testing.T) {
	var stderr bytes.Buffer
	run(context.Background(), []string{"--help"}, nil, &bytes.Buffer{}, &stderr)
	for _, f := range []string{"--root", "--key-file", "--ttl", "--http", "--ledger", "--log-level",
		"--max-message-bytes", "--session-timeout", "--request-timeout", "--max-sessions", "--max-conns",
		"--read-header-timeout", "--read-timeout", "--idle-timeout", "--max-header-bytes",
		"--auth-issuer", "--public-url", "--auth-scopes", "--auth-principal-claim", "--auth-tokens", "--auth-token-dir", "--insecure-no-auth",
		"--name", "--ledger-file", "--allow-ledger-rollback", "--version",
		"--approval", "--approvers", "--approvals", "--approve-issuer", "--approve-client-id", "--approve-client-secret-file",
		"--approve-groups-claim", "--approve-scopes", "--allow-http-approve-issuer", "--approve-passkeys", "--notify-webhook",
		"--audit-file", "--audit-key", "--audit-checkpoint-every", "--insecure-no-audit"} {
		if !strings.Contains(stderr.String(), "  -"+strings.TrimPrefix(f, "--")) {
			t.Errorf("--help does not document %s:\n%s", f, stderr.String())
		}
	}
}

// Every limit's default, as the binary resolves it: the library's
// defaults, with the session timeout and the request deadline tied to
// --ttl.
func TestFrontDefaults(t *testing.T) {
	for _, tt := range []struct {
		args             []string
		session, request time.Duration
	}{
		{nil, 10 * time.Minute, 11 * time.Minute},
		{[]string{"--ttl", "30m"}, 30 * time.Minute, 31 * time.Minute},
		{[]string{"--ttl", "30m", "--session-timeout", "5m", "--request-timeout", "40m"}, 5 * time.Minute, 40 * time.Minute},
	} {
		c, err := parse(tt.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		got := c.front.httpOptions(nil, nil)
		want := serve.HTTPOptions{
			MaxMessageBytes:   64 << 10,
			SessionTimeout:    tt.session,
			MaxSessions:       1000,
			RequestTimeout:    tt.request,
			MaxConns:          256,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    32 << 10,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || c.front.httpAddr != "" {
			t.Errorf("%q:\n got %+v\nwant %+v", tt.args, got, want)
		}
	}
}

// The heap floor is on by default and off when the operator tunes the
// collector through the environment.
func TestHeapFloor(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want int
	}{
		{nil, heapFloorBytes},
		{map[string]string{"GOGC": "200"}, 0},
		{map[string]string{"GOGC": "off"}, 0},
		{map[string]string{"GOMEMLIMIT": "1GiB"}, 0},
		{map[string]string{"GODEBUG": "gctrace=1"}, heapFloorBytes},
	} {
		if got := len(heapFloor(func(k string) string { return tt.env[k] })); got != tt.want {
			t.Errorf("env %v: floor of %d bytes, want %d", tt.env, got, tt.want)
		}
	}
}
