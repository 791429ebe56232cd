package prompt

import (
	"iter"
	"strings"
)

// The delimiters of Path: the guillemets, and inside them one LEFT-TO-RIGHT
// ISOLATE ... POP DIRECTIONAL ISOLATE pair around the whole path.
const (
	openPath  = "«\u2066" // « then LEFT-TO-RIGHT ISOLATE
	closePath = "\u2069»" // POP DIRECTIONAL ISOLATE then »
	isolate   = "\u2068"  // FIRST STRONG ISOLATE, around each component
	popIso    = "\u2069"  // POP DIRECTIONAL ISOLATE
)

// Path returns the untrusted slash-separated path p ready to embed in a
// question: each component quoted by Quote in its own FIRST STRONG ISOLATE
// (U+2068) ... POP DIRECTIONAL ISOLATE (U+2069) pair, the separators "/" raw
// between the pairs, the whole in one LEFT-TO-RIGHT ISOLATE (U+2066) ... PDI
// pair between « and ».
//
// Why: in one isolate, as Value shows a value, the Unicode Bidirectional
// Algorithm joins right-to-left names and the slashes between them into one
// right-to-left run and draws the components in reverse order, so
// /srv/גיבוי/חוזה.pdf ("backup/contract.pdf") reads as /srv/חוזה/גיבוי.pdf,
// another path. Isolated one by one inside a left-to-right isolate, each
// component keeps its own direction inside, and the components and slashes
// are drawn left to right in their logical order, whatever their direction.
// This is tested with GNU FriBidi, a real implementation of the algorithm.
//
// A path with right-to-left components gets no warning for its direction:
// the order can no longer mislead, a right-to-left name is drawn as its
// readers write it, and a warning on every Hebrew or Arabic path would teach
// people to ignore warnings. Letters of two scripts in one name are flagged
// by Warnings as before.
//
// When the path is wider than opts.MaxWidth columns, Path drops whole
// components from the middle and shows one … in their place, keeping the
// last component (the file name) and as many components on each side as fit,
// the tail taking up to two thirds of the room:
//
//	/home/alice/projects/report-2026/drafts/final.pdf
//
// shows as «/home/…/final.pdf» with MaxWidth 20 (isolates not shown). Only
// when the file name itself does not fit is the path cut inside components,
// as Value cuts a value: never inside an escape or a grapheme cluster, never
// across an isolate (a cut component keeps its pair around what remains of
// it, … included when the cut falls inside that one component).
//
// Untruncated, Path is one-to-one: the components are the text between raw
// slashes, each Unquote's input. A component never contains "/", and Quote
// escapes the look-alikes of the slash, so every slash drawn is a separator.
func Path(p string, opts Options) string {
	maxWidth := opts.MaxWidth
	if maxWidth <= 0 {
		maxWidth = DefaultMaxWidth
	}
	if len(p) >= longValue*(maxWidth+8) {
		return longPath(p, maxWidth, maxWidth+1)
	}
	var j strings.Builder // the quoted components joined by slashes
	j.Grow(len(p))
	ranges := make([]component, 0, strings.Count(p, "/")+1)
	for c := range strings.SplitSeq(p, "/") {
		if len(ranges) > 0 {
			j.WriteByte('/')
		}
		start := j.Len()
		quote(&j, c, 0, len(c))
		ranges = append(ranges, component{start, j.Len()})
	}
	q := j.String()
	head, tail := len(q), len(q) // nothing dropped
	if len(q) > maxWidth || !printableASCII(q) {
		head, tail = pathCut(q, ranges, maxWidth)
	}
	return renderPath(q, ranges, head, tail)
}

// component is the byte range of one quoted component in the joined text.
type component struct{ start, end int }

// pathCut returns the bytes [head, tail) of the joined text q to replace with
// an ellipsis so that the path fits maxWidth columns, or head == tail == len(q)
// when it fits already.
func pathCut(q string, comps []component, maxWidth int) (head, tail int) {
	widths := make([]int, len(comps))
	total := len(comps) - 1 // the separators
	for i, c := range comps {
		for _, w := range atoms(q[c.start:c.end]) {
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
	head, tail, _ = span(pathAtoms(q, comps), maxWidth)
	return head, tail
}

// wholeComponents chooses a cut that drops whole components: the last one
// and as many before it as fit in two thirds of the room, then as many from
// the start as fit in the rest. It fails when the last component does not fit.
func wholeComponents(comps []component, widths []int, maxWidth int) (head, tail int, ok bool) {
	n := len(comps) - 1
	budget := maxWidth - 1 // the ellipsis
	tailBudget := budget - budget/3
	if n < 1 || 1+widths[n] > budget {
		return 0, 0, false
	}
	t, tw := n, 1+widths[n] // the tail: separator and component, from t on
	for t-1 >= 1 && tw+1+widths[t-1] <= tailBudget {
		t, tw = t-1, tw+1+widths[t-1]
	}
	h, hw := 0, 0 // the head: component and separator, before h
	for h < t-1 && hw+widths[h]+1 <= budget-tw {
		h, hw = h+1, hw+widths[h]+1
	}
	return comps[h].start, comps[t].start - 1, true
}

// pathAtoms yields the atoms of each quoted component, measured on its own
// (an isolate ends every grapheme cluster), and each separator.
func pathAtoms(q string, comps []component) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for i, c := range comps {
			if i > 0 && !yield("/", 1) {
				return
			}
			for a, w := range atoms(q[c.start:c.end]) {
				if !yield(a, w) {
					return
				}
			}
		}
	}
}

// renderPath writes the joined text q without the bytes [head, tail), an
// ellipsis in their place if any were dropped, each component's remaining
// text inside one isolate, all between the path's delimiters.
func renderPath(q string, comps []component, head, tail int) string {
	type piece struct {
		text string
		comp int // the component it is text of, or -1 for a separator or the ellipsis
	}
	if head == len(q) { // nothing dropped: the common case, without pieces
		var b strings.Builder
		b.Grow(len(openPath) + len(q) + (len(isolate)+len(popIso))*len(comps) + len(closePath))
		b.WriteString(openPath)
		for i, c := range comps {
			if i > 0 {
				b.WriteByte('/')
			}
			if c.start < c.end {
				b.WriteString(isolate)
				b.WriteString(q[c.start:c.end])
				b.WriteString(popIso)
			}
		}
		b.WriteString(closePath)
		return b.String()
	}
	var ps []piece
	keep := func(from, to int) { // the bytes [from, to) of q
		for i, c := range comps {
			if i > 0 && from <= c.start-1 && c.start-1 < to {
				ps = append(ps, piece{"/", -1})
			}
			if lo, hi := max(c.start, from), min(c.end, to); lo < hi {
				ps = append(ps, piece{q[lo:hi], i})
			}
		}
	}
	keep(0, head)
	if head < tail {
		ps = append(ps, piece{ellipsis, -1})
	}
	keep(tail, len(q))

	var b strings.Builder
	b.Grow(len(openPath) + len(q) + len(ellipsis) + (len(isolate)+len(popIso))*len(comps) + len(closePath))
	b.WriteString(openPath)
	open := -1 // the component whose isolate is open
	for k, p := range ps {
		switch {
		case p.comp >= 0 && p.comp == open: // the rest of a component cut inside
		case p.text == ellipsis && open >= 0 && k+1 < len(ps) && ps[k+1].comp == open:
			// A cut inside one component stays inside its isolate.
		default:
			if open >= 0 {
				b.WriteString(popIso)
			}
			if open = p.comp; open >= 0 {
				b.WriteString(isolate)
			}
		}
		b.WriteString(p.text)
	}
	if open >= 0 {
		b.WriteString(popIso)
	}
	b.WriteString(closePath)
	return b.String()
}

// longPath is Path for a path much longer than maxWidth, quoting only the
// components it may show: it returns exactly what quoting every component
// returns (TestMatchesReference, TestCorpusMatchesReference). Widths are capped at
// limit (maxWidth+1): every choice Path makes compares sums of widths with
// at most maxWidth columns, so a component wider than that, however wide,
// is never shown whole, and only its first atoms can be shown (at the head)
// or, for the last component, its whole text is quoted (the tail).
func longPath(p string, maxWidth, limit int) string {
	raw := strings.Split(p, "/")
	n := len(raw) - 1
	quoted := make([]string, len(raw))
	widths := make([]int, len(raw))
	for i := range widths {
		widths[i] = -1
	}
	width := func(i int) int {
		if widths[i] < 0 {
			quoted[i], widths[i] = quoteCapped(raw[i], maxWidth, limit)
		}
		return widths[i]
	}
	total := n // the separators
	for i := 0; i <= n && total <= maxWidth; i++ {
		total += width(i)
	}
	if total <= maxWidth {
		// Everything was quoted whole and fits.
		return renderQuoted(quoted, func(int) bool { return true }, -1, -1)
	}
	if n >= 1 && 1+width(n) <= maxWidth-1 {
		// The file name fits: Path drops whole components from the middle
		// (wholeComponents), and shows the others whole, each narrower
		// than limit, so quoted whole.
		budget := maxWidth - 1
		tailBudget := budget - budget/3
		t, tw := n, 1+width(n)
		for t-1 >= 1 && tw+1+width(t-1) <= tailBudget {
			t, tw = t-1, tw+1+width(t-1)
		}
		h, hw := 0, 0
		for h < t-1 && hw+width(h)+1 <= budget-tw {
			h, hw = h+1, hw+width(h)+1
		}
		return renderQuoted(quoted, func(i int) bool { return i < h || i >= t }, h, t)
	}
	// The file name does not fit: the cut falls inside it, and the head
	// shows the components from the start until they are wider than the
	// room. Quote those (capped), none of the middle, and the last whole.
	for i, w := 0, -1; i < n && w <= maxWidth; i++ {
		w += 1 + width(i)
	}
	var b strings.Builder
	quote(&b, raw[n], 0, len(raw[n]))
	quoted[n] = b.String()
	var j strings.Builder
	comps := make([]component, 0, len(raw))
	for i, q := range quoted {
		if i > 0 {
			j.WriteByte('/')
		}
		if widths[i] < 0 && i < n {
			q = "" // never reached by the head, so neither shown nor measured
		}
		start := j.Len()
		j.WriteString(q)
		comps = append(comps, component{start, j.Len()})
	}
	q := j.String()
	head, tail, _ := span(pathAtoms(q, comps), maxWidth)
	return renderPath(q, comps, head, tail)
}

// quoteCapped returns Quote(c) and its width when that is at most maxWidth
// columns; else a prefix of Quote(c), whole atoms of it wider than
// maxWidth columns, and limit.
func quoteCapped(c string, maxWidth, limit int) (string, int) {
	var b strings.Builder
	end := 0
	for step := 4 * (maxWidth + 8); ; step *= 2 {
		end, _ = quote(&b, c, end, end+step)
		q := b.String()
		at, width := 0, 0
		for a, w := range atoms(q) {
			if end < len(c) && at+len(a) == len(q) {
				break // the last atom may continue past what is quoted
			}
			at, width = at+len(a), width+w
			if width > maxWidth {
				return q[:at], limit
			}
		}
		if end == len(c) {
			return q, width
		}
	}
}

// renderQuoted renders the components quoted (each quoted whole where
// shown reports true) as renderPath does, the components from h up to t
// dropped for one ellipsis if h >= 0.
func renderQuoted(quoted []string, shown func(int) bool, h, t int) string {
	var j strings.Builder
	comps := make([]component, 0, len(quoted))
	for i, q := range quoted {
		if i > 0 {
			j.WriteByte('/')
		}
		if !shown(i) {
			q = "-" // dropped: one byte keeps the cut from being empty
		}
		start := j.Len()
		j.WriteString(q)
		comps = append(comps, component{start, j.Len()})
	}
	q := j.String()
	if h < 0 {
		return renderPath(q, comps, len(q), len(q))
	}
	return renderPath(q, comps, comps[h].start, comps[t].start-1)
}
