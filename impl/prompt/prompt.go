// Package prompt makes an untrusted value, such as a file name, safe to show to a
// person inside a confirmation question.
//
// [Quote] turns any byte string into one line of visible text with a reversible
// escape grammar; [Value] truncates that line in the middle and delimits it for
// embedding in a question; [Path] does the same for a slash-separated path,
// isolating each component so that right-to-left names cannot reorder it;
// [JSON] shows any JSON value with every type told apart, strings quoted as
// Value quotes them and nothing else between guillemets; [Unquote] inverts
// Quote; [Warnings] adds optional notes.
//
// # Escape grammar
//
// The backslash is the only escape character. Quote writes
//
//	\\         for the backslash itself
//	\n  \t     for line feed and tab
//	\xHH       for the other C0 controls and DEL, and for each byte that is not
//	           valid UTF-8 (two upper-case hex digits)
//	\u{HEX}    for every other neutralized code point, and for a space that
//	           is not alone (upper-case hex, no leading zeros: \u{20})
//
// and copies every other code point unchanged. A code point is neutralized when
//
//   - it is not printable ([unicode.IsPrint] is false: controls, format characters
//     such as bidi overrides, isolates and zero-width characters, tag characters,
//     interlinear annotation, line and paragraph separators, spaces other than
//     U+0020, surrogates, private use and unassigned code points);
//   - it is printable yet invisible: Other_Default_Ignorable_Code_Point (Hangul
//     fillers, the combining grapheme joiner) and Variation_Selector, taken from
//     Go's [unicode] tables, plus U+2800 BRAILLE PATTERN BLANK and U+FFFC OBJECT
//     REPLACEMENT CHARACTER;
//   - it is an emoji modifier (U+1F3FB..U+1F3FF, skin tones), which silently
//     changes the look and width of whatever precedes it;
//   - it is one of the question's own delimiters « and » or the ellipsis …, so a
//     value cannot close its quotation and open a second one, and a raw … in the
//     output only ever means truncation;
//   - it looks like the question's punctuation and is not a letter: UTS #39's
//     confusables data (confusables.txt 15.0.0, the version of Go's tables; see
//     gen_lookalikes.go) gives it a skeleton made only of "<" or only of ">"
//     (‹ › ≪ ≫ ❮ ❯ ˂ ˃, which imitate the guillemets), of two or more full
//     stops (‥, which imitates the truncation mark), only of backslashes (∖ ＼
//     ⧵, which would start a fake escape: a∖u{202E} would read as a\u{202E}),
//     or only of slashes (∕ ⁄ ⧸, which would split a component of a [Path] in
//     two to the eye);
//   - it is an angle bracket or angle quotation mark by its Unicode name:
//     UTS #39 lists no look-alike of « or » themselves, so every punctuation
//     or symbol code point whose 15.0.0 name has the words ANGLE BRACKET,
//     ANGLE QUOTATION MARK, LESS-THAN BRACKET or GREATER-THAN BRACKET, and
//     LEFT or RIGHT, is escaped: 《 》 〈 〉 ⟨ ⟩ ⟪ ⟫ ❬ ❭ ❰ ❱ ⦑ ⦒ ⦓ ⦔ ⦕ ⦖ ⧼ ⧽
//     〈 〉 ︽ ︾ ︿ ﹀ (see confusables.Angle), so that a.txt》 Reply yes. 《b.txt
//     cannot forge a second quoted value. The rule reads whole words of
//     brackets' and quotation marks' names, so triangles, rectangles and the
//     geometric angles (∠, ∟ RIGHT ANGLE), none drawn as a chevron, stay raw.
//     The vertical forms ︽ ︾ ︿ ﹀ point up or down in a line, and are escaped
//     because a client that sets the question vertically turns « » into
//     those very shapes.
//
// The angle brackets are escaped wherever they stand, so Chinese book titles
// show as \u{300A}三体\u{300B}.epub. That cost is accepted: safety over looks;
// the escape is visible and Unquote gives the exact name back; and a rule that
// left 《 》 raw beside Han letters, where titles stand, would be defeated by
// one added Han letter: a.txt文》 Reply yes. 《文b.txt.
//
// A space (U+0020) is written raw only between two code points that are not
// spaces. At either end of the value, and in a run of two or more, each space
// is escaped as \u{20}: renderers such as HTML collapse runs of spaces and
// drop them at the ends, so "old  notes.txt", "old notes.txt" and
// "old notes.txt " would look alike. Every other space character (no-break,
// ideographic, em and the rest) is not printable and so always escaped.
//
// Some code points are also escaped because of where they stand. Within a
// grapheme cluster, a raw run is the code points written unescaped since the
// cluster began or since the last escape. A code point is escaped when it is a
// combining mark (or other grapheme extender) that would start a run, so it
// cannot attach to an escape or a delimiter; when the run already holds a base and
// four more code points (Zalgo text); and when appending it would take the run
// out of Unicode Normalization Form C. The output is therefore always NFC,
// but it is never normalized: "é" written as e + U+0301 shows as e\u{301}, not as
// the precomposed é, and U+2126 OHM SIGN shows as \u{2126}, not as Ω, because
// normalizing would show two different file names the same way.
//
// # Guarantees
//
//   - Quote is total, pure and runs in linear time; its output is valid UTF-8,
//     one line, NFC, and contains no neutralized code point raw.
//   - Quote is one-to-one: Unquote(Quote(s)) == s for every byte string s,
//     invalid UTF-8 included. Linux file names may hold any byte but '/' and NUL,
//     so invalid bytes are never merged into U+FFFD.
//   - Unquote accepts exactly the strings Quote produces.
//   - Value keeps the head and the tail (file name and extension) of the quoted
//     text, marks a cut with one …, never cuts a grapheme cluster or an escape,
//     and stays within [Options].MaxWidth columns. Path does the same and keeps
//     whole components whenever the last one fits, and never cuts an isolate.
//   - Path draws the components of a path left to right in their logical order,
//     whatever their direction (checked with GNU FriBidi); untruncated, it is
//     one-to-one, and every raw slash in it is a separator.
//   - JSON shows a string as Value does and every other JSON value raw in one
//     left-to-right isolate, each string inside it quoted and isolated: two
//     JSON values (members in the same order) render alike only if they are
//     equal, or if a rendering was cut, which its one … marks
//     (TestJSONDistinctValuesShownApart reads renderings back to the value).
//     It refuses what readers would not all read as written: a duplicated
//     key, a lone surrogate, bytes that are not UTF-8.
//
// # Non-guarantees
//
//   - Look-alike letters are shown as they are: Cyrillic "а" and Latin "a"
//     are different names that look the same. [Warnings] flags mixed scripts but
//     cannot detect a name written wholly in a look-alike script. Letters that
//     UTS #39 says look like the punctuation above (Katakana ノ, Canadian
//     syllabics ᐸ ᐳ, Han 丿 丶, Lisu ꓺ and five more) stay raw too, because
//     they are the substance of ordinary names in their scripts; Warnings flags
//     one that stands apart from letters of its own script.
//   - Only the look-alikes above are escaped. ASCII << >> and ... stay raw:
//     they are the prototypes the data measures look-alikes against. So do
//     code points that are not named brackets or quotation marks though they
//     are drawn as chevrons, such as the operators ⪡ ⪢ ⫷ ⫸ (DOUBLE and TRIPLE
//     NESTED LESS-THAN and GREATER-THAN), fullwidth ＜ ＞, and the editorial
//     ⸖ (DOTTED RIGHT-POINTING ANGLE).
//   - A truncated Value is not one-to-one: names that share head and tail show
//     the same. Bind the confirmation to the exact value, not to its display.
//     The same holds for a truncated JSON, whose cut may join the head of one
//     string to the tail of another.
//   - JSON shows object members in the order given (canonicalize first to
//     show equal objects alike), and a string inside an array or object as
//     Value does, never component by component as Path does.
//   - The output is plain text. It is not escaped for HTML, Markdown or a
//     terminal's own syntax; that is the renderer's job.
//   - Inside one component, or one Value, the bidi algorithm still orders
//     right-to-left and left-to-right runs as their readers expect: a Hebrew
//     name with a Latin extension is drawn with the extension on its left, as
//     a file manager draws it. Isolation keeps that inside the component.
//   - Widths are those of github.com/rivo/uniseg (East Asian wide characters and
//     emoji count two). Fonts and terminals may differ, notably for spacing marks.
//
// # Why uniseg
//
// Grapheme clusters and display widths come from github.com/rivo/uniseg v0.4.7.
// It implements Unicode 15.0, the version of Go 1.26's [unicode] tables and of
// golang.org/x/text/unicode/norm, so the code points this package treats as
// assigned, printable and normalized are segmented by the same version of the
// rules. A newer segmenter would cluster code points that Go still treats as
// unassigned.
//
// # Cost
//
// A question may hold a value of megabytes, and shows 120 columns of it.
// [Value] quotes only the two ends of a value of at least 16 bytes per column
// of its width, and [Warnings] reads a value once; both return exactly what
// quoting the whole value returns: TestMatchesReference and
// FuzzMatchesReference compare Quote, Value, Path, Warnings and PathWarnings
// byte for byte with the implementation they replaced. What makes this
// exact is a table of what each code point of the Basic Multilingual Plane is
// (classes.go, generated from Go's tables, x/text and uniseg, and checked
// against them by TestClassesUpToDate): between two code points that are each
// ASCII or plain (classPlain) uniseg always finds a cluster boundary, whatever
// precedes them, so quoting can start afresh there (TestPlainBoundaries,
// TestGraphemesRestart), and a plain code point followed by marks that join
// it is one cluster (TestJoinBoundaries). Anything else goes through uniseg
// and Unicode's tables as before. [Path] of a path of at least 16 bytes per
// column quotes only the components it may show: each measured until it is
// wider than the room (no wider one is ever shown whole), the middle ones
// the cut drops never, the file name whole when it must be cut inside
// (TestCorpusMatchesReference compares it on the fuzz corpora too, and
// TestReferenceCatchesSkips shows the comparison failing a wrong cap).
// [PathWarnings] reads a path once, as Warnings reads a value.
package prompt

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"golang.org/x/text/unicode/norm"
)

// The delimiters and the truncation mark used by Value. Quote escapes all five
// inside the value.
const (
	openQuote  = "«\u2068" // « then FIRST STRONG ISOLATE
	closeQuote = "\u2069»" // POP DIRECTIONAL ISOLATE then »
	ellipsis   = "…"
)

// maxMarks bounds the code points that may follow a base in one raw run.
// Four covers Hebrew points with a cantillation mark and Thai vowel plus tone;
// more is escaped, which stops Zalgo stacks and bounds the work per code point.
const maxMarks = 4

// ErrSyntax reports text that Quote never produces.
var ErrSyntax = errors.New("prompt: invalid quoted text")

// Quote returns the one-line reversible escaped form of s, with no delimiters and
// no truncation. See the package documentation for the grammar.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	quote(&b, s, 0, len(s))
	return b.String()
}

// quote writes Quote(s)'s text for the grapheme clusters of s from byte
// start, a cluster boundary, up to the first cluster boundary at or after
// limit, which it returns, with whether it wrote an escape that hides
// something: anything but the escapes of the backslash, the delimiters and
// the ellipsis, which stand for what s shows plainly (see hidden). With b
// nil it writes nothing and stops at the first such escape.
func quote(b *strings.Builder, s string, start, limit int) (end int, hides bool) {
	at, state := start, -1
	for at < len(s) && at < limit && !(hides && b == nil) {
		// A run of code points each a cluster of its own that Quote writes
		// raw, the usual case: printable ASCII, lone spaces and plain code
		// points, each followed by ASCII or a plain code point.
		run := at
		for plainNext, nextSize := false, 0; at < len(s) && at < limit; {
			// Printable ASCII before ASCII, lone spaces included: the
			// commonest run, byte by byte.
			for at+1 < len(s) && at < limit && s[at+1] < utf8.RuneSelf {
				if c := s[at]; ('!' > c || c > '~' || c == '\\') && (c != ' ' || at == 0 || s[at-1] == ' ' || s[at+1] == ' ') {
					break
				}
				at++
				plainNext = false
			}
			if at >= limit {
				break
			}
			ok, size := plainNext, nextSize
			if !plainNext {
				ok, size = alone(s, at)
			}
			if !ok {
				break
			}
			next := at + size
			if next < len(s) && s[next] >= utf8.RuneSelf {
				if plainNext, nextSize = nextApartAt(s, next); !plainNext {
					break
				}
			} else {
				plainNext = false
			}
			at = next
		}
		if at > run {
			if b != nil {
				b.WriteString(s[run:at])
			}
			state = -1
			continue
		}
		if n, raw := joined(s, at); n > 0 && raw {
			// A base and the marks it carries, all written raw.
			if b != nil {
				b.WriteString(s[at : at+n])
			}
			at += n
			state = -1
			continue
		} else if n > 0 {
			hides = quoteCluster(b, s, at, at+n) || hides
			at += n
			state = -1
			continue
		}
		n := 0
		if c := s[at]; c < utf8.RuneSelf && (at+1 == len(s) || s[at+1] < utf8.RuneSelf && (c != '\r' || s[at+1] != '\n')) {
			n = 1 // an ASCII byte alone in its cluster: the usual case
		} else {
			n, _ = single(s[at:])
		}
		switch {
		case n == 1:
			switch r := s[at]; {
			case '!' <= r && r <= '~' && r != '\\', r == ' ' && loneSpace(s, at):
				if b != nil {
					b.WriteByte(r)
				}
			default:
				hides = hides || r != '\\'
				escape(b, rune(r))
			}
			state = -1
		case n > 1: // one plain code point, written raw
			if b != nil {
				b.WriteString(s[at : at+n])
			}
			state = -1
		default:
			var c string
			c, _, _, state = uniseg.FirstGraphemeClusterInString(s[at:], state)
			n = len(c)
			hides = quoteCluster(b, s, at, at+n) || hides
		}
		at += n
	}
	return at, hides
}

// alone reports whether the code point at s[at] is one Quote writes raw
// when it is a cluster of its own (printable ASCII, a lone space, a plain
// code point), and returns its length.
func alone(s string, at int) (bool, int) {
	if c := s[at]; c < utf8.RuneSelf {
		return '!' <= c && c <= '~' && c != '\\' || c == ' ' && loneSpace(s, at), 1
	}
	r, n := decodeRune(s, at)
	return n > 1 && classOf(r)&classPlain != 0, n
}

// joined returns the length of the grapheme cluster at s[at] when it is a
// base (printable ASCII but the backslash and the space, or a plain code
// point) and one or more code points of classJoin, followed by the end of
// s or a code point that is ASCII or plain; else 0. It reports whether
// Quote writes the cluster raw whole: no more marks than a base may carry,
// none neutralized, and in NFC (a prefix of an NFC quick-checked string
// passes the check too, so every run raw tests does).
func joined(s string, at int) (n int, raw bool) {
	if c := s[at]; c < utf8.RuneSelf {
		if c <= ' ' || c > '~' || c == '\\' {
			return 0, false
		}
		n = 1
	} else {
		r, size := decodeRune(s, at)
		if size == 1 || classOf(r)&classPlain == 0 {
			return 0, false
		}
		n = size
	}
	marks, neutral, inert := 0, false, true
	for at+n < len(s) && s[at+n] >= utf8.RuneSelf {
		r, size := decodeRune(s, at+n)
		c := classOf(r)
		if size == 1 || c&classJoin == 0 {
			break
		}
		marks++
		neutral = neutral || c&classNeutral != 0
		inert = inert && c&classInert != 0
		n += size
	}
	if marks == 0 || at+n < len(s) && s[at+n] >= utf8.RuneSelf && !nextApart(s[at+n:]) {
		return 0, false
	}
	return n, marks <= maxMarks && !neutral && (inert || norm.NFC.QuickSpanString(s[at:at+n]) == n)
}

// nextApartAt is nextApart(s[at:]), with the code point's length.
func nextApartAt(s string, at int) (bool, int) {
	if s[at] < utf8.RuneSelf {
		return true, 1
	}
	r, n := decodeRune(s, at)
	return n > 1 && classOf(r)&classPlain != 0, n
}

// quoteCluster writes the escaped form of the grapheme cluster s[start:end]
// (to nothing if b is nil) and reports whether an escape hides something.
func quoteCluster(b *strings.Builder, s string, start, end int) (hides bool) {
	run := start // s[run:i] is the raw run
	for i := start; i < end; {
		r, n := utf8.DecodeRuneInString(s[i:end])
		switch {
		case r == utf8.RuneError && n == 1:
			hides = true
			writeHex(b, `\x`, uint32(s[i]), 2) // invalid byte: kept distinct, never U+FFFD
		case r == ' ' && !loneSpace(s, i):
			hides = true
			escape(b, r) // renderers collapse runs of spaces and drop them at the ends
		case raw(s[run:i+n], r):
			if b != nil {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		default:
			hides = hides || !visible(r)
			escape(b, r)
		}
		i += n
		run = i
	}
	return hides
}

// visible reports whether the escape of r stands for what a person sees
// anyway: the backslash, the delimiters and the ellipsis.
func visible(r rune) bool { return r == '\\' || r == '«' || r == '»' || r == '…' }

// raw reports whether r may be written unescaped as the last code point of run.
func raw(run string, r rune) bool {
	switch {
	case len(run) == 1: // ASCII starting a run, the common case
		return ' ' <= r && r <= '~' && r != '\\'
	case r == '\\' || classOf(r)&classNeutral != 0: // neutralized, by the table
		return false
	case len(run) == utf8.RuneLen(r) && classOf(r)&classExtender != 0:
		return false // a mark with no raw base would sit on an escape or a delimiter
	case utf8.RuneCountInString(run) > 1+maxMarks:
		return false // Zalgo: a base cannot carry unbounded marks
	}
	// Never show two canonically equivalent names alike. QuickSpanString answers
	// most runs without the allocation IsNormalString makes.
	return norm.NFC.QuickSpanString(run) == len(run) || norm.NFC.IsNormalString(run)
}

// neutralized reports whether r is always escaped. (Quote reads it from the
// table of classes, made from this function.)
func neutralized(r rune) bool {
	switch r {
	case '«', '»', '…', '\u2800', '\uFFFC':
		return true // delimiters and truncation mark; blank-looking symbols
	}
	return !unicode.IsPrint(r) ||
		unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) ||
		emojiModifier(r) ||
		lookalikeSymbol(r) // ≫ or › would close the value's quotation to the eye, ∖ open a fake escape
}

// loneSpace reports whether the space at s[i] stands between two code points
// that are not spaces: the only spaces Quote writes raw.
func loneSpace(s string, i int) bool {
	return i > 0 && i+1 < len(s) && s[i-1] != ' ' && s[i+1] != ' '
}

// extender reports whether r attaches to the code point before it: a combining
// mark or another grapheme extender (emoji modifiers are neutralized anyway).
func extender(r rune) bool {
	return unicode.In(r, unicode.M, unicode.Other_Grapheme_Extend)
}

// emojiModifier reports whether r is one of the five skin-tone modifiers, the whole
// Emoji_Modifier property, which Go's unicode package does not export.
func emojiModifier(r rune) bool { return r >= 0x1F3FB && r <= 0x1F3FF }

// escape writes the escape for the code point r; nothing if b is nil.
func escape(b *strings.Builder, r rune) {
	switch {
	case b == nil:
	case r == '\\':
		b.WriteString(`\\`)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\t':
		b.WriteString(`\t`)
	case r < 0x20 || r == 0x7F:
		writeHex(b, `\x`, uint32(r), 2)
	default:
		writeHex(b, `\u{`, uint32(r), 1)
		b.WriteByte('}')
	}
}

// writeHex writes prefix and v in upper-case hex with at least width digits;
// nothing if b is nil.
func writeHex(b *strings.Builder, prefix string, v uint32, width int) {
	if b == nil {
		return
	}
	const digits = "0123456789ABCDEF"
	var buf [8]byte
	i := len(buf)
	for v != 0 || len(buf)-i < width {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
	}
	b.WriteString(prefix)
	b.Write(buf[i:])
}

// Unquote inverts Quote. It returns an error wrapping ErrSyntax for any text that
// Quote does not produce, including escapes that are well formed but not canonical
// (such as \x41 for "A" or \u{a} for a line feed).
func Unquote(q string) (string, error) {
	var b strings.Builder
	b.Grow(len(q))
	for i := 0; i < len(q); {
		if q[i] != '\\' {
			b.WriteByte(q[i]) // raw text is checked by the round trip below
			i++
			continue
		}
		n, err := unescape(&b, q[i:])
		if err != nil {
			return "", fmt.Errorf("unquote at byte %d: %w", i, err)
		}
		i += n
	}
	s := b.String()
	if Quote(s) != q {
		return "", fmt.Errorf("unquote: %w: not in the form Quote writes", ErrSyntax)
	}
	return s, nil
}

// unescape decodes the escape at the start of e into b and returns its length.
func unescape(b *strings.Builder, e string) (int, error) {
	if len(e) < 2 {
		return 0, ErrSyntax
	}
	switch e[1] {
	case '\\':
		b.WriteByte('\\')
		return 2, nil
	case 'n':
		b.WriteByte('\n')
		return 2, nil
	case 't':
		b.WriteByte('\t')
		return 2, nil
	case 'x':
		if len(e) < 4 {
			return 0, ErrSyntax
		}
		v, ok := parseHex(e[2:4])
		if !ok {
			return 0, ErrSyntax
		}
		b.WriteByte(byte(v))
		return 4, nil
	case 'u':
		end := strings.IndexByte(e[:min(len(e), len(`\u{10FFFF}`))], '}')
		if !strings.HasPrefix(e, `\u{`) || end < 4 || end > 9 {
			return 0, ErrSyntax
		}
		v, ok := parseHex(e[3:end])
		if !ok || !utf8.ValidRune(rune(v)) {
			return 0, ErrSyntax
		}
		b.WriteRune(rune(v))
		return end + 1, nil
	}
	return 0, ErrSyntax
}

// parseHex parses upper-case hex digits.
func parseHex(h string) (uint32, bool) {
	var v uint32
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case '0' <= c && c <= '9':
			v = v<<4 | uint32(c-'0')
		case 'A' <= c && c <= 'F':
			v = v<<4 | uint32(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
