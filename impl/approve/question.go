package approve

import (
	"fmt"
	"strings"
)

// A segment is a run of a question's text, or an isolate holding
// segments: what the page renders as text, or as a <bdi> element.
type segment struct {
	Text     string // a run of text, when Isolate is false
	Isolate  bool
	Dir      string // the isolate's direction: "" (first strong), "ltr" or "rtl"
	Children []segment
}

// The directional isolates package prompt puts around each untrusted
// value, and the other bidi controls, which it never writes raw.
const (
	lri = '\u2066' // LEFT-TO-RIGHT ISOLATE
	rli = '\u2067' // RIGHT-TO-LEFT ISOLATE
	fsi = '\u2068' // FIRST STRONG ISOLATE
	pdi = '\u2069' // POP DIRECTIONAL ISOLATE
)

// segments turns a question, as package prompt writes it, into the tree
// the page renders: each isolate (FSI, LRI or RLI ... PDI) becomes a
// <bdi> (dir auto, ltr or rtl) holding what it held, so that each
// untrusted value is its own HTML isolate, as it was its own Unicode one.
// The page's text is then the question less its isolate characters.
//
// A question not written by package prompt may hold bidi controls it
// never writes raw: an unmatched PDI, the embeddings and overrides
// (U+202A..U+202E) and the marks (U+200E, U+200F, U+061C). Each is shown
// as an escape in prompt's form (\u{202E}), visible, never obeyed: an
// override left raw would redraw the rest of the page. An isolate left
// open ends with the question.
func segments(q string) []segment {
	type frame struct {
		seg  segment
		text strings.Builder
	}
	stack := []*frame{{}}
	flush := func() {
		top := stack[len(stack)-1]
		if top.text.Len() > 0 {
			top.seg.Children = append(top.seg.Children, segment{Text: top.text.String()})
			top.text.Reset()
		}
	}
	for _, r := range q {
		top := stack[len(stack)-1]
		switch r {
		case lri, rli, fsi:
			flush()
			dir := map[rune]string{lri: "ltr", rli: "rtl", fsi: ""}[r]
			stack = append(stack, &frame{seg: segment{Isolate: true, Dir: dir}})
		case pdi:
			if len(stack) == 1 {
				fmt.Fprintf(&top.text, `\u{%X}`, r)
				continue
			}
			flush()
			stack = stack[:len(stack)-1]
			parent := stack[len(stack)-1]
			parent.seg.Children = append(parent.seg.Children, top.seg)
		case '\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u200E', '\u200F', '\u061C':
			// Spoofing: an override or embedding would reorder what
			// follows it on the page.
			fmt.Fprintf(&top.text, `\u{%X}`, r)
		default:
			top.text.WriteRune(r)
		}
	}
	for len(stack) > 1 {
		flush()
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		parent := stack[len(stack)-1]
		parent.seg.Children = append(parent.seg.Children, top.seg)
	}
	flush()
	return stack[0].seg.Children
}
