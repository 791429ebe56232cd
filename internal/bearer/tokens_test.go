package bearer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
)

func TestParseTokens(t *testing.T) {
	alice, bob := bearer.NewToken(), bearer.NewToken()
	good := "# team tokens\n\n" + bearer.Line(alice, "alice") + "\n" + bearer.Line(bob, "bob smith") + "\n"
	tk, err := bearer.ParseTokens(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{alice: "alice", bob: "bob smith"} {
		ti, err := tk.Verify(context.Background(), token, nil)
		if err != nil || ti.UserID != want {
			t.Fatalf("Verify = %+v, %v; want %s", ti, err, want)
		}
	}
	// The file holds hashes: the hash itself is no token.
	hash, _, _ := strings.Cut(bearer.Line(alice, "alice"), " ")
	for _, token := range []string{"", "alice", hash, strings.TrimPrefix(hash, "sha256:"), alice + " "} {
		if _, err := tk.Verify(context.Background(), token, nil); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("Verify(%q) = %v, want ErrInvalidToken", token, err)
		}
	}

	bad := []struct{ name, file string }{
		{"empty", "# nothing\n"},
		{"no principal", strings.Split(bearer.Line(alice, "x"), " ")[0] + "\n"},
		{"no prefix", strings.TrimPrefix(bearer.Line(alice, "alice"), "sha256:") + "\n"},
		{"short hash", "sha256:abcd alice\n"},
		{"upper-case hash", strings.ToUpper(bearer.Line(alice, "ALICE")) + "\n"},
		// The prefix in lower case, only the digits upper: one hash, one spelling.
		{"upper-case digits", "sha256:" + strings.ToUpper(strings.TrimPrefix(bearer.Line(alice, "alice"), "sha256:")) + "\n"},
		{"the raw token", alice + " alice\n"},
		{"the same token twice", bearer.Line(alice, "alice") + "\n" + bearer.Line(alice, "mallory") + "\n"},
		{"control character", bearer.Line(alice, "ali\x1bce") + "\n"},
	}
	for _, tt := range bad {
		if _, err := bearer.ParseTokens(strings.NewReader(tt.file)); err == nil {
			t.Errorf("%s: ParseTokens succeeded", tt.name)
		}
	}
}

// TestReadTokensPermissions: a token file others could read or write, or
// that another user owns, is refused; the same file made private is read.
func TestReadTokensPermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(bearer.Line(bearer.NewToken(), "alice")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := bearer.ReadTokens(path); !errors.Is(err, bearer.ErrPermissions) {
			t.Fatalf("mode %#o: ReadTokens = %v, want ErrPermissions", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if tk, err := bearer.ReadTokens(path); err != nil || tk.Len() != 1 {
			t.Fatalf("mode %#o: ReadTokens = %v", mode, err)
		}
	}
	if os.Geteuid() == 0 {
		// Another user's file, private to them: not this server's.
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := bearer.ReadTokens(path); !errors.Is(err, bearer.ErrPermissions) {
			t.Fatalf("file of uid 65534: ReadTokens = %v, want ErrPermissions", err)
		}
	}
	if _, err := bearer.ReadTokens(dir); err == nil {
		t.Fatal("ReadTokens of a directory succeeded")
	}
}

// An owner-only token file in a directory others may write (without the
// sticky bit) is refused: they could rename a token file of theirs into
// place. In a sticky one, as /tmp, it is read (the control).
func TestReadTokensSharedDirectory(t *testing.T) {
	for _, c := range []struct {
		mode   os.FileMode
		refuse bool
	}{
		{0o700, false},
		{os.ModeSticky | 0o777, false},
		{0o777, true},
		{0o770, true},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		path := filepath.Join(dir, "tokens")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(bearer.Line(bearer.NewToken(), "alice")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		tk, err := bearer.ReadTokens(path)
		switch {
		case c.refuse && (!errors.Is(err, bearer.ErrPermissions) || !strings.Contains(err.Error(), "may replace")):
			t.Errorf("directory %v: ReadTokens = %v, want ErrPermissions saying who may replace it", c.mode, err)
		case !c.refuse && (err != nil || tk.Len() != 1):
			t.Errorf("directory %v: ReadTokens = %v", c.mode, err)
		}
	}
}

// TestGenerate: the token is written to a new 0600 file in a 0700
// directory, verifies as the operator, and is removed by the cleanup; a
// directory others can enter is refused.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "mcp-confirm")
	tk, path, remove, err := bearer.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v, %v; want mode %#o", p, fi.Mode(), err, want)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if ti, err := tk.Verify(context.Background(), token, nil); err != nil || ti.UserID != bearer.GeneratedPrincipal {
		t.Fatalf("Verify(generated) = %+v, %v", ti, err)
	}
	if len(token) < 43 {
		t.Fatalf("token %q: want 256 bits", token)
	}
	remove()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token file left behind: %v", err)
	}
	// A second server gets a different token.
	tk2, path2, remove2, err := bearer.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer remove2()
	if _, err := tk2.Verify(context.Background(), token, nil); err == nil {
		t.Fatalf("a new server accepts the old token (file %s)", path2)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := bearer.Generate(open); !errors.Is(err, bearer.ErrPermissions) {
		t.Fatalf("Generate in a 0755 directory = %v, want ErrPermissions", err)
	}
}

func ExampleLine() {
	// What an operator appends to the --auth-tokens file for a new user;
	// the token itself goes to the user, and nowhere else.
	token := "an example token; use bearer.NewToken()"
	fmt.Println(bearer.Line(token, "alice"))
	// Output: sha256:c4208dd459e005d570614d203390a6663679f14bfa8b021097adef02eb4cd72a alice
}

// TestReadTokensNotRegular: a directory or a FIFO where the token file
// should be is refused as not a regular file, before anything reads it,
// and the FIFO does not hold the start-up. The negative control is
// TestReadTokensPermissions' private file.
func TestReadTokensNotRegular(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tokens")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "tokens")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, fifo} {
		done := make(chan error, 1)
		go func() {
			_, err := bearer.ReadTokens(path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, bearer.ErrPermissions) || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("ReadTokens(%s) = %v, want not a regular file", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadTokens(%s) hung", path)
		}
	}
}
