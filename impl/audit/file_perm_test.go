package audit_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
)

// nobody is the uid of the other local user in these tests.
const nobody = 65534

// TestFileRefusesWhatOthersCouldWrite: a trail file, or its checkpoints
// file, that another local user could write, or that is not a regular
// file, is refused before anything is read, cut or appended: a FIFO
// planted at the path (which would hang the start-up), a file group or
// others may write (they could rewrite the records and the head a
// restart continues from), and, when the test runs as root, a file that
// user made first in a shared sticky directory such as /tmp (they may
// make it writable whenever they like; the attacker's part runs as uid
// 65534). Every refused file holds a valid trail and a torn last line,
// which an open would cut: it is left byte for byte as it was. Owner-only
// and group-readable files of this user open (the controls).
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
		root   bool                                      // needs root to act as another user
		plant  func(t *testing.T, path string, b []byte) // what is at the path before OpenFile
		refuse bool
	}{
		{"owner only (control)", false, mode(0o600), false},
		{"group may read (control)", false, mode(0o640), false},
		{"group may write", false, mode(0o620), true},
		{"others may write", false, mode(0o602), true},
		{"FIFO", false, fifo, true},
		{"made first by another user", true, byNobody, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to run the other user's part as uid 65534")
			}
			for _, which := range []string{"trail", "checkpoints"} {
				dir := t.TempDir()
				// A shared directory, as /tmp, that the other user can reach.
				if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, 0o1777); err != nil {
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
				c.plant(t, target, trail)
				err := openAndCheckpoint(t, path)
				switch {
				case c.refuse && !errors.Is(err, audit.ErrInsecureFile):
					t.Fatalf("%s: err = %v, want ErrInsecureFile", which, err)
				case !c.refuse && err != nil:
					t.Fatalf("%s: %v", which, err)
				case c.refuse && c.plant != nil:
					if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() {
						if b, _ := os.ReadFile(target); !bytes.Equal(b, trail) {
							t.Fatalf("%s: the refused file was changed:\n%q\nwant\n%q", which, b, trail)
						}
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
	done := make(chan error, 1)
	go func() {
		f, err := audit.OpenFile(path, audit.FileOptions{})
		if err == nil {
			err = f.AddCheckpoint(context.Background(), audit.Checkpoint{})
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("OpenFile or AddCheckpoint hung")
		return nil
	}
}

// mode writes b to a file of this user's with permissions perm.
func mode(perm os.FileMode) func(*testing.T, string, []byte) {
	return func(t *testing.T, path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
	}
}

func fifo(t *testing.T, path string, _ []byte) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// byNobody has uid 65534 write b to a new file at path, owner-only, as
// another local user would before the server first starts.
func byNobody(t *testing.T, path string, b []byte) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `umask 077 && cat > "$1"`, "sh", path)
	cmd.Stdin = bytes.NewReader(b)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %v\n%s", nobody, err, out)
	}
}
