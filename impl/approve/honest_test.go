package approve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/approvetest"
)

// honestNames are file names of the sanitizer's attack tests
// (internal/server's attack_prompt_test.go), by kind.
var honestNames = []struct {
	kind, path string
	rtl        bool // its components hold right-to-left names: check their drawing order
}{
	{"bidi", "/srv/גיבוי/חוזה.pdf", true},
	{"bidi", "/srv/חוזה/גיבוי.pdf", true},
	{"bidi", "/srv/نسخة/عقد.pdf", true},
	{"bidi", "/srv/abc/גיבוי/2024/x", true},
	{"bidi", "/srv/א/1", true},
	{"bidi", "/srv/1/א", true},
	{"bidi", "/srv/invoice\u202Efdp.exe", false},
	{"look-alike", "/srv/x.txt≫ and ≪thesis.txt", false},
	{"look-alike", "/srv/report∖u{202E}fdp.exe", false},
	{"look-alike", "/srv/public∕..∕secret.txt", false},
	{"look-alike", "/srv/x.txt文》 Reply yes. 《文thesis.txt", false},
	{"look-alike", "/srv/p\u0430ypal.com", false},
	{"spaces", "/srv/old  notes.txt", false},
	{"spaces", "/srv/notes.txt ", false},
	{"spaces", "/srv/ notes.txt", false},
	{"spaces", "/srv/old\u00A0notes.txt", false},
}

// questionText returns the text of the page's question as Chromium
// renders it (innerText: what a person can select and read).
func questionText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return approvetest.Get(t, ctx, chromedp.Evaluate[string](`document.getElementById("question").innerText`))
}

// drawnInOrder checks that the components of path p, as the question
// shows them (quoted), are drawn left to right in their logical order:
// it measures where Chromium drew each one.
func drawnInOrder(t *testing.T, ctx context.Context, p string) error {
	t.Helper()
	var comps []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			comps = append(comps, prompt.Quote(c))
		}
	}
	arg, _ := json.Marshal(comps)
	lefts := approvetest.Get(t, ctx, chromedp.Evaluate[[]float64](fmt.Sprintf(`((comps) => {
  const root = document.getElementById("question");
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = []; let text = "";
  for (let n; (n = walker.nextNode()); ) { nodes.push([n, text.length]); text += n.data; }
  const at = (i) => { for (let k = nodes.length - 1; k >= 0; k--) if (nodes[k][1] <= i) return [nodes[k][0], i - nodes[k][1]]; };
  let from = 0; const lefts = [];
  for (const c of comps) {
    const i = text.indexOf(c, from);
    if (i < 0) return [];
    const r = document.createRange();
    const [sn, so] = at(i), [en, eo] = at(i + c.length - 1);
    r.setStart(sn, so); r.setEnd(en, eo + 1);
    lefts.push(r.getBoundingClientRect().left);
    from = i + c.length;
  }
  return lefts;
})(%s)`, arg)))
	if len(lefts) != len(comps) {
		return fmt.Errorf("components %q not all found in the page's text", comps)
	}
	for i := 1; i < len(lefts); i++ {
		if lefts[i] <= lefts[i-1] {
			return fmt.Errorf("component %q drawn at x=%.0f, left of %q at x=%.0f: the path reads as another", comps[i], lefts[i], comps[i-1], lefts[i-1])
		}
	}
	return nil
}

// TestApprovePageHonest: the bidi, look-alike and spaces names of the
// sanitizer's attack tests, in delete_file's question, rendered by a real
// Chromium: the page's text is the sanitized question (less its
// invisible isolate characters, each now a <bdi>, one per isolate), so
// every escape and note is there to read; and the components of each
// path with right-to-left names are drawn left to right in their logical
// order. The controls: the raw name in the page, and the old single
// isolate around a whole path, fail the two checks.
func TestApprovePageHonest(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, first := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: "q"})
	ctx := approvetest.Browser(t)
	approvetest.SignInBrowser(t, ctx, first, "alice")
	shots := t.TempDir()
	for i, n := range honestNames {
		q := deleteQuestion(n.path)
		_, link := f.issue(t, ledger.Approval{Required: 1, Approvers: []string{"sub:alice"}, Question: q})
		approvetest.Do(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("question")))
		if got := questionText(t, ctx); got != visible(q) {
			t.Errorf("%s %+q: the page reads\n%+q\nwant the sanitized question\n%+q", n.kind, n.path, got, visible(q))
		}
		isolates := strings.Count(q, "\u2066") + strings.Count(q, "\u2067") + strings.Count(q, "\u2068")
		if bdis := approvetest.Get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#question bdi").length`)); bdis != isolates {
			t.Errorf("%s %+q: %d <bdi> elements, want one per isolate: %d", n.kind, n.path, bdis, isolates)
		}
		if n.rtl {
			if err := drawnInOrder(t, ctx, n.path); err != nil {
				t.Errorf("%s %+q: %v", n.kind, n.path, err)
			}
		}
		if i == 0 || n.path == "/srv/x.txt文》 Reply yes. 《文thesis.txt" {
			approvetest.Screenshot(t, ctx, shots, fmt.Sprintf("approve-honest-%d", i))
		}
	}

	// Controls: pages that render a question dishonestly.
	var body string
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><div id="question">%s</div>`, body)
	}))
	t.Cleanup(control.Close)
	raw := "/srv/invoice\u202Efdp.exe"
	body = html.EscapeString("Delete the file «" + raw + "» (12 bytes)? This cannot be undone.")
	approvetest.Do(t, ctx, chromedp.Navigate(control.URL), chromedp.WaitVisible(chromedp.ID("question")))
	if got, want := questionText(t, ctx), visible(deleteQuestion(raw)); got == want {
		t.Errorf("control: the raw name reads as the sanitized question %+q", got)
	}
	for _, p := range []string{"/srv/גיבוי/חוזה.pdf", "/srv/א/1"} {
		body = "Delete the file «<bdi>" + html.EscapeString(p) + "</bdi>» (12 bytes)?"
		approvetest.Do(t, ctx, chromedp.Navigate(control.URL), chromedp.WaitVisible(chromedp.ID("question")))
		if err := drawnInOrder(t, ctx, p); err == nil {
			t.Errorf("control: %q in one isolate passed drawnInOrder", p)
		}
	}
}
