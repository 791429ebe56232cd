package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

// A File is a trail kept in a JSONL file (one record's canonical bytes
// and a newline per line) and its checkpoints in a second file beside it
// (PATH.checkpoints): the trail of the in-memory store, which writes each
// record with [File.Begin] and makes it durable (fsync) before the
// transition it records takes effect, under its own lock.
//
// A File is safe for concurrent use; records are appended one at a time,
// in the order Begin is called. One process may append to a file at a time
// (OpenFile takes an exclusive flock; a second opener is refused).
//
// What it guarantees: a record Begin returned is on disk before Commit —
// written and synced to the file's data (its bytes and the file's size,
// as fdatasync) in one system call on Linux (a write to the file, opened
// O_DSYNC), by a write and an fsync elsewhere — and a
// record aborted is cut off the file (and that fsync'd) before Abort
// returns; the directory is fsync'd once when the file is opened, so
// that a file just created is found again after a crash. A crash between
// Begin and Commit leaves the record in the file, which is a transition
// that may or may not have been taken (for the memory store, which
// forgets everything on a crash, one never answered). A torn last line (a
// crash during the write) is cut off by the next OpenFile. Neither file
// is used if another local user could write it ([ErrInsecureFile]). What
// it does not: stop whoever can write the file, or replace it in its
// directory, from rewriting it; checkpoints signed with a key they do not
// hold show what they changed up to the last checkpoint.
type File struct {
	mu     sync.Mutex
	f      *os.File
	fd     int // f's descriptor, taken once: valid until Close, which sets broken
	path   string
	size   int64
	seq    uint64
	head   Hash
	now    func() time.Time
	broken error // set when an abort could not cut a record, or by Close: nothing more is written

	// Used under mu, from Begin to Commit or Abort: one record is pending
	// at a time, so its line and its Pending are the File's, not a new
	// allocation each.
	buf     []byte
	pending Pending
	// portable: each record is written, then fsync'd, as on systems
	// other than Linux (tests: the two ways write the same bytes).
	portable bool
}

// maxKeptBuf is the largest line buffer a File keeps between records: a
// huge question's is dropped after use.
const maxKeptBuf = 64 << 10

// FileOptions configures [OpenFile].
type FileOptions struct {
	// Now is the clock of the records' Time. Default time.Now.
	Now func() time.Time
}

// OpenFile opens (creating it, mode 0600) the trail at path, and finds
// its head: the last record. It refuses a symbolic link, a file that is
// not a regular file, that group or others may write, or that someone
// other than this user or root owns (wrapping [ErrInsecureFile]), before
// it reads or changes anything; and a file whose last complete line is
// not a record.
func OpenFile(path string, opts FileOptions) (*File, error) {
	f, err := openOwn(path, openSync)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %s is in use by another process: %w", path, err)
	}
	t := &File{f: f, fd: int(f.Fd()), path: path, now: opts.Now}
	if t.now == nil {
		t.now = time.Now
	}
	if err := t.recover(); err != nil {
		f.Close()
		return nil, err
	}
	// A crash must not lose the file's name with it: its records are
	// synced to the file's data, which does not cover the directory entry.
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	return t, nil
}

// ErrInsecureFile reports a trail or checkpoints file that another local
// user could write, or that is not a regular file.
var ErrInsecureFile = ownfile.ErrInsecure

// openOwn opens (creating it, mode 0600) the file at path for reading and
// appending, with the flags in flag too, and refuses it unless it is a
// regular file of this user's or root's that group and others may not
// write, in directories they may not write either (ownfile.Check and
// ownfile.Dirs).
func openOwn(path string, flag int) (*os.File, error) {
	// Checked before the open creates anything: another user who may
	// write a directory above could rename a trail of theirs into place.
	if err := ownfile.Dirs(path); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// O_NOFOLLOW: another local user's symlink must not choose the file.
	// O_RDWR and O_NONBLOCK: a FIFO planted there must not hold the open
	// (it is refused below; a regular file ignores O_NONBLOCK).
	f, err := os.OpenFile(path, flag|os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Another user who could write the file could rewrite the records,
	// and the head a restart continues the chain from.
	if err := ownfile.Check(f, ownfile.Options{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	return f, nil
}

// syncDir fsyncs the directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// recover finds the head, cutting off a torn last line.
func (t *File) recover() error {
	b, err := io.ReadAll(io.NewSectionReader(t.f, 0, 1<<62))
	if err != nil {
		return fmt.Errorf("audit: read %s: %w", t.path, err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	if end != len(b) {
		// A torn write: its transition never took effect.
		if err := t.f.Truncate(int64(end)); err != nil {
			return fmt.Errorf("audit: cut the torn last line of %s: %w", t.path, err)
		}
		if err := t.f.Sync(); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	t.size = int64(end)
	if end == 0 {
		return nil
	}
	last := b[bytes.LastIndexByte(b[:end-1], '\n')+1 : end-1]
	r, err := Parse(last)
	if err != nil {
		return fmt.Errorf("audit: the last record of %s: %w (run mcp-confirm audit verify)", t.path, err)
	}
	t.seq, t.head = r.Seq, sha256.Sum256(last)
	return nil
}

// A Pending is a record written and made durable whose transition has not
// yet taken effect: Commit or Abort it, once. It is the File's own (one
// is pending at a time): do not keep it after.
type Pending struct {
	t    *File
	sum  Hash  // the record's SHA-256: the next head
	n    int64 // the line's length, with its newline
	size int64 // the file's size before it
}

// Begin gives r its seq, time and prev, and appends it to the file, made
// durable before Begin returns (see [File]). The File stays locked (no
// other record is written) until the Pending is committed or aborted. Any
// error means nothing was written.
func (t *File) Begin(r Record) (*Pending, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.broken != nil {
		t.mu.Unlock()
		return nil, t.broken
	}
	line := Seal(r.AppendPrefix(t.buf[:0]), t.seq+1, t.now().UnixMicro(), r.Result, t.head)
	line = append(line, '\n')
	if t.buf = line; cap(line) > maxKeptBuf {
		t.buf = nil
	}
	p := &t.pending
	*p = Pending{t: t, sum: sha256.Sum256(line[:len(line)-1]), n: int64(len(line)), size: t.size}
	if err := t.appendSync(line); err != nil {
		err = fmt.Errorf("audit: append to %s: %w", t.path, err)
		p.abort()
		t.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// Commit makes the record the trail's head. A nil Pending commits
// nothing.
func (p *Pending) Commit() {
	if p == nil {
		return
	}
	t := p.t
	t.seq++
	t.head = p.sum
	t.size += p.n
	t.mu.Unlock()
}

// Abort cuts the record off the file: its transition did not take effect.
func (p *Pending) Abort() error {
	err := p.abort()
	p.t.mu.Unlock()
	return err
}

func (p *Pending) abort() error {
	t := p.t
	err := t.f.Truncate(p.size)
	if err == nil {
		err = t.f.Sync()
	}
	if err != nil {
		// The file may now hold a record of a transition never taken:
		// write nothing more rather than chain onto it.
		t.broken = fmt.Errorf("audit: %s: a record could not be cut off after its transition failed: %w", t.path, err)
		return t.broken
	}
	return nil
}

// Append writes r as [File.Begin] and commits it: for a record of a
// refusal, which changes nothing else.
func (t *File) Append(r Record) error {
	p, err := t.Begin(r)
	if err != nil {
		return err
	}
	p.Commit()
	return nil
}

// Head implements [Trail].
func (t *File) Head(context.Context) (uint64, Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq, t.head, nil
}

// Records implements [Trail]: it reads the file as it is on disk.
func (t *File) Records(_ context.Context, from uint64) iter.Seq2[[]byte, error] {
	return FileRecords(t.path, from)
}

// FileRecords yields the records of the trail file at path, from the
// from-th line on (1: all), without opening it for writing: for verify and
// export, while a server appends. A last line without its newline is a
// record being written (or torn by a crash, which the next OpenFile cuts
// off): it is left out.
func FileRecords(path string, from uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		b, err := readRegular(path)
		if err != nil {
			yield(nil, fmt.Errorf("audit: %w", err))
			return
		}
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		n := uint64(0)
		for line, err := range Lines(b) {
			if n++; n < from && err == nil {
				continue
			}
			if !yield(line, err) || err != nil {
				return
			}
		}
	}
}

// readRegular reads the regular file at path whole, whoever owns it (a
// trail being verified may be a copy). A FIFO planted where verify or
// export reads would hold the operator's command forever: it is opened
// without waiting for a writer and refused.
func readRegular(path string) ([]byte, error) {
	f, err := ownfile.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CheckpointPath is where the checkpoints of the trail at path are kept.
func CheckpointPath(path string) string { return path + ".checkpoints" }

// AddCheckpoint implements [Trail]: one line of JSON appended to
// [CheckpointPath], fsync'd.
func (t *File) AddCheckpoint(_ context.Context, c Checkpoint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := openOwn(CheckpointPath(t.path), 0)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: checkpoint: %w", err)
	}
	return nil
}

// Checkpoints implements [Trail].
func (t *File) Checkpoints(context.Context) ([]Checkpoint, error) {
	return ReadCheckpoints(CheckpointPath(t.path))
}

// ReadCheckpoints reads a file of checkpoints, one JSON line each; a file
// that does not exist holds none.
func ReadCheckpoints(path string) ([]Checkpoint, error) {
	b, err := readRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var cps []Checkpoint
	for line, err := range Lines(b) {
		if err != nil {
			return nil, fmt.Errorf("audit: %s: %w", path, err)
		}
		var c Checkpoint
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("audit: %s: %w", path, err)
		}
		cps = append(cps, c)
	}
	return cps, nil
}

// ErrClosed: the File was closed; nothing more is written to it.
var ErrClosed = errors.New("audit: the trail file is closed")

// Close closes the file. A record begun after it fails with ErrClosed.
func (t *File) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Its descriptor, kept in fd, may be reused by the next file opened:
	// nothing may write through it from now on.
	t.broken = ErrClosed
	return t.f.Close()
}

var _ Trail = (*File)(nil)

// Path returns the trail file's path.
func (t *File) Path() string { return t.path }

// writeSync appends line to t's file with a write, then fsyncs it. t is
// locked.
func writeSync(t *File, line []byte) error {
	if _, err := t.f.Write(line); err != nil {
		return err
	}
	return t.f.Sync()
}
