package prompt

import (
	"slices"
	"unicode"
)

//go:generate go run gen_lookalikes.go

// A lookalike is a code point that UTS #39 says looks like the ASCII
// punctuation of (see lookalikes.go, generated from confusables.txt).
type lookalike struct {
	r  rune
	of rune
}

// imitates returns the ASCII punctuation r looks like ('<', '>', '.', '\\' or
// '/'), or 0.
func imitates(r rune) rune {
	i, ok := slices.BinarySearchFunc(lookalikes[:], r, func(l lookalike, r rune) int { return int(l.r - r) })
	if !ok {
		return 0
	}
	return lookalikes[i].of
}

// lookalikeSymbol reports whether r looks like the question's punctuation and
// is not a letter: Quote escapes it. A letter that looks like punctuation is
// a letter of its script first, left raw and flagged by Warnings instead.
func lookalikeSymbol(r rune) bool { return imitates(r) != 0 && !unicode.IsLetter(r) }
