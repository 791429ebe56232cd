//go:build linux

package fuzz

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/beneath"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

// FuzzBeneath asserts that package beneath never resolves outside its root
// and never follows a symbolic link, whatever the path: the parent it opens
// is exactly the directory the path names lexically, reached through real
// directories only; a path it refuses has a symlink, a non-directory or a
// missing entry exactly where the refusal says (or is not a plain relative
// path, or too long); a path of real directories is never refused; and
// openat2 and the openat walk give the same answer.
func FuzzBeneath(f *testing.F) {
	base := f.TempDir()
	beneathtest.Tree(f, base, beneathTree(base))
	root := filepath.Join(base, "root")
	kernel, err := beneath.Open(root, beneath.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { kernel.Close() })
	walk, err := beneath.Open(root, beneath.Options{Walk: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { walk.Close() })
	realRoot := kernel.Names()[0]

	for _, seed := range beneathSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if err := beneathCheck(realRoot, rel, openParent(kernel), openParent(walk)); err != nil {
			t.Fatal(err)
		}
	})
}

var beneathSeeds = []string{
	"a.txt", "sub/b.txt", "sub/deep/c.txt", "sub/in-link", "sub/dir-link/c.txt", "sub/up/a.txt",
	"alice/junk/thesis.txt", "out-abs/c.txt", "out-rel/c.txt", "loop/x", "proc/root/etc/passwd",
	"emptydir/x", "file/x", "é/\u202e/x.txt", "sub/deep/e/f/g/h/i", "../root-sibling/d.txt",
	"sub/../a.txt", "./a.txt", "a.txt/", "sub//b.txt", "/etc/passwd", "", ".", "..", "a\x00b",
	strings.Repeat("sub/", 1100), strings.Repeat("x", 256),
}

// beneathTree is the tree FuzzBeneath resolves in: path under base ->
// "file", "dir" or "link:TARGET".
func beneathTree(base string) map[string]string {
	return map[string]string{
		"root/a.txt":            "file",
		"root/sub/b.txt":        "file",
		"root/sub/deep/c.txt":   "file",
		"root/sub/in-link":      "link:../a.txt",
		"root/sub/dir-link":     "link:deep",
		"root/sub/up":           "link:..",
		"root/alice/junk":       "link:../bob",
		"root/bob/thesis.txt":   "file",
		"root/out-abs":          "link:" + filepath.Join(base, "outside"),
		"root/out-rel":          "link:../outside",
		"root/loop":             "link:loop",
		"root/proc":             "link:/proc/self",
		"root/emptydir":         "dir",
		"root/file":             "file",
		"root/é/\u202e/x.txt":   "file",
		"outside/c.txt":         "file",
		"root-sibling/d.txt":    "file",
		"root/sub/deep/e/f/g/h": "dir",
	}
}

// resolved is what a resolver answered for one path.
type resolved struct {
	id   beneath.ID
	name string
	err  error
}

func openParent(r *beneath.Root) func(string) resolved {
	return func(rel string) resolved {
		d, name, err := r.OpenParent(rel)
		if err != nil {
			return resolved{err: err}
		}
		defer d.Close()
		return resolved{id: d.ID(), name: name}
	}
}

// beneathCheck is FuzzBeneath's oracle: the two resolvers agree, an
// accepted path's parent is the directory rel names lexically under
// realRoot, reached through real directories only, and a refusal is true
// of the component it blames; a path of real directories is accepted.
func beneathCheck(realRoot, rel string, kernel, walk func(string) resolved) error {
	r1, r2 := kernel(rel), walk(rel)
	if (r1.err == nil) != (r2.err == nil) || (r1.err != nil && r1.err.Error() != r2.err.Error()) {
		return fmt.Errorf("OpenParent(%q): openat2 says %v, the walk %v", rel, r1.err, r2.err)
	}
	dir := filepath.Dir(rel)
	if r1.err == nil {
		if r1 != r2 || r1.name != filepath.Base(rel) {
			return fmt.Errorf("OpenParent(%q): openat2 %v %q, the walk %v %q", rel, r1.id, r1.name, r2.id, r2.name)
		}
		// Only real directories, from the root down.
		if bad, fi := firstNonDir(realRoot, dir); bad != "" {
			return fmt.Errorf("OpenParent(%q) went through %q, which is %v", rel, bad, fi)
		}
		want, err := lstatID(filepath.Join(realRoot, dir))
		if err != nil || r1.id != want {
			return fmt.Errorf("OpenParent(%q) opened %v, not %s (%v %v)", rel, r1.id, dir, want, err)
		}
		return nil
	}
	var be *beneath.Error
	if !errors.As(r1.err, &be) {
		return fmt.Errorf("OpenParent(%q): %v is not a *beneath.Error", rel, r1.err)
	}
	switch {
	case errors.Is(r1.err, beneath.ErrTooLong):
		if beneath.CheckLength(rel) == nil {
			return fmt.Errorf("OpenParent(%q) said too long", rel)
		}
		return nil
	case errors.Is(r1.err, beneath.ErrNotLocal):
		if local(rel) && beneath.CheckLength(rel) == nil {
			return fmt.Errorf("OpenParent(%q) said not local", rel)
		}
		return nil
	}
	// The refusal names a component of the path: every directory before
	// it is real, and it is what the refusal says.
	if !local(rel) || (be.Path != dir && !strings.HasPrefix(dir, be.Path+"/")) {
		return fmt.Errorf("OpenParent(%q) blames %q, not a directory on the path", rel, be.Path)
	}
	if bad, _ := firstNonDir(realRoot, filepath.Dir(be.Path)); bad != "" {
		return fmt.Errorf("OpenParent(%q) blames %q, but %q comes first", rel, be.Path, bad)
	}
	fi, err := os.Lstat(filepath.Join(realRoot, be.Path))
	switch {
	case errors.Is(r1.err, beneath.ErrSymlink):
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("OpenParent(%q): %q is not a symlink (%v)", rel, be.Path, err)
		}
	case errors.Is(r1.err, beneath.ErrNotDir):
		if err != nil || fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("OpenParent(%q): %q is a directory or symlink (%v)", rel, be.Path, err)
		}
	case errors.Is(r1.err, fs.ErrNotExist):
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("OpenParent(%q): %q exists", rel, be.Path)
		}
	default:
		return fmt.Errorf("OpenParent(%q): unexpected refusal %v", rel, r1.err)
	}
	// Completeness cannot fail here: the blamed component is not a real
	// directory, so the path is not one of real directories.
	return nil
}

// TestBeneathFuzzOracle: FuzzBeneath's oracle rejects a resolver that
// follows symbolic links (as os.Root does in the middle of a path), one
// that refuses a plain path, one that blames the wrong component, and two
// resolvers that disagree.
func TestBeneathFuzzOracle(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, beneathTree(base))
	root := filepath.Join(base, "root")
	r, err := beneath.Open(root, beneath.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	good := openParent(r)
	following := func(rel string) resolved { // stat follows every link
		id, err := statID(filepath.Join(root, filepath.Dir(rel)))
		return resolved{id: id, name: filepath.Base(rel), err: err}
	}
	refusing := func(string) resolved { return resolved{err: &beneath.Error{Path: "sub", Err: beneath.ErrSymlink}} }
	misblaming := func(rel string) resolved {
		res := good(rel)
		var be *beneath.Error
		if errors.As(res.err, &be) {
			res.err = &beneath.Error{Path: "sub", Err: be.Err}
		}
		return res
	}
	for _, c := range []struct {
		name         string
		rel          string
		kernel, walk func(string) resolved
	}{
		{"follows a link in the middle", "sub/dir-link/c.txt", following, following},
		{"follows a link out of the root", "out-abs/c.txt", following, following},
		{"refuses a plain path", "sub/deep/c.txt", refusing, refusing},
		{"blames the wrong component", "alice/junk/thesis.txt", misblaming, misblaming},
		{"the resolvers disagree", "sub/dir-link/c.txt", good, following},
	} {
		if err := beneathCheck(r.Names()[0], c.rel, c.kernel, c.walk); err == nil {
			t.Errorf("%s: the oracle accepted it", c.name)
		}
	}
	for _, seed := range beneathSeeds {
		if err := beneathCheck(r.Names()[0], seed, good, good); err != nil {
			t.Errorf("seed %q: %v", seed, err)
		}
	}
}

// local reports whether rel is a plain relative path: no empty, "." or ".."
// component, no NUL, not absolute.
func local(rel string) bool {
	if rel == "" || rel[0] == '/' || strings.IndexByte(rel, 0) >= 0 {
		return false
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// firstNonDir walks dir (relative, clean, or ".") under root with Lstat and
// returns the first prefix that is not a real directory, and what it is.
func firstNonDir(root, dir string) (string, any) {
	if dir == "." {
		return "", nil
	}
	prefix := ""
	for c := range strings.SplitSeq(dir, "/") {
		prefix = filepath.Join(prefix, c)
		fi, err := os.Lstat(filepath.Join(root, prefix))
		if err != nil {
			return prefix, err
		}
		if !fi.IsDir() {
			return prefix, fi.Mode()
		}
	}
	return "", nil
}

func lstatID(p string) (beneath.ID, error) {
	var st syscall.Stat_t
	err := syscall.Lstat(p, &st)
	return beneath.ID{Dev: uint64(st.Dev), Ino: st.Ino}, err
}

func statID(p string) (beneath.ID, error) {
	var st syscall.Stat_t
	err := syscall.Stat(p, &st)
	return beneath.ID{Dev: uint64(st.Dev), Ino: st.Ino}, err
}
