package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// ErrBroken: a trail does not verify. Every error [Verify] returns for a
// trail (rather than for reading it) is a *[Break] that wraps it.
var ErrBroken = errors.New("audit: the trail does not verify")

// A Problem is how a trail fails to verify.
type Problem string

const (
	Edited    Problem = "edited"    // the record's bytes changed (or a record replaced)
	Deleted   Problem = "deleted"   // the record is missing: the next one's seq skips it
	Reordered Problem = "reordered" // the record is out of its place
	Truncated Problem = "truncated" // the trail ends before a signed checkpoint's seq
	Forged    Problem = "forged"    // a checkpoint's signature does not verify
)

// A Break names the first record at which a trail stops proving itself.
type Break struct {
	Seq     uint64 // the record named (for Forged: the checkpoint's seq)
	Problem Problem
	Detail  string
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit: record %d %s: %s", b.Seq, b.Problem, b.Detail)
}

func (b *Break) Unwrap() error { return ErrBroken }

// A Summary is what a verified trail proved.
type Summary struct {
	Records uint64 // the last seq: records 1 to Records are in order and unedited
	Head    Hash   // the SHA-256 of the last record (zero for an empty trail)
	// Checkpoint is the highest seq a valid checkpoint signed (0: none):
	// records after it could have been rewritten by whoever can write
	// the store.
	Checkpoint uint64
}

// VerifyOptions configures [Verify].
type VerifyOptions struct {
	// Key verifies the checkpoints' signatures. Required if there are
	// checkpoints.
	Key ed25519.PublicKey
	// Namespace, if set, is the namespace every checkpoint must name.
	Namespace string

	skipPrev bool // a broken verifier, for the negative control
}

// Verify reads the trail's records in order (lines: canonical bytes, seq
// 1 first) and checks that each is canonical, that the seqs run 1, 2, 3...
// with no gap, that each record's Prev is the SHA-256 of the one before,
// and, for each checkpoint, that its signature verifies and the record at
// its seq exists and has the head it signed. It names the first break: a
// record edited (its bytes no longer canonical, or its SHA-256 not the
// next record's Prev, or not a checkpoint's head), deleted (a seq
// skipped), reordered (a seq found later), or the trail truncated (it ends
// before a checkpoint's seq). An error from lines is returned as it is.
//
// What it cannot see: a rewrite of every record after the last valid
// checkpoint (whoever can write the store can recompute the chain), or a
// truncation to before one, if the checkpoint was also removed (keep
// checkpoints elsewhere too: the server logs each).
func Verify(lines iter.Seq2[[]byte, error], checkpoints []Checkpoint, opts VerifyOptions) (Summary, error) {
	cps := slices.Clone(checkpoints)
	slices.SortFunc(cps, func(a, b Checkpoint) int { return cmpUint(a.Seq, b.Seq) })
	var sum Summary
	for _, c := range cps {
		if err := c.Verify(opts.Key); err != nil {
			return sum, &Break{Seq: c.Seq, Problem: Forged, Detail: "the checkpoint signing seq " + fmt.Sprint(c.Seq) + " does not verify: " + err.Error()}
		}
		if opts.Namespace != "" && c.Namespace != opts.Namespace {
			return sum, &Break{Seq: c.Seq, Problem: Forged, Detail: fmt.Sprintf("the checkpoint is of namespace %q, not %q", c.Namespace, opts.Namespace)}
		}
	}
	// A checkpoint of record 0 (the empty trail) names no record: left
	// first, it stopped every later checkpoint's head being compared, so
	// an edit of a checkpointed last record was named a truncation.
	for len(cps) > 0 && cps[0].Seq == 0 {
		cps = cps[1:]
	}
	var prev Hash
	next := uint64(1) // the seq expected
	var found *Break  // a seq out of place, waiting to learn whether the expected one comes later
	for line, err := range lines {
		if err != nil {
			return sum, err
		}
		if found != nil {
			// Only looking for the missing seq now.
			if r, err := Parse(line); err == nil && r.Seq == found.Seq {
				found.Problem = Reordered
				found.Detail = fmt.Sprintf("it comes after record %s", found.Detail)
				return sum, found
			}
			continue
		}
		r, err := Parse(line)
		if err != nil {
			return sum, &Break{Seq: next, Problem: Edited, Detail: fmt.Sprintf("the record in its place is not in canonical form (%v)", err)}
		}
		if r.Seq != next {
			// Deleted, unless it turns up later (reordered).
			found = &Break{Seq: next, Problem: Deleted, Detail: fmt.Sprint(r.Seq)}
			if r.Seq < next {
				return sum, &Break{Seq: r.Seq, Problem: Reordered, Detail: fmt.Sprintf("it comes again after record %d", next-1)}
			}
			continue
		}
		if r.Prev != prev && !opts.skipPrev {
			if next == 1 {
				return sum, &Break{Seq: 1, Problem: Edited, Detail: "the first record's prev is not zero"}
			}
			return sum, &Break{Seq: next - 1, Problem: Edited, Detail: fmt.Sprintf("its SHA-256 is not record %d's prev", next)}
		}
		prev = sha256.Sum256(line)
		for len(cps) > 0 && cps[0].Seq == next {
			if cps[0].Head != prev && !opts.skipPrev {
				return sum, &Break{Seq: next, Problem: Edited, Detail: "its SHA-256 is not the head a signed checkpoint names"}
			}
			sum.Checkpoint = next
			cps = cps[1:]
		}
		sum.Records, sum.Head = next, prev
		next++
	}
	if found != nil {
		found.Detail = fmt.Sprintf("record %s follows record %d", found.Detail, found.Seq-1)
		return sum, found
	}
	if len(cps) > 0 {
		last := cps[len(cps)-1]
		return sum, &Break{Seq: sum.Records + 1, Problem: Truncated, Detail: fmt.Sprintf(
			"the trail ends at record %d, and a signed checkpoint names record %d (head %x)", sum.Records, last.Seq, last.Head[:8])}
	}
	return sum, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Lines returns the lines of a JSONL buffer, for [Verify].
func Lines(b []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				yield(nil, errors.New("audit: the last line has no newline: a torn write"))
				return
			}
			if !yield(b[:i], nil) {
				return
			}
			b = b[i+1:]
		}
	}
}
