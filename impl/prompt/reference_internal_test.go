package prompt

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	// Long paths of many components, of which Path quotes only those it
	// may show: short or wide components at either end, a wide one in the
	// middle, right-to-left and mixed-script names, empty components.
	for _, comp := range []string{"a", "dir", "ж\u0301", "גיבוי", "हिन्दी", "文件夹", "", " x ", "\u200B", strings.Repeat("w", 130)} {
		many := strings.Repeat(comp+"/", 20000/(len(comp)+1)+1)
		in = append(in, "/"+many+"final.pdf", many, "/srv/"+strings.Repeat("m", 3000)+"/"+many+"f", many+strings.Repeat("é", 200), strings.Repeat("x", 150)+"/"+many+"/"+strings.Repeat("y", 150))
	}
	for range n / 10 {
		var p strings.Builder
		for p.Len() < 12000 {
			p.WriteString(randomText(rnd, rnd.IntN([]int{3, 10, 60, 400}[rnd.IntN(4)])))
			p.WriteByte('/')
		}
		in = append(in, p.String()+randomText(rnd, rnd.IntN(30)))
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

// corpusInputs returns the strings of the sanitizer's fuzz corpora
// (fuzz/testdata/fuzz/FuzzSanitize*), each also repeated until it is long
// enough for the paths that skip what is not shown, and joined as the
// components of a long path.
func corpusInputs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "fuzz", "testdata", "fuzz", "FuzzSanitize*", "*"))
	if err != nil || len(files) < 20 {
		t.Fatalf("the sanitizer's fuzz corpora: %d files, %v", len(files), err)
	}
	var in, all []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "string(") {
				continue
			}
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			all = append(all, s)
			in = append(in, s, strings.Repeat(s, 4000/(len(s)+1)+1)+s)
		}
	}
	in = append(in, strings.Join(all, "/"), strings.Repeat(strings.Join(all, "/"), 20))
	return in
}

// TestCorpusMatchesReference compares the fast paths with the reference
// (as TestMatchesReference does) on the fuzz corpora of the sanitizer, at
// every width the corpora name and at the question's.
func TestCorpusMatchesReference(t *testing.T) {
	for i, s := range corpusInputs(t) {
		for _, w := range []int{[]int{1, 2, 5, 8, 13, 20, 40, 80}[i%8], 120} {
			checkReference(t, s, w)
		}
	}
}

// TestReferenceCatchesSkips is the negative control of the comparison: a
// long path whose components' widths are capped one column too low (so a
// component too wide to show passes for one that fits) must differ from
// the reference on the inputs the comparison uses, while the right cap
// matches.
func TestReferenceCatchesSkips(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	inputs := append(referenceInputs(rnd, 60), corpusInputs(t)...)
	caught := 0
	for _, s := range inputs {
		for _, w := range []int{20, 120} {
			if len(s) < longValue*(w+8) {
				continue
			}
			want := pathRef(s, Options{MaxWidth: w})
			if got := longPath(s, w, w+1); got != want {
				t.Fatalf("longPath(%+.60q…, %d) differs from the reference with the right cap", s, w)
			}
			if longPath(s, w, w) != want {
				caught++
			}
		}
	}
	if caught == 0 {
		t.Fatal("capping widths at maxWidth went unnoticed: the comparison cannot fail")
	}
	t.Logf("the wrong cap differs from the reference on %d inputs", caught)
}
