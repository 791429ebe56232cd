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
	return warnings(s, hidden(s))
}

// PathWarnings is Warnings for a path shown by Path, which quotes each
// component on its own: a space at either end of a component is escaped, and
// so counts as hidden, as in "/srv/ notes.txt".
func PathWarnings(p string) []Warning {
	h := false
	for c := range strings.SplitSeq(p, "/") {
		if h = hidden(c); h {
			break
		}
	}
	return warnings(p, h)
}

// warnings returns the warnings for s, Hidden if h.
func warnings(s string, h bool) []Warning {
	var ws []Warning
	if h {
		ws = append(ws, Hidden)
	}
	if mixedScripts(s) || lonelyLookalike(s) {
		ws = append(ws, MixedScripts)
	}
	return ws
}

// hidden reports whether Quote(s) holds an escape other than those for the
// backslash, the delimiters and the ellipsis, which are visible in s already.
func hidden(s string) bool {
	q := Quote(s)
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

// maxScripts bounds the scripts one value may use before it counts as mixed,
// which also bounds the script lookups per letter.
const maxScripts = 8

// mixedScripts reports whether a word of s (a run of letters and marks) has
// letters of scripts that UTS #39's Highly Restrictive level does not allow
// together, or whether s uses letters of more than maxScripts scripts.
func mixedScripts(s string) bool {
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
		if word = append(word, name); !highlyRestrictive(word) {
			return true
		}
	}
	return false
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

// highlyRestrictive reports whether the scripts fit one of UTS #39's Highly
// Restrictive sets.
func highlyRestrictive(scripts []string) bool {
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

// lonelyLookalike reports whether s has a letter that looks like the
// question's punctuation with no partner beside it: a letter of its own
// script, or of Common or Inherited, that is not a look-alike. Marks are
// skipped; they belong to the letter before them. Each run of marks is
// skipped at most twice, so the check is linear.
func lonelyLookalike(s string) bool {
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
