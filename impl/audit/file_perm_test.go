//go:build linux

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

func TestMain(m *testing.M) {
	beneathtest.Main()
	os.Exit(m.Run())
}

// TestFileRefusesWhatOthersCouldWrite: a trail file, or its checkpoints
// file, that another local user could write, or that is not a regular
// file, is refused before anything is read, cut or appended: a FIFO
// planted at the path (which would hang the start-up), a file group or
// others may write (they could rewrite the records and the head a
// restart continues from), and, when the test runs as root, a file that
// user made first in a shared sticky directory such as /tmp (they may
// make it writable whenever they like; the attacker's part runs as uid
// 65534, an empty file of mode 0644), and an owner-only file in a
// directory others may write without the sticky bit (they could rename a
// trail of theirs into place). The other refused files hold a
// valid trail and a torn last line, which an open would cut; each is left
// byte for byte as it was. Owner-only and group-readable files of this
// user open (the controls).
func TestFileRefusesWhatOthersCouldWrite(t *testing.T) {
	f, src := newFile(t, 3)
	f.Close()
	valid, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	trail := append(valid, `{"v":1,"op":"iss`...) // a torn last line: OpenFile would cut it

	for _, c := range []struct {
		name   string
		plant  func(t *testing.T, path string, b []byte) []byte // puts what is at the path before OpenFile; returns the file's bytes
		refuse bool
	}{
		{"owner only (control)", mode(0o600), false},
		{"group may read (control)", mode(0o640), false},
		{"group may write", mode(0o620), true},
		{"others may write", mode(0o602), true},
		{"FIFO", fifo, true},
		{"made first by another user", byNobody, true},
		{"in a directory others may write", inSharedDir, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, which := range []string{"trail", "checkpoints"} {
				dir := beneathtest.Dir(t)
				if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil { // shared, as /tmp
					t.Fatal(err)
				}
				path := filepath.Join(dir, "audit.jsonl")
				target := path
				if which == "checkpoints" {
					target = audit.CheckpointPath(path)
					if err := os.WriteFile(path, valid, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				planted := c.plant(t, target, trail)
				err := openAndCheckpoint(t, path)
				switch {
				case c.refuse && !errors.Is(err, audit.ErrInsecureFile):
					t.Fatalf("%s: err = %v, want ErrInsecureFile", which, err)
				case !c.refuse && err != nil:
					t.Fatalf("%s: %v", which, err)
				case c.refuse && planted != nil:
					if b, _ := os.ReadFile(target); !bytes.Equal(b, planted) {
						t.Fatalf("%s: the refused file was changed:\n%q\nwant\n%q", which, b, planted)
					}
				}
			}
		})
	}
}

// openAndCheckpoint opens the trail at path and adds a checkpoint, within
// a deadline (a FIFO must not hold either), and returns the first error.
func openAndCheckpoint(t *testing.T, path string) error {
	t.Helper()
	return within(t, "OpenFile or AddCheckpoint", func() error {
		f, err := audit.OpenFile(path, audit.FileOptions{})
		if err == nil {
			err = f.AddCheckpoint(context.Background(), audit.Checkpoint{})
			f.Close()
		}
		return err
	})
}

// within returns what f returns, and fails t if f takes more than 10 s.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal(what + " hung")
		return nil
	}
}

// mode writes b to a file of this user's with permissions perm.
func mode(perm os.FileMode) func(*testing.T, string, []byte) []byte {
	return func(t *testing.T, path string, b []byte) []byte {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// inSharedDir writes b to an owner-only file at path and lets everyone
// write its directory, without the sticky bit: another user could rename
// a trail of theirs into place.
func inSharedDir(t *testing.T, path string, b []byte) []byte {
	t.Helper()
	mode(0o600)(t, path, b)
	if err := os.Chmod(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	return b
}

func fifo(t *testing.T, path string, _ []byte) []byte {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return nil
}

// byNobody has the other local user (uid 65534, when the test runs as
// root) create an empty file at path, as before the server first starts.
func byNobody(t *testing.T, path string, _ []byte) []byte {
	t.Helper()
	a := beneathtest.New(t)
	if !a.Unprivileged() {
		t.Skip("needs root to act as another user (uid 65534)")
	}
	if err := a.Do("create", path); err != nil {
		t.Fatal(err)
	}
	return []byte{}
}

// TestReadersRefuseFIFO: FileRecords and ReadCheckpoints, which verify
// and export run, refuse a FIFO planted where they read, at once (it would
// hold the operator's command until someone wrote it); a regular file is
// read, and no checkpoints file is none (the controls).
func TestReadersRefuseFIFO(t *testing.T) {
	records := func(path string) func() error {
		return func() error {
			for _, err := range audit.FileRecords(path, 1) {
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	checkpoints := func(path string) func() error {
		return func() error {
			_, err := audit.ReadCheckpoints(path)
			return err
		}
	}
	dir := t.TempDir()
	pipe := filepath.Join(dir, "fifo")
	fifo(t, pipe, nil)
	for name, read := range map[string]func() error{"records": records(pipe), "checkpoints": checkpoints(pipe)} {
		if err := within(t, name, read); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s from a FIFO: %v, want refused as not a regular file", name, err)
		}
	}
	regular := filepath.Join(dir, "trail")
	mode(0o644)(t, regular, nil)
	for name, read := range map[string]func() error{"records": records(regular), "checkpoints": checkpoints(regular),
		"no checkpoints file": checkpoints(filepath.Join(dir, "none"))} {
		if err := within(t, name, read); err != nil {
			t.Errorf("control: %s: %v", name, err)
		}
	}
}
