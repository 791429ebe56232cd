package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileWritesEitherWay: a trail written with one system call a record
// (a write to the file opened O_DSYNC, on Linux) and one written with a
// write and an fsync (elsewhere) hold the same bytes, which verify;
// records of every length, a long one (past the buffer a File keeps)
// among shorter ones, so that a reused buffer that kept stale bytes would
// show.
func TestFileWritesEitherWay(t *testing.T) {
	questions := []string{strings.Repeat("é", maxKeptBuf), "short", "", strings.Repeat("q", 300), "x"}
	var files [2][]byte
	for i, portable := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "a.jsonl")
		clock := time.UnixMicro(1_780_000_000_000_000)
		f, err := OpenFile(path, FileOptions{Now: func() time.Time { clock = clock.Add(time.Millisecond); return clock }})
		if err != nil {
			t.Fatal(err)
		}
		f.portable = portable
		for j, q := range questions {
			r := Record{Op: OpIssue, ID: "00112233445566778899aabbccddeeff", Principal: "alice", Question: q, Result: "ok"}
			if j%2 == 1 {
				r = Record{Op: OpRedeem, ID: "00112233445566778899aabbccddeeff", Answer: q, Result: "done"}
			}
			if err := f.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		if sum, err := Verify(f.Records(context.Background(), 1), nil, VerifyOptions{}); err != nil || sum.Records != uint64(len(questions)) {
			t.Fatalf("portable %v: Verify: %+v, %v; want %d records", portable, sum, err, len(questions))
		}
		seq, head, _ := f.Head(context.Background())
		f.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		last := b[bytes.LastIndexByte(b[:len(b)-1], '\n')+1 : len(b)-1]
		if r, err := Parse(last); err != nil || r.Seq != seq || r.Sum() != head {
			t.Fatalf("portable %v: head %d %x is not the last record (%+v, %v)", portable, seq, head, r, err)
		}
		files[i] = b
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatalf("the two ways wrote different trails:\n%s\n%s", files[0], files[1])
	}
}

// TestFileAppendAllocates: a record written costs no allocation: its
// line and its Pending are the File's.
func TestFileAppendAllocates(t *testing.T) {
	f, err := OpenFile(filepath.Join(t.TempDir(), "a.jsonl"), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := Record{Op: OpIssue, ID: "00112233445566778899aabbccddeeff", Principal: "alice", Tool: "delete_file",
		Question: "Delete the file /srv/data/reports/2026/q3-summary.pdf?", Deadline: 1_780_000_000_000_000, Result: "ok"}
	if n := testing.AllocsPerRun(100, func() {
		if err := f.Append(r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations a record, want 0", n)
	}
}

// TestFileClosedWritesNothing: a record begun after Close fails with
// ErrClosed and writes nothing, even to the file that now holds the
// descriptor the File kept (the lowest free one, so the next opened).
func TestFileClosedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFile(filepath.Join(dir, "a.jsonl"), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Op: OpIssue, ID: "00112233445566778899aabbccddeeff", Result: "ok"}
	if err := f.Append(r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := os.OpenFile(filepath.Join(dir, "other"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if int(other.Fd()) != f.fd {
		t.Fatalf("the next file opened got descriptor %d, not the closed trail's %d: nothing to check", other.Fd(), f.fd)
	}
	if err := f.Append(r); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if b, err := os.ReadFile(other.Name()); err != nil || len(b) != 0 {
		t.Fatalf("the file holding the trail's old descriptor got %q (%v)", b, err)
	}
}
