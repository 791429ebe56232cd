package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
)

// --version prints one line, the same for the server, the proxy and keygen,
// and wins over every other flag (nothing is validated, opened or served).
func TestVersionFlag(t *testing.T) {
	want := "mcp-confirm " + confirm.Version() + "\n"
	for _, args := range [][]string{
		{"--version"},
		{"-version"},
		{"--version", "--ttl", "-1s", "--ledger", "ftp://x"},
		{"proxy", "--version"},
		{"proxy", "--version", "--upstream", "ftp://x"},
		{"keygen", "--version"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if code != 0 || stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0, %q, nothing", args, code, stdout.String(), stderr.String(), want)
		}
	}
}

// builtVersion is the version the go command recorded in the binary at bin
// (go version -m), by the rule confirm.Version documents: the main module's
// version, else its VCS revision and "+dirty" if modified, else "devel".
func builtVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var mod, rev, dirty string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			mod = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			dirty = "+dirty"
		}
	}
	switch {
	case mod != "" && mod != "(devel)":
		return mod
	case rev != "":
		return rev + dirty
	}
	return "devel"
}

// The built binary's --version (after proxy and keygen too) is the version
// the go command stamped in it, and is the serverInfo.version both front
// ends announce.
// Built in a git checkout with VCS stamping on (go build's default, which
// GOFLAGS=-buildvcs=false turns off), that is a pseudo-version naming the
// commit; otherwise "devel".
func TestBinaryVersion(t *testing.T) {
	bin := binary(t)
	want := builtVersion(t, bin)
	t.Logf("the binary's version: %s", want)
	if strings.ContainsAny(want, " \n") {
		t.Fatalf("go version -m reports %q", want)
	}
	for _, args := range [][]string{{"--version"}, {"proxy", "--version"}, {"keygen", "--version"}} {
		code, stdout, stderr := runBinary(t, nil, "", args...)
		if code != 0 || stdout != "mcp-confirm "+want+"\n" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0, %q", args, code, stdout, stderr, "mcp-confirm "+want+"\n")
		}
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"mcp-confirm", []string{"--root", t.TempDir()}},
		{"mcp-confirm-proxy", []string{"proxy", "--", bin, "--root", t.TempDir()}},
	} {
		cs, stderr := mrtrClient(t, nil, tt.args...)
		if info := cs.InitializeResult().ServerInfo; info.Name != tt.name || info.Version != want {
			t.Errorf("%q: serverInfo = %+v, want %s %s; stderr:\n%s", tt.args, info, tt.name, want, stderr.String())
		}
	}
}
