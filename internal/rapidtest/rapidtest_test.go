package rapidtest_test

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

// failing is a rapid.TB on which a failure is recorded, not reported.
type failing struct {
	*testing.T
	mu     sync.Mutex
	failed bool
}

func (f *failing) Errorf(string, ...any) { f.Fail() }
func (f *failing) Error(...any)          { f.Fail() }
func (f *failing) Fatalf(string, ...any) { f.FailNow() }
func (f *failing) Fatal(...any)          { f.FailNow() }
func (f *failing) Fail()                 { f.mu.Lock(); f.failed = true; f.mu.Unlock() }
func (f *failing) FailNow()              { f.Fail(); runtime.Goexit() }
func (f *failing) Failed() bool          { f.mu.Lock(); defer f.mu.Unlock(); return f.failed }

// TestOutOfTree runs a failing rapid check in a package directory of its
// own: the committed fail file replays from the copy, the new one is
// written outside the package, and nothing is left in it.
func TestOutOfTree(t *testing.T) {
	pkg := t.TempDir()
	committed := filepath.Join("testdata", "rapid", "TestOutOfTree_check", "TestOutOfTree_check-1-1.fail")
	if err := os.MkdirAll(filepath.Join(pkg, filepath.Dir(committed)), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not a valid fail file: rapid logs that it ignores it, and searches.
	if err := os.WriteFile(filepath.Join(pkg, committed), []byte("# committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)

	var dir string
	t.Run("check", func(t *testing.T) {
		dir = rapidtest.OutOfTree(t)
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		if a, b := realPath(t, wd), realPath(t, dir); a != b {
			t.Fatalf("working directory %s, want %s", a, b)
		}
		if b, err := os.ReadFile(committed); err != nil || string(b) != "# committed\n" {
			t.Fatalf("committed fail file not copied: %q, %v", b, err)
		}
		f := &failing{T: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			rapid.Check(f, func(rt *rapid.T) {
				if rapid.IntRange(0, 9).Draw(rt, "n") >= 0 {
					rt.Fatal("always")
				}
			})
		}()
		<-done
		if !f.Failed() {
			t.Fatal("rapid passed a property that always fails")
		}
		written, err := filepath.Glob(filepath.Join(dir, "testdata", "rapid", "TestOutOfTree_check", "*.fail"))
		if err != nil || len(written) != 2 {
			t.Fatalf("want the committed fail file and rapid's new one under %s, found %q (%v)", dir, written, err)
		}
	})

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := realPath(t, wd), realPath(t, pkg); a != b {
		t.Fatalf("working directory after the test: %s, want %s", a, b)
	}
	var left []string
	filepath.WalkDir(pkg, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) != 1 || left[0] != filepath.Join(pkg, committed) {
		t.Fatalf("the package directory holds %q, want only its committed fail file", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s not removed after a passing test: %v", dir, err)
	}
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
