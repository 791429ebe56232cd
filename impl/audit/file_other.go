//go:build !linux

package audit

// appendSync appends line to the file and makes it durable: a write and
// an fsync. t is locked.
func (t *File) appendSync(line []byte) error { return writeSync(t, line) }
