package prompt

import (
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// DefaultMaxWidth is the width Value uses when Options.MaxWidth is not positive.
const DefaultMaxWidth = 80

// Options configure Value. The zero value selects the defaults.
type Options struct {
	// MaxWidth bounds the display columns of the escaped text, not counting the
	// delimiters (which take two more). Zero or less selects DefaultMaxWidth.
	MaxWidth int
}

// Value returns the untrusted value s ready to embed in a human-facing question:
// Quote(s), cut in the middle to at most opts.MaxWidth columns, between « and ».
// Inside the guillemets, which keep the direction of the question around them,
// the text is wrapped in one FIRST STRONG ISOLATE (U+2068) ... POP DIRECTIONAL
// ISOLATE (U+2069) pair, so a right-to-left value cannot reorder the question.
// Quote escapes all four inside the value, so it cannot close them early.
//
// When Quote(s) fits, it is returned whole. Otherwise the tail (file name and
// extension) keeps about two thirds of the width, the head the rest, and one …
// marks the cut, which falls only between grapheme clusters and never inside an
// escape. With MaxWidth 20,
//
//	/home/alice/projects/report-2026/drafts/final.pdf
//
// shows as «/home/…fts/final.pdf» (isolates not shown). The … is the only raw
// ellipsis the result can contain, because Quote escapes any in s.
func Value(s string, opts Options) string {
	maxWidth := opts.MaxWidth
	if maxWidth <= 0 {
		maxWidth = DefaultMaxWidth
	}
	return openQuote + truncate(Quote(s), maxWidth) + closeQuote
}

// truncate cuts the middle of the quoted text q so that it fits in maxWidth
// columns, in one pass: the tail (file name and extension) gets two thirds of the
// room, the head what the tail leaves.
func truncate(q string, maxWidth int) string {
	if len(q) <= maxWidth && printableASCII(q) {
		return q // one column per byte: it fits (the usual short path)
	}
	return cut(q, maxWidth)
}

// cut is truncate without the shortcut.
func cut(q string, maxWidth int) string {
	head, tail, width := span(atoms(q), maxWidth)
	if width <= maxWidth {
		return q
	}
	return q[:head] + ellipsis + q[tail:]
}

// span measures the text made of atoms and, when it is wider than maxWidth,
// chooses what to drop: the bytes [head, tail) of the text, to be replaced by
// one ellipsis. The tail (file name and extension) gets two thirds of the
// room, the head what the tail leaves. It returns the text's width too.
func span(atoms iter.Seq2[string, int], maxWidth int) (head, tail, width int) {
	budget := maxWidth - uniseg.StringWidth(ellipsis)
	tailBudget := budget - budget/3
	type cut struct{ at, width int } // an offset in the text and the columns before it
	var heads, tails []cut           // head ends within budget; tail starts within tailBudget of the end
	at := 0
	for a, w := range atoms {
		tails = append(tails, cut{at, width})
		at, width = at+len(a), width+w
		if width <= budget {
			heads = append(heads, cut{at, width})
		}
		for len(tails) > 0 && width-tails[0].width > tailBudget {
			tails = tails[1:]
		}
	}
	t := cut{at, width}
	if len(tails) > 0 {
		t = tails[0]
	}
	h := cut{0, 0}
	for _, c := range heads {
		if c.width <= budget-(width-t.width) {
			h = c
		}
	}
	return h.at, t.at, width
}

// printableASCII reports whether every byte of s is in ' '..'~'. Each such
// byte is a grapheme cluster of its own, one column wide.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// atoms yields the pieces of quoted text q that truncation keeps or drops whole,
// with their widths: the shortest runs of grapheme clusters that end outside an
// escape. (A cluster of the output can span an escape's last character and the
// raw mark-like code point after it, as in "}" followed by U+0E33.)
func atoms(q string) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		start, end, width, escEnd := 0, 0, 0, 0
		for c, w := range graphemes(q) {
			for i := max(end, escEnd); i < end+len(c); i++ {
				if q[i] == '\\' {
					escEnd = i + escapeLen(q[i:])
					i = escEnd - 1
				}
			}
			end, width = end+len(c), width+w
			if end >= escEnd {
				if !yield(q[start:end], width) {
					return
				}
				start, width = end, 0
			}
		}
	}
}

// escapeLen returns the length of the escape Quote wrote at the start of e.
func escapeLen(e string) int {
	switch e[1] {
	case 'x':
		return len(`\xHH`)
	case 'u':
		return strings.IndexByte(e, '}') + 1
	}
	return len(`\n`)
}

// graphemes yields the grapheme clusters of s with their display widths, as
// uniseg computes them. An ASCII byte followed by another is a cluster of its own
// (UAX #29 rule GB999; CR LF is the one exception), so that common case skips
// uniseg, whose state it does not need: no rule looks back across two ASCII bytes.
func graphemes(s string) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		state := -1
		for s != "" {
			var c string
			var w int
			if s[0] < utf8.RuneSelf && (len(s) == 1 || s[1] < utf8.RuneSelf) && !strings.HasPrefix(s, "\r\n") {
				c, s, w, state = s[:1], s[1:], asciiWidth(s[0]), -1
			} else {
				c, s, w, state = uniseg.FirstGraphemeClusterInString(s, state)
			}
			if !yield(c, w) {
				return
			}
		}
	}
}

// asciiWidth is uniseg's width of an ASCII byte: 0 for controls, 1 otherwise.
func asciiWidth(b byte) int {
	if b < ' ' || b == 0x7F {
		return 0
	}
	return 1
}
