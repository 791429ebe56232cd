package prompt_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

func TestWarnings(t *testing.T) {
	const (
		eight  = "a б α ب א क ก ա" // Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Armenian
		hidden = prompt.Hidden
		mixed  = prompt.MixedScripts
	)
	tests := []struct {
		name string
		in   string
		want []prompt.Warning
	}{
		// Negative controls: nothing to warn about.
		{"plain", "report-2026.pdf", nil},
		{"backslash and delimiters are visible", `a\b «c» d…`, nil},
		{"one script", "файл.txt", nil},
		{"Japanese with Latin", "報告_ファイル_ほうこく.txt", nil},
		{"Korean with Han and Latin", "보고서_報告.txt", nil},
		{"Chinese with Bopomofo", "ㄅ中文.txt", nil},
		{"accents", "Crème brûlée", nil},
		{"eight scripts in separate words", eight, nil},
		{"Katakana NO in a word", "/home/taro/ノート.txt", nil},
		{"Katakana NO after Katakana", "フォルダノ", nil},
		{"Canadian PA in a syllabics word", "ᐸᓂᖅ.txt", nil},
		{"spaces are no letters", "old notes.txt", nil},

		{"forged prompt", forged, []prompt.Warning{hidden}},
		{"zero width", "pay\u200Bpal", []prompt.Warning{hidden}},
		{"bidi override", "invoice\u202Efdp.exe", []prompt.Warning{hidden}},
		{"decomposed accent", "e\u0301", []prompt.Warning{hidden}},
		{"invalid byte", "\xff", []prompt.Warning{hidden}},
		{"Cyrillic a in Latin", "p\u0430ypal.com", []prompt.Warning{mixed}},
		{"Greek omicron in Latin", "g\u03BFogle", []prompt.Warning{mixed}},
		{"Hangul with Hiragana", "한ひ", []prompt.Warning{mixed}},
		{"nine scripts in separate words", eight + " ა", []prompt.Warning{mixed}},
		{"both", "p\u0430y\u200Bpal", []prompt.Warning{hidden, mixed}},
		{"Han slash-likes forge a parent", "public丿..丿secret.txt", []prompt.Warning{mixed}},
		{"Katakana NO between Latin", "a\u30CEb", []prompt.Warning{mixed}},
		{"Canadian syllabics as guillemets", "x.txt ᐳᐳ and ᐸᐸ y.txt", []prompt.Warning{mixed}},
		{"Katakana NO alone", "ノ", []prompt.Warning{mixed}},
		{"marks are skipped to the partner", "ᐸ\u0301ᓂ", nil},
		{"marks do not make a partner", "q\u0301ノ\u0301q", []prompt.Warning{mixed}},
		{"look-alike symbols are escaped", "x.txt≫ and ≪y.txt", []prompt.Warning{hidden}},
		{"doubled space", "old  notes.txt", []prompt.Warning{hidden}},
		{"trailing space", "notes.txt ", []prompt.Warning{hidden}},
		// A prepended letter takes the space after it into its cluster,
		// where the space is escaped as any space at an end is.
		{"trailing space after a prepended letter", "\u0D4E ", []prompt.Warning{hidden}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := prompt.Warnings(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Warnings(%+q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPathWarnings(t *testing.T) {
	tests := []struct {
		in   string
		want []prompt.Warning
	}{
		{"/srv/old notes.txt", nil},
		{"/srv/ notes.txt", []prompt.Warning{prompt.Hidden}}, // Path escapes the space; Warnings of the whole would not
		{"/srv/notes /x", []prompt.Warning{prompt.Hidden}},
		{"/srv/a\u200Bb", []prompt.Warning{prompt.Hidden}},
		{"/srv/p\u0430ypal", []prompt.Warning{prompt.MixedScripts}},
		{"/home/taro/ノート.txt", nil},
		{"/srv/ノ/x", []prompt.Warning{prompt.MixedScripts}},
	}
	for _, tt := range tests {
		if got := prompt.PathWarnings(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("PathWarnings(%+q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := prompt.Warnings("/srv/ notes.txt"); got != nil {
		t.Errorf("control: Warnings(%+q) = %q, want none: the space is lone in the whole path", "/srv/ notes.txt", got)
	}
}

func TestWarningsOneMebibyte(t *testing.T) {
	for name, s := range hostile(1 << 20) {
		t.Run(name, func(t *testing.T) {
			prompt.Warnings(s) // must finish; the benchmark below measures how fast
		})
	}
	// Look-alike letters between long runs of marks: each run is skipped at
	// most twice, so this takes about as long as the inputs above.
	marked := strings.Repeat("ᐸ"+strings.Repeat("\u0301", 64), 1<<13)
	if got := prompt.Warnings(marked); !slices.Contains(got, prompt.MixedScripts) {
		t.Errorf("Warnings(look-alikes between marks) = %q, want MixedScripts", got)
	}
	alternating := strings.Repeat("a中", 1<<18)
	if got := prompt.Warnings(alternating); got != nil {
		t.Errorf("Warnings(Latin and Han) = %q, want none", got)
	}
}

func BenchmarkWarnings(b *testing.B) {
	for name, s := range hostile(1 << 20) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				prompt.Warnings(s)
			}
		})
	}
}
