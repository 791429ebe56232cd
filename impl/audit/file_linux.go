package audit

import (
	"io"

	"golang.org/x/sys/unix"
)

// appendSync appends line to the file (opened O_APPEND) and makes it
// durable: one pwritev2 with RWF_DSYNC, whose return means the bytes and
// the file's new size are on the disk, as a write then fdatasync would
// (synchronized I/O data integrity completion) — one system call a
// record instead of two. A kernel that refuses the flag (before 4.7)
// gets a write and an fsync, from then on. t is locked.
func (t *File) appendSync(line []byte) error {
	if !t.noDsync {
		// Offset -1: the file's position, which O_APPEND puts at its end.
		n, err := unix.Pwritev2(int(t.f.Fd()), [][]byte{line}, -1, unix.RWF_DSYNC)
		switch {
		case err == unix.EOPNOTSUPP || err == unix.ENOSYS || err == unix.EINVAL || err == unix.EPERM:
			// Refused before writing anything: the flag or the call is
			// unknown, or a seccomp filter forbids it. A write will say if
			// the file itself is the trouble.
			t.noDsync = true
		case err != nil:
			// EINTR among them: not retried, as part may be written; the
			// caller cuts it off.
			return err
		case n != len(line):
			return io.ErrShortWrite // the caller cuts the part written off
		default:
			return nil
		}
	}
	return writeSync(t, line)
}
