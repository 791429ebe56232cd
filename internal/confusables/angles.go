package confusables

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/runenames"
)

// NamesVersion is the Unicode version of the character names Angle is
// applied to (golang.org/x/text/unicode/runenames, which follows Go's
// release: 15.0.0 with Go 1.26).
const NamesVersion = runenames.UnicodeVersion

// Angle returns '«' for a left and '»' for a right angle-shaped bracket or
// quotation mark, the shape of the question's delimiters: r must be a
// punctuation or symbol code point (P* or S*) and name its Unicode name.
// Otherwise, and for « and » themselves, it returns 0.
//
// confusables.txt maps nothing to « or »: it lists ‹ › ≪ ≫ ❮ ❯ as confusable
// with < and >, but 《 》 ⟪ ⟫ ❬ ❭ and the rest are prototypes of their own
// (〈 〉 ⟨ ⟩ map to ❬ ❭), so no skeleton ties them to the delimiters. Their
// Unicode names say what they are, so the rule reads the name word by word:
// it needs ANGLE BRACKET, ANGLE QUOTATION MARK, LESS-THAN BRACKET or
// GREATER-THAN BRACKET (⦓ ⦔ ⦕ ⦖, brackets drawn as < and >), and a LEFT or
// RIGHT word (LEFT-POINTING counts) to say which side it opens or closes.
// Whole words, so TRIANGLE, RECTANGLE and SIGNWRITING's HAND-ANGLE are out;
// only brackets and quotation marks, so the geometric angles (∠, ∟ RIGHT
// ANGLE, ⸀ RIGHT ANGLE SUBSTITUTION MARKER) are out: none of those is drawn
// as a chevron. The vertical presentation forms ︽ ︾ ︿ ﹀ stay in: in a
// horizontal line they point up or down, but a client that sets the
// question vertically rotates « and » into those very shapes.
func Angle(r rune, name string) rune {
	if r == '«' || r == '»' || !unicode.In(r, unicode.P, unicode.S) {
		return 0
	}
	words := strings.Fields(name)
	shaped := false
	for i := 1; i < len(words); i++ {
		switch words[i-1] + " " + words[i] {
		case "ANGLE BRACKET", "LESS-THAN BRACKET", "GREATER-THAN BRACKET":
			shaped = true
		case "ANGLE QUOTATION":
			shaped = i+1 < len(words) && words[i+1] == "MARK"
		}
		if shaped {
			break
		}
	}
	if !shaped {
		return 0
	}
	var of rune
	for _, w := range words {
		side, _, _ := strings.Cut(w, "-") // LEFT-POINTING
		var o rune
		switch side {
		case "LEFT":
			o = '«'
		case "RIGHT":
			o = '»'
		default:
			continue
		}
		if of != 0 && of != o {
			return 0 // both ways: no guillemet (Unicode 15.0 names none)
		}
		of = o
	}
	return of
}

// Angles returns, in code point order, every code point for which Angle,
// given the code point's Unicode name, is not 0.
func Angles() []Lookalike {
	var ls []Lookalike
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if of := Angle(r, runenames.Name(r)); of != 0 {
			ls = append(ls, Lookalike{r, of})
		}
	}
	return ls
}
