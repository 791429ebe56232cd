package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileWritesEitherWay: a trail written with one system call a record
// (pwritev2 with RWF_DSYNC, where the kernel has it) and one written with
// a write and an fsync (the fallback) hold the same bytes, which verify;
// records of every length, a long one (past the buffer a File keeps)
// among shorter ones, so that a reused buffer that kept stale bytes would
// show.
func TestFileWritesEitherWay(t *testing.T) {
	questions := []string{strings.Repeat("é", maxKeptBuf), "short", "", strings.Repeat("q", 300), "x"}
	var files [2][]byte
	for i, noDsync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "a.jsonl")
		clock := time.UnixMicro(1_780_000_000_000_000)
		f, err := OpenFile(path, FileOptions{Now: func() time.Time { clock = clock.Add(time.Millisecond); return clock }})
		if err != nil {
			t.Fatal(err)
		}
		f.noDsync = noDsync
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
			t.Fatalf("noDsync %v: Verify: %+v, %v; want %d records", noDsync, sum, err, len(questions))
		}
		seq, head, _ := f.Head(context.Background())
		f.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		last := b[bytes.LastIndexByte(b[:len(b)-1], '\n')+1 : len(b)-1]
		if r, err := Parse(last); err != nil || r.Seq != seq || r.Sum() != head {
			t.Fatalf("noDsync %v: head %d %x is not the last record (%+v, %v)", noDsync, seq, head, r, err)
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
