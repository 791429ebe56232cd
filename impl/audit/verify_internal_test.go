package audit

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// TestVerifySkippingPrevMissesEdit is the negative control of the chain
// check: a record edited (kept canonical) is named by Verify, and missed
// by a verifier that skips the prev-hash check.
func TestVerifySkippingPrevMissesEdit(t *testing.T) {
	f, err := OpenFile(filepath.Join(t.TempDir(), "a.jsonl"), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 4 {
		if err := f.Append(Record{Op: OpIssue, ID: "1", Principal: "alice", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	var lines [][]byte
	for l, err := range f.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, slices.Clone(l))
	}
	r, _ := Parse(lines[1])
	r.Principal = "mallory"
	lines[1] = r.Canonical()
	seq := func(yield func([]byte, error) bool) {
		for _, l := range lines {
			if !yield(l, nil) {
				return
			}
		}
	}
	var b *Break
	if _, err := Verify(seq, nil, VerifyOptions{}); !errors.As(err, &b) || b.Seq != 2 || b.Problem != Edited {
		t.Fatalf("Verify: %v, want record 2 edited", err)
	}
	if _, err := Verify(seq, nil, VerifyOptions{skipPrev: true}); err != nil {
		t.Fatalf("the broken verifier: %v", err)
	}
}
