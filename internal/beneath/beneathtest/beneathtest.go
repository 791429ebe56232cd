//go:build linux

// Package beneathtest runs filesystem attacks from another process, as an
// unprivileged user, for tests of code that resolves paths beneath roots.
//
// The attacker is the test binary itself, started again: a test package
// calls [Main] first in its TestMain. When the test runs as root (as CI
// does), the attacker runs as uid and gid 65534 with no supplementary
// groups, so the kernel's permission checks are part of what is tested: it
// can move only what its user could. Running as another user, the attacker
// is that same user: the races are still run, the permission checks are
// not (Unprivileged reports which).
package beneathtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Nobody is the user and group the attacker runs as when the test runs as
// root.
const Nobody = 65534

// envRole marks a process started as the attacker.
const envRole = "BENEATHTEST_ATTACKER"

// Main runs the attacker's operation and exits if this process was started
// as the attacker; otherwise it returns at once. Call it first in TestMain.
func Main() {
	if os.Getenv(envRole) != "1" || len(os.Args) < 2 {
		return
	}
	args := os.Args[1:]
	if args[0] == "swap" {
		swap(args[1], args[2])
	}
	err := do(args[0], args[1:]...)
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println(0)
	case errors.As(err, &errno):
		fmt.Println(int(errno))
	default:
		fmt.Println(err)
	}
	os.Exit(0)
}

func do(op string, args ...string) error {
	switch op {
	case "exchange":
		return unix.Renameat2(unix.AT_FDCWD, args[0], unix.AT_FDCWD, args[1], unix.RENAME_EXCHANGE)
	case "rename":
		return unix.Rename(args[0], args[1])
	case "unlink":
		return unix.Unlink(args[0])
	case "symlink":
		return unix.Symlink(args[0], args[1])
	case "mkdir":
		return unix.Mkdir(args[0], 0o755)
	case "create":
		fd, err := unix.Open(args[0], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	return fmt.Errorf("beneathtest: unknown operation %q", op)
}

// swap exchanges a and b (renameat2 RENAME_EXCHANGE) in a tight loop. It
// prints "ready" after the first two exchanges (the pair back in place), and
// on end of standard input prints how many exchanges it made and exits.
func swap(a, b string) {
	var stop atomic.Bool
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	for n := 0; ; n++ {
		if stop.Load() {
			fmt.Println(n)
			os.Exit(0)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if n == 1 {
			fmt.Println("ready")
		}
	}
}

// Attacker starts attacker processes.
type Attacker struct {
	t    testing.TB
	exe  string
	cred *syscall.Credential
}

// New copies the test binary where any user can run it.
func New(t testing.TB) *Attacker {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(Dir(t), "attacker")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	a := &Attacker{t: t, exe: exe}
	if os.Geteuid() == 0 {
		a.cred = &syscall.Credential{Uid: Nobody, Gid: Nobody, Groups: []uint32{}}
	}
	return a
}

// Unprivileged reports whether the attacker runs as another user than the
// test (uid 65534, because the test runs as root).
func (a *Attacker) Unprivileged() bool { return a.cred != nil }

// Own makes paths belong to the attacker's user (when it is another user).
func (a *Attacker) Own(paths ...string) {
	a.t.Helper()
	if a.cred == nil {
		return
	}
	for _, p := range paths {
		if err := os.Lchown(p, Nobody, Nobody); err != nil {
			a.t.Fatal(err)
		}
	}
}

func (a *Attacker) command(args ...string) *exec.Cmd {
	cmd := exec.Command(a.exe, args...)
	cmd.Env = append(os.Environ(), envRole+"=1")
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Do performs one operation as the attacker and returns its error (a
// syscall.Errno, so errors.Is(err, fs.ErrPermission) works). Operations:
// exchange A B (renameat2 RENAME_EXCHANGE), rename A B, unlink A,
// symlink TARGET LINK, mkdir A, create A.
func (a *Attacker) Do(op string, args ...string) error {
	a.t.Helper()
	out, err := a.command(append([]string{op}, args...)...).Output()
	if err != nil {
		a.t.Fatalf("attacker %s %q: %v", op, args, err)
	}
	s := strings.TrimSpace(string(out))
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New(s)
	}
	if n == 0 {
		return nil
	}
	return syscall.Errno(n)
}

// Swap starts exchanging a and b in a tight loop as the attacker, returning
// once it has made its first exchanges. stop ends the loop and returns how
// many exchanges were made; it leaves a and b as they were found.
func (a *Attacker) Swap(x, y string) (stop func() int64) {
	a.t.Helper()
	cmd := a.command("swap", x, y)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		a.t.Fatalf("the attacker could not exchange %s and %s: %q", x, y, lines.Text())
	}
	stopped := false
	var count int64
	stop = func() int64 {
		if stopped {
			return count
		}
		stopped = true
		stdin.Close()
		done := make(chan struct{})
		go func() {
			if lines.Scan() {
				count, _ = strconv.ParseInt(lines.Text(), 10, 64)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
		if count%2 == 1 {
			// Stopped between the halves of a pair: put it back.
			if err := unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, y, unix.RENAME_EXCHANGE); err != nil {
				a.t.Errorf("restoring %s and %s: %v", x, y, err)
			}
		}
		return count
	}
	a.t.Cleanup(func() { stop() })
	return stop
}

// Dir returns a new empty directory that every user can traverse (mode
// 0755, under the system's temporary directory), removed when the test
// ends. t.TempDir's directories are private to the test's user.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "beneathtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(d); err != nil {
			t.Errorf("beneathtest: removing %s: %v", d, err)
		}
	})
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Tree builds a directory tree under base: each key is a path under base,
// each value "file" (a one-byte file), "dir" or "link:TARGET" (a symbolic
// link). Missing parents are made.
func Tree(t testing.TB, base string, entries map[string]string) {
	t.Helper()
	for p, kind := range entries {
		full := filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case kind == "file":
			err = os.WriteFile(full, []byte("x"), 0o644)
		case kind == "dir":
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(kind, "link:"):
			err = os.Symlink(strings.TrimPrefix(kind, "link:"), full)
		default:
			err = fmt.Errorf("beneathtest: unknown kind %q", kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Inodes maps every inode under dir (dir included, symbolic links not
// followed) to a path of it relative to dir, so a test can tell what
// disappeared whatever was renamed.
func Inodes(t testing.TB, dir string) map[uint64]string {
	t.Helper()
	m := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		m[fi.Sys().(*syscall.Stat_t).Ino] = rel
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
