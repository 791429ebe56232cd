package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// curlMarker precedes the fenced block of docs/operating.md that
// TestCurlExample runs.
const curlMarker = "<!-- curl-example: TestCurlExample runs this block -->"

// docBlock returns the fenced block that follows marker in the Markdown
// file path.
func docBlock(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker+"\n```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block after %q", path, marker)
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatalf("the block after %q in %s does not end", marker, path)
	}
	return block + "\n"
}

// TestCurlExample runs the curl example of docs/operating.md, as it
// stands but for the token file, address and root of a binary of its own,
// in bash against that binary serving HTTP behind its generated token:
// the 2026-07-28 question, its answer deleting cache.txt, the same answer
// again told it was already used; the older era's initialize, question on
// the call's stream and answer deleting notes.txt. So the example a reader
// copies is complete and current. It runs the curl command the binary
// prints on stderr, too.
func TestCurlExample(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: the curl example of docs/operating.md NOT RUN", tool)
		}
	}
	script := docBlock(t, filepath.Join("..", "..", "docs", "operating.md"), curlMarker)

	runtimeDir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, name := range []string{"cache.txt", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startBinary(t, []string{"XDG_RUNTIME_DIR=" + runtimeDir}, "--root", root, "--http", "127.0.0.1:0")
	m := tokenFileLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no token file named on stderr:\n%s", p.stderr.String())
	}
	for doc, here := range map[string]string{
		"/run/user/1000/mcp-confirm/token-4242": m[1],
		"http://127.0.0.1:8080/":                p.url + "/",
		"/srv/cleanup":                          root,
	} {
		if !strings.Contains(script, doc) {
			t.Fatalf("the example no longer uses %s, which the test replaces:\n%s", doc, script)
		}
		script = strings.ReplaceAll(script, doc, here)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir() // mktemp and anything else the script writes stay out of the tree
	cmd.Env = append(os.Environ(), "TMPDIR="+cmd.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the example failed (%v):\n%s", err, out)
	}
	got := string(out)
	t.Logf("output:\n%s", got)
	for _, want := range []string{
		`"resultType":"input_required"`,
		`"requestState":"v1.`,
		`"message":"Delete the file «`,
		`"text":"Deleted «`,
		"This approval was already used: this is the result of that earlier execution.",
		`"method":"elicitation/create"`,
		`"id":2,"result":{"content":[{"type":"text","text":"Deleted «`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output does not show %s", want)
		}
	}
	if n := strings.Count(got, `"text":"Deleted «`); n != 3 {
		t.Errorf("%d results say Deleted, want 3 (cache.txt, its replay, notes.txt)", n)
	}
	for _, name := range []string{"cache.txt", "notes.txt"} {
		if _, err := os.Lstat(filepath.Join(root, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was not deleted: %v", name, err)
		}
	}

	// The command the binary prints on stderr, with its token file, runs
	// as printed: an initialize the server answers.
	_, hint, _ := strings.Cut(p.stderr.String(), "with URL set to that address,\n")
	hint, _, ok := strings.Cut(hint, "\n  For lasting tokens")
	if !ok || !strings.Contains(hint, "curl ") {
		t.Fatalf("no curl command on stderr:\n%s", p.stderr.String())
	}
	hintCmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", hint)
	hintCmd.Env = append(os.Environ(), "URL="+p.url)
	out, err = hintCmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"serverInfo":{"name":"mcp-confirm"`) {
		t.Fatalf("the command on stderr (%v):\n%s\nanswered:\n%s", err, hint, out)
	}
}
