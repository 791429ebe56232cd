package prompt

// The implementation of Quote, Value, Path and Warnings before they learned
// to skip what a question does not show (issue 27), kept as the reference
// the faster code must match byte for byte (TestMatchesReference,
// FuzzMatchesReference). Only uniseg segments here, and Unicode's tables
// answer every question about a code point.

import (
	"iter"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"golang.org/x/text/unicode/norm"
)

// quoteRefString is Quote as it was.
func quoteRefString(s string) string {
	var b strings.Builder
	quoteRef(&b, s)
	return b.String()
}

// valueRef is Value as it was.
func valueRef(s string, opts Options) string {
	maxWidth := opts.MaxWidth
	if maxWidth <= 0 {
		maxWidth = DefaultMaxWidth
	}
	return openQuote + truncateRef(quoteRefString(s), maxWidth) + closeQuote
}

// warningsRef is Warnings as it was.
func warningsRef(s string) []Warning { return warningsForRef(s, hiddenRef(s)) }

// pathWarningsRef is PathWarnings as it was.
func pathWarningsRef(p string) []Warning {
	h := false
	for c := range strings.SplitSeq(p, "/") {
		if h = hiddenRef(c); h {
			break
		}
	}
	return warningsForRef(p, h)
}

// pathRef is Path as it was.
func pathRef(p string, opts Options) string {
	maxWidth := opts.MaxWidth
	if maxWidth <= 0 {
		maxWidth = DefaultMaxWidth
	}
	var j strings.Builder
	j.Grow(len(p))
	ranges := make([]component, 0, strings.Count(p, "/")+1)
	for c := range strings.SplitSeq(p, "/") {
		if len(ranges) > 0 {
			j.WriteByte('/')
		}
		start := j.Len()
		quoteRef(&j, c)
		ranges = append(ranges, component{start, j.Len()})
	}
	q := j.String()
	head, tail := len(q), len(q)
	if len(q) > maxWidth || !printableASCII(q) {
		head, tail = pathCutRef(q, ranges, maxWidth)
	}
	return renderPath(q, ranges, head, tail)
}

func quoteRef(b *strings.Builder, s string) {
	at := 0
	for c := range graphemesRef(s) {
		if len(c) == 1 && c[0] < utf8.RuneSelf { // an ASCII byte alone in its cluster: the usual case
			switch r := c[0]; {
			case '!' <= r && r <= '~' && r != '\\', r == ' ' && loneSpace(s, at):
				b.WriteByte(r)
			default:
				escape(b, rune(r))
			}
		} else {
			quoteClusterRef(b, s, at, at+len(c))
		}
		at += len(c)
	}
}

func quoteClusterRef(b *strings.Builder, s string, start, end int) {
	run := start // s[run:i] is the raw run
	for i := start; i < end; {
		r, n := utf8.DecodeRuneInString(s[i:end])
		switch {
		case r == utf8.RuneError && n == 1:
			writeHex(b, `\x`, uint32(s[i]), 2) // invalid byte: kept distinct, never U+FFFD
		case r == ' ' && !loneSpace(s, i):
			escape(b, r) // renderers collapse runs of spaces and drop them at the ends
		case rawRef(s[run:i+n], r):
			b.WriteString(s[i : i+n])
			i += n
			continue
		default:
			escape(b, r)
		}
		i += n
		run = i
	}
}

func rawRef(run string, r rune) bool {
	switch {
	case len(run) == 1: // ASCII starting a run, the common case
		return ' ' <= r && r <= '~' && r != '\\'
	case r == '\\' || neutralized(r):
		return false
	case len(run) == utf8.RuneLen(r) && extender(r):
		return false // a mark with no raw base would sit on an escape or a delimiter
	case utf8.RuneCountInString(run) > 1+maxMarks:
		return false // Zalgo: a base cannot carry unbounded marks
	}
	// Never show two canonically equivalent names alike. QuickSpanString answers
	// most runs without the allocation IsNormalString makes.
	return norm.NFC.QuickSpanString(run) == len(run) || norm.NFC.IsNormalString(run)
}

func truncateRef(q string, maxWidth int) string {
	if len(q) <= maxWidth && printableASCII(q) {
		return q // one column per byte: it fits (the usual short path)
	}
	return cutRef(q, maxWidth)
}

func cutRef(q string, maxWidth int) string {
	head, tail, width := spanRef(atomsRef(q), maxWidth)
	if width <= maxWidth {
		return q
	}
	return q[:head] + ellipsis + q[tail:]
}

func spanRef(atoms iter.Seq2[string, int], maxWidth int) (head, tail, width int) {
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

func atomsRef(q string) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		start, end, width, escEnd := 0, 0, 0, 0
		for c, w := range graphemesRef(q) {
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

func graphemesRef(s string) iter.Seq2[string, int] {
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

func warningsForRef(s string, h bool) []Warning {
	var ws []Warning
	if h {
		ws = append(ws, Hidden)
	}
	if mixedScriptsRef(s) || lonelyLookalikeRef(s) {
		ws = append(ws, MixedScripts)
	}
	return ws
}

func hiddenRef(s string) bool {
	q := quoteRefString(s)
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' {
			continue
		}
		e := q[i : i+escapeLen(q[i:])]
		switch e {
		case `\\`, `\u{AB}`, `\u{BB}`, `\u{2026}`:
		default:
			return true
		}
		i += len(e) - 1
	}
	return false
}

func mixedScriptsRef(s string) bool {
	var known, word []string // the scripts seen in s, and in the current word
	for _, r := range s {
		switch {
		case unicode.IsLetter(r):
		case unicode.IsMark(r):
			continue
		default:
			word = word[:0]
			continue
		}
		name := script(r, known)
		if name == "" || slices.Contains(word, name) {
			continue
		}
		if !slices.Contains(known, name) {
			if known = append(known, name); len(known) > maxScripts {
				return true
			}
		}
		if word = append(word, name); !highlyRestrictiveRef(word) {
			return true
		}
	}
	return false
}

func lonelyLookalikeRef(s string) bool {
	var known []string // the scripts of look-alike letters seen, for script's search
	for i, r := range s {
		if r < lookalikes[0].r || imitates(r) == 0 || !unicode.IsLetter(r) {
			continue
		}
		name := script(r, known)
		if !slices.Contains(known, name) {
			known = append(known, name)
		}
		if !partner(before(s[:i]), name) && !partner(after(s[i+utf8.RuneLen(r):]), name) {
			return true
		}
	}
	return false
}

func pathCutRef(q string, comps []component, maxWidth int) (head, tail int) {
	widths := make([]int, len(comps))
	total := len(comps) - 1 // the separators
	for i, c := range comps {
		for _, w := range atomsRef(q[c.start:c.end]) {
			widths[i] += w
		}
		total += widths[i]
	}
	if total <= maxWidth {
		return len(q), len(q)
	}
	if head, tail, ok := wholeComponents(comps, widths, maxWidth); ok {
		return head, tail
	}
	head, tail, _ = spanRef(pathAtomsRef(q, comps), maxWidth)
	return head, tail
}

func pathAtomsRef(q string, comps []component) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for i, c := range comps {
			if i > 0 && !yield("/", 1) {
				return
			}
			for a, w := range atomsRef(q[c.start:c.end]) {
				if !yield(a, w) {
					return
				}
			}
		}
	}
}

func highlyRestrictiveRef(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, set := range [][]string{
		{"Latin", "Han", "Hiragana", "Katakana"},
		{"Latin", "Han", "Bopomofo"},
		{"Latin", "Han", "Hangul"},
	} {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(set, s) }) {
			return true
		}
	}
	return false
}
