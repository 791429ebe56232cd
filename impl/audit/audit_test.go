package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
)

func record(op audit.Op, result string) audit.Record {
	return audit.Record{Op: op, ID: "00112233445566778899aabbccddeeff", Principal: "alice", Tool: "delete_file",
		ArgsDigest: "sha256:ab", Result: result}
}

func TestCanonicalRoundTrip(t *testing.T) {
	for _, r := range []audit.Record{
		record(audit.OpIssue, "ok"),
		{Op: audit.OpIssue, ID: "x", Question: "Delete \"a\\b\"\n\t\x7f <script> é 😀 \u2028", Deadline: 1_700_000_000_000_000, Result: "ok", Seq: 7, Time: -3},
		{Op: audit.OpDecide, Approver: "sub:bob", Decision: "approve", Result: "ok", Seq: 1 << 60, Prev: sha256.Sum256(nil)},
	} {
		line := r.Canonical()
		got, err := audit.Parse(line)
		if err != nil {
			t.Fatalf("Parse(%s): %v", line, err)
		}
		if got != r {
			t.Errorf("round trip of %s: got %+v, want %+v", line, got, r)
		}
		if bytes.ContainsAny(line, "\n\r") {
			t.Errorf("canonical bytes hold a line break: %q", line)
		}
	}
	// Invalid UTF-8 is written as U+FFFD, and then round-trips.
	r := record(audit.OpIssue, "ok")
	r.Question = "bad \xff byte"
	got, err := audit.Parse(r.Canonical())
	if err != nil || got.Question != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8: got %q, %v", got.Question, err)
	}
}

func TestParseRefusesOtherSpellings(t *testing.T) {
	r := record(audit.OpRedeem, "ok")
	r.Seq = 1
	line := string(r.Canonical())
	for name, other := range map[string]string{
		"space":          strings.Replace(line, `"op":`, `"op": `, 1),
		"key order":      strings.Replace(line, `"v":1,"op":"redeem"`, `"op":"redeem","v":1`, 1),
		"escape":         strings.Replace(line, `alice`, `\u0061lice`, 1),
		"upper-case key": strings.Replace(line, `"tool"`, `"Tool"`, 1),
		"unknown field":  strings.Replace(line, `"seq"`, `"token":"x","seq"`, 1),
		"empty field":    strings.Replace(line, `"seq"`, `"answer":"","seq"`, 1),
		"upper-case hex": strings.Replace(line, `"prev":"00`, `"prev":"0A`, 1),
		"trailing":       line + " ",
		"version 2":      strings.Replace(line, `"v":1`, `"v":2`, 1),
		"bad op":         strings.Replace(line, `"redeem"`, `"steal"`, 1),
		"bad result":     strings.Replace(line, `"result":"ok"`, `"result":"OK"`, 1),
		"empty result":   strings.Replace(line, `"result":"ok"`, `"result":""`, 1),
		"long result":    strings.Replace(line, `"result":"ok"`, `"result":"`+strings.Repeat("a", 33)+`"`, 1),
		"long prev":      strings.Replace(line, `"}`, `00"}`, 1),
		"short prev":     strings.Replace(line, `00"}`, `"}`, 1),
	} {
		if other == line {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, err := audit.Parse([]byte(other)); !errors.Is(err, audit.ErrNotCanonical) {
			t.Errorf("%s: Parse(%s) = %v, want ErrNotCanonical", name, other, err)
		}
	}
}

// TestCanonicalBytes pins the canonical bytes of a record, which the
// Redis and PostgreSQL stores' scripts also write: every field in its
// place, empty ones left out, control characters and DEL escaped as
// \u00XX, '"' and '\' with a backslash.
func TestCanonicalBytes(t *testing.T) {
	r := audit.Record{Op: audit.OpDecide, ID: "0011", Principal: "alice", Tool: "delete_file", ArgsDigest: "sha256:ab",
		Question: "a\x7f\"\\\n\x01b", Deadline: -1, Approver: "sub:bob", Decision: "approve",
		Seq: 2, Time: 7, Result: "ok", Prev: audit.Hash{0xff, 31: 0x01}}
	const want = `{"v":1,"op":"decide","id":"0011","principal":"alice","tool":"delete_file","args":"sha256:ab",` +
		`"question":"a\u007f\"\\\u000a\u0001b","deadline":-1,"approver":"sub:bob","decision":"approve",` +
		`"seq":2,"time":7,"result":"ok","prev":"ff00000000000000000000000000000000000000000000000000000000000001"}`
	if got := string(r.Canonical()); got != want {
		t.Errorf("canonical bytes:\n%s\nwant\n%s", got, want)
	}
	if got, err := audit.Parse([]byte(want)); err != nil || got != r {
		t.Errorf("Parse: %+v, %v; want %+v", got, err, r)
	}
}

// TestRecorded: every answer is recorded but a store's failure, an Issue
// refused, and a poll while approvers decide.
func TestRecorded(t *testing.T) {
	for _, c := range []struct {
		op     audit.Op
		result string
		want   bool
	}{
		{audit.OpIssue, "ok", true},
		{audit.OpIssue, "full", false},
		{audit.OpIssue, "exists", false},
		{audit.OpIssue, "error", false},
		{audit.OpRedeem, "ok", true},
		{audit.OpRedeem, "done", true},
		{audit.OpRedeem, "expired", true},
		{audit.OpRedeem, "awaiting_approval", false},
		{audit.OpRedeem, "error", false},
		{audit.OpDecide, "decided", true},
		{audit.OpDecide, "error", false},
		{audit.OpCancel, "in_progress", true},
		{audit.OpComplete, "in_doubt", true},
		{audit.OpComplete, "error", false},
	} {
		if got := audit.Recorded(c.op, c.result); got != c.want {
			t.Errorf("Recorded(%s, %s) = %v, want %v", c.op, c.result, got, c.want)
		}
	}
}

// TestLinesRefusesATornLastLine: a buffer whose last line has no newline
// (a torn write) is an error after the lines before it, not a record.
func TestLinesRefusesATornLastLine(t *testing.T) {
	var got []string
	var last error
	for l, err := range audit.Lines([]byte("a\nb\n{\"v\":1")) {
		if err != nil {
			last = err
			break
		}
		got = append(got, string(l))
	}
	if !slices.Equal(got, []string{"a", "b"}) || last == nil {
		t.Errorf("Lines: %q, then %v; want a, b, then an error", got, last)
	}
}

func TestKind(t *testing.T) {
	for _, c := range []struct {
		op      audit.Op
		result  string
		outcome string
		want    audit.Kind
	}{
		{audit.OpIssue, "ok", "", audit.Asked},
		{audit.OpDecide, "ok", "", audit.Decided},
		{audit.OpDecide, "decided", "", audit.Refused},
		{audit.OpRedeem, "ok", "", audit.Redeemed},
		{audit.OpRedeem, "done", "", audit.Refused},
		{audit.OpCancel, "ok", "", audit.Cancelled},
		{audit.OpCancel, "in_progress", "", audit.Refused},
		{audit.OpComplete, "ok", "done", audit.Outcome},
		{audit.OpComplete, "ok", "failed", audit.Outcome},
		{audit.OpComplete, "ok", "unknown", audit.InDoubt},
		{audit.OpComplete, "in_doubt", "done", audit.InDoubt},
		{audit.OpComplete, "done", "done", audit.Refused},
	} {
		r := audit.Record{Op: c.op, Result: c.result, Outcome: c.outcome}
		if got := r.Kind(); got != c.want {
			t.Errorf("%s %s %s: kind %s, want %s", c.op, c.result, c.outcome, got, c.want)
		}
	}
}

// newFile opens a trail in a temporary directory with n records.
func newFile(t *testing.T, n int) (*audit.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := audit.OpenFile(path, audit.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for i := range n {
		op := []audit.Op{audit.OpIssue, audit.OpRedeem, audit.OpComplete}[i%3]
		r := record(op, "ok")
		if op == audit.OpComplete {
			r.Outcome = "done"
		}
		if err := f.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return f, path
}

func TestFileAbortCutsTheRecord(t *testing.T) {
	f, path := newFile(t, 2)
	before, _ := os.ReadFile(path)
	p, err := f.Begin(record(audit.OpRedeem, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	during, _ := os.ReadFile(path)
	if len(during) <= len(before) {
		t.Fatal("Begin wrote nothing to the file")
	}
	if err := p.Abort(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, before) {
		t.Fatalf("after Abort the file is\n%s\nwant\n%s", after, before)
	}
	if seq, _, _ := f.Head(context.Background()); seq != 2 {
		t.Fatalf("head seq %d after an abort, want 2", seq)
	}
	// The next record chains onto the last committed one.
	if err := f.Append(record(audit.OpCancel, "ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(f.Records(context.Background(), 1), nil, audit.VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestFileReopenCutsATornLine(t *testing.T) {
	f, path := newFile(t, 3)
	_, head, _ := f.Head(context.Background())
	f.Close()
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, `{"v":1,"op":"iss`...), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := audit.OpenFile(path, audit.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	seq, h, _ := g.Head(context.Background())
	if seq != 3 || h != head {
		t.Fatalf("reopened at seq %d head %x, want 3 %x", seq, h, head)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
		t.Fatal("the torn line was not cut off")
	}
}

func TestFileRefusesSymlinkAndSecondWriter(t *testing.T) {
	_, path := newFile(t, 1)
	if _, err := audit.OpenFile(path, audit.FileOptions{}); err == nil {
		t.Error("a second OpenFile of a trail in use succeeded")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.OpenFile(link, audit.FileOptions{}); err == nil {
		t.Error("OpenFile followed a symbolic link")
	}
}

func TestKeyLines(t *testing.T) {
	priv, pub := audit.GenerateKey()
	k, err := audit.ParseKey(strings.NewReader("# comment\n\n" + priv + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if audit.PublicLine(k) != pub {
		t.Fatal("the public line of the parsed key differs")
	}
	p, err := audit.ParsePublicKey(strings.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	c := audit.SignCheckpoint(k, "ns", 3, sha256.Sum256([]byte("x")), time.Now())
	if err := c.Verify(p); err != nil {
		t.Fatal(err)
	}
	c.Seq++
	if c.Verify(p) == nil {
		t.Fatal("a checkpoint whose seq changed verifies")
	}
	if p, err := audit.ParsePublicKey(strings.NewReader(priv)); err != nil || !p.Equal(k.Public()) {
		t.Errorf("ParsePublicKey of the signing key line: %x, %v; want its public half", p, err)
	}
	for _, bad := range []string{pub, audit.KeyPrefix + "AAAA", priv + "AAAA", priv[:len(priv)-1], priv[:len(priv)-2] + "AA", "", "mcp-confirm-key-v1:" + priv[len(audit.KeyPrefix):]} {
		if _, err := audit.ParseKey(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
}

// TestFileRecordsLeavesOutATornLine: a reader (verify, export) running
// while a record is half-written sees the records before it, and they
// verify.
func TestFileRecordsLeavesOutATornLine(t *testing.T) {
	f, path := newFile(t, 3)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(`{"v":1,"op":"red`)
	fh.Close()
	sum, err := audit.Verify(f.Records(context.Background(), 1), nil, audit.VerifyOptions{})
	if err != nil || sum.Records != 3 {
		t.Fatalf("Verify: %+v, %v; want 3 records", sum, err)
	}
}
