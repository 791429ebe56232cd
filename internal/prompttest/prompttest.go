// Package prompttest tells tests what a person sees of a one-line question:
// it renders lines with GNU FriBidi, a real implementation of the Unicode
// Bidirectional Algorithm (UAX #9, isolates included), and checks the visual
// order of a path's components.
//
// golang.org/x/text/unicode/bidi resolves embedding levels but does not
// reorder lines (rule L2), so it cannot say what is drawn; FriBidi can. The
// tests that use this package skip, naming the Debian package to install,
// when the fribidi command is missing; .ci/run installs it and fails on the
// skip.
package prompttest

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// A Rendering is one logical line and where FriBidi draws each of its code
// points in a left-to-right paragraph.
type Rendering struct {
	Logical []rune
	// Visual is FriBidi's visual string: the code points left to right,
	// mirrored where the algorithm mirrors them (a "(" in a right-to-left run
	// is drawn as ")").
	Visual []rune
	// LtoV maps each logical index to its visual index.
	LtoV []int
}

// Render renders each line (none may contain a line break) as FriBidi does
// with a left-to-right base direction, no padding and no line breaking:
// fribidi --ltr --nopad --nobreak --ltov. It skips t when fribidi is not
// installed.
func Render(t testing.TB, lines ...string) []Rendering {
	t.Helper()
	path, err := exec.LookPath("fribidi")
	if err != nil {
		t.Skip("fribidi not found: install GNU FriBidi's command, Debian package libfribidi-bin (apt-get install libfribidi-bin)")
	}
	var in bytes.Buffer
	for _, l := range lines {
		if l == "" || strings.ContainsAny(l, "\r\n") {
			t.Fatalf("prompttest.Render: line %+q is empty or holds a line break", l)
		}
		in.WriteString(l + "\n")
	}
	cmd := exec.Command(path, "--ltr", "--nopad", "--nobreak", "--ltov")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fribidi: %v", err)
	}
	outLines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(outLines) != 2*len(lines) {
		t.Fatalf("fribidi printed %d lines for %d inputs, want a visual line and a map for each", len(outLines), len(lines))
	}
	rs := make([]Rendering, len(lines))
	for i, l := range lines {
		r := Rendering{Logical: []rune(l), Visual: []rune(outLines[2*i])}
		for f := range strings.FieldsSeq(outLines[2*i+1]) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("fribidi map %q: %v", outLines[2*i+1], err)
			}
			r.LtoV = append(r.LtoV, v)
		}
		if len(r.LtoV) != len(r.Logical) || len(r.Visual) != len(r.Logical) {
			t.Fatalf("fribidi: %d code points, visual %d, map %d", len(r.Logical), len(r.Visual), len(r.LtoV))
		}
		rs[i] = r
	}
	return rs
}

// Seen returns the visual string without the invisible bidi format
// characters (marks, embeddings, overrides, isolates): what is drawn.
func (r Rendering) Seen() string {
	var b strings.Builder
	for _, c := range r.Visual {
		if !unicode.Is(unicode.Bidi_Control, c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// ComponentOrder checks that components, found in this order in the logical
// line starting at logical index from, are drawn left to right in the same
// order, each one wholly left of the next, with the text between two
// consecutive components (a separator) drawn between them.
func (r Rendering) ComponentOrder(from int, components ...string) error {
	type span struct{ lo, hi int } // visual positions
	var spans []span
	var between [][]int // visual positions of the text between consecutive components
	at := from
	for i, c := range components {
		idx := index(r.Logical[at:], []rune(c))
		if idx < 0 {
			return fmt.Errorf("component %d %+q not found after logical index %d of %+q", i, c, at, string(r.Logical))
		}
		if i > 0 {
			between = append(between, slices.Clone(r.LtoV[at:at+idx]))
		}
		start := at + idx
		at = start + len([]rune(c))
		s := span{len(r.LtoV), -1}
		for _, v := range r.LtoV[start:at] {
			s.lo, s.hi = min(s.lo, v), max(s.hi, v)
		}
		spans = append(spans, s)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i-1].hi >= spans[i].lo {
			return fmt.Errorf("component %d %+q is not drawn wholly left of component %d %+q: %q",
				i-1, components[i-1], i, components[i], r.Seen())
		}
		for _, v := range between[i-1] {
			if v < spans[i-1].hi || v > spans[i].lo {
				return fmt.Errorf("the separator between components %d and %d is drawn outside them: %q", i-1, i, r.Seen())
			}
		}
	}
	return nil
}

// index returns the index of the first sub in s, or -1.
func index(s, sub []rune) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
