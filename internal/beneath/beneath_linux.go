package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is a directory opened once. It is safe for concurrent use; Close it
// only when no call is using it.
type Root struct {
	fd     int
	id     ID
	mnt    uint64 // mount ID; 0 when the kernel reports none
	names  []string
	walk   bool // resolve by the openat walk (no openat2, or Options.Walk)
	sys2   func(dirfd int, path string, flags, resolve uint64) (int, error)
	closed bool
}

// resolveFlags are openat2's: no symlink, no magic link, no "..", no mount
// crossing anywhere on the path.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// dirFlags open a directory handle good only for *at calls and fstat: no
// read access is needed, none is taken.
const dirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// Open opens dir, which must be an existing directory, as a root. Its names
// are its absolute form and that form with symbolic links resolved (the
// first of [Root.Names]); both must name the directory opened.
func Open(dir string, opts Options) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("beneath: root %s: %w", Show(dir), err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("beneath: root %s: %w", Show(dir), err)
	}
	fd, err := unix.Open(resolved, dirFlags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("beneath: root %s is not a directory", Show(dir))
		}
		return nil, fmt.Errorf("beneath: root %s: %w", Show(dir), &os.PathError{Op: "open", Path: resolved, Err: err})
	}
	r := &Root{fd: fd, names: []string{resolved}, walk: opts.Walk, sys2: opts.openat2}
	if abs != resolved {
		r.names = append(r.names, abs)
	}
	if r.sys2 == nil {
		r.sys2 = openat2
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		r.Close()
		return nil, fmt.Errorf("beneath: root %s: %w", Show(dir), err)
	}
	r.id = idOf(&st)
	r.mnt, _ = mountID(fd)
	if err := r.Check(); err != nil {
		r.Close()
		return nil, err
	}
	if !r.walk {
		// Decided once: a kernel without openat2 (before 5.6), or a seccomp
		// filter that refuses a call it does not know, gets the walk.
		fd, err := r.sys2(r.fd, ".", dirFlags, resolveFlags)
		switch {
		case err == nil:
			unix.Close(fd)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			r.walk = true
		default:
			r.Close()
			return nil, fmt.Errorf("beneath: root %s: openat2: %w", Show(dir), err)
		}
	}
	return r, nil
}

func openat2(dirfd int, path string, flags, resolve uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, path, &unix.OpenHow{Flags: flags, Resolve: resolve})
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Names returns every absolute name of the root, the one with symbolic
// links resolved first.
func (r *Root) Names() []string { return append([]string(nil), r.names...) }

// ID returns the root directory's identity.
func (r *Root) ID() ID { return r.id }

// Walks reports whether the root resolves by the openat walk rather than by
// openat2.
func (r *Root) Walks() bool { return r.walk }

// Check confirms that every name of the root still names the directory that
// was opened; otherwise it returns an [*Error] wrapping [ErrRootMoved] with
// the name that no longer does. A name is looked up as a person would read
// it, following symbolic links: it is the administrator's name for the root.
func (r *Root) Check() error {
	for _, name := range r.names {
		var st unix.Stat_t
		if err := unix.Stat(name, &st); err != nil || idOf(&st) != r.id {
			return &Error{Path: name, Err: ErrRootMoved}
		}
	}
	return nil
}

// Close closes the root's handle.
func (r *Root) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return unix.Close(r.fd)
}

// Dir is an open handle on a directory beneath a root.
type Dir struct {
	fd int
	id ID
}

// OpenParent resolves the parent directory of rel beneath the root, as the
// package documentation describes, and returns it with rel's last
// component. rel must be a plain relative path ([ErrNotLocal] otherwise).
func (r *Root) OpenParent(rel string) (*Dir, string, error) {
	if err := checkLocal(rel); err != nil {
		return nil, "", err
	}
	dir, name := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	d, err := r.OpenDir(dir)
	if err != nil {
		return nil, "", err
	}
	return d, name, nil
}

// OpenDir resolves the directory rel beneath the root ("." is the root
// itself).
func (r *Root) OpenDir(rel string) (*Dir, error) {
	if rel != "." {
		if err := checkLocal(rel); err != nil {
			return nil, err
		}
	}
	var fd int
	var err error
	if r.walk {
		fd, err = r.walkTo(rel)
	} else {
		fd, err = r.openat2(rel)
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &Error{Path: rel, Err: err}
	}
	return &Dir{fd: fd, id: idOf(&st)}, nil
}

// openat2 resolves rel in one system call. On a refusal it asks the walk
// which component is at fault, only to name it: the walk's success never
// turns a refusal into an acceptance.
func (r *Root) openat2(rel string) (int, error) {
	var fd int
	var err error
	for range 3 {
		// EAGAIN: the kernel saw a concurrent rename or mount it could not
		// rule out (only possible with "..", which never gets here) — retry.
		if fd, err = r.sys2(r.fd, rel, dirFlags, resolveFlags); err != unix.EAGAIN {
			break
		}
	}
	if err == nil {
		return fd, nil
	}
	wfd, werr := r.walkTo(rel)
	if werr == nil {
		unix.Close(wfd)
		return -1, &Error{Path: rel, Err: classify(err)}
	}
	var be *Error
	if errors.As(werr, &be) && errors.Is(be.Err, ErrChanged) {
		// The component flipped back under the walk: it is the one at
		// fault, for the reason openat2 gave.
		return -1, &Error{Path: be.Path, Err: classify(err)}
	}
	return -1, werr
}

// classify maps openat2's errors for a path with no ".." onto the package's
// reasons.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return ErrSymlink
	case errors.Is(err, unix.EXDEV):
		return ErrMountPoint
	case errors.Is(err, unix.ENOTDIR):
		return ErrNotDir
	}
	return err
}

// walkTo resolves rel one component at a time: openat with O_NOFOLLOW
// (O_PATH | O_DIRECTORY makes a symbolic link fail with ENOTDIR instead of
// opening the link), then a mount check, before the next component.
func (r *Root) walkTo(rel string) (int, error) {
	fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, &Error{Path: ".", Err: err}
	}
	if rel == "." {
		return fd, nil
	}
	end := 0
	for comp := range strings.SplitSeq(rel, "/") {
		end += len(comp)
		next, err := unix.Openat(fd, comp, dirFlags|unix.O_NOFOLLOW, 0)
		if err != nil {
			err = whyNot(fd, comp, err)
			unix.Close(fd)
			return -1, &Error{Path: rel[:end], Err: err}
		}
		unix.Close(fd)
		fd = next
		if !r.sameMount(fd) {
			unix.Close(fd)
			return -1, &Error{Path: rel[:end], Err: ErrMountPoint}
		}
		end++ // the slash
	}
	return fd, nil
}

// whyNot says why openat refused comp in dir. The answer is looked up
// after the fact: a component that is a directory again by then was
// replaced while it was resolved.
func whyNot(dir int, comp string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, comp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ErrChanged
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return ErrSymlink
	case unix.S_IFDIR:
		return ErrChanged
	}
	return ErrNotDir
}

// sameMount reports whether fd is on the root's mount: by mount ID where the
// kernel reports one, else by device number (which tells another
// filesystem, but not a bind mount of the same one, apart).
func (r *Root) sameMount(fd int) bool {
	if r.mnt != 0 {
		m, ok := mountID(fd)
		return ok && m == r.mnt
	}
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint64(st.Dev) == r.id.Dev
}

func mountID(fd int) (uint64, bool) {
	var sx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx)
	if err != nil || sx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, false
	}
	return sx.Mnt_id, true
}

func idOf(st *unix.Stat_t) ID { return ID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)} }

// same returns the root in rs that is the same directory on the same mount
// as r, if any.
func (rs *Roots) same(r *Root) *Root {
	for _, o := range rs.list {
		if o.id == r.id && o.mnt == r.mnt {
			return o
		}
	}
	return nil
}

// ID returns the directory's identity.
func (d *Dir) ID() ID { return d.id }

// Lstat describes the entry name in d, not following a symbolic link
// (fstatat with AT_SYMLINK_NOFOLLOW on d's handle).
func (d *Dir) Lstat(name string) (Entry, error) {
	if err := checkName(name); err != nil {
		return Entry{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Entry{}, &Error{Path: name, Err: err}
	}
	return Entry{
		ID:      idOf(&st),
		Mode:    fileMode(st.Mode),
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
		Nlink:   uint64(st.Nlink),
	}, nil
}

// Unlink removes the entry name from d (unlinkat on d's handle, no flags):
// it removes a file, a symbolic link or a special file, never a directory
// (EISDIR). It does not check what the entry is: call Lstat first.
func (d *Dir) Unlink(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &Error{Path: name, Err: err}
	}
	return nil
}

// Close closes the directory handle.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// fileMode converts st_mode as os.Lstat does.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
