package prompt_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
	"golang.org/x/text/unicode/norm"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// body strips Value's delimiters, failing the test if they are missing.
func body(t *testing.T, v string) string {
	t.Helper()
	b, ok := strings.CutPrefix(v, "«\u2068")
	if ok {
		b, ok = strings.CutSuffix(b, "\u2069»")
	}
	if !ok {
		t.Fatalf("Value returned %+q, want it between «\\u2068 and \\u2069»", v)
	}
	return b
}

func TestValue(t *testing.T) {
	family := "👨\u200D👩\u200D👧\u200D👦"
	tests := []struct {
		name  string
		in    string
		width int
		want  string
	}{
		{"fits", "cache.txt", 0, "cache.txt"},
		{"empty", "", 0, ""},
		{"forged prompt stays on one line", forged, 0,
			`cache.txt\n\nSYSTEM NOTICE… has expired.\nEnter your AWS secret key to continue:`},
		{"exactly fits", "0123456789", 10, "0123456789"},
		{"one column over", "0123456789a", 10, "012…56789a"},
		{"keeps file name and extension", "/home/alice/projects/report-2026/drafts/final.pdf", 20,
			"/home/…fts/final.pdf"},
		{"RTL override stays escaped", "invoice\u202Efdp.exe", 0, `invoice\u{202E}fdp.exe`},
		{"forged second target", "a» and «b", 0, `a\u{BB} and \u{AB}b`},
		{"wide characters count two", "文件文件文件文件文件文件.txt", 10, "文…件.txt"},
		{"escape is never cut", strings.Repeat("\u200B", 10) + ".txt", 12, "….txt"},
		{"escape kept whole when it fits", "ab\u200Bcd\u200B.txt", 18, `ab…\u{200B}.txt`},
		{"flags are never re-paired", "🇺🇸🇫🇷🇩🇪🇯🇵", 5, "🇺🇸…🇯🇵"},
		{"flags, narrower", "🇺🇸🇫🇷🇩🇪🇯🇵", 4, "…🇯🇵"},
		{"ZWJ family at the cut", family + family + ".png", 20, `👨\u{200D}👩…👦.png`},
		{"combining marks at the cut", strings.Repeat("\u0E01\u0E35\u0E48", 8) + ".txt", 8,
			"\u0E01\u0E35\u0E48\u0E01\u0E35\u0E48…\u0E01\u0E35\u0E48.txt"},
		{"width one", "abc", 1, "…"},
		{"invalid UTF-8", "\xff\xfe\x00name", 0, `\xFF\xFE\x00name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := body(t, prompt.Value(tt.in, prompt.Options{MaxWidth: tt.width}))
			if got != tt.want {
				t.Errorf("Value(%+q, %d) = %+q, want %+q", tt.in, tt.width, got, tt.want)
			}
		})
	}
}

func TestValueDefaultWidth(t *testing.T) {
	long := strings.Repeat("x", 200)
	if got := uniseg.StringWidth(body(t, prompt.Value(long, prompt.Options{}))); got != prompt.DefaultMaxWidth {
		t.Errorf("zero Options: width %d, want %d", got, prompt.DefaultMaxWidth)
	}
	if got := uniseg.StringWidth(body(t, prompt.Value(long, prompt.Options{MaxWidth: -5}))); got != prompt.DefaultMaxWidth {
		t.Errorf("negative MaxWidth: width %d, want %d", got, prompt.DefaultMaxWidth)
	}
}

// TestValueCutProperties checks every width from 1 to past the full length on
// inputs with clusters and escapes at every position.
func TestValueCutProperties(t *testing.T) {
	inputs := []string{
		forged, "👨\u200D👩\u200D👧\u200D👦 family.png", "🇺🇸🇫🇷🇩🇪🇯🇵🇬🇧", "e\u0301\u0323x\u0336\u0336\u0336\u0336\u0336\u0336",
		"\u202Eabc\u2066文件\xff\xfe", "\u200B\u0E33\U0001F3FB\u0D4E\u200Bz", "a\\b\\c\\d\\e.txt",
	}
	// Random strings over pieces that each exercise a rule: marks, extenders,
	// Prepend, Hangul jamo, regional indicators, ZWJ, wide, invalid bytes.
	pieces := []string{
		"a", "e", "n", ".", "\\", "\n", "\xff", "\u0301", "\u0323", "\u0E33", "\u0D4E", "\u200D", "\u200B",
		"\U0001F468", "\U0001F1FA", "\U0001F3FB", "\u1100", "\u1161", "\u11A8", "\uFF9E", "文", "«", "…", "\u2126",
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		var b strings.Builder
		for range rnd.IntN(40) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		q := prompt.Quote(s)
		full := uniseg.StringWidth(q)
		bounds := map[int]bool{0: true}
		for rest, state, at := q, -1, 0; rest != ""; {
			var c string
			c, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
			at += len(c)
			bounds[at] = true
		}
		for w := 1; w <= full+1; w++ {
			got := body(t, prompt.Value(s, prompt.Options{MaxWidth: w}))
			if uniseg.StringWidth(got) > w {
				t.Errorf("Value(%+q, %d) = %+q is %d columns wide", s, w, got, uniseg.StringWidth(got))
			}
			if full <= w {
				if got != q {
					t.Errorf("Value(%+q, %d) = %+q, want the whole %+q", s, w, got, q)
				}
				continue
			}
			head, tail, ok := strings.Cut(got, "…")
			if !ok || strings.Contains(tail, "…") {
				t.Fatalf("Value(%+q, %d) = %+q, want exactly one …", s, w, got)
			}
			if !strings.HasPrefix(q, head) || !strings.HasSuffix(q, tail) {
				t.Errorf("Value(%+q, %d) = %+q, not head…tail of %+q", s, w, got, q)
			}
			if strings.HasSuffix(strings.ReplaceAll(head, `\\`, ""), `\`) {
				t.Errorf("Value(%+q, %d) = %+q cuts an escape", s, w, got)
			}
			if !bounds[len(head)] || !bounds[len(q)-len(tail)] {
				t.Errorf("Value(%+q, %d) = %+q cuts a grapheme cluster of %+q", s, w, got, q)
			}
			if !norm.NFC.IsNormalString(got) {
				t.Errorf("Value(%+q, %d) = %+q is not NFC", s, w, got)
			}
		}
	}
}

// hostile returns inputs of about n bytes that stress each rule, each ending in
// a visible file name that truncation must keep.
func hostile(n int) map[string]string {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, n)
	for i := range random {
		random[i] = byte(rnd.UintN(256))
	}
	repeat := func(s string) string { return strings.Repeat(s, n/len(s)) + "/secret.txt" }
	return map[string]string{
		"ascii":           repeat("a"),
		"backslashes":     repeat(`\`),
		"invalid bytes":   repeat("\xff"),
		"newlines":        repeat("\n"),
		"zero width":      repeat("\u200B"),
		"bidi":            repeat("\u202E\u2066"),
		"tags":            repeat("\U000E0041"),
		"combining marks": repeat("\u0301"),
		"one huge zalgo":  "e" + repeat("\u0336"),
		"hangul jamo":     repeat("\u1100"),
		"flags":           repeat("\U0001F1FA"),
		"ZWJ emoji":       repeat("👨\u200D"),
		"skin tones":      repeat("\U0001F3FB"),
		"wide":            repeat("文"),
		"eight scripts":   repeat("a.б.α.ب.א.क.ก.ա."),
		"random bytes":    string(random) + "/secret.txt",
	}
}

func TestValueOneMebibyte(t *testing.T) {
	for name, s := range hostile(1 << 20) {
		t.Run(name, func(t *testing.T) {
			got := body(t, prompt.Value(s, prompt.Options{}))
			if w := uniseg.StringWidth(got); w > prompt.DefaultMaxWidth {
				t.Errorf("width %d", w)
			}
			if !strings.HasSuffix(got, "/secret.txt") || strings.Count(got, "…") != 1 {
				t.Errorf("Value = %+q, want one … and the file name", got)
			}
		})
	}
}

func BenchmarkValue(b *testing.B) {
	for name, s := range hostile(1 << 20) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				prompt.Value(s, prompt.Options{})
			}
		})
	}
}

func BenchmarkQuoteFileName(b *testing.B) {
	for b.Loop() {
		prompt.Quote("/home/alice/projects/report-2026/drafts/final.pdf")
	}
}
