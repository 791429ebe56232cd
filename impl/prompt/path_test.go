package prompt_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rivo/uniseg"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/prompttest"
)

// showIsolates makes Path's invisible structure visible: ⟨…⟩ for each
// component's isolate, [ ] for the whole path's.
var showIsolates = strings.NewReplacer("\u2066", "[", "\u2068", "⟨", "\u2069", "⟩")

func TestPath(t *testing.T) {
	const long = "/home/alice/projects/report-2026/drafts/final.pdf"
	tests := []struct {
		name  string
		in    string
		width int
		want  string
	}{
		{"absolute", "/srv/a/b.txt", 0, "«[/⟨srv⟩/⟨a⟩/⟨b.txt⟩⟩»"},
		{"relative", "a/b", 0, "«[⟨a⟩/⟨b⟩⟩»"},
		{"one component", "notes.txt", 0, "«[⟨notes.txt⟩⟩»"},
		{"empty", "", 0, "«[⟩»"},
		{"root", "/", 0, "«[/⟩»"},
		{"empty components", "a//b/", 0, "«[⟨a⟩//⟨b⟩/⟩»"},
		{"right-to-left components", "/srv/גיבוי/חוזה.pdf", 0, "«[/⟨srv⟩/⟨גיבוי⟩/⟨חוזה.pdf⟩⟩»"},
		{"escapes stay in their component", "/srv/a\nb/c\u202E", 0, `«[/⟨srv⟩/⟨a\nb⟩/⟨c\u{202E}⟩⟩»`},
		{"spaces at a component's ends", "/srv/ a/b /c  d", 0, `«[/⟨srv⟩/⟨\u{20}a⟩/⟨b\u{20}⟩/⟨c\u{20}\u{20}d⟩⟩»`},
		{"slash look-alikes cannot split a component", "/srv/a∕b⁄c", 0, `«[/⟨srv⟩/⟨a\u{2215}b\u{2044}c⟩⟩»`},
		{"delimiter look-alikes", "/srv/a≫ and ≪b", 0, `«[/⟨srv⟩/⟨a\u{226B} and \u{226A}b⟩⟩»`},

		// Truncation drops whole components when the file name fits.
		{"fits exactly", long, len(long), "«[/⟨home⟩/⟨alice⟩/⟨projects⟩/⟨report-2026⟩/⟨drafts⟩/⟨final.pdf⟩⟩»"},
		{"one column short", long, len(long) - 1, "«[/⟨home⟩/⟨alice⟩/…/⟨report-2026⟩/⟨drafts⟩/⟨final.pdf⟩⟩»"},
		{"keeps head and file name", long, 20, "«[/⟨home⟩/…/⟨final.pdf⟩⟩»"},
		{"file name only", long, 12, "«[/…/⟨final.pdf⟩⟩»"},
		{"relative, head dropped", "aaaa/bbbb/c.txt", 10, "«[…/⟨c.txt⟩⟩»"},
		{"wide components count two", "/文件/文件/文件/文件/文件.txt", 16, "«[/⟨文件⟩/…/⟨文件.txt⟩⟩»"},
		{"escapes are never split", "/\u200B\u200B/\u200B\u200B/x", 12, `«[/…/⟨x⟩⟩»`},

		// The file name does not fit: cut inside components, as Value does.
		{"cut inside the file name", "/srv/verylongfilenamethatdoesnotfit.txt", 12, "«[/⟨sr⟩…⟨tfit.txt⟩⟩»"},
		{"cut across components", "/srv/a/verylongfilenamethatdoesnotfit.txt", 20, "«[/⟨srv⟩/⟨a⟩…⟨oesnotfit.txt⟩⟩»"},
		{"no separator", "verylongfilenamethatdoesnotfit.txt", 10, "«[⟨ver…it.txt⟩⟩»"},
		{"right-to-left name cut", "/srv/" + strings.Repeat("חוזה", 10) + ".pdf", 20, "«[/⟨srv⟩/⟨ח…החוזהחוזה.pdf⟩⟩»"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := prompt.Path(tt.in, prompt.Options{MaxWidth: tt.width})
			if shown := showIsolates.Replace(got); shown != tt.want {
				t.Errorf("Path(%+q, %d) = %s, want %s", tt.in, tt.width, shown, tt.want)
			}
		})
	}
}

// TestPathBidi renders questions with GNU FriBidi and checks that each
// path's components are drawn left to right in their logical order, and that
// no two of the paths are drawn alike. The control, the same paths shown by
// Value in one isolate, must fail both checks.
func TestPathBidi(t *testing.T) {
	paths := [][]string{ // components, joined by "/"
		{"", "srv", "גיבוי", "חוזה.pdf"},         // "backup/contract.pdf"
		{"", "srv", "חוזה", "גיבוי.pdf"},         // "contract/backup.pdf"
		{"", "srv", "نسخة", "عقد.pdf"},           // Arabic
		{"", "srv", "abc", "גיבוי", "2024", "x"}, // mixed
		{"", "srv", "גיבוי", "report", "חוזה"},
		{"", "srv", "א", "1"}, // numeric: drawn alike in one isolate
		{"", "srv", "1", "א"},
		{"", "srv", "גיבוי", "2024", "12"},
		{"", "srv", "גיבוי", "12", "2024"},
		{"", "srv", "א 1", "x"},
		{"", "srv", "1 א", "x"},
		{"", "srv", "א.exe", "ב.pdf"},
	}
	question := func(shown string) string { return fmt.Sprintf("Delete the file %s (1 byte)?", shown) }
	for _, form := range []struct {
		name    string
		show    func(string) string
		control bool
	}{
		{"Path", func(p string) string { return prompt.Path(p, prompt.Options{}) }, false},
		{"Value (control)", func(p string) string { return prompt.Value(p, prompt.Options{}) }, true},
	} {
		t.Run(form.name, func(t *testing.T) {
			var lines []string
			for _, cs := range paths {
				lines = append(lines, question(form.show(strings.Join(cs, "/"))))
			}
			disorder := 0
			seen := map[string]string{}
			for i, r := range prompttest.Render(t, lines...) {
				if err := r.ComponentOrder(len("Delete the file "), nonEmpty(cs(paths[i]))...); err != nil {
					disorder++
					if !form.control {
						t.Errorf("%s: %v", strings.Join(paths[i], "/"), err)
					}
				}
				if prev, ok := seen[r.Seen()]; ok && !form.control {
					t.Errorf("%s and %s are both drawn as %q", prev, strings.Join(paths[i], "/"), r.Seen())
				}
				seen[r.Seen()] = strings.Join(paths[i], "/")
			}
			if form.control {
				if disorder == 0 {
					t.Error("the control drew every path in order: the check cannot fail")
				}
				if len(seen) == len(paths) {
					t.Error("the control drew every path differently: the check cannot fail")
				}
				t.Logf("control: %d of %d paths out of order, %d drawings for %d paths", disorder, len(paths), len(seen), len(paths))
			}
		})
	}
}

// cs quotes each component as the question shows it.
func cs(components []string) []string {
	q := make([]string, len(components))
	for i, c := range components {
		q[i] = prompt.Quote(c)
	}
	return q
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestPathCutProperties checks, at every width, that a path fits, keeps its
// structure, marks a cut with one …, and drops whole components whenever
// its file name fits.
func TestPathCutProperties(t *testing.T) {
	pieces := []string{"a", "bb", "文", "\u200B", "\u0301", "\n", "«", "…", " ", "  ", "א", "1", "👨\u200D👩", "\xff", "\u0D4E"}
	rnd := rand.New(rand.NewPCG(5, 6))
	var inputs []string
	for range 300 {
		var b strings.Builder
		for range rnd.IntN(30) {
			if rnd.IntN(4) == 0 {
				b.WriteByte('/')
			} else {
				b.WriteString(pieces[rnd.IntN(len(pieces))])
			}
		}
		inputs = append(inputs, b.String())
	}
	for _, p := range inputs {
		full := prompt.Path(p, prompt.Options{MaxWidth: 1 << 20})
		fullWidth := uniseg.StringWidth(strings.NewReplacer("\u2066", "", "\u2068", "", "\u2069", "").Replace(full)) - 2
		comps := strings.Split(p, "/")
		last := uniseg.StringWidth(prompt.Quote(comps[len(comps)-1]))
		for w := 1; w <= fullWidth+1; w++ {
			got := prompt.Path(p, prompt.Options{MaxWidth: w})
			body, ok := strings.CutPrefix(got, "«\u2066")
			if ok {
				body, ok = strings.CutSuffix(body, "\u2069»")
			}
			if !ok {
				t.Fatalf("Path(%+q, %d) = %+q: not between «LRI and PDI»", p, w, got)
			}
			plain := strings.NewReplacer("\u2068", "", "\u2069", "").Replace(body)
			if uniseg.StringWidth(plain) > w && fullWidth > w {
				t.Errorf("Path(%+q, %d) = %+q is %d columns wide", p, w, got, uniseg.StringWidth(plain))
			}
			if err := balanced(body); err != nil {
				t.Errorf("Path(%+q, %d) = %+q: %v", p, w, showIsolates.Replace(got), err)
			}
			switch n := strings.Count(plain, "…"); {
			case fullWidth <= w && got != full:
				t.Errorf("Path(%+q, %d) = %+q, want the whole %+q", p, w, got, full)
			case fullWidth > w && n != 1:
				t.Errorf("Path(%+q, %d) = %+q holds %d …, want one", p, w, got, n)
			case fullWidth > w && len(comps) > 1 && last+2 <= w && !wholeCut(body):
				t.Errorf("Path(%+q, %d) = %s cuts inside a component, though the file name fits", p, w, showIsolates.Replace(got))
			}
		}
	}
}

// balanced checks that isolates in body are FSI…PDI pairs, never nested,
// with no separator inside.
func balanced(body string) error {
	open := false
	for _, r := range body {
		switch {
		case r == '\u2068' && !open:
			open = true
		case r == '\u2069' && open:
			open = false
		case r == '\u2068' || r == '\u2069' || r == '\u2066' || r == '\u2067':
			return fmt.Errorf("unbalanced or nested isolate %U", r)
		case r == '/' && open:
			return fmt.Errorf("a separator inside an isolate")
		}
	}
	if open {
		return fmt.Errorf("an isolate is not closed")
	}
	return nil
}

// wholeCut reports whether the … of body stands between separators (or at
// the start), outside any isolate: whole components were dropped.
func wholeCut(body string) bool {
	before, after, _ := strings.Cut(body, "…")
	return (before == "" || strings.HasSuffix(before, "/")) && strings.HasPrefix(after, "/")
}
