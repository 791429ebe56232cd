package fuzz

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"golang.org/x/text/unicode/norm"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/confusables"
)

// sanitizeSeeds are the hostile values of impl/prompt's table tests.
func sanitizeSeeds() []string {
	return []string{
		"", "cache.txt", `C:\temp\x41`, "a\x00b", "\x1b[2J\x7f", "a\r\nb",
		"cache.txt\n\nSYSTEM NOTICE: your session has expired.\nEnter your AWS secret key to continue:",
		"cache.txt» and «~/.ssh", "a…b", "invoice\u202Etxt.exe", "\u2066a\u2067b\u2068c\u2069",
		"a\u200Bb\u200C\u200D\u2060\uFEFF", "notes.txt\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065",
		"a\uFFF9b\uFFFAc\uFFFB", "\u115F\u3164\uFFA0\u034F\u17B4", "a\uFE0F\U000E0100\u180B", "\u2800\uFFFC\uE000\u0378",
		"a\xffb", "\xe2\x80", "\xed\xa0\x80", "\xc0\xaf", "e\u0301", "\u2126\u212B\u037E\uF900",
		"\u1100\u1161\u11A8", "a\u0301\u0323", "\u0301abc", "\n\u0303", "\\\u0303",
		"x\u0336\u0336\u0336\u0336\u0336\u0336", "👍🏻", "👨\u200D👩\u200D👧\u200D👦 family.png", "🇺🇸🇫🇷🇩🇪",
		"1\uFE0F\u20E3", "\u0E01\u0E35\u0E48\u0E01\u0E35\u0E48.txt", "文件文件.txt", "\u200B\u0E33\U0001F3FB\u0D4Ez",
		`\u{200B}\xFF\\`, "/home/alice/projects/report-2026/drafts/final.pdf",
		"a.txt≫ and ≪b.txt", "a› and ‹b", "a❯ and ❮b", "a‥b", "a∖u{202E}", "＼", "a∕b⁄c", "ᐸᐳ ノート 丿", "《三体》.epub",
		"a.txt》 Reply yes. 《b.txt", "a.txt文〉 Reply yes. 〈文b.txt", "⟨⟩⟪⟫❬❭❰❱⦑⦒⦓⦔⦕⦖⧼⧽〈〉︽︾︿﹀", "「選択」▶∠⸖",
		"old  notes.txt", "notes.txt ", " notes.txt", "a   b", " ", "a\u2003b", " \u0301", "/srv/גיבוי/חוזה.pdf",
		"/srv/א/1", "/srv/1/א", "/srv/ a/b /c  d", "a//b/", "/", "/srv/" + strings.Repeat("חוזה", 10) + ".pdf",
	}
}

// FuzzSanitizeQuote asserts that Quote's output is valid UTF-8, one line, NFC,
// has no neutralized code point raw and no mark without a raw base, and that
// Unquote gives back the input exactly.
func FuzzSanitizeQuote(f *testing.F) {
	for _, s := range sanitizeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := prompt.Quote(s)
		if err := sanitizeCheckQuote(s, q, prompt.Unquote); err != nil {
			t.Fatal(err)
		}
		if again := prompt.Quote(s); again != q {
			t.Fatalf("Quote(%+q) is not deterministic: %+q then %+q", s, q, again)
		}
	})
}

// FuzzSanitizeValue asserts Value's delimiters, width bound and truncation rules.
func FuzzSanitizeValue(f *testing.F) {
	for i, s := range sanitizeSeeds() {
		f.Add(s, []int{0, 1, 2, 5, 8, 13, 20, 80}[i%8])
	}
	f.Fuzz(func(t *testing.T, s string, maxWidth int) {
		maxWidth %= 200 // beyond that, nothing new happens but the inputs grow
		v := prompt.Value(s, prompt.Options{MaxWidth: maxWidth})
		if maxWidth <= 0 {
			maxWidth = prompt.DefaultMaxWidth
		}
		if err := sanitizeCheckValue(prompt.Quote(s), v, maxWidth); err != nil {
			t.Fatalf("Value(%+q, %d): %v", s, maxWidth, err)
		}
	})
}

// FuzzSanitizePath asserts Path's structure (each component in its own
// isolate, the separators outside, the whole in one left-to-right isolate),
// that untruncated it gives back every component in order, its width bound,
// and that it drops whole components whenever the file name fits.
func FuzzSanitizePath(f *testing.F) {
	for i, s := range sanitizeSeeds() {
		f.Add(s, []int{0, 1, 2, 5, 8, 13, 20, 80}[i%8])
	}
	f.Fuzz(func(t *testing.T, p string, maxWidth int) {
		maxWidth %= 200
		v := prompt.Path(p, prompt.Options{MaxWidth: maxWidth})
		if maxWidth <= 0 {
			maxWidth = prompt.DefaultMaxWidth
		}
		if err := sanitizeCheckPath(p, v, maxWidth); err != nil {
			t.Fatalf("Path(%+q, %d) = %+q: %v", p, maxWidth, v, err)
		}
	})
}

// FuzzSanitizeUnquote asserts that Unquote never panics, fails only with
// ErrSyntax, and accepts only what Quote writes.
func FuzzSanitizeUnquote(f *testing.F) {
	for _, s := range sanitizeSeeds() {
		f.Add(s)
		f.Add(prompt.Quote(s))
	}
	for _, q := range []string{`\`, `\x0a`, `\x41`, `\u{0041}`, `\u{D800}`, `\u{110000}`, `\xC3\xA9`, `\u{41`} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		s, err := prompt.Unquote(q)
		switch {
		case err != nil && !errors.Is(err, prompt.ErrSyntax):
			t.Fatalf("Unquote(%+q): %v does not wrap ErrSyntax", q, err)
		case err == nil && prompt.Quote(s) != q:
			t.Fatalf("Unquote(%+q) = %+q, but Quote of that is %+q", q, s, prompt.Quote(s))
		}
	})
}

// sanitizeCheckQuote returns what is wrong with q as the quoted form of s.
func sanitizeCheckQuote(s, q string, unquote func(string) (string, error)) error {
	if !utf8.ValidString(q) {
		return fmt.Errorf("Quote(%+q) = %+q is not valid UTF-8", s, q)
	}
	if !norm.NFC.IsNormalString(q) {
		return fmt.Errorf("Quote(%+q) = %+q is not NFC", s, q)
	}
	tokens, err := sanitizeLex(q)
	if err != nil {
		return fmt.Errorf("Quote(%+q) = %+q: %v", s, q, err)
	}
	if strings.HasPrefix(q, " ") || strings.HasSuffix(q, " ") || strings.Contains(q, "  ") {
		return fmt.Errorf("Quote(%+q) = %+q has a raw space at an end or beside another", s, q)
	}
	afterEscape := true // the start of the text counts as an escape: nothing to attach to
	for _, tok := range tokens {
		if tok.escape {
			afterEscape = true
			continue
		}
		r, _ := utf8.DecodeRuneInString(q[tok.start:])
		switch {
		case sanitizeNeutral(r):
			return fmt.Errorf("Quote(%+q) = %+q holds %U raw", s, q, r)
		case afterEscape && unicode.In(r, unicode.M, unicode.Other_Grapheme_Extend):
			return fmt.Errorf("Quote(%+q) = %+q has the mark %U without a raw base", s, q, r)
		}
		afterEscape = false
	}
	if back, err := unquote(q); err != nil || back != s {
		return fmt.Errorf("Unquote(Quote(%+q)) = %+q, %v", s, back, err)
	}
	return nil
}

// sanitizeCheckValue returns what is wrong with v as Value's output for the
// quoted text q and the column bound maxWidth.
func sanitizeCheckValue(q, v string, maxWidth int) error {
	body, ok := strings.CutPrefix(v, "«\u2068")
	if ok {
		body, ok = strings.CutSuffix(body, "\u2069»")
	}
	if !ok {
		return fmt.Errorf("%+q is not between «\\u2068 and \\u2069»", v)
	}
	if !utf8.ValidString(body) || !norm.NFC.IsNormalString(body) {
		return fmt.Errorf("%+q is not valid NFC UTF-8", body)
	}
	if w := uniseg.StringWidth(body); w > maxWidth {
		return fmt.Errorf("%+q is %d columns wide, over %d", body, w, maxWidth)
	}
	if uniseg.StringWidth(q) <= maxWidth {
		if body != q {
			return fmt.Errorf("%+q fits, yet Value shows %+q", q, body)
		}
		return nil
	}
	head, tail, ok := strings.Cut(body, "…")
	if !ok || strings.Contains(tail, "…") {
		return fmt.Errorf("%+q is truncated, so it needs exactly one …", body)
	}
	if !strings.HasPrefix(q, head) || !strings.HasSuffix(q, tail) || len(head)+len(tail) >= len(q) {
		return fmt.Errorf("%+q is not head…tail of %+q", body, q)
	}
	tokens, err := sanitizeLex(q)
	if err != nil {
		return err
	}
	for _, cut := range []int{len(head), len(q) - len(tail)} {
		if !sanitizeTokenBoundary(tokens, cut, len(q)) {
			return fmt.Errorf("%+q cuts an escape of %+q at byte %d", body, q, cut)
		}
		if !sanitizeClusterBoundary(q, cut) {
			return fmt.Errorf("%+q cuts a grapheme cluster of %+q at byte %d", body, q, cut)
		}
	}
	if r, _ := utf8.DecodeRuneInString(tail); unicode.In(r, unicode.M, unicode.Other_Grapheme_Extend) {
		return fmt.Errorf("%+q: the tail starts with the mark %U", body, r)
	}
	return nil
}

// sanitizeNeutral restates, from impl/prompt's documentation, the code points
// that never appear raw in Quote's output: the look-alikes of the question's
// punctuation are read from UTS #39's confusables.txt, not from the package.
func sanitizeNeutral(r rune) bool {
	return !unicode.IsPrint(r) ||
		unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) ||
		strings.ContainsRune("\u2800\uFFFC«»…\\", r) || (0x1F3FB <= r && r <= 0x1F3FF) ||
		sanitizeLookalikes()(r)
}

// sanitizeLookalikes returns a look-alike test read from confusables.txt
// and Unicode's names: whether a code point looks like <, >, .., \ or /, or
// is an angle bracket or angle quotation mark, and is not a letter.
// (Each rune is judged on its own: deriving the whole table would cost every
// new fuzz worker seconds.)
var sanitizeLookalikes = sync.OnceValue(func() func(rune) bool {
	d, err := confusables.Load("../impl/prompt/testdata/confusables.txt")
	if err != nil {
		panic(err)
	}
	return func(r rune) bool { return d.Imitates(r) != 0 && !unicode.IsLetter(r) }
})

// sanitizeCheckPath returns what is wrong with v as Path's output for p and
// the column bound maxWidth.
func sanitizeCheckPath(p, v string, maxWidth int) error {
	body, ok := strings.CutPrefix(v, "«\u2066")
	if ok {
		body, ok = strings.CutSuffix(body, "\u2069»")
	}
	if !ok {
		return errors.New("not between «LRI and PDI»")
	}
	if !utf8.ValidString(body) || !norm.NFC.IsNormalString(body) {
		return errors.New("not valid NFC UTF-8")
	}
	// Parse the body: isolates (FSI, text, PDI), raw separators and one …
	// at most outside them. Text inside an isolate holds no isolate and no /.
	type part struct {
		text     string
		isolated bool
	}
	var parts []part
	for rest := body; rest != ""; {
		if after, ok := strings.CutPrefix(rest, "\u2068"); ok {
			text, next, ok := strings.Cut(after, "\u2069")
			if !ok || strings.ContainsAny(text, "\u2066\u2067\u2068/") {
				return fmt.Errorf("an isolate is unclosed, nested or holds a separator in %+q", body)
			}
			if text == "" {
				return fmt.Errorf("an empty isolate in %+q", body)
			}
			parts = append(parts, part{text, true})
			rest = next
			continue
		}
		r, n := utf8.DecodeRuneInString(rest)
		if r != '/' && r != '…' {
			return fmt.Errorf("%U outside every isolate in %+q", r, body)
		}
		parts = append(parts, part{rest[:n], false})
		rest = rest[n:]
	}
	var plain strings.Builder
	for _, pt := range parts {
		plain.WriteString(pt.text)
	}
	comps := strings.Split(p, "/")
	var quoted []string
	width := len(comps) - 1
	for _, c := range comps {
		quoted = append(quoted, prompt.Quote(c))
		width += uniseg.StringWidth(prompt.Quote(c))
	}
	if strings.Count(plain.String(), "…") == 0 {
		// Untruncated: the components, in order, each in its own isolate.
		var got []string
		cur, inComp := "", false
		for _, pt := range parts {
			switch {
			case pt.isolated && inComp:
				return fmt.Errorf("two isolates for one component in %+q", body)
			case pt.isolated:
				cur, inComp = pt.text, true
			default: // a separator
				got, cur, inComp = append(got, cur), "", false
			}
		}
		got = append(got, cur)
		if !slices.Equal(got, quoted) {
			return fmt.Errorf("components %+q, want %+q in order", got, quoted)
		}
		for i, q := range got {
			if c, err := prompt.Unquote(q); err != nil || c != comps[i] {
				return fmt.Errorf("component %d %+q does not unquote to %+q: %v", i, q, comps[i], err)
			}
		}
		if width > maxWidth {
			return fmt.Errorf("%d columns wide, over %d, yet not truncated", width, maxWidth)
		}
		return nil
	}
	if width <= maxWidth {
		return fmt.Errorf("fits in %d columns, yet truncated", maxWidth)
	}
	if w := uniseg.StringWidth(plain.String()); w > maxWidth {
		return fmt.Errorf("%d columns wide, over %d", w, maxWidth)
	}
	joined := strings.Join(quoted, "/")
	head, tail, _ := strings.Cut(plain.String(), "…")
	if strings.Contains(tail, "…") || !strings.HasPrefix(joined, head) || !strings.HasSuffix(joined, tail) {
		return fmt.Errorf("%+q is not head…tail of %+q with one …", plain.String(), joined)
	}
	last := quoted[len(quoted)-1]
	if len(comps) > 1 && 1+uniseg.StringWidth(last)+1 <= maxWidth {
		if !(head == "" || strings.HasSuffix(head, "/")) || !strings.HasPrefix(tail, "/") {
			return fmt.Errorf("cut inside a component, though the file name %+q fits", last)
		}
		return nil
	}
	// Cut inside components: at token and cluster boundaries of the
	// component it falls in.
	for _, cut := range []int{len(head), len(joined) - len(tail)} {
		start := strings.LastIndexByte(joined[:cut], '/') + 1
		end := len(joined)
		if i := strings.IndexByte(joined[cut:], '/'); i >= 0 {
			end = cut + i
		}
		c := joined[start:end]
		tokens, err := sanitizeLex(c)
		if err != nil {
			return err
		}
		if !sanitizeTokenBoundary(tokens, cut-start, len(c)) || !sanitizeClusterBoundary(c, cut-start) {
			return fmt.Errorf("cuts an escape or a grapheme cluster of %+q at byte %d", c, cut-start)
		}
	}
	return nil
}

// sanitizeToken is an escape or one raw code point of quoted text.
type sanitizeToken struct {
	start  int
	escape bool
}

// sanitizeLex splits quoted text into tokens by the documented grammar:
// \\, \n, \t, \xHH and \u{HEX} with upper-case hex, or one raw code point.
func sanitizeLex(q string) ([]sanitizeToken, error) {
	var tokens []sanitizeToken
	for i := 0; i < len(q); {
		n := sanitizeEscapeLen(q[i:])
		if q[i] == '\\' && n == 0 {
			return nil, fmt.Errorf("malformed escape at byte %d of %+q", i, q)
		}
		tokens = append(tokens, sanitizeToken{i, n > 0})
		if n == 0 {
			_, n = utf8.DecodeRuneInString(q[i:])
		}
		i += n
	}
	return tokens, nil
}

// sanitizeEscapeLen returns the length of the well-formed escape e starts with, or 0.
func sanitizeEscapeLen(e string) int {
	hex := func(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }
	switch {
	case strings.HasPrefix(e, `\\`), strings.HasPrefix(e, `\n`), strings.HasPrefix(e, `\t`):
		return 2
	case len(e) >= 4 && strings.HasPrefix(e, `\x`) && hex(e[2]) && hex(e[3]):
		return 4
	case strings.HasPrefix(e, `\u{`):
		for j := 3; j < len(e) && j <= 9; j++ {
			if e[j] == '}' && j > 3 {
				return j + 1
			}
			if !hex(e[j]) {
				return 0
			}
		}
	}
	return 0
}

// sanitizeTokenBoundary reports whether offset at starts a token (or is the end).
func sanitizeTokenBoundary(tokens []sanitizeToken, at, end int) bool {
	if at == end {
		return true
	}
	for _, tok := range tokens {
		if tok.start == at {
			return true
		}
	}
	return false
}

// sanitizeClusterBoundary reports whether offset at of s is a grapheme cluster boundary.
func sanitizeClusterBoundary(s string, at int) bool {
	pos, state := 0, -1
	for pos < at {
		var c string
		c, _, _, state = uniseg.FirstGraphemeClusterInString(s[pos:], state)
		pos += len(c)
	}
	return pos == at
}

// TestSanitizeFuzzOracles is the negative control for the checkers above: each
// known-broken output must be caught, and Quote's and Value's must not.
func TestSanitizeFuzzOracles(t *testing.T) {
	identity := func(q string) (string, error) { return q, nil }
	for _, bad := range []struct{ s, q string }{
		{"a\nb", "a b"},               // the seed's rule: merges a\nb with a b
		{"a\u200Bb", "ab"},            // deleting zero-width characters merges too
		{"a\u200Bb", "a\u200Bb"},      // raw zero-width space
		{"x\u00BBy", "x\u00BBy"},      // raw closing delimiter
		{"e\u0301", "e\u0301"},        // not NFC
		{"\xff", "\uFFFD"},            // invalid byte merged into U+FFFD
		{"\u0301", "\u0301"},          // leading mark
		{"\n\u0334", `\n` + "\u0334"}, // mark on an escape
		{"a", `\q`},                   // malformed escape
		{"a≫b", "a≫b"},                // raw look-alike of »
		{"a》b", "a》b"},                // raw angle bracket found by name
		{"a︾b", "a︾b"},                // raw vertical angle bracket
		{"a∖x", "a∖x"},                // raw look-alike of the backslash
		{"a  b", "a  b"},              // doubled raw space
		{"a ", "a "},                  // trailing raw space
	} {
		if sanitizeCheckQuote(bad.s, bad.q, identity) == nil {
			t.Errorf("quote checker accepted %+q for %+q", bad.q, bad.s)
		}
	}
	q := prompt.Quote("ab\u200Bcd\u200B.txt")      // ab\u{200B}cd\u{200B}.txt, 24 columns
	thai := prompt.Quote("\u200B\u0E33abcdefghij") // \u{200B} then U+0E33 joins the }
	for _, bad := range []struct {
		q, v  string
		width int
	}{
		{q, "ab…\\u{200B}.txt", 18},               // missing delimiters
		{q, "«\u2068" + q + "\u2069»", 18},        // too wide
		{q, "«\u2068ab\u2069»", 30},               // fits, yet truncated
		{q, "«\u2068ab\u2069»", 18},               // truncated without …
		{q, "«\u2068a…b…txt\u2069»", 18},          // two …
		{q, "«\u2068ab\\u{20…txt\u2069»", 18},     // an escape cut
		{q, "«\u2068ab…\\u{200B}.TXT\u2069»", 18}, // tail not a suffix
		{thai, "«\u2068\\u{200B}…j\u2069»", 18},   // a grapheme cluster cut
	} {
		if sanitizeCheckValue(bad.q, bad.v, bad.width) == nil {
			t.Errorf("value checker accepted %+q at width %d", bad.v, bad.width)
		}
	}
	lri, fsi, pdi := "\u2066", "\u2068", "\u2069"
	for _, bad := range []struct {
		p, v  string
		width int
	}{
		{"/a/b", "«" + fsi + "/a/b" + pdi + "»", 80},                                                                        // Value's one isolate
		{"/a/b", "«" + lri + "/" + fsi + "a/b" + pdi + pdi + "»", 80},                                                       // a separator isolated
		{"/a/b", "«" + lri + "/" + fsi + "b" + pdi + "/" + fsi + "a" + pdi + pdi + "»", 80},                                 // out of order
		{"/a/b", "«" + lri + "/" + fsi + "a" + pdi + "/b" + pdi + "»", 80},                                                  // a component not isolated
		{"/aaaa/bbbb/c", "«" + lri + "/" + fsi + "aa" + pdi + "…" + fsi + "b" + pdi + "/" + fsi + "c" + pdi + pdi + "»", 8}, // cut inside though c fits
		{"/aaaa/bbbb/c", "«" + lri + "/" + fsi + "aaaa" + pdi + "/…/" + fsi + "c" + pdi + pdi + "»", 8},                     // too wide
		{"/a/b", "«" + lri + "/…/" + fsi + "b" + pdi + pdi + "»", 80},                                                       // fits, yet truncated
	} {
		if sanitizeCheckPath(bad.p, bad.v, bad.width) == nil {
			t.Errorf("path checker accepted %+q for %+q at width %d", bad.v, bad.p, bad.width)
		}
	}
	for _, s := range sanitizeSeeds() {
		if err := sanitizeCheckQuote(s, prompt.Quote(s), prompt.Unquote); err != nil {
			t.Error(err)
		}
		for _, w := range []int{1, 3, 7, 12, 20, 80} {
			if err := sanitizeCheckPath(s, prompt.Path(s, prompt.Options{MaxWidth: w}), w); err != nil {
				t.Errorf("Path(%+q, %d): %v", s, w, err)
			}
		}
		for _, w := range []int{1, 7, 20, 80} {
			if err := sanitizeCheckValue(prompt.Quote(s), prompt.Value(s, prompt.Options{MaxWidth: w}), w); err != nil {
				t.Errorf("Value(%+q, %d): %v", s, w, err)
			}
		}
	}
}
