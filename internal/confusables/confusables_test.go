package confusables_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/mcp-confirm/mcp-confirm/internal/confusables"
)

const header = "\uFEFF# confusables.txt\n# Version: 15.0.0\n"

func TestParse(t *testing.T) {
	d, err := confusables.Parse(strings.NewReader(header +
		"226B ;\t003E 003E ;\tMA\t# ( ≫ → >> )\n\n2216 ;\t005C ;\tMA\t# ( ∖ → \\ )\n" +
		"00E9 ;\t0065 ;\tMA\t# é → e, to show NFD first\n# Version: 16.0.0, a later comment\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "15.0.0" || len(d.Prototype) != 3 {
		t.Fatalf("Parse: version %q, %d entries", d.Version, len(d.Prototype))
	}
	for in, want := range map[string]string{"≫": ">>", "a∖b": "a\\b", "≫x": ">>x", "e\u0301": "e\u0301", "\u00e9": "e\u0301", "«": "«"} {
		if got := d.Skeleton(in); got != want {
			t.Errorf("Skeleton(%q) = %q, want %q", in, got, want)
		}
	}
	for r, want := range map[rune]rune{'≫': '>', '∖': '\\', '«': 0, '>': 0, 'é': 0} {
		if got := d.Imitates(r); got != want {
			t.Errorf("Imitates(%q) = %q, want %q", r, got, want)
		}
	}
}

// TestSkeletonNormalizesLast: UTS #39's skeleton is NFD again after the
// mapping, so a prototype written precomposed compares decomposed.
func TestSkeletonNormalizesLast(t *testing.T) {
	d := &confusables.Data{Version: "test", Prototype: map[rune]string{'\u2024': "\u00e9"}}
	if got := d.Skeleton("\u2024"); got != "e\u0301" {
		t.Fatalf("Skeleton = %q, want %q", got, "e\u0301")
	}
}

func TestParseRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no version":     "226B ;\t003E ;\tMA\n",
		"no data":        header,
		"two fields":     header + "226B ;\t003E\n",
		"bad hex":        header + "22XB ;\t003E ;\tMA\n",
		"two sources":    header + "226B 226A ;\t003E ;\tMA\n",
		"empty target":   header + "226B ;\t ;\tMA\n",
		"beyond Unicode": header + "110000 ;\t003E ;\tMA\n",
		"source twice":   header + "226B ;\t003E ;\tMA\n226B ;\t003C ;\tMA\n",
		"four fields":    header + "226B ;\t003E ;\tMA ;\tX\n",
	} {
		if _, err := confusables.Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: Parse accepted %q", name, text)
		}
	}
}

// TestAngle checks the name rule on made-up and real names, with negative
// controls: the shape must be a bracket's or a quotation mark's, named by
// whole words, on one side, and the code point punctuation or a symbol.
func TestAngle(t *testing.T) {
	for _, tt := range []struct {
		r    rune
		name string
		want rune
	}{
		{'《', "LEFT DOUBLE ANGLE BRACKET", '«'},
		{'》', "RIGHT DOUBLE ANGLE BRACKET", '»'},
		{'‹', "SINGLE LEFT-POINTING ANGLE QUOTATION MARK", '«'},
		{'❱', "HEAVY RIGHT-POINTING ANGLE BRACKET ORNAMENT", '»'},
		{'︽', "PRESENTATION FORM FOR VERTICAL LEFT DOUBLE ANGLE BRACKET", '«'},
		{'⦓', "LEFT ARC LESS-THAN BRACKET", '«'},
		{'⦖', "DOUBLE RIGHT ARC LESS-THAN BRACKET", '»'},
		// Negative controls.
		{'«', "LEFT-POINTING DOUBLE ANGLE QUOTATION MARK", 0},  // the delimiter itself
		{'»', "RIGHT-POINTING DOUBLE ANGLE QUOTATION MARK", 0}, // the delimiter itself
		{'▶', "BLACK RIGHT-POINTING TRIANGLE", 0},              // TRIANGLE is not ANGLE
		{'∟', "RIGHT ANGLE", 0},                                // geometry, not a bracket
		{'⸀', "RIGHT ANGLE SUBSTITUTION MARKER", 0},            // not a bracket
		{'⸖', "DOTTED RIGHT-POINTING ANGLE", 0},                // not named a bracket
		{'「', "LEFT CORNER BRACKET", 0},                        // a bracket, not angled
		{'⪡', "DOUBLE NESTED LESS-THAN", 0},                    // an operator, not a bracket
		{'x', "LEFT ANGLE QUOTATION", 0},                       // no MARK
		{'x', "LEFT ANGLE BRACKET RIGHT", 0},                   // both sides
		{'x', "ANGLE BRACKET", 0},                              // no side
		{'x', "LEFT ANGLEBRACKET", 0},                          // not whole words
		{'a', "LEFT ANGLE BRACKET", 0},                         // a letter
		{0x1D885, "SIGNWRITING HAND-ANGLE", 0},                 // HAND-ANGLE is not ANGLE
		{0x031A, "COMBINING LEFT ANGLE ABOVE", 0},              // a mark
	} {
		r := tt.r
		if tt.r == 'x' {
			r = '⟨' // a real bracket under a made-up name
		}
		if got := confusables.Angle(r, tt.name); got != tt.want {
			t.Errorf("Angle(%U, %q) = %q, want %q", r, tt.name, got, tt.want)
		}
	}
}

// TestAngles checks the rule on Unicode's names: the brackets the issue
// named are in, near misses are out, each left one has its right partner
// (the next code point: Unicode encodes each pair side by side), and the
// names are of the Unicode version of Go's tables.
func TestAngles(t *testing.T) {
	if confusables.NamesVersion != unicode.Version {
		t.Fatalf("runenames has Unicode %s names, Go's tables are %s", confusables.NamesVersion, unicode.Version)
	}
	got := map[rune]rune{}
	for _, l := range confusables.Angles() {
		got[l.Rune] = l.Of
	}
	for _, pair := range []string{"《》", "〈〉", "⟨⟩", "⟪⟫", "︽︾", "︿﹀", "⦑⦒", "⧼⧽", "〈〉", "‹›", "❮❯", "❬❭", "❰❱"} {
		l, r := []rune(pair)[0], []rune(pair)[1]
		if got[l] != '«' || got[r] != '»' {
			t.Errorf("%c %c: Angles has %q %q, want « »", l, r, got[l], got[r])
		}
	}
	for _, r := range []rune{'«', '»', '<', '>', '▶', '∟', '⸖', '「', '⪡', '≪', '＜', 0x1D885} {
		if of, ok := got[r]; ok {
			t.Errorf("Angles has %U (%q)", r, of)
		}
	}
	lefts := 0
	for r, of := range got {
		if of != '«' {
			continue
		}
		lefts++
		if got[r+1] != '»' {
			t.Errorf("%U %c has no right-hand partner in Angles", r, r)
		}
	}
	if len(got) != 2*lefts {
		t.Errorf("Angles has %d code points, %d of them left", len(got), lefts)
	}
	t.Logf("%d angle brackets and quotation marks", len(got))
}
