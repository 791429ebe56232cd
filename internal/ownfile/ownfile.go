// Package ownfile checks that a file the process reads or appends to is
// one no other local user can change: a regular file of this process's
// user or root, which group and others may not write (nor, for a secret,
// read).
//
// What it guarantees: [Check] looks at the opened file (fstat), not at
// its name, so the file checked is the file then read or written (the
// one a symbolic link reaches, if the name is one); [Dirs] checks every
// directory above a name, as given and with symbolic links resolved, so
// that no other user can rename another file into its place; [Open]
// does both; and [OpenRegular], for a file that is read and checked
// rather than trusted, refuses only what is not a regular file. Neither
// open waits on a FIFO planted at the name.
//
// What it does not: keep a file that passed from being changed later by
// its owner or root, or notice a file changed after it was read; nor
// check the directories of a name that [Check] alone was given.
package ownfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrInsecure reports a file another local user could change (or read,
// for a secret), or one that is not a regular file.
var ErrInsecure = errors.New("a file another user could change")

// Options says what a file must keep from others.
type Options struct {
	// Secret also refuses a file group or others may read.
	Secret bool
}

// Open opens the file at path for reading and checks it (the file a
// symbolic link reaches, if path is one) and the directories above it
// ([Check], [Dirs]). It does not wait on a FIFO.
func Open(path string, opts Options) (*os.File, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	if err := Check(f, opts); err != nil {
		f.Close()
		return nil, err
	}
	if err := Dirs(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenRegular opens the file at path for reading, whoever owns it, and
// refuses it, wrapping [ErrInsecure], unless it is a regular file: for a
// file whose contents are checked rather than trusted (an audit trail
// being verified may be a copy another user made). It does not wait on a
// FIFO.
func OpenRegular(path string) (*os.File, error) {
	// O_NONBLOCK: a FIFO planted at the name must not hold the open, and
	// with it the command reading (a regular file ignores the flag).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(f.Name(), fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular refuses, wrapping [ErrInsecure], the entry name that fi does
// not say is a regular file.
func regular(name string, fi os.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	// A FIFO, a device or a directory: a reader that hangs, or writes
	// that nothing keeps.
	return fmt.Errorf("%w: %s is not a regular file (%v)", ErrInsecure, name, fi.Mode().Type())
}

// Check refuses the opened file f, wrapping [ErrInsecure] with f's name
// and the reason, unless it is a regular file owned by this process's
// user or root that group and others may not write (nor read, if
// opts.Secret).
func Check(f *os.File, opts Options) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	mask := os.FileMode(0o022)
	if opts.Secret {
		mask = 0o077
	}
	if err := regular(f.Name(), fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&mask != 0 {
		// Stops another user from rewriting (or reading) it.
		what := "write"
		if opts.Secret {
			what = "read or write"
		}
		return fmt.Errorf("%w: %s has permissions %04o: group or others may %s it (chmod %04o %s)",
			ErrInsecure, f.Name(), fi.Mode().Perm(), what, fi.Mode().Perm()&^mask, f.Name())
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	// Stops a file another user made first, in a directory both may
	// write: its owner may change its mode whenever they like.
	return owned(f.Name(), st)
}

// Dirs refuses, wrapping [ErrInsecure], a name with a directory above it
// (as given, or with symbolic links resolved) that group or others may
// write without the sticky bit, or that is owned by someone other than
// this process's user or root. A name not made yet has the directories of
// its parent checked, so that a caller may check before it creates.
func Dirs(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, os.ErrNotExist) {
		if real, err = filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			real = filepath.Join(real, filepath.Base(abs))
		}
	}
	if err != nil {
		return err
	}
	for _, p := range []string{abs, real} {
		for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				return err
			}
			// Stops another user from replacing the file by renaming
			// into a directory they may write (the sticky bit forbids
			// renaming over another user's file).
			if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
				return fmt.Errorf("%w: directory %s has permissions %04o: group or others may replace %s (chmod go-w %s)", ErrInsecure, dir, fi.Mode().Perm(), path, dir)
			}
			st, _ := fi.Sys().(*syscall.Stat_t)
			// Stops a directory of another user's, who may rename
			// anything in it whatever its mode.
			if err := owned(dir, st); err != nil {
				return err
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return nil
}

// owned refuses the entry name unless st says this process's user or
// root owns it.
func owned(name string, st *syscall.Stat_t) error {
	if st == nil {
		return fmt.Errorf("%w: cannot tell who owns %s", ErrInsecure, name)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d) or root", ErrInsecure, name, st.Uid, uid)
	}
	return nil
}
