//go:build linux

package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

// resolvers runs f once with openat2 and once with the walk.
func resolvers(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("openat2", func(t *testing.T) { f(t, Options{}) })
	t.Run("walk", func(t *testing.T) { f(t, Options{Walk: true}) })
}

func openRoot(t *testing.T, dir string, opts Options) *Root {
	t.Helper()
	r, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.Walks() && !opts.Walk {
		t.Skip("this kernel has no openat2 (Linux 5.6): only the walk can be tested here")
	}
	if r.Walks() != opts.Walk {
		t.Fatalf("Walks() = %v with Options.Walk = %v", r.Walks(), opts.Walk)
	}
	return r
}

// TestOpenParent is the resolver's table: each path either resolves to the
// directory the lexical path names with no symlink on it, or is refused
// with the reason and the component at fault.
func TestOpenParent(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{
		"root/a.txt":            "file",
		"root/sub/b.txt":        "file",
		"root/sub/deep/c.txt":   "file",
		"root/sub/in-link":      "link:../a.txt",
		"root/sub/dir-link":     "link:deep",
		"root/alice/junk":       "link:../bob",
		"root/bob/thesis.txt":   "file",
		"root/out-dir":          "link:../outside",
		"root/abs-dir":          "link:" + filepath.Join(base, "outside"),
		"root/loop":             "link:loop",
		"root/proc-self":        "link:/proc/self",
		"outside/secret.txt":    "file",
		"root-sibling/d.txt":    "file",
		"root/file-in-the-path": "file",
	})
	root := filepath.Join(base, "root")
	cases := []struct {
		rel      string
		dir      string // the directory expected, relative to root ("" when refused)
		err      error
		at       string // Error.Path expected when refused
		tooLongs bool
	}{
		{rel: "a.txt", dir: "."},
		{rel: "sub/b.txt", dir: "sub"},
		{rel: "sub/deep/c.txt", dir: "sub/deep"},
		{rel: "sub/in-link", dir: "sub"}, // the final component is not resolved here
		{rel: "sub/dir-link/c.txt", err: ErrSymlink, at: "sub/dir-link"},
		{rel: "alice/junk/thesis.txt", err: ErrSymlink, at: "alice/junk"},
		{rel: "out-dir/secret.txt", err: ErrSymlink, at: "out-dir"},
		{rel: "abs-dir/secret.txt", err: ErrSymlink, at: "abs-dir"},
		{rel: "loop/x", err: ErrSymlink, at: "loop"},
		{rel: "proc-self/root/etc/passwd", err: ErrSymlink, at: "proc-self"},
		{rel: "file-in-the-path/x", err: ErrNotDir, at: "file-in-the-path"},
		{rel: "missing/x", err: fs.ErrNotExist, at: "missing"},
		{rel: "sub/missing/deeper/x", err: fs.ErrNotExist, at: "sub/missing"},
		{rel: "../root-sibling/d.txt", err: ErrNotLocal},
		{rel: "sub/../../outside/secret.txt", err: ErrNotLocal},
		{rel: "/etc/passwd", err: ErrNotLocal},
		{rel: "./a.txt", err: ErrNotLocal},
		{rel: "sub//b.txt", err: ErrNotLocal},
		{rel: "", err: ErrNotLocal},
		{rel: "a\x00b", err: ErrNotLocal},
		{rel: strings.Repeat("x/", 2048) + "y", err: ErrTooLong},
		{rel: strings.Repeat("n", 256), err: ErrTooLong},
	}
	resolvers(t, func(t *testing.T, opts Options) {
		r := openRoot(t, root, opts)
		for _, c := range cases {
			d, name, err := r.OpenParent(c.rel)
			if c.err == nil {
				if err != nil {
					t.Errorf("OpenParent(%q): %v", c.rel, err)
					continue
				}
				want := lstatID(t, filepath.Join(root, c.dir))
				if d.ID() != want || name != filepath.Base(c.rel) {
					t.Errorf("OpenParent(%q) = %v %q, want %v %q", c.rel, d.ID(), name, want, filepath.Base(c.rel))
				}
				d.Close()
				continue
			}
			var be *Error
			if !errors.Is(err, c.err) || !errors.As(err, &be) {
				t.Errorf("OpenParent(%q) = %v, want %v", c.rel, err, c.err)
				continue
			}
			if c.at != "" && be.Path != c.at {
				t.Errorf("OpenParent(%q) blames %q, want %q", c.rel, be.Path, c.at)
			}
			if c.at != "" && !strings.Contains(err.Error(), prompt.Path(c.at, prompt.Options{})) {
				t.Errorf("OpenParent(%q): message %q does not name %q", c.rel, err, c.at)
			}
		}
	})
}

func lstatID(t *testing.T, p string) ID {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return idOf(&st)
}

// TestDecidedOnce: a kernel (or seccomp filter) without openat2 gets the
// walk, decided when the root is opened; any other failure of the probe is
// an error, not a silent fallback.
func TestDecidedOnce(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		r, err := Open(dir, Options{openat2: func(int, string, uint64, uint64) (int, error) {
			calls++
			return -1, errno
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Walks() {
			t.Errorf("%v from openat2: the root does not walk", errno)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		before := calls
		d, _, err := r.OpenParent("f")
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if calls != before {
			t.Errorf("%v: openat2 was tried again after the decision", errno)
		}
		r.Close()
	}
	_, err := Open(dir, Options{openat2: func(int, string, uint64, uint64) (int, error) { return -1, unix.EIO }})
	if !errors.Is(err, unix.EIO) {
		t.Errorf("EIO from the probe: Open = %v, want the error", err)
	}
}

// TestUnlinkThroughHandle: once the parent is open, renaming the directory,
// or swapping it for a symlink, does not move where Lstat and Unlink act;
// and Unlink never removes a directory.
func TestUnlinkThroughHandle(t *testing.T) {
	resolvers(t, func(t *testing.T, opts Options) {
		base := t.TempDir()
		beneathtest.Tree(t, base, map[string]string{
			"root/d/f.txt":       "file",
			"root/d/subdir":      "dir",
			"root/bob/f.txt":     "file",
			"root/bob/subdir/x":  "file",
			"root/elsewhere/new": "dir",
		})
		root := filepath.Join(base, "root")
		r := openRoot(t, root, opts)
		d, name, err := r.OpenParent("d/f.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		e, err := d.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		// The attacker moves the approved directory away and puts a symlink
		// to bob in its place.
		if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "elsewhere", "moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("bob", filepath.Join(root, "d")); err != nil {
			t.Fatal(err)
		}
		e2, err := d.Lstat(name)
		if err != nil || e2.ID != e.ID {
			t.Fatalf("Lstat through the handle after the swap: %v %v, want %v", e2.ID, err, e.ID)
		}
		if err := d.Unlink(name); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(root, "elsewhere", "moved", "f.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the approved file was not the one removed: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(root, "bob", "f.txt")); err != nil {
			t.Errorf("bob's file was removed: %v", err)
		}
		if err := d.Unlink("subdir"); !errors.Is(err, unix.EISDIR) {
			t.Errorf("Unlink of a directory = %v, want EISDIR", err)
		}
		for _, bad := range []string{"", ".", "..", "a/b", "/x"} {
			if err := d.Unlink(bad); !errors.Is(err, ErrNotLocal) {
				t.Errorf("Unlink(%q) = %v, want ErrNotLocal", bad, err)
			}
			if _, err := d.Lstat(bad); !errors.Is(err, ErrNotLocal) {
				t.Errorf("Lstat(%q) = %v, want ErrNotLocal", bad, err)
			}
		}
		// Resolving again now meets the symlink.
		if _, _, err := r.OpenParent("d/f.txt"); !errors.Is(err, ErrSymlink) {
			t.Errorf("after the swap: %v, want ErrSymlink", err)
		}
	})
}

// TestRootNames: a root is known by its resolved and its given name; Check
// refuses once either names another directory, and accepts again once
// restored. Roots given twice are one root; Find picks the longest name.
func TestRootNames(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{
		"srv/data/x.txt":      "file",
		"srv/data-evil/y.txt": "file",
		"link":                "link:srv/data",
	})
	srv, data, link := filepath.Join(base, "srv"), filepath.Join(base, "srv", "data"), filepath.Join(base, "link")
	rs, err := OpenRoots([]string{srv, data, link, data + "/"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if rs.Len() != 2 {
		t.Fatalf("%d roots, want 2 (data and link are one)", rs.Len())
	}
	dataRoot := rs.All()[1]
	if got := dataRoot.Names(); len(got) != 2 || got[0] != data || got[1] != link {
		t.Fatalf("names = %q, want [%q %q]", got, data, link)
	}
	for p, want := range map[string]struct {
		root *Root
		rel  string
	}{
		data + "/x.txt":           {dataRoot, "x.txt"},
		link + "/x.txt":           {dataRoot, "x.txt"},
		srv + "/data-evil/y.txt":  {rs.All()[0], "data-evil/y.txt"},
		srv + "/data":             {dataRoot, ""},
		srv + "/data-evil":        {rs.All()[0], "data-evil"},
		filepath.Join(base, "x"):  {nil, ""},
		filepath.Join(base, "sr"): {nil, ""},
	} {
		r, rel, err := rs.Find(p)
		if r != want.root || rel != want.rel || (want.root == nil) != errors.Is(err, ErrNotRoot) {
			t.Errorf("Find(%q) = %v %q %v, want %v %q", p, r, rel, err, want.root, want.rel)
		}
	}
	if _, _, err := rs.Find("relative/x"); !errors.Is(err, ErrNotLocal) {
		t.Errorf("Find of a relative path = %v", err)
	}
	// A path that is not clean is refused, not matched as written: the
	// root chosen and the path shown must be the ones acted on.
	for _, p := range []string{data + "/../data-evil/y.txt", data + "/./x.txt", srv + "//data/x.txt", data + "/"} {
		if _, rel, err := rs.Find(p); !errors.Is(err, ErrNotLocal) {
			t.Errorf("Find(%q) = %q, %v; want ErrNotLocal", p, rel, err)
		}
	}

	if err := dataRoot.Check(); err != nil {
		t.Fatal(err)
	}
	// The link is repointed: its name no longer names the root.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("srv/data-evil", link); err != nil {
		t.Fatal(err)
	}
	if err := dataRoot.Check(); !errors.Is(err, ErrRootMoved) || !strings.Contains(err.Error(), "link") {
		t.Errorf("after repointing the link: %v", err)
	}
	os.Remove(link)
	os.Symlink("srv/data", link)
	// The directory is renamed and another created in its place.
	if err := os.Rename(data, data+"-old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dataRoot.Check(); !errors.Is(err, ErrRootMoved) {
		t.Errorf("after replacing the directory: %v", err)
	}
	os.Remove(data)
	os.Rename(data+"-old", data)
	if err := dataRoot.Check(); err != nil {
		t.Errorf("restored: %v", err)
	}
}

// TestSlashRoot: "/" is a root like any other: every absolute path is under
// it, relative to it without a leading slash.
func TestSlashRoot(t *testing.T) {
	rs, err := OpenRoots([]string{"/"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	r, rel, err := rs.Find("/etc/hostname")
	if err != nil || rel != "etc/hostname" || r.Names()[0] != "/" {
		t.Fatalf("Find = %v %q %v", r, rel, err)
	}
	if _, rel, err := rs.Find("/"); err != nil || rel != "" {
		t.Fatalf("Find(/) = %q %v", rel, err)
	}
	d, name, err := r.OpenParent(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.ID() != lstatID(t, "/etc") || name != "hostname" {
		t.Fatalf("OpenParent(etc/hostname) = %v %q", d.ID(), name)
	}
	// /proc is another mount.
	if _, _, err := r.OpenParent("proc/self/status"); !errors.Is(err, ErrMountPoint) {
		t.Errorf("through /proc: %v, want ErrMountPoint", err)
	}
}

// TestMountPoint: a bind mount inside a root leading out of it is refused
// by both resolvers, naming the mount point. It needs CAP_SYS_ADMIN to make
// the mount (CI runs as root).
func TestMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a bind mount needs root (CI runs as root)")
	}
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{
		"root/mnt":           "dir",
		"root/plain/f.txt":   "file",
		"outside/secret.txt": "file",
	})
	root, mnt := filepath.Join(base, "root"), filepath.Join(base, "root", "mnt")
	if err := unix.Mount(filepath.Join(base, "outside"), mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	resolvers(t, func(t *testing.T, opts Options) {
		r := openRoot(t, root, opts)
		for _, rel := range []string{"mnt/secret.txt", "mnt/x/y"} {
			_, _, err := r.OpenParent(rel)
			var be *Error
			if !errors.Is(err, ErrMountPoint) || !errors.As(err, &be) || be.Path != "mnt" {
				t.Errorf("OpenParent(%q) = %v, want ErrMountPoint at mnt", rel, err)
			}
		}
		d, _, err := r.OpenParent("plain/f.txt")
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
	})
	// The mount itself as a root is fine: nothing is crossed beneath it.
	r := openRoot(t, mnt, Options{})
	d, _, err := r.OpenParent("secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// TestCheckLengthBounded: refusing an over-long path, and reporting it,
// costs the same for 16 MiB as for 4 KiB (about 0.1 ms of CPU here; the
// bound is 5 ms), and the message is short.
func TestCheckLengthBounded(t *testing.T) {
	for _, n := range []int{MaxPath + 1, 3 << 20, 16 << 20} {
		p := "/" + strings.Repeat("\u202e\u0301a", n/6+1)
		start := cpuTime(t)
		var msg string
		for range 100 {
			err := CheckLength(p)
			if !errors.Is(err, ErrTooLong) {
				t.Fatalf("%d bytes: %v", len(p), err)
			}
			msg = err.Error()
		}
		if d := (cpuTime(t) - start) / 100; d > 5*time.Millisecond {
			t.Errorf("%d bytes: %v per refusal", len(p), d)
		}
		if len(msg) > 600 || strings.ContainsRune(msg, '\u202e') {
			t.Errorf("%d bytes: message of %d bytes, or with a raw control: %q", len(p), len(msg), msg)
		}
	}
	if err := CheckLength(strings.Repeat("a", MaxName) + "/" + strings.Repeat("b", MaxName)); err != nil {
		t.Errorf("names at the limit: %v", err)
	}
	// The path limit, exactly: MaxPath bytes pass, one more does not.
	atLimit := strings.Repeat("d/", MaxPath/2) + strings.Repeat("f", MaxPath%2)
	if err := CheckLength(atLimit); len(atLimit) != MaxPath || err != nil {
		t.Errorf("a path of %d bytes: %v", len(atLimit), err)
	}
	if err := CheckLength(atLimit + "f"); !errors.Is(err, ErrTooLong) {
		t.Errorf("a path of %d bytes: %v, want ErrTooLong", len(atLimit)+1, err)
	}
	long := strings.Repeat("é", 128) // 256 bytes
	if err := CheckLength("a/" + long + "/b"); !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "name is 256 bytes") {
		t.Errorf("a 256-byte name: %v", err)
	}
	// A name of 4 KiB costs no more to report than a short one.
	name := strings.Repeat("a\u0301\u0302\u0303\u0304", MaxPath/9)
	start := cpuTime(t)
	for range 100 {
		if err := CheckLength(name); !errors.Is(err, ErrTooLong) || len(err.Error()) > 600 {
			t.Fatalf("a %d-byte name: %v", len(name), err)
		}
	}
	if d := (cpuTime(t) - start) / 100; d > 5*time.Millisecond {
		t.Errorf("a %d-byte name: %v per refusal", len(name), d)
	}
}

// TestWhyNot: the walk's diagnosis of a refused component, looked up after
// the fact, says "changed" for a component that is a directory again (or
// gone) by then, never "not a directory".
func TestWhyNot(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{"dir": "dir", "link": "link:dir", "file": "file"})
	fd, err := unix.Open(base, dirFlags, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for comp, want := range map[string]error{"dir": ErrChanged, "missing": ErrChanged, "link": ErrSymlink, "file": ErrNotDir} {
		for _, errno := range []unix.Errno{unix.ENOTDIR, unix.ELOOP} {
			if got := whyNot(fd, comp, errno); got != want {
				t.Errorf("whyNot(%s, %v) = %v, want %v", comp, errno, got, want)
			}
		}
	}
	if got := whyNot(fd, "dir", unix.EACCES); got != unix.EACCES {
		t.Errorf("EACCES became %v", got)
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestOpenat2RefusalStands: a path openat2 refuses stays refused, even when
// the walk asked afterwards (only to name the component at fault) resolves
// it: the two may disagree when a directory is swapped between them, and
// the refusal is the one that counts. A fake openat2 refuses plain
// directories here; the real one is the negative control.
func TestOpenat2RefusalStands(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{"root/sub/b.txt": "file"})
	root := filepath.Join(base, "root")
	control := openRoot(t, root, Options{})
	d, _, err := control.OpenParent("sub/b.txt")
	if err != nil {
		t.Fatalf("control: the real openat2 refuses sub/b.txt: %v", err)
	}
	d.Close()
	for errno, want := range map[unix.Errno]error{unix.ELOOP: ErrSymlink, unix.EXDEV: ErrMountPoint, unix.EAGAIN: unix.EAGAIN} {
		refusing := func(dirfd int, path string, flags, resolve uint64) (int, error) {
			if path == "." { // the probe when the root is opened
				return openat2(dirfd, path, flags, resolve)
			}
			return -1, errno
		}
		r := openRoot(t, root, Options{openat2: refusing})
		d, _, err := r.OpenParent("sub/b.txt")
		if err == nil {
			d.Close()
			t.Errorf("openat2 refused with %v, the walk resolved it, and OpenParent accepted", errno)
			continue
		}
		var be *Error
		if !errors.Is(err, want) || !errors.As(err, &be) || be.Path != "sub" {
			t.Errorf("openat2 refused with %v: OpenParent = %v, want %v at sub", errno, err, want)
		}
	}
}

// TestKernelStaysBeneath: the lexical check refuses ".." before any system
// call, and openat2's RESOLVE_BENEATH refuses it too, so the kernel keeps a
// path beneath the root on its own (called here past the lexical check).
func TestKernelStaysBeneath(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{"root/sub/b.txt": "file", "outside/secret.txt": "file"})
	r := openRoot(t, filepath.Join(base, "root"), Options{})
	for _, rel := range []string{"..", "../outside", "sub/../..", "sub/../../outside"} {
		if fd, err := r.openat2(rel); err == nil {
			unix.Close(fd)
			t.Errorf("openat2 resolved %q, above the root", rel)
		}
	}
	// Negative control: ".." that stays beneath the root is the kernel's to
	// allow (only the lexical check refuses it).
	fd, err := r.openat2("sub/..")
	if err != nil {
		t.Fatalf("openat2(sub/..): %v", err)
	}
	unix.Close(fd)
}

// TestDeviceNumberFallback: on a kernel that reports no mount ID (statx's
// STATX_MNT_ID is Linux 5.8), the walk tells another filesystem apart by
// its device number: /proc is refused beneath /, /etc is not.
func TestDeviceNumberFallback(t *testing.T) {
	r := openRoot(t, "/", Options{Walk: true})
	if r.mnt == 0 {
		t.Log("this kernel reports no mount ID: the fallback is what every test uses")
	}
	r.mnt = 0 // as on a kernel without STATX_MNT_ID
	_, _, err := r.OpenParent("proc/self/status")
	var be *Error
	if !errors.Is(err, ErrMountPoint) || !errors.As(err, &be) || be.Path != "proc" {
		t.Errorf("through /proc by device number: %v, want ErrMountPoint at proc", err)
	}
	d, name, err := r.OpenParent("etc/hostname")
	if err != nil {
		t.Fatalf("control: etc/hostname: %v", err)
	}
	defer d.Close()
	if d.ID() != lstatID(t, "/etc") || name != "hostname" {
		t.Errorf("OpenParent(etc/hostname) = %v %q", d.ID(), name)
	}
}

// TestOpenDirLocal: OpenDir, like OpenParent, refuses anything but a plain
// relative path before any system call: the walk would open ".." as it
// opens any directory, so the lexical check is what keeps it beneath the
// root. "." (the root) and a plain directory are the controls.
func TestOpenDirLocal(t *testing.T) {
	base := t.TempDir()
	beneathtest.Tree(t, base, map[string]string{"root/sub/b.txt": "file", "outside/secret.txt": "file"})
	resolvers(t, func(t *testing.T, opts Options) {
		r := openRoot(t, filepath.Join(base, "root"), opts)
		for _, rel := range []string{"..", "../outside", "sub/..", "sub/../..", "./sub", "sub/.", "/", base, "", "sub//", "a\x00b"} {
			d, err := r.OpenDir(rel)
			if err == nil {
				t.Errorf("OpenDir(%q) opened %v", rel, d.ID())
				d.Close()
				continue
			}
			if !errors.Is(err, ErrNotLocal) {
				t.Errorf("OpenDir(%q) = %v, want ErrNotLocal (the lexical check)", rel, err)
			}
		}
		for rel, want := range map[string]string{".": "root", "sub": "root/sub"} {
			d, err := r.OpenDir(rel)
			if err != nil {
				t.Fatalf("control: OpenDir(%q): %v", rel, err)
			}
			if d.ID() != lstatID(t, filepath.Join(base, want)) {
				t.Errorf("OpenDir(%q) = %v, not %s", rel, d.ID(), want)
			}
			d.Close()
		}
	})
}

// TestOpenat2Chosen: where the kernel has openat2 (asked directly here), a
// root opened with the default options uses it: the openat2 half of every
// table above is not silently skipped as "no openat2 on this kernel".
func TestOpenat2Chosen(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, dirFlags, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, ".", &unix.OpenHow{Flags: dirFlags, Resolve: resolveFlags})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("this kernel has no openat2 (%v): the walk is the only resolver here", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Walks() {
		t.Error("the kernel has openat2, and the root walks")
	}
}
