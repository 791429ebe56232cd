package prompt

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

//go:generate go test -run ^TestClassesUpToDate$ -update-classes .

// A class is what the question needs to know of one code point, looked up
// in the table classes.go holds for the Basic Multilingual Plane (where
// Unicode's tables would cost a binary search each) and computed for the
// rest.
type class uint16

const (
	// classWide: a plain code point that uniseg gives the display width 2
	// alone; other plain code points have width 1 (see width).
	classWide class = 1 << 0
	// classInert, the same bit for a code point of classJoin: it neither
	// composes with what precedes it nor is reordered (canonical combining
	// class 0, no backward composition) and is in NFC alone, so a plain
	// code point followed by such code points is in NFC.
	classInert class = 1 << 0
	// classJoin: grapheme cluster break property Extend or SpacingMark (not
	// ZWJ): it joins the code point before it, and whatever follows breaks
	// from it unless it joins too; so a plain code point and the code
	// points of this class after it make one cluster (see joined).
	classJoin class = 1 << 1
	// classPlain: grapheme cluster break property Other (neither a control,
	// an extender, a spacing mark, a prepended mark, a Hangul jamo or
	// syllable, a regional indicator, nor Extended_Pictographic), so that
	// there is a cluster boundary between two plain code points whatever
	// stands before them, and one after a plain code point followed by
	// ASCII; and Quote writes it raw as a cluster of its own: printable,
	// visible, no mark, in NFC. Only code points of the Basic Multilingual
	// Plane are ever plain.
	classPlain class = 1 << 2
	// classLetter: unicode.IsLetter.
	classLetter class = 1 << 3
	// classMark: unicode.IsMark.
	classMark class = 1 << 4
	// classLookalike: it looks like the question's punctuation (imitates).
	classLookalike class = 1 << 5
	// classNeutral: Quote always escapes it (neutralized).
	classNeutral class = 1 << 6
	// classExtender: it attaches to the code point before it (extender).
	classExtender class = 1 << 7
	// classScript is the shift of the index in scriptNames of a letter's
	// script (as script gives it): 0 for Common and Inherited letters and
	// for every code point that is not a letter.
	classScript = 8
)

// classOf returns the class of r.
func classOf(r rune) class {
	if r < 0x10000 {
		i := int(classBlock[r>>8])<<9 | int(r&0xFF)<<1
		return class(classData[i]) | class(classData[i+1])<<8
	}
	return classify(r, scriptIndex)
}

// classify computes the class of r: what classes.go holds for the Basic
// Multilingual Plane, but never plain (that takes uniseg; see class_test.go).
// index returns the index of a script's name in scriptNames.
func classify(r rune, index func(string) int) class {
	var c class
	if unicode.IsLetter(r) {
		c |= classLetter | class(index(script(r, nil)))<<classScript
	}
	if unicode.IsMark(r) {
		c |= classMark
	}
	if imitates(r) != 0 {
		c |= classLookalike
	}
	if neutralized(r) {
		c |= classNeutral
	}
	if extender(r) {
		c |= classExtender
	}
	return c
}

// scriptIndex returns the index of the script name in scriptNames, 0 if
// there is none.
func scriptIndex(name string) int {
	for i, n := range scriptNames {
		if n == name {
			return i
		}
	}
	return 0
}

// width returns the display width of a plain code point of class c.
func (c class) width() int { return 1 + int(c&classWide) }

// scriptName returns the name of the script of a letter of class c, as
// script does.
func (c class) scriptName() string { return scriptNames[c>>classScript] }

// nfcAlone reports whether r alone is in NFC.
func nfcAlone(r rune) bool {
	var buf [utf8.UTFMax]byte
	return norm.NFC.IsNormal(utf8.AppendRune(buf[:0], r))
}
