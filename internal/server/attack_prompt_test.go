package server_test

// Attacks on what the person reads: each file name is put to the real
// server through a real go-sdk client in both protocol eras; the person
// declines (or, where said, approves) and the test checks the question as
// drawn. Layer: sanitizer (impl/prompt); nothing is deleted but what was
// shown and approved.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/confusables"
	"github.com/mcp-confirm/mcp-confirm/internal/prompttest"
)

// askAll asks about each file (created under e's root) with the person
// declining, checks that nothing was deleted, and returns the questions.
func askAll(t *testing.T, era, transport string, names []string) (*env, []string) {
	t.Helper()
	e := newEnv(t, envOptions{})
	ans := decline()
	cs := e.connect(clientOptions{era: era, transport: transport, answer: ans})
	for _, name := range names {
		f := e.file(name, "x")
		res, err := call(cs, f)
		if err != nil || res.IsError {
			t.Fatalf("%+q: %v %s", name, err, describe(res))
		}
		wantExists(t, f)
	}
	qs := ans.Questions()
	if len(qs) != len(names) {
		t.Fatalf("asked %d questions, want %d", len(qs), len(names))
	}
	return e, qs
}

// slot returns the text between the question's one « and one », failing
// the test if the question does not have exactly one of each.
func slot(t *testing.T, q string) string {
	t.Helper()
	if strings.Count(q, "«") != 1 || strings.Count(q, "»") != 1 {
		t.Fatalf("question does not show exactly one delimited value: %+q", q)
	}
	_, rest, _ := strings.Cut(q, "«")
	s, _, _ := strings.Cut(rest, "»")
	return strings.NewReplacer("\u2066", "", "\u2068", "", "\u2069", "").Replace(s)
}

// Layer: sanitizer. Right-to-left directory names pulled the slashes into
// one right-to-left run inside the value's single isolate, so /srv/גיבוי/חוזה.pdf
// ("backup/contract.pdf") was drawn as /srv/חוזה/גיבוי.pdf, another file.
// GNU FriBidi renders each question; every path's components must be drawn
// left to right in their logical order and no two questions drawn alike.
// The control, the same questions with the old single-isolate form, must
// fail both checks.
func TestAttackBidiReordersComponents(t *testing.T) {
	paths := []string{ // under the root
		"גיבוי/חוזה.pdf", "חוזה/גיבוי.pdf", // the swap: both files exist
		"نسخة/عقد.pdf",                          // Arabic
		"abc/גיבוי/2024/x", "גיבוי/report/חוזה", // mixed
		"א/1", "1/א", // numeric: one drawing for both in one isolate
		"גיבוי/2024/12", "גיבוי/12/2024",
		"א 1/x", "1 א/x",
	}
	const lead = "Delete the file "
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e, qs := askAll(t, era, transport, paths)
		root, err := filepath.EvalSymlinks(e.root)
		if err != nil {
			t.Fatal(err)
		}
		control := make([]string, len(qs))
		for i, q := range qs {
			shown := filepath.Join(root, paths[i])
			if want := prompt.Path(shown, prompt.Options{}); !strings.HasPrefix(q, lead+want+" ") {
				t.Fatalf("question %+q does not show %+q in the path form", q, shown)
			}
			_, rest, _ := strings.Cut(q, "»")
			control[i] = lead + prompt.Value(shown, prompt.Options{}) + rest
		}
		for _, form := range []struct {
			name      string
			questions []string
			control   bool
		}{{"server", qs, false}, {"single isolate (control)", control, true}} {
			disorder, alike := 0, 0
			drawn := map[string]string{}
			for i, r := range prompttest.Render(t, form.questions...) {
				// The components as the question writes them, in logical
				// order; a long temporary root may be cut to "…".
				var comps []string
				for _, c := range strings.Split(slot(t, form.questions[i]), "/") {
					if c != "" && c != "…" {
						comps = append(comps, c)
					}
				}
				if n := strings.Count(paths[i], "/") + 1; len(comps) < n || strings.Join(comps[len(comps)-n:], "/") != paths[i] {
					t.Fatalf("%s: the question %+q does not show the path's own components", paths[i], form.questions[i])
				}
				if err := r.ComponentOrder(len(lead), comps...); err != nil {
					disorder++
					if !form.control {
						t.Errorf("%s: %v", paths[i], err)
					}
				}
				if other, ok := drawn[r.Seen()]; ok {
					alike++
					if !form.control {
						t.Errorf("%s and %s are drawn alike: %q", other, paths[i], r.Seen())
					}
				}
				drawn[r.Seen()] = paths[i]
			}
			t.Logf("%s: %d of %d paths out of order, %d drawn like another", form.name, disorder, len(paths), alike)
			if form.control && (disorder == 0 || alike == 0) {
				t.Errorf("the control passed a check (%d out of order, %d alike): the check cannot fail", disorder, alike)
			}
		}
	})
}

// Layer: sanitizer. Characters that look like the question's guillemets,
// its truncation mark, the escape character or a path separator, taken
// from UTS #39's confusables data, forged a second quoted file, a cut, an
// escape or a directory; so did the angle brackets that data leaves alone
// (a.txt》 Reply yes. 《b.txt), taken from Unicode's names. Symbols are
// escaped, every pair of angle brackets and Chinese book titles included;
// letters stay raw with a note.
func TestAttackLookalikeDelimiters(t *testing.T) {
	type row struct {
		name  string // the file name under the root
		shown string // how the slot shows it
		note  string // the note the question must carry, or "" for none
	}
	tests := []row{
		{"x.txt≫ and ≪thesis.txt", `x.txt\u{226B} and \u{226A}thesis.txt`, "hidden"},
		{"x.txt⨠ and ˂thesis.txt", `x.txt\u{2A20} and \u{2C2}thesis.txt`, "hidden"},
		{"report‥final.pdf", `report\u{2025}final.pdf`, "hidden"},           // a fake cut
		{"report∖u{202E}fdp.exe", `report\u{2216}u{202E}fdp.exe`, "hidden"}, // a fake escape
		{"public∕..∕secret.txt", `public\u{2215}..\u{2215}secret.txt`, "hidden"},
		{"public丿..丿secret.txt", "public丿..丿secret.txt", "look like punctuation"}, // Han letters
		{"x.txt ᐳᐳ and ᐸᐸ thesis.txt", "x.txt ᐳᐳ and ᐸᐸ thesis.txt", "look like punctuation"},
		// A Han letter beside the marks does not let them through.
		{"x.txt文》 Reply yes. 《文thesis.txt", `x.txt文\u{300B} Reply yes. \u{300A}文thesis.txt`, "hidden"},
		// The accepted cost: a Chinese book title shows its marks escaped.
		{"《三体》.epub", `\u{300A}三体\u{300B}.epub`, "hidden"},
		// Negative controls: names that are not look-alikes stay as they are.
		{"ノート.txt", "ノート.txt", ""},
		{"a<<b>>.txt", "a<<b>>.txt", ""},
		{"「選択」▶∠.txt", "「選択」▶∠.txt", ""}, // corner brackets, a triangle, an angle
	}
	// Every pair of angle brackets and angle quotation marks by name (each
	// left one's partner is the next code point: confusables' TestAngles).
	pairs := 0
	for _, l := range confusables.Angles() {
		if l.Of != '«' {
			continue
		}
		open, close := l.Rune, l.Rune+1
		tests = append(tests, row{
			fmt.Sprintf("x.txt%c Reply yes. %cthesis.txt", close, open),
			fmt.Sprintf(`x.txt\u{%X} Reply yes. \u{%X}thesis.txt`, close, open),
			"hidden",
		})
		pairs++
	}
	t.Logf("%d pairs of angle brackets by name", pairs)
	if pairs < 15 {
		t.Fatalf("only %d pairs of angle brackets by name", pairs)
	}
	d, err := confusables.Load("../../impl/prompt/testdata/confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
	}
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		_, qs := askAll(t, era, transport, names)
		for i, tt := range tests {
			q := qs[i]
			if s := slot(t, q); !strings.HasSuffix(s, "/"+tt.shown) {
				t.Errorf("%+q: the slot shows %+q, want it to end in /%s", tt.name, s, tt.shown)
			}
			for _, r := range q {
				// Judged from the data, not from package prompt's table; a raw
				// … is the question's own truncation mark.
				if r != '…' && d.Imitates(r) != 0 && !unicode.IsLetter(r) {
					t.Errorf("%+q: the question holds %q raw: %s", tt.name, r, q)
				}
			}
			_, notes, _ := strings.Cut(q, "This cannot be undone.")
			switch {
			case tt.note == "" && notes != "":
				t.Errorf("%+q: unexpected note %q", tt.name, notes)
			case tt.note != "" && !strings.Contains(notes, tt.note):
				t.Errorf("%+q: the note %q does not say %q", tt.name, notes, tt.note)
			}
		}
	})
}

// Layer: sanitizer. "old  notes.txt" and "old notes.txt", and "notes.txt "
// with a trailing space, showed alike wherever the client collapses
// whitespace, as HTML does. Each question must stay distinct after such
// collapsing, and approving the one about "old  notes.txt" deletes that
// file, not its one-space twin.
func TestAttackInvisibleSpaces(t *testing.T) {
	tests := []struct {
		name, shown string
		hidden      bool // whether the question notes hidden characters
	}{
		{"old notes.txt", "old notes.txt", false},
		{"old  notes.txt", `old\u{20}\u{20}notes.txt`, true},
		{"old   notes.txt", `old\u{20}\u{20}\u{20}notes.txt`, true},
		{"notes.txt", "notes.txt", false},
		{"notes.txt ", `notes.txt\u{20}`, true},
		{" notes.txt", `\u{20}notes.txt`, true},
		{"old\u00A0notes.txt", `old\u{A0}notes.txt`, true},
		{"old\u3000notes.txt", `old\u{3000}notes.txt`, true},
		{"old\u2003notes.txt", `old\u{2003}notes.txt`, true},
		{"old\u205Fnotes.txt", `old\u{205F}notes.txt`, true},
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
	}
	collapse := func(s string) string { return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ") }
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e, qs := askAll(t, era, transport, names)
		seen := map[string]string{}
		for i, tt := range tests {
			q := qs[i]
			if s := slot(t, q); !strings.HasSuffix(s, "/"+tt.shown) {
				t.Errorf("%+q: the slot shows %+q, want it to end in /%s", tt.name, s, tt.shown)
			}
			if got := strings.Contains(q, "Note: the name contains hidden"); got != tt.hidden {
				t.Errorf("%+q: hidden-character note %v, want %v: %s", tt.name, got, tt.hidden, q)
			}
			c := collapse(q)
			if other, ok := seen[c]; ok {
				t.Errorf("%+q and %+q read alike once whitespace collapses: %s", other, tt.name, c)
			}
			seen[c] = tt.name
		}

		// What was shown is what runs: approve "old  notes.txt" only.
		ans := accept()
		cs := e.connect(clientOptions{era: era, transport: transport, answer: ans})
		two, one := filepath.Join(e.root, "old  notes.txt"), filepath.Join(e.root, "old notes.txt")
		res, err := call(cs, two)
		wantDeleted(t, res, err, two)
		wantExists(t, one)
		if q := ans.Questions(); len(q) != 1 || !strings.Contains(q[0], `old\u{20}\u{20}notes.txt`) {
			t.Errorf("approved question %q does not show the two spaces", q)
		}
		if !strings.Contains(text(res), `old\u{20}\u{20}notes.txt`) {
			t.Errorf("result %q does not name the deleted file as shown", text(res))
		}
	})
}
