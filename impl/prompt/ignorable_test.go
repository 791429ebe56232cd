package prompt_test

import (
	"testing"
	"unicode"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// defaultIgnorable15 is Default_Ignorable_Code_Point as listed in the Unicode
// Character Database 15.0.0, DerivedCoreProperties.txt (27 lines, 4174 code
// points), transcribed so the test needs no network and no system files.
var defaultIgnorable15 = [][2]rune{
	{0x00AD, 0x00AD}, {0x034F, 0x034F}, {0x061C, 0x061C}, {0x115F, 0x1160},
	{0x17B4, 0x17B5}, {0x180B, 0x180D}, {0x180E, 0x180E}, {0x180F, 0x180F},
	{0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x2065, 0x2065},
	{0x2066, 0x206F}, {0x3164, 0x3164}, {0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF},
	{0xFFA0, 0xFFA0}, {0xFFF0, 0xFFF8}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
	{0xE0000, 0xE0000}, {0xE0001, 0xE0001}, {0xE0002, 0xE001F}, {0xE0020, 0xE007F},
	{0xE0080, 0xE00FF}, {0xE0100, 0xE01EF}, {0xE01F0, 0xE0FFF},
}

// derivedIgnorable is the UCD's derivation of Default_Ignorable_Code_Point
// (DerivedCoreProperties.txt header), evaluated on Go's unicode tables:
// Other_Default_Ignorable_Code_Point + Cf + Variation_Selector - White_Space -
// FFF9..FFFB (interlinear annotation) - 13430..13440 (Egyptian format controls) -
// Prepended_Concatenation_Mark.
func derivedIgnorable(r rune) bool {
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector) &&
		!unicode.In(r, unicode.White_Space, unicode.Prepended_Concatenation_Mark) &&
		!(0xFFF9 <= r && r <= 0xFFFB) && !(0x13430 <= r && r <= 0x13440)
}

func TestDefaultIgnorable(t *testing.T) {
	if unicode.Version != "15.0.0" {
		t.Fatalf("unicode.Version = %s; the transcribed table is 15.0.0, update both", unicode.Version)
	}
	ucd := map[rune]bool{}
	for _, rg := range defaultIgnorable15 {
		for r := rg[0]; r <= rg[1]; r++ {
			ucd[r] = true
		}
	}
	if len(ucd) != 4174 {
		t.Fatalf("transcribed table has %d code points, DerivedCoreProperties-15.0.0 says 4174", len(ucd))
	}
	printable := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if derivedIgnorable(r) != ucd[r] {
			t.Errorf("%U: derived from Go's tables %v, UCD %v", r, derivedIgnorable(r), ucd[r])
		}
		if !ucd[r] {
			continue
		}
		if unicode.IsPrint(r) {
			printable++ // invisible yet printable: only the extra tables catch these
		}
		if q := prompt.Quote(string(r)); q == string(r) {
			t.Errorf("%U is default-ignorable but Quote leaves it raw", r)
		}
	}
	t.Logf("%d default-ignorable code points are printable per unicode.IsPrint", printable)
	if printable == 0 {
		t.Error("no printable ignorable code point: the check above tested nothing beyond IsPrint")
	}
}

// TestDerivedIgnorableControl is the negative control: the derivation rejects
// what the UCD excludes on purpose, and Quote leaves ordinary letters raw.
func TestDerivedIgnorableControl(t *testing.T) {
	for _, r := range []rune{'a', ' ', '\u0600', '\uFFF9', '\U00013430', '\u0301'} {
		if derivedIgnorable(r) {
			t.Errorf("%U derived as ignorable", r)
		}
	}
	for _, r := range []rune{'a', 'é', 'Ж', '中', '\u0E01'} {
		if q := prompt.Quote(string(r)); q != string(r) {
			t.Errorf("Quote(%q) = %q, want it raw", r, q)
		}
	}
}
