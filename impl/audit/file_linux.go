package audit

import (
	"io"

	"golang.org/x/sys/unix"
)

// openSync is the flag OpenFile adds on Linux: every write to the file
// returns only once its bytes and the file's new size are on the disk
// (synchronized I/O data integrity completion, as a write then fdatasync
// would), which is what a record needs before its transition.
const openSync = unix.O_DSYNC

// appendSync appends line to the file (opened O_APPEND|O_DSYNC) and makes
// it durable in one system call: write(2), on the descriptor kept at open.
// pwritev2 with RWF_DSYNC through os.File.Fd, which syncs alike, took
// about a fifth longer a record within a call (BENCHMARKS.md row 26): a
// vector to copy in, os.File's fields to read. t is locked.
func (t *File) appendSync(line []byte) error {
	if t.portable {
		return writeSync(t, line)
	}
	n, err := unix.Write(t.fd, line)
	switch {
	case err != nil:
		// EINTR among them: not retried, as part may be written; the
		// caller cuts it off.
		return err
	case n != len(line):
		return io.ErrShortWrite // the caller cuts the part written off
	}
	return nil
}
