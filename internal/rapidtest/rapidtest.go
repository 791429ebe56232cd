// Package rapidtest keeps rapid's fail files out of the source tree.
//
// rapid (pgregory.net/rapid) replays the fail files it finds under
// testdata/rapid/<test>/ of the working directory before it searches, and
// writes the shrunk failure it finds there. A test that writes into the
// source tree breaks a read-only checkout, races another run of the same
// package, and leaves a stray file for the next commit; and a negative
// control fails rapid on purpose on every run. [OutOfTree] runs the rest
// of a test in a directory of its own under os.TempDir(), holding copies
// of the package's committed fail files, so that they still replay first
// and a new one is written there.
//
// It does not stop a test from writing into the tree by absolute path, and
// it cannot be used in a parallel test: the working directory is the
// process's.
package rapidtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// committed is where rapid keeps fail files, relative to a package's
// directory (the working directory of its tests).
const committed = "testdata/rapid"

// OutOfTree moves t, for the rest of the test, into a new directory under
// os.TempDir() holding a copy of the package's testdata/rapid, and returns
// that directory. When the test ends the working directory is restored;
// the directory is removed if the test passed, and kept, and named in the
// log, if it failed, since a fail file rapid wrote is the shortest way to
// reproduce the failure.
func OutOfTree(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcp-confirm-rapid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rapid's fail files, if it wrote any, are kept under %s: replay one with -rapid.failfile=PATH, "+
				"or commit it under the package's %s/ to replay it first on every run", filepath.Join(dir, committed), committed)
			return
		}
		os.RemoveAll(dir)
	})
	if err := copyTree(committed, filepath.Join(dir, committed)); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	return dir
}

// copyTree copies the regular files under src, if it exists, to dst.
func copyTree(src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
