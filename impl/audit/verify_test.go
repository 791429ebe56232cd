package audit_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
)

// trailLines returns the records of f, each its own copy.
func trailLines(t *testing.T, f *audit.File) [][]byte {
	t.Helper()
	var ls [][]byte
	for l, err := range f.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, slices.Clone(l))
	}
	return ls
}

// seqOf yields ls, then err if it is not nil.
func seqOf(ls [][]byte, err error) func(func([]byte, error) bool) {
	return func(yield func([]byte, error) bool) {
		for _, l := range ls {
			if !yield(l, nil) {
				return
			}
		}
		if err != nil {
			yield(nil, err)
		}
	}
}

// TestVerifyNamesTheFirstBreak tampers with a six-record trail and its
// signed checkpoints as whoever can write the store (or hand the verifier
// a checkpoint) could, and checks that Verify names the record or
// checkpoint at fault; the untampered trail verifies (the negative
// control), its checkpoints given in any order.
func TestVerifyNamesTheFirstBreak(t *testing.T) {
	f, _ := newFile(t, 6)
	orig := trailLines(t, f)
	_, head, _ := f.Head(context.Background())
	pub, key, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	hashOf := func(i int) audit.Hash {
		r, err := audit.Parse(orig[i-1])
		if err != nil {
			t.Fatal(err)
		}
		return r.Sum()
	}
	cp := func(k ed25519.PrivateKey, ns string, seq int) audit.Checkpoint {
		return audit.SignCheckpoint(k, ns, uint64(seq), hashOf(seq), now)
	}
	// Out of order (Verify sorts them), and one of record 0 (the empty
	// trail's, which names no record).
	good := []audit.Checkpoint{cp(key, "ns", 6), audit.SignCheckpoint(key, "ns", 0, audit.Hash{}, now), cp(key, "ns", 3)}
	opts := audit.VerifyOptions{Key: pub, Namespace: "ns"}

	sum, err := audit.Verify(seqOf(orig, nil), good, opts)
	if err != nil || sum.Records != 6 || sum.Head != head || sum.Checkpoint != 6 {
		t.Fatalf("the untampered trail: %+v, %v; want 6 records, head %x, checkpoint at 6", sum, err, head)
	}

	edited := func(c audit.Checkpoint, change func(*audit.Checkpoint)) []audit.Checkpoint {
		change(&c)
		return []audit.Checkpoint{c}
	}
	moved := func(from, to int) [][]byte { // record from (1-based) moved to index to
		ls := slices.Clone(orig)
		l := ls[from-1]
		ls = slices.Delete(ls, from-1, from)
		return slices.Insert(ls, to, l)
	}
	for _, c := range []struct {
		name    string
		lines   [][]byte
		cps     []audit.Checkpoint
		opts    audit.VerifyOptions
		seq     uint64
		problem audit.Problem
	}{
		{"checkpoint signed by another key", orig, []audit.Checkpoint{cp(other, "ns", 4)}, opts, 4, audit.Forged},
		{"checkpoint of another namespace", orig, []audit.Checkpoint{cp(key, "other", 4)}, opts, 4, audit.Forged},
		{"checkpoint without a key to verify it", orig, good, audit.VerifyOptions{}, 0, audit.Forged},
		{"checkpoint's head changed", orig, edited(cp(key, "ns", 4), func(c *audit.Checkpoint) { c.Head = hashOf(5) }), opts, 4, audit.Forged},
		{"checkpoint's namespace changed", orig, edited(cp(key, "other", 4), func(c *audit.Checkpoint) { c.Namespace = "ns" }), opts, 4, audit.Forged},
		{"last record edited below its checkpoint", func() [][]byte {
			ls := slices.Clone(orig)
			r, _ := audit.Parse(ls[5])
			r.Answer = "decline"
			ls[5] = r.Canonical()
			return ls
		}(), good, opts, 6, audit.Edited},
		// A first record whose prev is not zero: with no record after it,
		// no later prev can show the edit.
		{"first record's prev not zero, the only record", func() [][]byte {
			r, _ := audit.Parse(orig[0])
			r.Prev = audit.Hash{1}
			return [][]byte{r.Canonical()}
		}(), nil, opts, 1, audit.Edited},
		{"record moved two places on", moved(2, 3), good, opts, 2, audit.Reordered},
		{"record moved to the end", moved(2, 5), nil, opts, 2, audit.Reordered},
		{"record repeated", slices.Insert(slices.Clone(orig), 3, orig[1]), nil, opts, 2, audit.Reordered},
		{"last record repeated", slices.Insert(slices.Clone(orig), 3, orig[2]), nil, opts, 3, audit.Reordered},
		{"truncated to nothing below a checkpoint at record 1", nil, []audit.Checkpoint{cp(key, "ns", 1)}, opts, 1, audit.Truncated},
		{"truncated below a checkpoint at record 1, others at 0", nil,
			[]audit.Checkpoint{audit.SignCheckpoint(key, "ns", 0, audit.Hash{}, now), cp(key, "ns", 1)}, opts, 1, audit.Truncated},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := audit.Verify(seqOf(c.lines, nil), c.cps, c.opts)
			var b *audit.Break
			if !errors.As(err, &b) || b.Seq != c.seq || b.Problem != c.problem || !errors.Is(err, audit.ErrBroken) {
				t.Errorf("Verify: %v; want record %d %s", err, c.seq, c.problem)
			}
		})
	}

	// A trail whose reading fails part way is not verified: the error is
	// returned as it is, even with no checkpoint to show the records lost.
	readErr := errors.New("connection reset")
	if sum, err := audit.Verify(seqOf(orig[:2], readErr), nil, opts); !errors.Is(err, readErr) {
		t.Errorf("a read failing after record 2: %+v, %v; want the read's error", sum, err)
	}
}

// TestCheckpointSignatureCoversEveryField: a checkpoint with any field
// changed after signing does not verify, so that no one without the key
// can move a checkpoint to another record, head, namespace or time; the
// unchanged checkpoint verifies (the negative control).
func TestCheckpointSignatureCoversEveryField(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	c := audit.SignCheckpoint(key, "ns", 3, audit.Hash{1, 2, 3}, time.UnixMicro(1_700_000_000_000_000))
	if err := c.Verify(pub); err != nil {
		t.Fatalf("the signed checkpoint: %v", err)
	}
	for name, change := range map[string]func(*audit.Checkpoint){
		"namespace": func(c *audit.Checkpoint) { c.Namespace = "nt" },
		"seq":       func(c *audit.Checkpoint) { c.Seq = 4 },
		"head":      func(c *audit.Checkpoint) { c.Head[31] = 1 },
		"time":      func(c *audit.Checkpoint) { c.Time++ },
		"signature": func(c *audit.Checkpoint) { c.Sig = slices.Clone(c.Sig); c.Sig[0] ^= 1 },
	} {
		d := c
		change(&d)
		if err := d.Verify(pub); err == nil {
			t.Errorf("a checkpoint whose %s changed verifies", name)
		}
	}
	if err := c.Verify(nil); err == nil {
		t.Error("a checkpoint verifies without a key")
	}
}

// TestCheckpointJSON: a checkpoint round-trips through its JSON line, and
// a line with a field malformed is refused, not read as another checkpoint
// (nor a panic); the line unchanged is read (the negative control).
func TestCheckpointJSON(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	c := audit.SignCheckpoint(key, "ns", 3, audit.Hash{0xab}, time.UnixMicro(5))
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got audit.Checkpoint
	if err := json.Unmarshal(b, &got); err != nil || got.Seq != 3 || got.Head != c.Head || got.Namespace != "ns" || got.Time != 5 || !slices.Equal(got.Sig, c.Sig) {
		t.Fatalf("round trip of %s: %+v, %v", b, got, err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	sig, head := fields["sig"].(string), fields["head"].(string)
	for name, change := range map[string]func(map[string]any){
		"unknown field":   func(m map[string]any) { m["token"] = "x" },
		"version 2":       func(m map[string]any) { m["v"] = 2 },
		"short head":      func(m map[string]any) { m["head"] = head[:62] },
		"long head":       func(m map[string]any) { m["head"] = head + "ab" },
		"short signature": func(m map[string]any) { m["sig"] = sig[:40] },
		"long signature":  func(m map[string]any) { m["sig"] = sig + "AAAA" },
	} {
		m := maps.Clone(fields)
		change(m)
		line, _ := json.Marshal(m)
		var c audit.Checkpoint
		if err := json.Unmarshal(line, &c); err == nil {
			t.Errorf("%s: %s read as %+v", name, line, c)
		}
	}
}

// TestSignHead: an empty trail, or one whose head is signed already, gets
// no checkpoint; a new head gets one that verifies the trail; a checkpoint
// that could not be kept is an error, not a checkpoint reported kept.
func TestSignHead(t *testing.T) {
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(nil)
	f, path := newFile(t, 0)
	if c, ok, err := audit.SignHead(ctx, f, key, "ns", 0, time.Now()); ok || err != nil {
		t.Fatalf("SignHead of an empty trail: %+v, %v, %v; want none", c, ok, err)
	}
	for range 2 {
		if err := f.Append(record(audit.OpCancel, "ok")); err != nil {
			t.Fatal(err)
		}
	}
	c, ok, err := audit.SignHead(ctx, f, key, "ns", 0, time.Now())
	if !ok || err != nil || c.Seq != 2 {
		t.Fatalf("SignHead: %+v, %v, %v; want a checkpoint of record 2", c, ok, err)
	}
	if c2, ok, err := audit.SignHead(ctx, f, key, "ns", c.Seq, time.Now()); ok || err != nil {
		t.Fatalf("SignHead of a head signed already: %+v, %v, %v; want none", c2, ok, err)
	}
	cps, err := f.Checkpoints(ctx)
	if err != nil || len(cps) != 1 {
		t.Fatalf("checkpoints kept: %v, %v; want 1", cps, err)
	}
	if sum, err := audit.Verify(f.Records(ctx, 1), cps, audit.VerifyOptions{Key: pub, Namespace: "ns"}); err != nil || sum.Checkpoint != 2 {
		t.Fatalf("Verify: %+v, %v", sum, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}

	g, gpath := newFile(t, 1)
	if err := os.Mkdir(audit.CheckpointPath(gpath), 0o700); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := audit.SignHead(ctx, g, key, "ns", 0, time.Now()); ok || err == nil {
		t.Fatalf("SignHead that could not keep its checkpoint: %+v, %v, %v; want an error", c, ok, err)
	}
}
