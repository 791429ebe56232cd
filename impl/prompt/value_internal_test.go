package prompt

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestTruncateShortcut checks that truncate, with its shortcut for short
// printable ASCII, returns what the full cut returns, on Quote of: every
// ASCII string of up to 3 bytes, and random printable ones up to 120 bytes,
// at widths around their length.
func TestTruncateShortcut(t *testing.T) {
	check := func(s string) {
		q := Quote(s)
		for w := max(1, len(q)-2); w <= len(q)+2; w++ {
			if got, want := truncate(q, w), cut(q, w); got != want {
				t.Fatalf("truncate(%q, %d) = %q, cut = %q", q, w, got, want)
			}
		}
	}
	var b strings.Builder
	var all func(n int)
	all = func(n int) {
		check(b.String())
		if n == 0 {
			return
		}
		for c := byte(0); c < 0x80; c++ {
			s := b.String()
			b.WriteByte(c)
			all(n - 1)
			b.Reset()
			b.WriteString(s)
		}
	}
	all(3)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		n := r.IntN(121)
		q := make([]byte, n)
		for i := range q {
			q[i] = byte(' ' + r.IntN('~'-' '+1))
		}
		check(string(q))
	}
}
