package prompt

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// referenceInputs returns strings for the comparison with the reference:
// random hostile text of every length up to tens of thousands of code
// points (long ones take the paths that skip what is not shown), long
// runs of one hostile code point with a file name at the end, and long
// plain text with one hidden code point or look-alike far from its ends.
func referenceInputs(rnd *rand.Rand, n int) []string {
	var in []string
	for i := range n {
		size := []int{0, 1, 3, 8, 20, 60, 300, 2000, 9000}[i%9]
		in = append(in, randomText(rnd, rnd.IntN(size+1)))
	}
	for _, unit := range []string{"a", "ж", "文", "\u0301", "\U0001F1FA", "👨\u200D", "\u1100", "\n", "\xff", " ", "a ", "e\u0301", "ก\u0E33", "\u0600a"} {
		in = append(in, strings.Repeat(unit, 5000)+"/secret.txt", "/srv/"+strings.Repeat(unit, 3000))
	}
	text := strings.Repeat("Отчёт résumé Ελληνικά 中文文本 ひらがな العربية עברית हिन्दी ", 200)
	for _, odd := range []string{"", "\u200B", "p\u0430ypal", "ノ", "a  b", "\u202E", "\u0301", " "} {
		mid := len(text) / 2
		in = append(in, text[:mid]+odd+text[mid:], odd+text, text+odd, "/"+text+odd)
	}
	return in
}

// TestMatchesReference checks Quote, Value, Path, Warnings and PathWarnings
// against the implementation they replaced (reference_test.go), byte for
// byte, at widths from 1 to 200.
func TestMatchesReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	n := 300
	if testing.Short() {
		n = 60
	}
	for _, s := range referenceInputs(rnd, n) {
		checkReference(t, s, []int{0, 1, 2, 5, 8, 13, 20, 40, 80, 120, 200}[rnd.IntN(11)])
	}
}

func checkReference(t *testing.T, s string, width int) {
	t.Helper()
	if got, want := Quote(s), quoteRefString(s); got != want {
		t.Fatalf("Quote(%+.80q…) = %+.80q…, reference %+.80q…", s, got, want)
	}
	o := Options{MaxWidth: width}
	if got, want := Value(s, o), valueRef(s, o); got != want {
		t.Fatalf("Value(%+.80q…, %d) = %+q, reference %+q", s, width, got, want)
	}
	if got, want := Path(s, o), pathRef(s, o); got != want {
		t.Fatalf("Path(%+.80q…, %d) = %+q, reference %+q", s, width, got, want)
	}
	if got, want := Warnings(s), warningsRef(s); !slices.Equal(got, want) {
		t.Fatalf("Warnings(%+.80q…) = %q, reference %q", s, got, want)
	}
	if got, want := PathWarnings(s), pathWarningsRef(s); !slices.Equal(got, want) {
		t.Fatalf("PathWarnings(%+.80q…) = %q, reference %q", s, got, want)
	}
}

// FuzzMatchesReference is TestMatchesReference on fuzzed text, repeated to
// make it long.
func FuzzMatchesReference(f *testing.F) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for i, s := range referenceInputs(rnd, 18) {
		if len(s) < 2000 {
			f.Add(s, uint8(i), uint16(i*37))
		}
	}
	f.Fuzz(func(t *testing.T, s string, width uint8, repeat uint16) {
		if len(s)*int(repeat%2000) < 1<<18 {
			s = strings.Repeat(s, int(repeat%2000)) + s
		}
		checkReference(t, s, int(width)%201)
	})
}
