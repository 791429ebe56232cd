package prompt

import (
	"slices"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
)

// segment is one grapheme cluster and its width.
type segment struct {
	text  string
	width int
}

// alphabet holds code points of every grapheme break property, so that strings
// over it exercise every rule of UAX #29.
var alphabet = []string{
	"a", " ", "}", "\\", "\r", "\n", "\x00", "\xff", "\u0301", "\u0903", "\u0E33", "\u0D4E",
	"\u200D", "\u200B", "\U0001F468", "\U0001F3FB", "\U0001F1FA", "\U0001F1F8",
	"\u1100", "\u1161", "\u11A8", "\uAC00", "\uAC01", "\uFF9E", "\u2068", "中",
}

// TestGraphemesMatchesUniseg checks the ASCII fast path against plain uniseg on
// every string of up to four letters of alphabet.
func TestGraphemesMatchesUniseg(t *testing.T) {
	var strs []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		strs = append(strs, prefix)
		if n == 0 {
			return
		}
		for _, a := range alphabet {
			grow(prefix+a, n-1)
		}
	}
	grow("", 4)
	for _, s := range strs {
		var got, want []segment
		for c, w := range graphemes(s) {
			got = append(got, segment{c, w})
		}
		for rest, state := s, -1; rest != ""; {
			var c string
			var w int
			c, rest, w, state = uniseg.FirstGraphemeClusterInString(rest, state)
			want = append(want, segment{c, w})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("graphemes(%+q) = %+v, uniseg gives %+v", s, got, want)
		}
	}
}

// TestAtoms checks that atoms cover the text, end outside escapes and on
// cluster boundaries, and add up to uniseg's width.
func TestAtoms(t *testing.T) {
	for _, s := range []string{
		"", "abc", "a\u200Bb", "\u200B\u0E33x", "\u0D4E\n", "👨\u200D👩", "🇺🇸🇫🇷", "x\\y",
		"\u0D4E\u0D4E\u200B\U0001F3FB", strings.Repeat("\u0301", 10), "e\u0301\xff",
	} {
		q := Quote(s)
		bounds := map[int]bool{0: true}
		pos := 0
		for c := range graphemes(q) {
			pos += len(c)
			bounds[pos] = true
		}
		var joined strings.Builder
		width := 0
		for a, w := range atoms(q) {
			joined.WriteString(a)
			width += w
			end := joined.Len()
			if !bounds[end] {
				t.Errorf("atoms(%+q): %+q ends inside a grapheme cluster", q, a)
			}
			if inEscape(q, end) {
				t.Errorf("atoms(%+q): %+q ends inside an escape", q, a)
			}
		}
		if joined.String() != q || width != uniseg.StringWidth(q) {
			t.Errorf("atoms(%+q) join to %+q width %d, want width %d", q, joined.String(), width, uniseg.StringWidth(q))
		}
	}
}

// inEscape reports whether offset i of quoted text q falls strictly inside an escape.
func inEscape(q string, i int) bool {
	for j := 0; j < len(q); j++ {
		if q[j] == '\\' {
			n := escapeLen(q[j:])
			if j < i && i < j+n {
				return true
			}
			j += n - 1
		}
	}
	return false
}
