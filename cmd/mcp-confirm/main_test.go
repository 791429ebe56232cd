package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for _, f := range []string{"--root", "--key-file", "--ttl", "--http", "--ledger", "--log-level"} {
		if !strings.Contains(stderr.String(), "  -"+strings.TrimPrefix(f, "--")) {
			t.Errorf("--help does not document %s:\n%s", f, stderr.String())
		}
	}
}
