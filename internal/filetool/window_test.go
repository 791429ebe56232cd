//go:build linux

package filetool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

func TestMain(m *testing.M) {
	beneathtest.Main()
	os.Exit(m.Run())
}

// TestRemainingWindow makes, as an unprivileged user, every move that can
// land in the one window left — between the final fstatat and the unlinkat
// in the approved file's own directory — and checks what package beneath
// argues: the unlink removes at most one non-directory entry of that
// directory, one that the attacker could have removed itself; with no write
// permission on that directory the attacker cannot move anything there, and
// the approved file is the one deleted.
func TestRemainingWindow(t *testing.T) {
	att := beneathtest.New(t)
	if !att.Unprivileged() {
		t.Log("not running as root: the attacker is this same user, so the permission cases show only that the races are handled")
	}
	type outcome int
	const (
		deleted outcome = iota // the tool reports a deletion
		refused                // the tool refuses: nothing removed
	)
	cases := []struct {
		name string
		dir  string // the approved file's directory: shared (attacker-writable), locked (root's), sticky (1777)
		// window runs as the attacker between the check and the unlink; the
		// errors it expects when unprivileged.
		window func(at func(string) string) []attempt
		want   outcome
		// removable names the entries (under root) that may be removed:
		// the approved file, or what the attacker could remove itself.
		removable []string
		// control: the window is used by root, not the attacker, so the
		// checker must find a removal the attacker could not have made.
		control bool
	}{
		{
			name: "exchange with own file in a writable directory",
			dir:  "shared",
			window: func(at func(string) string) []attempt {
				return []attempt{{"exchange", []string{at("shared/a.txt"), at("shared/mine.txt")}, nil}}
			},
			want:      deleted,
			removable: []string{"shared/mine.txt"}, // the attacker's own file, in a directory it can write
		},
		{
			name: "own file renamed over the approved one",
			dir:  "shared",
			window: func(at func(string) string) []attempt {
				return []attempt{{"rename", []string{at("shared/mine.txt"), at("shared/a.txt")}, nil}}
			},
			want: deleted,
			// The rename itself removes the approved file (the attacker can:
			// it writes the directory); the unlink removes the attacker's.
			removable: []string{"shared/a.txt", "shared/mine.txt"},
		},
		{
			name: "exchange with own directory",
			dir:  "shared",
			window: func(at func(string) string) []attempt {
				return []attempt{{"exchange", []string{at("shared/a.txt"), at("shared/mydir")}, nil}}
			},
			want: refused, // unlinkat without AT_REMOVEDIR: EISDIR
		},
		{
			name: "approved file renamed away",
			dir:  "shared",
			window: func(at func(string) string) []attempt {
				return []attempt{{"rename", []string{at("shared/a.txt"), at("shared/moved.txt")}, nil}}
			},
			want: refused, // unlinkat: ENOENT, a refusal and not a failure
		},
		{
			name: "exchange from a read-only directory",
			dir:  "locked",
			window: func(at func(string) string) []attempt {
				return []attempt{
					{"exchange", []string{at("locked/a.txt"), at("shared/mine.txt")}, fs.ErrPermission},
					{"rename", []string{at("bob/thesis.txt"), at("locked/a.txt")}, fs.ErrPermission},
					{"exchange", []string{at("locked/a.txt"), at("locked/b.txt")}, fs.ErrPermission},
				}
			},
			want:      deleted,
			removable: []string{"locked/a.txt"},
		},
		{
			name: "sticky directory, another user's file",
			dir:  "sticky",
			window: func(at func(string) string) []attempt {
				return []attempt{
					{"exchange", []string{at("sticky/a.txt"), at("sticky/mine.txt")}, syscall.EPERM},
					{"rename", []string{at("sticky/mine.txt"), at("sticky/a.txt")}, syscall.EPERM},
				}
			},
			want:      deleted,
			removable: []string{"sticky/a.txt"},
		},
		{
			name: "control: root moves bob's file into the window",
			dir:  "locked",
			window: func(at func(string) string) []attempt {
				if err := os.Rename(at("bob/thesis.txt"), at("locked/a.txt")); err != nil {
					panic(err)
				}
				return nil
			},
			want:      deleted,
			removable: []string{"locked/a.txt"},
			control:   true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := beneathtest.Dir(t)
			root := filepath.Join(base, "root")
			for _, d := range []string{"shared", "shared/mydir", "locked", "sticky", "bob"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(filepath.Join(root, "sticky"), 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"shared/a.txt", "locked/a.txt", "locked/b.txt", "sticky/a.txt", "bob/thesis.txt"} {
				if err := os.WriteFile(filepath.Join(root, f), []byte("root's"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			att.Own(filepath.Join(root, "shared"), filepath.Join(root, "shared", "mydir"))
			for _, f := range []string{"shared/mine.txt", "shared/mydir/inside.txt", "sticky/mine.txt"} {
				if err := att.Do("create", filepath.Join(root, f)); err != nil {
					t.Fatalf("the attacker cannot create %s: %v", f, err)
				}
			}
			if att.Unprivileged() {
				// The permissions are what the case says they are.
				if err := att.Do("unlink", filepath.Join(root, "bob/thesis.txt")); !errors.Is(err, fs.ErrPermission) {
					t.Fatalf("the attacker can unlink bob's file: %v", err)
				}
			}
			tool, err := New(Options{Roots: []string{root}, Flow: testFlow(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer tool.Close()
			path := filepath.Join(root, c.dir, "a.txt")
			q, err := tool.ask(path)
			if err != nil {
				t.Fatal(err)
			}
			before := beneathtest.Inodes(t, root)
			dirs, allowed := map[uint64]bool{}, map[uint64]bool{}
			for ino, rel := range before {
				if fi, err := os.Lstat(filepath.Join(root, rel)); err == nil && fi.IsDir() {
					dirs[ino] = true
				}
				allowed[ino] = slices.Contains(c.removable, rel)
			}
			at := func(rel string) string { return filepath.Join(root, rel) }
			tool.beforeUnlink = func() {
				for _, a := range c.window(at) {
					err := att.Do(a.op, a.args...)
					switch {
					case !att.Unprivileged():
					case a.want == nil && err != nil:
						t.Errorf("attacker %s %v: %v", a.op, a.args, err)
					case a.want != nil && !errors.Is(err, a.want):
						t.Errorf("attacker %s %v = %v, want %v", a.op, a.args, err, a.want)
					}
				}
			}
			res, err := tool.act(path, ledger.Confirmation{Subject: q.Subject})
			var r *confirm.Refusal
			switch {
			case c.want == deleted && (err != nil || res.IsError):
				t.Fatalf("want a deletion, got %v", err)
			case c.want == refused && !errors.As(err, &r):
				t.Fatalf("want a refusal, got %v %v", res, err)
			case c.want == refused && !strings.Contains(r.Reason, "Nothing was deleted"):
				t.Fatalf("refusal %q", r.Reason)
			}
			after := beneathtest.Inodes(t, root)
			var violations []string
			for ino, rel := range before {
				if _, ok := after[ino]; ok || allowed[ino] {
					continue
				}
				// Not root: the attacker is the owner of every file, and
				// could remove any; a directory, it still could not through
				// the tool.
				if !att.Unprivileged() && !c.control && !dirs[ino] {
					continue
				}
				violations = append(violations, rel)
			}
			switch {
			case c.control && !att.Unprivileged():
				// As one user, nothing the control moves is beyond the
				// attacker, so there is nothing for the checker to catch.
			case c.control && len(violations) == 0:
				t.Errorf("control: the checker did not notice that bob's file was removed")
			case !c.control && len(violations) > 0:
				t.Errorf("removed, and the attacker could not have removed them: %q", violations)
			}
		})
	}
}

type attempt struct {
	op   string
	args []string
	want error // when unprivileged; nil: must succeed
}

func testFlow(t *testing.T) *confirm.Flow {
	t.Helper()
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := confirm.New(confirm.Options{Ledger: l})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestUnlinkRefusedOnAMountPoint: a file mounted over the approved one in
// the window after the final check (unlink then fails with EBUSY) is a
// refusal saying the file changed, and both files are left as they were;
// the control, the same call with no mount, deletes.
func TestUnlinkRefusedOnAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a file")
	}
	for _, mount := range []bool{true, false} {
		root := t.TempDir()
		path, other := filepath.Join(root, "a.txt"), filepath.Join(t.TempDir(), "other.txt")
		for _, f := range []string{path, other} {
			if err := os.WriteFile(f, []byte(f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tool, err := New(Options{Roots: []string{root}, Flow: testFlow(t)})
		if err != nil {
			t.Fatal(err)
		}
		q, err := tool.ask(path)
		if err != nil {
			t.Fatal(err)
		}
		if mount {
			tool.beforeUnlink = func() {
				if err := syscall.Mount(other, path, "", syscall.MS_BIND, ""); err != nil {
					t.Fatalf("bind-mounting over the approved file: %v", err)
				}
				t.Cleanup(func() { syscall.Unmount(path, 0) })
			}
		}
		res, err := tool.act(path, ledger.Confirmation{Subject: q.Subject})
		tool.Close()
		var r *confirm.Refusal
		switch {
		case !mount && (err != nil || res.IsError):
			t.Fatalf("control, no mount: %v %v; want a deletion", res, err)
		case !mount:
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("control, no mount: the file is still there (%v)", err)
			}
			continue
		case !errors.As(err, &r) || !strings.Contains(r.Reason, "changed just before it was deleted") || !strings.Contains(r.Reason, "Nothing was deleted"):
			t.Fatalf("a mount over the approved file: %v %v; want a refusal saying it changed and nothing was deleted", res, err)
		}
		syscall.Unmount(path, 0)
		for _, f := range []string{path, other} {
			if b, err := os.ReadFile(f); err != nil || string(b) != f {
				t.Fatalf("%s after the refusal: %q, %v; want it as it was", f, b, err)
			}
		}
	}
}
