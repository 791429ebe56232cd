package prompt

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Warning is a short note for the person who reads a question about a value.
// Warnings only add to the question; they never change how the value is shown.
type Warning string

const (
	// Hidden means Quote escaped code points that are invisible, control,
	// non-normalized or otherwise ambiguous (not just a backslash, a guillemet or
	// an ellipsis).
	Hidden Warning = `it contains hidden or ambiguous characters, shown as \ escapes`
	// MixedScripts means letters of scripts that UTS #39 does not allow together
	// at its Highly Restrictive level, as in a Latin name with a Cyrillic "а",
	// or a letter that UTS #39 says looks like the question's punctuation
	// (Katakana ノ like "/", Canadian syllabics ᐸ like "<") standing where it
	// can pass for that punctuation. Quote escapes such look-alikes unless they
	// are letters; this warning covers the letters.
	MixedScripts Warning = "it mixes scripts or uses letters that look like punctuation, which can imitate another name"
)

// Warnings returns the warnings that apply to s, Hidden before MixedScripts, or
// nil. It runs in linear time. The script check is a heuristic applied word by
// word, so "файл.txt" passes and "pаypal" (with a Cyrillic а) does not; a name
// written wholly in look-alike letters of one script raises nothing. A letter
// that looks like punctuation passes only beside a letter of its own script
// (or a Common one, such as the prolonged sound mark in ノート) that is not a
// look-alike itself, so "ノート.txt" passes and "a丿..丿b" does not.
func Warnings(s string) []Warning {
	h, m := scan(s)
	return list(h, m)
}

// PathWarnings is Warnings for a path shown by Path, which quotes each
// component on its own: a space at either end of a component is escaped, and
// so counts as hidden, as in "/srv/ notes.txt".
//
// It reads p once: each component as Warnings reads a value, the letters
// of all fed to one check, as misleadingLetters(p) would read them (a
// slash is no letter nor mark, so it ends a word and is no partner).
func PathWarnings(p string) []Warning {
	l := letters{latin: latinScript}
	h, m := false, false
	for c := range strings.SplitSeq(p, "/") {
		switch {
		case h && m:
			return list(h, m)
		case h:
			m = l.from(c, 0)
		case m:
			h = hidden(c)
		default:
			h, m = l.scan(c)
		}
		l.word, l.last = l.word[:0], 0 // the slash
	}
	return list(h, m)
}

// list returns Hidden if h, then MixedScripts if m, or nil.
func list(h, m bool) []Warning {
	var ws []Warning
	if h {
		ws = append(ws, Hidden)
	}
	if m {
		ws = append(ws, MixedScripts)
	}
	return ws
}

// scan returns hidden(s) and misleadingLetters(s) from one pass over s,
// which decodes each code point once where it can: a cluster that is one
// code point Quote writes raw (printable ASCII, a lone space, a plain code
// point, each before ASCII or a plain code point) is read once for both;
// any other cluster goes through quote, then its code points through the
// letters' check. Once one answer is known, the other is found alone.
func scan(s string) (hides, misleading bool) {
	l := letters{latin: latinScript}
	return l.scan(s)
}

// scan is scan(s), s fed to l after what l was fed before.
func (l *letters) scan(s string) (hides, misleading bool) {
	// At each turn i is a cluster boundary; r, n, c are the code point
	// there when the turn before decoded it (n > 0).
	var (
		r rune
		n int
		c class
	)
	for i := 0; i < len(s); {
		switch {
		case hides:
			return true, misleading || l.from(s, i)
		case misleading:
			_, h := quote(nil, s, i, len(s))
			return h, true
		}
		if n == 0 {
			// Printable ASCII before ASCII, lone spaces included: the
			// commonest run, byte by byte.
			for i+1 < len(s) && s[i+1] < utf8.RuneSelf {
				b := s[i]
				if ('!' > b || b > '~' || b == '\\') && (b != ' ' || i == 0 || s[i-1] == ' ' || s[i+1] == ' ') {
					break
				}
				i++
				switch {
				case 'a' > b|0x20 || b|0x20 > 'z':
					l.word, l.last = l.word[:0], 0
				case l.last != l.latin && l.letter(l.latin):
					misleading = true
				}
				if misleading {
					break
				}
			}
			if misleading {
				continue
			}
			r, n, c = decode(s, i)
		}
		ok := c&classPlain != 0 && n > 1 // an invalid byte has U+FFFD's class
		if r < utf8.RuneSelf {
			ok = '!' <= r && r <= '~' && r != '\\' || r == ' ' && loneSpace(s, i)
		}
		next := i + n
		var nr rune
		var nn int
		var nc class
		if ok && next < len(s) {
			nr, nn, nc = decode(s, next)
			// The next code point joins nothing before it, but LF after CR.
			ok = nr < utf8.RuneSelf && (r != '\r' || nr != '\n') || nc&classPlain != 0 && nn > 1
		}
		if ok {
			if c&(classLetter|classLookalike) == classLetter {
				// A letter that is no look-alike, the usual case.
				misleading = c>>classScript != l.last && l.letter(c>>classScript)
			} else {
				misleading = l.add(s, i, n, r, c)
			}
			i, r, n, c = next, nr, nn, nc
			continue
		}
		var end int
		if jn, raw := joined(s, i); jn > 0 {
			// A base and the marks it carries: one cluster, its code
			// points' letters fed below.
			end = i + jn
			hides = !raw && quoteCluster(nil, s, i, end)
		} else {
			end, hides = quote(nil, s, i, i+1) // exactly the one cluster at i
		}
		for i < end && !misleading {
			r, n, c = decode(s, i)
			misleading = l.add(s, i, n, r, c)
			i += n
		}
		i, n = end, 0
	}
	return hides, misleading
}

// decode returns the code point at s[i], its length and class (U+FFFD's
// class for an invalid byte, as range reads it).
func decode(s string, i int) (r rune, n int, c class) {
	// One call per code point on the hot path: the decoding of the forms
	// of the Basic Multilingual Plane and classOf's table lookup inline.
	switch b := s[i]; {
	case b < utf8.RuneSelf:
		r, n = rune(b), 1
	case 0xC2 <= b && b <= 0xDF && i+1 < len(s) && s[i+1]&0xC0 == 0x80:
		r, n = rune(b&0x1F)<<6|rune(s[i+1]&0x3F), 2
	case 0xE1 <= b && b <= 0xEF && b != 0xED && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80:
		r, n = rune(b&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F), 3
	default:
		r, n = utf8.DecodeRuneInString(s[i:])
		return r, n, classOf(r)
	}
	k := int(classBlock[r>>8])<<9 | int(r&0xFF)<<1
	return r, n, class(classData[k]) | class(classData[k+1])<<8
}

// decodeRune is utf8.DecodeRuneInString(s[i:]) for s[i] not ASCII, with
// the two- and three-byte forms of most scripts decoded inline.
func decodeRune(s string, i int) (rune, int) {
	switch b := s[i]; {
	case 0xC2 <= b && b <= 0xDF && i+1 < len(s) && s[i+1]&0xC0 == 0x80:
		return rune(b&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case 0xE1 <= b && b <= 0xEF && b != 0xED && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80:
		return rune(b&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s[i:])
}

// hidden reports whether Quote(s) holds an escape other than those for the
// backslash, the delimiters and the ellipsis, which are visible in s already.
// It writes nothing and stops at the first.
func hidden(s string) bool {
	_, h := quote(nil, s, 0, len(s))
	return h
}

// maxScripts bounds the scripts one value may use before it counts as mixed,
// which also bounds the script lookups per letter.
const maxScripts = 8

// misleadingLetters reports whether mixedScripts or lonelyLookalike holds
// for s, in one pass.
//
// mixedScripts: a word of s (a run of letters and marks) has letters of
// scripts that UTS #39's Highly Restrictive level does not allow together,
// or s uses letters of more than maxScripts scripts.
//
// lonelyLookalike: s has a letter that looks like the question's
// punctuation with no partner beside it: a letter of its own script, or of
// Common or Inherited, that is not a look-alike. Marks are skipped; they
// belong to the letter before them. Each run of marks is skipped at most
// twice, so the check is linear.
func misleadingLetters(s string) bool {
	l := letters{latin: latinScript}
	return l.from(s, 0)
}

// letters is misleadingLetters' state, fed one code point at a time.
type letters struct {
	known, word []class // the scripts seen, and in the current word
	last        class   // the script of the current word's last letter
	latin       class   // Latin's script index
}

// from feeds s from byte i on (a code point boundary) and reports whether
// any code point so far made the letters misleading.
func (l *letters) from(s string, i int) bool {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			i++
			switch {
			case 'a' > b|0x20 || b|0x20 > 'z':
				l.word, l.last = l.word[:0], 0
			case l.last != l.latin && l.letter(l.latin):
				return true
			}
			continue
		}
		r, n := decodeRune(s, i)
		if l.add(s, i, n, r, classOf(r)) {
			return true
		}
		i += n
	}
	return false
}

// add feeds the code point r of class c at s[i:i+n] and reports whether it
// makes the letters misleading.
func (l *letters) add(s string, i, n int, r rune, c class) bool {
	if c&(classLookalike|classLetter) == classLookalike|classLetter && r >= lookalikes[0].r {
		name := c.scriptName()
		if !partner(before(s[:i]), name) && !partner(after(s[i+n:]), name) {
			return true // lonelyLookalike
		}
	}
	switch {
	case c&classLetter != 0:
		return l.letter(c >> classScript)
	case c&classMark == 0:
		l.word, l.last = l.word[:0], 0
	}
	return false
}

// letter feeds a letter of the script sc (0: Common or Inherited) and
// reports whether it makes the letters misleading (mixedScripts).
func (l *letters) letter(sc class) bool {
	if sc == 0 || sc == l.last {
		return false
	}
	l.last = sc
	if slices.Contains(l.word, sc) {
		return false
	}
	if !slices.Contains(l.known, sc) {
		if l.known = append(l.known, sc); len(l.known) > maxScripts {
			return true
		}
	}
	l.word = append(l.word, sc)
	return !highlyRestrictive(l.word)
}

// script returns the name of the script of the letter r, or "" for Common and
// Inherited. It tries the known scripts first, so a search of all scripts
// happens only for a letter of a new script.
func script(r rune, known []string) string {
	if r < utf8.RuneSelf {
		return "Latin"
	}
	for _, name := range known {
		if unicode.Is(unicode.Scripts[name], r) {
			return name
		}
	}
	if unicode.In(r, unicode.Common, unicode.Inherited) {
		return ""
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

// highlyRestrictive reports whether the scripts (classScript indexes) fit
// one of UTS #39's Highly Restrictive sets.
func highlyRestrictive(scripts []class) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, set := range [][]string{
		{"Latin", "Han", "Hiragana", "Katakana"},
		{"Latin", "Han", "Bopomofo"},
		{"Latin", "Han", "Hangul"},
	} {
		if !slices.ContainsFunc(scripts, func(sc class) bool { return !slices.Contains(set, scriptNames[sc]) }) {
			return true
		}
	}
	return false
}

// before returns the last code point of s that is not a mark, or -1.
func before(s string) rune {
	for s != "" {
		r, n := utf8.DecodeLastRuneInString(s)
		if !unicode.IsMark(r) {
			return r
		}
		s = s[:len(s)-n]
	}
	return -1
}

// after returns the first code point of s that is not a mark, or -1.
func after(s string) rune {
	for _, r := range s {
		if !unicode.IsMark(r) {
			return r
		}
	}
	return -1
}

// partner reports whether r is a letter of the script name, Common or
// Inherited, that does not look like punctuation.
func partner(r rune, name string) bool {
	if r < 0 || !unicode.IsLetter(r) || imitates(r) != 0 {
		return false
	}
	return unicode.In(r, unicode.Common, unicode.Inherited) || name != "" && unicode.Is(unicode.Scripts[name], r)
}
