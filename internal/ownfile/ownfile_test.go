//go:build linux

package ownfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

func TestMain(m *testing.M) {
	beneathtest.Main()
	os.Exit(m.Run())
}

// TestOpen: what Open accepts and refuses, each refusal naming why. A
// file another user made runs that user's part as uid 65534 when the test
// runs as root. The accepted rows are the controls: a checker that
// refused everything would fail them.
func TestOpen(t *testing.T) {
	for _, c := range []struct {
		name   string
		other  bool // made by another user
		make   func(t *testing.T, path string)
		opts   ownfile.Options
		refuse string // "" accepts
	}{
		{"owner only", false, file(0o600), ownfile.Options{}, ""},
		{"owner only, secret", false, file(0o600), ownfile.Options{Secret: true}, ""},
		{"others may read", false, file(0o644), ownfile.Options{}, ""},
		{"others may read a secret", false, file(0o644), ownfile.Options{Secret: true}, "may read or write it (chmod 0600"},
		{"group may write", false, file(0o620), ownfile.Options{}, "may write it (chmod 0600"},
		{"group may only search a secret", false, file(0o610), ownfile.Options{Secret: true}, "may read or write it (chmod 0600"},
		{"others may write", false, file(0o646), ownfile.Options{}, "may write it (chmod 0644"},
		{"FIFO", false, func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ownfile.Options{}, "not a regular file"},
		{"directory", false, func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, ownfile.Options{}, "not a regular file"},
		{"made by another user", true, nil, ownfile.Options{}, "owned by uid 65534"},
		{"in a directory others may write", false, func(t *testing.T, p string) {
			file(0o600)(t, p)
			if err := os.Chmod(filepath.Dir(p), 0o777); err != nil { // not sticky
				t.Fatal(err)
			}
		}, ownfile.Options{}, "may replace"},
		{"in a directory of another user", false, func(t *testing.T, p string) {
			file(0o600)(t, p)
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the directory to another user (uid 65534)")
			}
			if err := os.Chown(filepath.Dir(p), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, ownfile.Options{}, "owned by uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := sharedFile(t, c.other, c.make)
			err := opened(t, func() (*os.File, error) { return ownfile.Open(path, c.opts) })
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse != "" && (!errors.Is(err, ownfile.ErrInsecure) || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("err = %v; want ErrInsecure saying %q", err, c.refuse)
			}
		})
	}
}

// Through a symbolic link, the file checked is the one it reaches: a link
// to an owner-only file opens (the control), one to a file others may
// write is refused.
func TestOpenChecksWhatALinkReaches(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		perm   os.FileMode
		refuse bool
	}{{0o600, false}, {0o666, true}} {
		target := filepath.Join(dir, fmt.Sprintf("target%o", c.perm))
		file(c.perm)(t, target)
		link := target + ".link"
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		f, err := ownfile.Open(link, ownfile.Options{})
		if err == nil {
			f.Close()
		}
		if c.refuse != errors.Is(err, ownfile.ErrInsecure) || !c.refuse && err != nil {
			t.Errorf("a link to a file of mode %04o: err = %v", c.perm, err)
		}
	}
}

// TestDirs: the directories above a name, as given and as a symbolic link
// resolves it, and above a name not made yet. The accepted rows are the
// controls.
func TestDirs(t *testing.T) {
	dir := func(t *testing.T, mode os.FileMode) string {
		d := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	link := func(t *testing.T, from, to string) string {
		p := filepath.Join(from, "link")
		file(0o600)(t, filepath.Join(to, "f"))
		if err := os.Symlink(filepath.Join(to, "f"), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name   string
		path   func(t *testing.T) string
		refuse string // "" accepts
	}{
		{"private directory", func(t *testing.T) string {
			p := filepath.Join(dir(t, 0o700), "f")
			file(0o600)(t, p)
			return p
		}, ""},
		{"sticky shared directory", func(t *testing.T) string {
			p := filepath.Join(dir(t, os.ModeSticky|0o777), "f")
			file(0o600)(t, p)
			return p
		}, ""},
		{"not made yet, private directory", func(t *testing.T) string {
			return filepath.Join(dir(t, 0o755), "new")
		}, ""},
		{"not made yet, group may write the directory", func(t *testing.T) string {
			return filepath.Join(dir(t, 0o775), "new")
		}, "may replace"},
		{"others may write a directory further up", func(t *testing.T) string {
			child := filepath.Join(dir(t, 0o757), "child")
			if err := os.Mkdir(child, 0o700); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(child, "new")
		}, "may replace"},
		{"link between private directories", func(t *testing.T) string {
			return link(t, dir(t, 0o755), dir(t, 0o700))
		}, ""},
		{"link into a shared directory", func(t *testing.T) string {
			return link(t, dir(t, 0o755), dir(t, 0o777))
		}, "may replace"},
		{"link in a shared directory", func(t *testing.T) string {
			return link(t, dir(t, 0o777), dir(t, 0o755))
		}, "may replace"},
		{"not made yet, beneath a link to a directory in a shared one", func(t *testing.T) string {
			sub := filepath.Join(dir(t, 0o777), "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			l := filepath.Join(dir(t, 0o755), "l")
			if err := os.Symlink(sub, l); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(l, "new")
		}, "may replace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ownfile.Dirs(c.path(t))
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse != "" && (!errors.Is(err, ownfile.ErrInsecure) || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("err = %v; want ErrInsecure saying %q", err, c.refuse)
			}
		})
	}
	if err := ownfile.Dirs(filepath.Join(t.TempDir(), "missing", "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory: err = %v, want ErrNotExist", err)
	}
}

// TestCheckRefusesADirectory: Check, called on a file its caller opened,
// refuses what is not a regular file as Open does.
func TestCheckRefusesADirectory(t *testing.T) {
	f, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ownfile.Check(f, ownfile.Options{}); !errors.Is(err, ownfile.ErrInsecure) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Check of a directory: %v, want ErrInsecure saying it is not a regular file", err)
	}
}

// file makes a file of this user's with permissions perm.
func file(perm os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenRegular: it refuses only what is not a regular file, whoever
// owns it and whatever its mode, and does not wait on a FIFO. The
// accepted rows are the controls: a file another user made, or others
// may write, is read (its contents are checked, not trusted).
func TestOpenRegular(t *testing.T) {
	for _, c := range []struct {
		name   string
		other  bool // made by another user
		make   func(t *testing.T, path string)
		refuse bool
	}{
		{"owner only", false, file(0o600), false},
		{"others may write", false, file(0o666), false},
		{"made by another user", true, nil, false},
		{"FIFO", false, func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"directory", false, func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"link to a FIFO", false, func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p+".fifo", 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p+".fifo", p); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := sharedFile(t, c.other, c.make)
			err := opened(t, func() (*os.File, error) { return ownfile.OpenRegular(path) })
			switch {
			case !c.refuse && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse && (!errors.Is(err, ownfile.ErrInsecure) || !strings.Contains(err.Error(), "not a regular file")):
				t.Fatalf("err = %v; want ErrInsecure saying it is not a regular file", err)
			}
		})
	}
}

// sharedFile returns the path of a file f in a directory others may
// write, sticky (as /tmp), made by mk, or, if other, by another user
// (uid 65534: the test is skipped unless it runs as root).
func sharedFile(t *testing.T, other bool, mk func(*testing.T, string)) string {
	t.Helper()
	dir := beneathtest.Dir(t)
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if !other {
		mk(t, path)
		return path
	}
	a := beneathtest.New(t)
	if !a.Unprivileged() {
		t.Skip("needs root to act as another user (uid 65534)")
	}
	if err := a.Do("create", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// opened returns the error of open, closing what it opened, and fails the
// test if open hangs (as on a FIFO without a writer).
func opened(t *testing.T, open func() (*os.File, error)) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := open()
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the open hung")
		return nil
	}
}
