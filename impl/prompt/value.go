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
	if len(s) >= longValue*(maxWidth+8) {
		if v, ok := window(s, maxWidth); ok {
			return openQuote + v + closeQuote
		}
	}
	return openQuote + truncate(Quote(s), maxWidth) + closeQuote
}

// longValue: a value of at least longValue bytes per column of the width is
// quoted only at its ends, when that can be done exactly (window).
const longValue = 16

// window returns what truncate(Quote(s), maxWidth) returns, for an s much
// longer than maxWidth, quoting only its two ends: a head from the start,
// and a tail from a point where segmenting s afresh finds the clusters
// segmenting it from the start finds (between two plain code points), each
// long enough that the cut falls inside it, away from its edges, where its
// clusters could differ from the whole's. It reports false, and the caller
// quotes everything, when the ends do not suffice: a value with no two
// plain code points near its end, or one whose quoted text may fit.
func window(s string, maxWidth int) (string, bool) {
	budget := maxWidth - uniseg.StringWidth(ellipsis)
	tailBudget := budget - budget/3
	step := 4 * (maxWidth + 8)

	// The head: enough of Quote(s) that its atoms, but the last (which may
	// continue past it), are wider than maxWidth.
	var hq strings.Builder
	var heads []cutPoint // atom ends, with the columns before them, within budget
	headEnd := 0         // the end in s of what hq quotes
	for limit := step; ; limit *= 2 {
		if limit >= len(s)/2 {
			return "", false
		}
		headEnd, _ = quote(&hq, s, headEnd, limit)
		var width int
		heads, width = headCuts(hq.String(), budget)
		if width > maxWidth {
			break
		}
	}

	// The tail: Quote(s) from a point where clusters start afresh, wider
	// than the tail's budget from its second atom on.
	var tq strings.Builder
	tail, tailWidth := 0, 0
	for size := step; ; size *= 2 {
		from := len(s) - size
		if from <= headEnd || from <= len(s)/2 {
			return "", false
		}
		p := restart(s, from)
		if p < 0 {
			continue
		}
		tq.Reset()
		quote(&tq, s, p, len(s))
		var ok bool
		if tail, tailWidth, ok = tailCut(tq.String(), tailBudget); ok {
			break
		}
	}
	h := 0
	for _, c := range heads {
		if c.width <= budget-tailWidth {
			h = c.at
		}
	}
	return hq.String()[:h] + ellipsis + tq.String()[tail:], true
}

// A cutPoint is an offset in quoted text and the columns before it.
type cutPoint struct{ at, width int }

// headCuts returns the ends of the atoms of the quoted text q within budget
// columns, but for the last atom, and the width of q without it.
func headCuts(q string, budget int) (heads []cutPoint, width int) {
	end := 0
	for a, w := range atoms(q) {
		if end > 0 && width <= budget {
			heads = append(heads, cutPoint{end, width})
		}
		end += len(a)
		width += w
		if end == len(q) {
			width -= w
		}
	}
	return heads, width
}

// tailCut returns the start of the tail of quoted text q that span keeps:
// the first atom start from which q is at most tailBudget columns wide, and
// that width. It reports false when that is q's first atom or q's end.
func tailCut(q string, tailBudget int) (at, width int, ok bool) {
	type start struct{ at, width int } // an atom start and the columns before it
	var starts []start
	at, total := 0, 0
	for a, w := range atoms(q) {
		starts = append(starts, start{at, total})
		at, total = at+len(a), total+w
	}
	for i, st := range starts {
		if total-st.width <= tailBudget {
			return st.at, total - st.width, i > 0
		}
	}
	return 0, 0, false
}

// restart returns the first offset at or after from that stands between
// two code points each ASCII or plain, but for CR LF, or -1: segmenting s
// from there finds the grapheme clusters segmenting it from the start finds
// (see classPlain), and quoting s from there writes Quote(s)'s text from a
// cluster boundary of it, between two code points neither of which joins
// the other.
func restart(s string, from int) int {
	for from < len(s) && !utf8.RuneStart(s[from]) {
		from++
	}
	var prev rune = -1 // the code point before i, if ASCII or plain
	for i := from; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		apart := n == 1 && r < utf8.RuneSelf || n > 1 && classOf(r)&classPlain != 0
		if apart && prev >= 0 && !(prev == '\r' && r == '\n') && i > from {
			return i
		}
		prev = -1
		if apart {
			prev = r
		}
		i += n
	}
	return -1
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
	var heads, tails []cutPoint // head ends within budget; tail starts within tailBudget of the end
	at := 0
	for a, w := range atoms {
		tails = append(tails, cutPoint{at, width})
		at, width = at+len(a), width+w
		if width <= budget {
			heads = append(heads, cutPoint{at, width})
		}
		for len(tails) > 0 && width-tails[0].width > tailBudget {
			tails = tails[1:]
		}
	}
	t := cutPoint{at, width}
	if len(tails) > 0 {
		t = tails[0]
	}
	h := cutPoint{0, 0}
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
// uniseg computes them. Two cases skip uniseg, whose state they do not need:
// an ASCII byte followed by another or by a plain code point is a cluster of
// its own (UAX #29 rule GB999; CR LF is the one exception), and so is a plain
// code point followed by another or by ASCII (see classPlain; no rule looks
// back across either pair, so uniseg starts afresh after them).
func graphemes(s string) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		state := -1
		for s != "" {
			var c string
			var w int
			if n, pw := single(s); n > 0 {
				c, s, w, state = s[:n], s[n:], pw, -1
			} else {
				c, s, w, state = uniseg.FirstGraphemeClusterInString(s, state)
			}
			if !yield(c, w) {
				return
			}
		}
	}
}

// single returns the length and width of the first grapheme cluster of s
// when it is an ASCII byte or a plain code point that the next one cannot
// join, or 0.
func single(s string) (n, width int) {
	if s[0] < utf8.RuneSelf {
		if len(s) == 1 || nextApart(s[1:]) && !strings.HasPrefix(s, "\r\n") {
			return 1, asciiWidth(s[0])
		}
		return 0, 0
	}
	r, n := utf8.DecodeRuneInString(s)
	if n == 1 { // an invalid byte
		return 0, 0
	}
	c := classOf(r)
	if c&classPlain == 0 || n < len(s) && !nextApart(s[n:]) {
		return 0, 0
	}
	return n, c.width()
}

// nextApart reports whether the code point s starts with is ASCII or plain:
// one that joins nothing before it.
func nextApart(s string) bool {
	if s[0] < utf8.RuneSelf {
		return true
	}
	r, n := utf8.DecodeRuneInString(s)
	return n > 1 && classOf(r)&classPlain != 0
}

// asciiWidth is uniseg's width of an ASCII byte: 0 for controls, 1 otherwise.
func asciiWidth(b byte) int {
	if b < ' ' || b == 0x7F {
		return 0
	}
	return 1
}
