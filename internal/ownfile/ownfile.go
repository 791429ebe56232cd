// Package ownfile checks that a file the process reads or appends to is
// one no other local user can change: a regular file of this process's
// user or root, which group and others may not write (nor, for a secret,
// read).
//
// What it guarantees: [Check] looks at the opened file (fstat), not at
// its name, so the file checked is the file then read or written (the
// one a symbolic link reaches, if the name is one); and [Open] does not
// wait on a FIFO planted at the name.
//
// What it does not: check the directories above the file. Whoever may
// write one of them can rename another file into its place before the
// next open (package keyfile checks those too, for key files).
package ownfile

import (
	"errors"
	"fmt"
	"os"
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
// symbolic link reaches, if path is one). It does not wait on a FIFO.
func Open(path string, opts Options) (*os.File, error) {
	// O_NONBLOCK: a FIFO must not hold the open (Check refuses it; a
	// regular file ignores the flag).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := Check(f, opts); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
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
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		// A FIFO, a device or a directory: a reader that hangs, or
		// writes that nothing keeps.
		return fmt.Errorf("%w: %s is not a regular file (%v)", ErrInsecure, f.Name(), fi.Mode().Type())
	case fi.Mode().Perm()&mask != 0:
		// Stops another user from rewriting (or reading) it.
		what := "write"
		if opts.Secret {
			what = "read or write"
		}
		return fmt.Errorf("%w: %s has permissions %04o: group or others may %s it (chmod %04o %s)",
			ErrInsecure, f.Name(), fi.Mode().Perm(), what, fi.Mode().Perm()&^mask, f.Name())
	case !ok:
		return fmt.Errorf("%w: cannot tell who owns %s", ErrInsecure, f.Name())
	case st.Uid != uint32(os.Geteuid()) && st.Uid != 0:
		// Stops a file another user made first, in a directory both
		// may write: its owner may change its mode whenever they like.
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d) or root", ErrInsecure, f.Name(), st.Uid, os.Geteuid())
	}
	return nil
}
