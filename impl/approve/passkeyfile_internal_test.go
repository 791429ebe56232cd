//go:build linux

package approve

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

func TestMain(m *testing.M) {
	beneathtest.Main()
	os.Exit(m.Run())
}

// TestPasskeysFileWritableRefused: a passkeys file another local user
// could write, or could choose, is neither read nor appended to, and is
// left as it was: group or others may write it (they could plant a
// passkey); a FIFO (the page would hang reading it); a symbolic link, to
// an owner-only passkeys file or dangling (an add would create the file
// where it points); and, when the test runs as root, a file another user
// (uid 65534) made first in a shared sticky directory; and an owner-only
// file, or none, in a directory others may write without the sticky bit
// (they could rename a file of theirs into place). An owner-only file in a
// sticky one is read and appended to (the control).
func TestPasskeysFileWritableRefused(t *testing.T) {
	const line = `{"name":"mallory","handle":"AA==","enrolment":"AA==","credential":{}}` + "\n"
	regular := func(perm os.FileMode) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, perm); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name   string
		plant  func(t *testing.T, path string)
		refuse bool
	}{
		{"owner only (control)", regular(0o600), false},
		{"group may write", regular(0o620), true},
		{"others may write", regular(0o602), true},
		{"everyone may write", regular(0o666), true},
		{"FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"symbolic link to an owner-only file", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "passkeys")
			regular(0o600)(t, target)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"dangling symbolic link", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "created"), path); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"in a directory others may write", func(t *testing.T, path string) {
			regular(0o600)(t, path)
			shareDir(t, path)
		}, true},
		{"missing, in a directory others may write", shareDir, true},
		{"made first by another user", func(t *testing.T, path string) {
			a := beneathtest.New(t)
			if !a.Unprivileged() {
				t.Skip("needs root to act as another user (uid 65534)")
			}
			if err := a.Do("create", path); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := beneathtest.Dir(t)
			if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil { // shared, as /tmp
				t.Fatal(err)
			}
			file := filepath.Join(dir, "passkeys")
			c.plant(t, file)
			before := snapshot(t, file)
			p := &passkeys{file: file}
			var loaded []passkey
			var lerr, aerr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				loaded, lerr = p.load()
				aerr = p.add(passkey{Name: "x", Principal: "x", Enrolment: []byte{1}})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("load or add hung")
			}
			if !c.refuse {
				if lerr != nil || len(loaded) != 1 || aerr != nil {
					t.Fatalf("control: %d passkeys, %v; add: %v", len(loaded), lerr, aerr)
				}
				return
			}
			if lerr == nil {
				t.Errorf("read: %d passkeys", len(loaded))
			}
			if aerr == nil {
				t.Error("a passkey added")
			}
			if after := snapshot(t, file); after != before {
				t.Errorf("changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// shareDir lets everyone write path's directory, without the sticky bit:
// another user could rename a passkeys file of theirs into place.
func shareDir(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes what is at path and, through a symbolic link, what
// it reaches: its type and mode, and a regular file's bytes.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	var b bytes.Buffer
	for p := path; ; {
		fi, err := os.Lstat(p)
		if err != nil {
			b.WriteString(p + ": " + err.Error() + "\n")
			return b.String()
		}
		b.WriteString(p + ": " + fi.Mode().String() + "\n")
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			next, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			p = next
			continue
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		return b.String()
	}
}

// TestPasskeysEnrolOnce: an enrolment link enrols one passkey, also when
// its ceremony is finished at once through two replicas (two handles on
// one file, each with its own lock) by several browsers: of every add of
// one link's nonce, one is kept and the others are told the link was used.
// A link of its own enrols beside it (the control).
func TestPasskeysEnrolOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passkeys")
	replicas := []*passkeys{{file: file}, {file: file}}
	const rounds, browsers = 40, 8
	for round := range rounds {
		nonce := []byte(fmt.Sprintf("enrolment %05d", round))
		errs := make([]error, browsers)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range browsers {
			wg.Go(func() {
				start.Wait()
				errs[i] = replicas[i%2].add(passkey{Name: "dave", NotCaller: true, Handle: []byte{byte(i)}, Enrolment: nonce})
			})
		}
		start.Done()
		wg.Wait()
		kept := 0
		for i, err := range errs {
			switch {
			case err == nil:
				kept++
			case !errors.Is(err, errEnrolled):
				t.Fatalf("round %d, browser %d: %v", round, i, err)
			}
		}
		if kept != 1 {
			t.Fatalf("round %d: one link enrolled %d passkeys", round, kept)
		}
	}
	all, err := replicas[1].load()
	if err != nil || len(all) != rounds {
		t.Fatalf("the file holds %d passkeys, %v; want %d", len(all), err, rounds)
	}
	if used, err := replicas[0].used([]byte("enrolment 00000")); !used || err != nil {
		t.Errorf("used = %v, %v for an enrolled link", used, err)
	}
	if used, err := replicas[0].used([]byte("never enrolled.")); used || err != nil {
		t.Errorf("used = %v, %v for a link that enrolled nothing", used, err)
	}
}
