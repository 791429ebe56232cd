//go:build linux

package fuzz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
	"github.com/mcp-confirm/mcp-confirm/internal/filetool"
)

// FuzzLocate asserts that delete_file's path validation never accepts a
// path whose real location is outside the root, nor one with a symlink
// anywhere on it, nor anything but a regular file, whatever the path: "..",
// symlinks in and out, a sibling sharing the root's prefix, NUL bytes,
// relative and absolute forms.
func FuzzLocate(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "root")
	tree := map[string]string{ // path under base -> "file", "dir" or "link:TARGET"
		"root/a.txt":         "file",
		"root/sub/b.txt":     "file",
		"root/sub/in-link":   "link:../a.txt",
		"root/sub/dir-link":  "link:..",
		"root/out-abs":       "link:" + filepath.Join(base, "secret.txt"),
		"root/out-rel":       "link:../secret.txt",
		"root/out-dir":       "link:../outside",
		"root/loop":          "link:loop",
		"root/emptydir":      "dir",
		"secret.txt":         "file",
		"outside/c.txt":      "file",
		"root-sibling/d.txt": "file",
	}
	beneathtest.Tree(f, base, tree)
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		f.Fatal(err)
	}
	flow, err := confirm.New(confirm.Options{Ledger: l})
	if err != nil {
		f.Fatal(err)
	}
	tool, err := filetool.New(filetool.Options{Roots: []string{root}, Flow: flow})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { tool.Close() })
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}

	for _, seed := range []string{
		"a.txt", "sub/b.txt", "sub/in-link", "sub/dir-link/a.txt", "out-abs", "out-rel",
		"out-dir/c.txt", "loop", "emptydir", "../secret.txt", "../root-sibling/d.txt",
		"sub/../a.txt", "sub/../../secret.txt", "./a.txt", "a.txt/", "a.txt\x00",
		"/etc/passwd", "", ".", "..", "//a.txt",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, p string, absolute bool) {
		if absolute {
			p = root + "/" + p
		}
		shown, err := tool.Locate(p)
		if err != nil {
			if _, ok := err.(*confirm.Refusal); !ok {
				t.Fatalf("Locate(%q): error is not a refusal: %v", p, err)
			}
			return
		}
		// Accepted: the entry itself must be a regular file whose real
		// directory lies inside the real root.
		fi, err := os.Lstat(shown)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("Locate(%q) accepted %q, which is not a regular file (%v)", p, shown, err)
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(shown))
		if err != nil {
			t.Fatalf("Locate(%q) accepted %q: %v", p, shown, err)
		}
		if dir != realRoot && !strings.HasPrefix(dir, realRoot+string(filepath.Separator)) {
			t.Fatalf("Locate(%q) accepted %q, whose directory %q is outside the root %q", p, shown, dir, realRoot)
		}
		// And it got there through real directories only: no symlink on
		// the path, even one that stays inside the root.
		rel, err := filepath.Rel(realRoot, filepath.Dir(shown))
		if err != nil {
			t.Fatal(err)
		}
		if bad, fi := firstNonDir(realRoot, rel); bad != "" {
			t.Fatalf("Locate(%q) accepted %q, through %q, which is %v", p, shown, bad, fi)
		}
	})
}
