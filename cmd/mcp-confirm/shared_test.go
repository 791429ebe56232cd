package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretFile writes content to a new file with mode.
func secretFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// The ledger URL comes from --ledger, else --ledger-file, else
// $MCP_CONFIRM_LEDGER, else memory:; only --ledger with a password warns.
func TestLedgerSource(t *testing.T) {
	const withPW = "redis://:s3cret@127.0.0.1:6379/0"
	good := secretFile(t, "# the shared ledger\n\n  "+withPW+"  \n# end\n", 0o600)
	tests := []struct {
		name    string
		args    []string
		env     string
		url     string
		warn    bool
		wantErr string
	}{
		{"default", nil, "", "memory:", false, ""},
		{"flag", []string{"--ledger", "redis://127.0.0.1:6379/0"}, "", "redis://127.0.0.1:6379/0", false, ""},
		{"flag with a password", []string{"--ledger", withPW}, "", withPW, true, ""},
		{"flag with a password parameter", []string{"--ledger", "postgres://u@h/db?password=s3cret"}, "", "postgres://u@h/db?password=s3cret", true, ""},
		{"flag beats the environment", []string{"--ledger", "memory:"}, withPW, "memory:", false, ""},
		{"environment", nil, withPW, withPW, false, ""},
		{"file", []string{"--ledger-file", good}, "", withPW, false, ""},
		{"file beats the environment", []string{"--ledger-file", good}, "memory:", withPW, false, ""},
		{"both flags", []string{"--ledger", "memory:", "--ledger-file", good}, "", "", false, "choose one"},
		{"file readable by others", []string{"--ledger-file", secretFile(t, withPW, 0o644)}, "", "", false, "permissions 0644"},
		{"file writable by the group", []string{"--ledger-file", secretFile(t, withPW, 0o620)}, "", "", false, "permissions 0620"},
		{"two URLs", []string{"--ledger-file", secretFile(t, "memory:\nredis://h/0\n", 0o600)}, "", "", false, "line 2: a second URL"},
		{"empty file", []string{"--ledger-file", secretFile(t, "# nothing\n", 0o600)}, "", "", false, "holds no URL"},
		{"missing file", []string{"--ledger-file", filepath.Join(t.TempDir(), "nope")}, "", "", false, "no such file"},
		{"bad URL in the environment", nil, "ftp://h", "", false, "$MCP_CONFIRM_LEDGER: unsupported ledger URL"},
		{"bad URL in the file", []string{"--ledger-file", secretFile(t, "ftp://h\n", 0o600)}, "", "", false, "unsupported ledger URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sharedFlags
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			s.register(fs, "svc")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := s.resolve(func(k string) string {
				if k == ledgerEnv {
					return tt.env
				}
				return ""
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || s.url != tt.url {
				t.Fatalf("url %q, err %v; want %q", s.url, err, tt.url)
			}
			if warned := len(s.warnings) > 0; warned != tt.warn {
				t.Fatalf("warnings %q, want a warning: %v", s.warnings, tt.warn)
			}
			for _, w := range s.warnings {
				if strings.Contains(w, "s3cret") || !strings.Contains(w, ledgerEnv) {
					t.Fatalf("warning %q shows the password or not the remedy", w)
				}
			}
		})
	}
}

func TestNameFlag(t *testing.T) {
	for name, ok := range map[string]bool{
		"mcp-confirm": true, "files.example.com": true, "a": true, "A_1-b.c": true,
		"": false, "-x": false, "{x}": false, "a b": false, "a:b": false, strings.Repeat("a", 65): false, "é": false,
	} {
		var s sharedFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		s.register(fs, "svc")
		if err := fs.Parse([]string{"--name", name}); err != nil {
			t.Fatal(err)
		}
		if err := s.resolve(func(string) string { return "" }); (err == nil) != ok {
			t.Errorf("--name %q: err = %v, want ok: %v", name, err, ok)
		}
	}
}
