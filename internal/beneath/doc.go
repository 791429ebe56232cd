// Package beneath resolves a path beneath a directory opened once, without
// following a symbolic link anywhere on the path and without leaving the
// directory's mount, and hands back one handle on the parent directory
// through which an entry is checked and unlinked.
//
// A [Root] is a directory opened once (O_PATH) with its identity (device,
// inode, mount) and every absolute name it is known by: the name given, and
// that name with symbolic links resolved. [Roots] holds several; a directory
// given twice under different names is one Root with both names, and
// [Roots.Find] picks the root whose name is the longest prefix of a path, so
// overlapping roots (/srv and /srv/data) and the root / work.
// [Root.Check] confirms that each name still names the directory that was
// opened; a caller runs it on every call, so what it shows a person under a
// root's name is what it acts on.
//
// [Root.OpenParent] resolves the directory part of a relative path in one
// pass, component by component, and returns a [Dir]:
//   - with openat2(2) and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//     RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV where the kernel has it (Linux
//     5.6 and later). Whether it does is decided once, when the root is
//     opened: ENOSYS, or EPERM from a seccomp filter that does not know the
//     call, selects the walk. [Options.Walk] selects it always.
//   - otherwise by openat(2) with O_PATH | O_DIRECTORY | O_NOFOLLOW, one
//     component at a time, each checked to be on the root's mount (by the
//     mount ID from statx where the kernel reports one, Linux 5.8 and later,
//     else by the device number).
//
// [Dir.Lstat] (fstatat with AT_SYMLINK_NOFOLLOW) and [Dir.Unlink] (unlinkat
// with no flags) then act on one entry through that same handle. Nothing is
// ever resolved from the root a second time, and Unlink never removes a
// directory.
//
// What it guarantees:
//   - No symbolic link is followed, in the middle of a path or at its end,
//     whether it points inside the root or out of it: a path through one is
//     refused with an [*Error] naming the component ([ErrSymlink]). A
//     directory swapped for a symbolic link while a path is resolved is
//     either seen as the directory (and the handle keeps naming that
//     directory whatever is renamed afterwards) or refused.
//   - Only plain relative paths are resolved: "", absolute paths, and ".",
//     ".." or empty components are refused before any system call
//     ([ErrNotLocal]); the kernel is asked to stay beneath the root even so.
//   - Resolution never crosses a mount point ([ErrMountPoint]). The decision
//     is to refuse: a bind mount inside a root makes a directory from
//     anywhere in the system appear beneath it, and a person approving
//     /srv/data/x/passwd cannot tell that x is /etc. Only a privileged user
//     can make a mount this process sees (an unprivileged user's FUSE mount
//     is served by that user's own process, so it reaches nothing that user
//     could not), so a refusal only ever meets an administrator's mount;
//     give each mount that should be reachable as a root of its own.
//   - Input is bounded before any work: a path longer than [MaxPath] bytes,
//     or with a component longer than [MaxName] bytes, is refused
//     ([ErrTooLong]) without being scanned further. An [*Error]'s message
//     shows at most a bounded head and tail of a path, escaped by package
//     prompt, so even a hostile path costs a bounded amount to report.
//
// What it does not guarantee:
//   - The entry's own name is looked up twice, by Lstat and by Unlink, in
//     the same directory handle: Linux cannot unlink by handle. Between the
//     two, whoever can write that directory can rename another entry to that
//     name, and Unlink removes that entry instead. Only an entry of that one
//     directory, and never a directory (unlinkat without AT_REMOVEDIR fails
//     with EISDIR). Whoever moved it there needed write permission on that
//     directory, and, if the directory is sticky, to own what they moved or
//     replaced; a file moved in from elsewhere needed the same rights where
//     it came from. So that person could have deleted the entry themselves:
//     the window removes nothing they could not. TestRemainingWindow in
//     package filetool makes each such move, as an unprivileged user, inside
//     the window. One caveat: with fs.protected_hardlinks=0 (it is 1 on
//     every mainstream distribution) a user can hard-link a file they do not
//     own into a directory they can write; Unlink may then remove that new
//     link, which leaves the file itself and its other names in place.
//   - Hard links: a file's identity is its inode, and a file may have
//     several names, in and out of a root. Unlinking one name removes only
//     that name; the data lives on while any other name does. A caller that
//     wants the file itself gone must look at its link count.
//   - A root's names are checked by path lookup when Check runs. A root
//     renamed after that check is still the directory the handle holds: an
//     entry is then checked and unlinked in the directory that was opened
//     and shown, under its old name.
//   - Linux only. On other systems Open refuses every root.
package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// Limits on the input, checked before any other work. They are Linux's
// PATH_MAX (which counts the terminating NUL) and NAME_MAX: no longer path
// or name can be resolved by the kernel, so refusing them early loses
// nothing.
const (
	MaxPath = 4095
	MaxName = 255
)

// The reasons a path is refused. An [*Error] wraps one of them, or an errno
// such as ENOENT (errors.Is(err, fs.ErrNotExist)) or EACCES.
var (
	ErrSymlink    = errors.New("is a symbolic link, and symbolic links are never followed")
	ErrMountPoint = errors.New("is a mount point, and paths never cross into another mount")
	ErrNotDir     = errors.New("is not a directory")
	ErrChanged    = errors.New("changed while the path was resolved (a directory, then not)")
	ErrNotLocal   = errors.New("is not a plain relative path (empty, absolute, or with a \".\", \"..\" or empty component)")
	ErrTooLong    = errors.New("is too long")
	ErrRootMoved  = errors.New("no longer names the directory that was opened as a root (it was moved, replaced or removed)")
	ErrNotRoot    = errors.New("is not beneath any root")
)

// An Error is a refused path: Path is the path up to and including the
// component at fault (relative to the root, or absolute for a root's own
// name), Err the reason.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Unwrap() error { return e.Err }

// Error shows Path escaped by package prompt. A path over [MaxPath] bytes is
// shown only by its length and a short head and tail: the cost of reporting
// it does not grow with it.
func (e *Error) Error() string {
	if errors.Is(e.Err, ErrTooLong) {
		return tooLong(e.Path)
	}
	return "beneath: " + Show(e.Path) + " " + reason(e.Err)
}

// Show returns the path p escaped for a person to read (prompt.Path: each
// component isolated, drawn in order), or for a p over MaxPath bytes its
// length, head and tail only.
func Show(p string) string {
	if len(p) > MaxPath {
		return fmt.Sprintf("%s…%s (%d bytes)", prompt.Value(head(p), prompt.Options{MaxWidth: excerpt}),
			prompt.Value(tail(p), prompt.Options{MaxWidth: excerpt}), len(p))
	}
	return prompt.Path(p, prompt.Options{})
}

func reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "cannot be searched by this server (permission denied)"
	}
	for _, sentinel := range []error{ErrSymlink, ErrMountPoint, ErrNotDir, ErrChanged, ErrNotLocal, ErrRootMoved, ErrNotRoot} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return "cannot be resolved: " + err.Error()
}

// excerpt is how many bytes of each end of an over-long path are shown.
const excerpt = 48

func tooLong(p string) string {
	what, limit := "path", MaxPath
	if len(p) <= MaxPath {
		what, limit = "name", MaxName // a component of a path within MaxPath
	}
	return fmt.Sprintf("beneath: the %s is %d bytes long, over the limit of %d; it begins %s and ends %s",
		what, len(p), limit, prompt.Value(head(p), prompt.Options{MaxWidth: excerpt}), prompt.Value(tail(p), prompt.Options{MaxWidth: excerpt}))
}

// head and tail cut at most excerpt bytes off each end of p, at a rune
// boundary where p is valid UTF-8 there.
func head(p string) string {
	n := min(excerpt, len(p))
	for i := 0; i < utf8.UTFMax && n < len(p) && n > 0 && !utf8.RuneStart(p[n]); i++ {
		n--
	}
	return p[:n]
}

func tail(p string) string {
	n := max(len(p)-excerpt, 0)
	for i := 0; i < utf8.UTFMax && n < len(p) && !utf8.RuneStart(p[n]); i++ {
		n++
	}
	return p[n:]
}

// CheckLength refuses a path over [MaxPath] bytes or with a component over
// [MaxName] bytes. It costs O(1) for an over-long path and O(MaxPath)
// otherwise; call it on untrusted input before anything else.
func CheckLength(p string) error {
	if len(p) > MaxPath {
		return &Error{Path: p, Err: ErrTooLong}
	}
	for c := range strings.SplitSeq(p, "/") {
		if len(c) > MaxName {
			return &Error{Path: c, Err: ErrTooLong}
		}
	}
	return nil
}

// checkLocal refuses anything but a plain relative path: non-empty
// components, none "." or "..". It is the lexical half of staying beneath a
// root; the kernel (RESOLVE_BENEATH) or the walk (which never opens "..")
// is the other.
func checkLocal(rel string) error {
	if err := CheckLength(rel); err != nil {
		return err
	}
	if rel == "" || rel[0] == '/' {
		return &Error{Path: rel, Err: ErrNotLocal}
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." || c == ".." || strings.IndexByte(c, 0) >= 0 {
			return &Error{Path: rel, Err: ErrNotLocal}
		}
	}
	return nil
}

// checkName refuses anything but one plain path component.
func checkName(name string) error {
	if err := checkLocal(name); err != nil {
		return err
	}
	if strings.IndexByte(name, '/') >= 0 {
		return &Error{Path: name, Err: ErrNotLocal}
	}
	return nil
}

// ID is a filesystem object's identity: its device and inode numbers.
type ID struct{ Dev, Ino uint64 }

// Entry is what Lstat reports about a directory entry; the entry itself, not
// what a symbolic link points to.
type Entry struct {
	ID
	Mode    fs.FileMode
	Size    int64
	MtimeNs int64 // modification time, nanoseconds since the Unix epoch
	Nlink   uint64
}

// Options configures how roots resolve paths. The zero value is the default:
// openat2 where the kernel has it, the walk elsewhere.
type Options struct {
	// Walk resolves by the per-component openat walk even where openat2
	// exists. Both refuse the same paths (the tests run both); the walk costs
	// one system call or two per component instead of one per path.
	Walk bool

	// openat2, when set, replaces the openat2 system call (tests force
	// ENOSYS with it to check the decision).
	openat2 func(dirfd int, path string, flags uint64, resolve uint64) (int, error)
}

// Roots is a set of roots, each directory opened once.
type Roots struct{ list []*Root }

// OpenRoots opens every directory in dirs. Directories that are the same
// (device, inode and mount) become one [Root] known by all their names.
func OpenRoots(dirs []string, opts Options) (*Roots, error) {
	rs := &Roots{}
	for _, dir := range dirs {
		r, err := Open(dir, opts)
		if err != nil {
			rs.Close()
			return nil, err
		}
		if same := rs.same(r); same != nil {
			for _, n := range r.names {
				if !contains(same.names, n) {
					same.names = append(same.names, n)
				}
			}
			r.Close()
			continue
		}
		rs.list = append(rs.list, r)
	}
	return rs, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Len is the number of distinct roots.
func (rs *Roots) Len() int { return len(rs.list) }

// All returns the roots in the order they were first given.
func (rs *Roots) All() []*Root { return rs.list }

// Close closes every root.
func (rs *Roots) Close() error {
	var errs []error
	for _, r := range rs.list {
		errs = append(errs, r.Close())
	}
	rs.list = nil
	return errors.Join(errs...)
}

// Find returns the root one of whose names is the longest prefix of the
// absolute, clean path p, and p relative to that name ("" when p is the
// root itself). A longest match makes overlapping roots unambiguous: with
// roots /srv and /srv/data, /srv/data/x is resolved beneath /srv/data.
// Matching is lexical: Find never touches the filesystem.
func (rs *Roots) Find(p string) (r *Root, rel string, err error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return nil, "", &Error{Path: p, Err: ErrNotLocal}
	}
	best := -1
	for _, root := range rs.list {
		for _, name := range root.names {
			rest, ok := under(p, name)
			if ok && len(name) > best {
				best, r, rel = len(name), root, rest
			}
		}
	}
	if r == nil {
		return nil, "", &Error{Path: p, Err: ErrNotRoot}
	}
	return r, rel, nil
}

// under reports whether the clean absolute path p is name or beneath it,
// and p relative to name. "/srv/data-evil" is not under "/srv/data".
func under(p, name string) (string, bool) {
	if p == name {
		return "", true
	}
	prefix := name
	if !strings.HasSuffix(prefix, "/") { // the root "/" already ends in one
		prefix += "/"
	}
	rel, ok := strings.CutPrefix(p, prefix)
	return rel, ok
}
