package prompt

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/internal/jsonstring"
)

// ErrJSON reports JSON that [JSON] will not show: text that is not one JSON
// value, or a value that readers would not all read as it is written.
var ErrJSON = errors.New("prompt: JSON value cannot be shown exactly")

// maxJSONDepth bounds the nesting of arrays and objects JSON accepts (the
// depth package requeststate accepts in arguments).
const maxJSONDepth = 128

// The isolate that keeps a JSON value other than a string left to right
// whatever surrounds it: without it, the brackets, commas and a number's
// sign are neutral or weak characters that a right-to-left neighbour
// reorders ("-5" drawn as "5-").
const (
	openLiteral  = "\u2066" // LEFT-TO-RIGHT ISOLATE
	closeLiteral = "\u2069" // POP DIRECTIONAL ISOLATE
)

// JSON returns the JSON value raw ready to embed in a question, every JSON
// type told apart at sight:
//
//   - a string between « and », escaped and isolated as [Value] shows it
//     (for a string, JSON returns exactly Value's result);
//   - a number, true, false and null as their literal text, raw, never
//     between guillemets: false and «false», 5 and «5», null and «null»
//     differ;
//   - an array as [v, v], an object as {«key»: v, «key»: v}, members in
//     the order given, every string inside it, key or value, between « and
//     » in its own FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE pair:
//     ["a"] shows as [«a»], the string "[\"a\"]" as «["a"]».
//
// Anything but a string is wrapped in one LEFT-TO-RIGHT ISOLATE (U+2066)
// ... POP DIRECTIONAL ISOLATE pair, so that a right-to-left neighbour
// cannot reorder its brackets, commas or sign. The result is one line.
//
// Untruncated, JSON is one-to-one on JSON values written with their
// members in the same order: Quote escapes « », the isolates and their
// look-alikes inside every string, so the brackets, commas, colons and
// literals outside the guillemets are the value's own structure, and each
// string is Unquote's input. When the result would be wider than
// opts.MaxWidth columns (the guillemets, brackets and separators
// counted), the middle is cut as Value cuts a value: one … marks the cut
// (the only raw … the result can hold), the tail keeps about two thirds of
// the room, and the cut never falls inside an escape, a grapheme cluster
// or an isolate (a string cut keeps its pair around what remains of it).
// A truncated result is not one-to-one.
//
// JSON refuses, with an error wrapping [ErrJSON] that says where: text
// that is not exactly one JSON value (RFC 8259); nesting deeper than 128;
// an object that names a key twice (readers disagree on which one counts);
// a string that holds bytes that are not UTF-8 or a lone UTF-16 surrogate
// escape (most readers turn both into U+FFFD, which is not what was sent);
// a number that readers using IEEE-754 doubles would read as another
// (9007199254740993, 1e400, 1e-400; the rule is at exactNumber). Keys in
// the error are escaped as Value escapes them.
func JSON(raw []byte, opts Options) (string, error) {
	maxWidth := opts.MaxWidth
	if maxWidth <= 0 {
		maxWidth = DefaultMaxWidth
	}
	p := jsonParser{in: raw, render: true}
	if err := p.document(); err != nil {
		return "", err
	}
	if len(p.pieces) == 1 && p.pieces[0].str {
		return openQuote + truncate(p.pieces[0].text, maxWidth) + closeQuote, nil
	}
	return openLiteral + renderJSON(p.pieces, maxWidth) + closeLiteral, nil
}

// CheckJSON returns the error [JSON] would return for raw, without
// rendering it: nil exactly when JSON shows raw.
func CheckJSON(raw []byte) error {
	p := jsonParser{in: raw}
	return p.document()
}

// JSONWarnings returns the [Warnings] of every string in the JSON value
// raw, keys included, each warning once, Hidden before MixedScripts; nil
// when there are none or raw is not a value [JSON] shows.
func JSONWarnings(raw []byte) []Warning {
	p := jsonParser{in: raw, keepText: true}
	if p.document() != nil {
		return nil
	}
	h, m := false, false
	for _, s := range p.texts {
		h = h || hidden(s)
		m = m || misleadingLetters(s)
	}
	var ws []Warning
	if h {
		ws = append(ws, Hidden)
	}
	if m {
		ws = append(ws, MixedScripts)
	}
	return ws
}

// A jsonPiece is one token of the rendering: a string (its quoted text,
// shown as «text») or anything else, shown as its ASCII text.
type jsonPiece struct {
	text string
	str  bool
}

// jsonParser checks a JSON text and, if render is set, turns it into
// pieces.
type jsonParser struct {
	in       []byte
	pos      int
	render   bool
	pieces   []jsonPiece
	path     []jsonStep // where the value being parsed is
	keepText bool       // keep every string's decoded text in texts
	texts    []string
}

// A jsonStep is one step of a path: an object's key, or an array's index.
type jsonStep struct {
	key   string
	index int // -1 for a key
}

func (p *jsonParser) errorf(format string, args ...any) error {
	var where strings.Builder
	for i, s := range p.path {
		switch {
		case s.index >= 0:
			fmt.Fprintf(&where, "[%d]", s.index)
		case i > 0:
			where.WriteString("." + showKey(s.key))
		default:
			where.WriteString(showKey(s.key))
		}
	}
	if where.Len() > 0 {
		return fmt.Errorf("%w: at %s: %s", ErrJSON, where.String(), fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%w: %s", ErrJSON, fmt.Sprintf(format, args...))
}

// showKey shows a key in an error.
func showKey(k string) string { return Value(k, Options{MaxWidth: 40}) }

func (p *jsonParser) add(text string, str bool) {
	if p.render {
		p.pieces = append(p.pieces, jsonPiece{text, str})
	}
}

// addString adds the string s.
func (p *jsonParser) addString(s string) {
	if p.render {
		p.pieces = append(p.pieces, jsonPiece{Quote(s), true})
	}
}

// document parses the whole input as one value.
func (p *jsonParser) document() error {
	if err := p.value(0); err != nil {
		return err
	}
	p.space()
	if p.pos != len(p.in) {
		return p.errorf("data after the value")
	}
	return nil
}

func (p *jsonParser) space() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) error {
	p.space()
	if p.pos == len(p.in) {
		return p.errorf("not a JSON value: the text ends early")
	}
	switch c := p.in[p.pos]; {
	case c == '{' || c == '[':
		if depth == maxJSONDepth {
			return p.errorf("nested deeper than %d", maxJSONDepth)
		}
		if c == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		p.addString(s)
		return nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(string(p.in[p.pos:min(len(p.in), p.pos+5)]), lit) {
			p.pos += len(lit)
			p.add(lit, false)
			return nil
		}
	}
	return p.errorf("not a JSON value at byte %d", p.pos)
}

func (p *jsonParser) object(depth int) error {
	p.pos++ // '{'
	p.add("{", false)
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.add("}", false)
		return nil
	}
	seen := map[string]bool{}
	for {
		p.space()
		if p.pos == len(p.in) || p.in[p.pos] != '"' {
			return p.errorf("not a JSON value: an object member has no key at byte %d", p.pos)
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		// Readers disagree on which of two equal keys counts (the first,
		// the last, or neither): the person would read one, the tool use
		// the other.
		if seen[key] {
			return p.errorf("the key %s is given twice", showKey(key))
		}
		seen[key] = true
		p.addString(key)
		p.space()
		if p.pos == len(p.in) || p.in[p.pos] != ':' {
			return p.errorf("not a JSON value: no ':' at byte %d", p.pos)
		}
		p.pos++
		p.add(": ", false)
		p.path = append(p.path, jsonStep{key: key, index: -1})
		if err := p.value(depth); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.space()
		if p.pos == len(p.in) {
			return p.errorf("not a JSON value: the text ends inside an object")
		}
		switch p.in[p.pos] {
		case '}':
			p.pos++
			p.add("}", false)
			return nil
		case ',':
			p.pos++
			p.add(", ", false)
		default:
			return p.errorf("not a JSON value: no ',' or '}' at byte %d", p.pos)
		}
	}
}

func (p *jsonParser) array(depth int) error {
	p.pos++ // '['
	p.add("[", false)
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.add("]", false)
		return nil
	}
	for i := 0; ; i++ {
		p.path = append(p.path, jsonStep{index: i})
		if err := p.value(depth); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.space()
		if p.pos == len(p.in) {
			return p.errorf("not a JSON value: the text ends inside an array")
		}
		switch p.in[p.pos] {
		case ']':
			p.pos++
			p.add("]", false)
			return nil
		case ',':
			p.pos++
			p.add(", ", false)
		default:
			return p.errorf("not a JSON value: no ',' or ']' at byte %d", p.pos)
		}
	}
}

// number checks the RFC 8259 grammar,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and adds the literal.
func (p *jsonParser) number() error {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && '0' <= p.in[p.pos] && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return p.errorf("not a JSON value: a number without digits at byte %d", start)
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("not a JSON value: a number without digits after '.' at byte %d", start)
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("not a JSON value: a number without exponent digits at byte %d", start)
		}
	}
	lit := string(p.in[start:p.pos])
	if err := exactNumber(lit); err != "" {
		return p.errorf("%s", err)
	}
	p.add(lit, false)
	return nil
}

// exactNumber says why readers would not all read the number literal lit
// (RFC 8259 grammar, already checked) as it is written, or returns "".
//
// The rule: lit must have the value of the shortest decimal that reads
// back as its nearest IEEE-754 double (strconv.FormatFloat with precision
// -1, what JavaScript's String, Python's repr and Go print). Readers that
// decode JSON numbers into doubles (JavaScript, Python's float, Go's
// float64, most others) get that double and show and compare it as that
// decimal; readers that keep the decimal (Python's int, big-number
// libraries) get lit itself; the person read lit. All three agree exactly
// when the two decimals have one value: 1.0 and 1.50 pass, as do 0.1 and
// 1e23 (no double equals them, but every double reader treats its nearest
// one as them). Refused: integers past 2^53 that no double holds
// (9007199254740993 reads as 9007199254740992), more digits than a double
// keeps (0.1000000000000000055511151231257827 reads as 0.1), numbers past
// the largest double (1e400: Infinity or an error) and nonzero numbers
// below the smallest (1e-400 reads as 0). A rule of exact binary
// representability instead would refuse 0.1 and nearly every decimal
// fraction, which all readers agree on; one on digit count alone would
// pass 9007199254740993.
func exactNumber(lit string) string {
	neg, digits, point, ok := decimal(lit)
	if ok && digits == "" {
		return "" // a zero, of either sign: every reader reads a zero
	}
	shown := lit
	if len(shown) > 40 {
		shown = shown[:20] + ellipsis + shown[len(shown)-19:]
	}
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case !ok || err != nil:
		return "the number " + shown + " is beyond the largest IEEE-754 double: readers that use doubles (JavaScript, Python's float) read Infinity, or fail"
	case f == 0:
		return "the number " + shown + " is read as 0 by readers that use IEEE-754 doubles (JavaScript, Python's float): it is below the smallest double"
	}
	n2, d2, p2, _ := decimal(strconv.FormatFloat(f, 'e', -1, 64))
	if neg == n2 && digits == d2 && point == p2 {
		return ""
	}
	read := strconv.FormatFloat(f, 'g', -1, 64)
	if _, frac := math.Modf(f); frac == 0 && math.Abs(f) < 1e21 {
		read = strconv.FormatFloat(f, 'f', -1, 64) // as JavaScript prints it
	}
	return "the number " + shown + " is read as " + read + " by readers that use IEEE-754 doubles (JavaScript, Python's float)"
}

// decimal reads the value of a number literal as 0.digits × 10^point, digits
// without leading or trailing zeros ("" for a zero). ok is false when the
// exponent is too large to matter: past any double, unless digits is "".
func decimal(lit string) (neg bool, digits string, point int64, ok bool) {
	neg = strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	all := strings.TrimLeft(intPart+frac, "0")
	point = int64(len(intPart)) - int64(len(intPart+frac)-len(all))
	digits = strings.TrimRight(all, "0")
	if digits == "" {
		return neg, "", 0, true
	}
	if exp != "" {
		e, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return neg, digits, 0, false
		}
		point += e
	}
	return neg, digits, point, true
}

// str decodes the string at p.pos, refusing what readers would not all
// decode alike.
func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	var b strings.Builder
	for {
		if p.pos == len(p.in) {
			return "", p.errorf("not a JSON value: a string at byte %d never ends", start)
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			s := b.String()
			if p.keepText {
				p.texts = append(p.texts, s)
			}
			return s, nil
		case c < 0x20:
			return "", p.errorf("not a JSON value: a raw control character in a string at byte %d", p.pos)
		case c != '\\':
			// A run of text up to the next quote, escape or control
			// character, which no UTF-8 sequence holds.
			run := p.pos
			for p.pos < len(p.in) {
				if c := p.in[p.pos]; c == '"' || c == '\\' || c < 0x20 {
					break
				}
				p.pos++
			}
			if !utf8.Valid(p.in[run:p.pos]) {
				// Most readers decode it as U+FFFD: two different strings
				// would be read alike, and neither as sent.
				return "", p.errorf("a string holds bytes that are not UTF-8")
			}
			if b.Len() == 0 && p.pos < len(p.in) && p.in[p.pos] == '"' {
				// The whole string, unescaped: one copy.
				p.pos++
				s := string(p.in[run : p.pos-1])
				if p.keepText {
					p.texts = append(p.texts, s)
				}
				return s, nil
			}
			b.Write(p.in[run:p.pos])
		default:
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		}
	}
}

// escape decodes the escape sequence at p.pos.
func (p *jsonParser) escape() (rune, error) {
	r, n, err := jsonstring.Decode(p.in[p.pos:])
	switch {
	case errors.Is(err, jsonstring.ErrUnterminated):
		return 0, p.errorf("not a JSON value: an escape never ends")
	case errors.Is(err, jsonstring.ErrHex):
		return 0, p.errorf("not a JSON value: an invalid \\u escape at byte %d", p.pos)
	case err != nil:
		return 0, p.errorf("not a JSON value: an invalid escape at byte %d", p.pos)
	}
	p.pos += n
	if utf16.IsSurrogate(r) {
		// Most readers decode it as U+FFFD, as they do an invalid byte.
		return 0, p.errorf("a string holds a lone UTF-16 surrogate escape (\\u%04X)", r)
	}
	return r, nil
}

// renderJSON writes the pieces, cut in the middle to maxWidth columns.
func renderJSON(pieces []jsonPiece, maxWidth int) string {
	// t is the rendering without isolates: strings as «text». strs are the
	// byte ranges of the strings in t, guillemets included.
	var t strings.Builder
	var strs []component
	for _, pc := range pieces {
		if !pc.str {
			t.WriteString(pc.text)
			continue
		}
		start := t.Len()
		t.WriteString("«" + pc.text + "»")
		strs = append(strs, component{start, t.Len()})
	}
	text := t.String()
	head, tail := len(text), len(text) // nothing dropped
	if len(text) > maxWidth || !printableASCII(text) {
		if h, t, width := span(jsonAtoms(text, strs), maxWidth); width > maxWidth {
			head, tail = h, t
		}
	}
	return renderCutJSON(text, strs, head, tail)
}

// jsonAtoms yields the pieces of text that a cut keeps or drops whole: each
// byte outside strings (all ASCII), and for each string its « and », and
// the atoms of its quoted text.
func jsonAtoms(text string, strs []component) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		at := 0
		for _, s := range strs {
			for ; at < s.start; at++ {
				if !yield(text[at:at+1], 1) {
					return
				}
			}
			if !yield("«", 1) {
				return
			}
			for a, w := range atoms(text[s.start+len("«") : s.end-len("»")]) {
				if !yield(a, w) {
					return
				}
			}
			if !yield("»", 1) {
				return
			}
			at = s.end
		}
		for ; at < len(text); at++ {
			if !yield(text[at:at+1], 1) {
				return
			}
		}
	}
}

// renderCutJSON writes text without the bytes [head, tail), one … in their
// place if any were dropped, each string's remaining text inside its own
// isolate, within its guillemets where they remain.
func renderCutJSON(text string, strs []component, head, tail int) string {
	var b strings.Builder
	b.Grow(len(text) + len(ellipsis) + len(strs)*(len(isolate)+len(popIso)))
	open := -1 // the string whose isolate is open
	k := 0     // the first string that does not end before the current byte
	write := func(from, to int) {
		for i := from; i < to; {
			for k < len(strs) && strs[k].end <= i {
				k++
			}
			if k == len(strs) || i < strs[k].start {
				end := to
				if k < len(strs) {
					end = min(end, strs[k].start)
				}
				b.WriteString(text[i:end])
				i = end
				continue
			}
			s := strs[k]
			end := min(s.end, to)
			part := text[i:end]
			if i == s.start {
				b.WriteString("«")
				part = part[len("«"):]
			}
			if open != k {
				b.WriteString(isolate)
				open = k
			}
			closed := end == s.end
			if closed {
				part = part[:len(part)-len("»")]
			}
			b.WriteString(part)
			if closed {
				b.WriteString(popIso + "»")
				open = -1
			}
			i = end
		}
	}
	write(0, head)
	if head < tail {
		// A cut inside one string keeps the … inside its isolate.
		inside := open >= 0 && tail < strs[open].end
		if open >= 0 && !inside {
			b.WriteString(popIso)
			open = -1
		}
		b.WriteString(ellipsis)
	}
	write(tail, len(text))
	return b.String()
}
