package notify_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/notify"
)

// receiver is a local webhook receiver: it records each post.
type receiver struct {
	*httptest.Server
	posts chan post
}

type post struct {
	contentType string
	body        []byte
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{posts: make(chan post, 16)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPost {
			r.posts <- post{req.Header.Get("Content-Type"), b}
		}
		w.WriteHeader(status)
		io.WriteString(w, "receiver-answer-that-must-not-be-logged")
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) next(t *testing.T) post {
	t.Helper()
	select {
	case p := <-r.posts:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver got no post within 10 s")
	}
	return post{}
}

// secretPath stands for the token in a Slack webhook's path.
const secretPath = "/services/T000/B000/secret-token-XYZ"

const link = "https://confirm.example.com/approve/Zm9vYmFyYmF6"

func notice(question string) confirm.Notice {
	return confirm.Notice{Link: link, Question: question, Tool: "delete_file", Expires: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC), Required: 2}
}

// decoded is the text of a message as Slack shows it: entities decoded.
func decoded(text string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(text)
}

// markup returns the Slack control sequences (<…>) of text, and whether a
// code fence closes before the last.
var markupRE = regexp.MustCompile(`<[^>]*>`)

// checkMessage checks a message's JSON: Slack's fields, no parsing or
// unfurling, the page's link as the only markup, and the question, inside
// one code block, shown exactly (entities decoded, \u{60} for `).
func checkMessage(body []byte, question string) []string {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var faults []string
	text, _ := m["text"].(string)
	if m["parse"] != "none" || m["link_names"] != false || m["unfurl_links"] != false || m["unfurl_media"] != false {
		faults = append(faults, "parsing, name linking or unfurling not off")
	}
	if got := markupRE.FindAllString(text, -1); len(got) != 1 || got[0] != "<"+link+"|open the approval page>" {
		faults = append(faults, "markup other than the page's link: "+strings.Join(got, " "))
	}
	if strings.Count(text, "```") != 2 {
		faults = append(faults, "the question's code block is not one block")
	}
	_, block, _ := strings.Cut(text, "```\n")
	block = strings.TrimSuffix(block, "\n```")
	if want := strings.ReplaceAll(question, "`", `\u{60}`); decoded(block) != want {
		faults = append(faults, "the question reads "+decoded(block)+", want "+want)
	}
	if !strings.Contains(text, "2026-12-04 08:00:00 UTC") || !strings.Contains(text, "2 approvals") {
		faults = append(faults, "no deadline or number of approvals")
	}
	return faults
}

// Untrusted values that would form markup in Slack unescaped.
var attacks = []string{
	"<https://evil.example/approve|open the approval page>",
	"<!channel> <!here> <!everyone>",
	"<@U0123ABCD> <#C0123ABCD> <!subteam^S0123>",
	"```\n*bold* _italic_ <https://evil.example>\n```",
	"a &lt;b&gt; & c",
	"`code` ``` ends the block",
}

// TestWebhookEscapesUntrusted: whatever the question holds, the message
// posted has one link, the page's, and shows the question exactly,
// inside one code block. The control, a message built without escaping,
// fails the same checks.
func TestWebhookEscapesUntrusted(t *testing.T) {
	r := newReceiver(t, http.StatusOK)
	w, err := notify.New(notify.Options{URL: r.URL + secretPath, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attacks {
		question := "Delete the file " + prompt.Value(a, prompt.Options{MaxWidth: 200}) + "?"
		t.Run(a, func(t *testing.T) {
			w.Notify(notice(question))
			p := r.next(t)
			if p.contentType != "application/json" {
				t.Errorf("Content-Type %q", p.contentType)
			}
			if faults := checkMessage(p.body, question); len(faults) > 0 {
				t.Fatalf("message %s: %q", p.body, faults)
			}
			// The control: the same text unescaped is caught.
			raw := strings.Replace(string(notify.Message(notice("QUESTION"))), "QUESTION", jsonString(question), 1)
			if len(checkMessage([]byte(raw), question)) == 0 {
				t.Fatalf("the checker passed an unescaped message: %s", raw)
			}
		})
	}
}

// jsonString is s as it stands inside a JSON string, quotes excluded.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestWebhookFailureDoesNotBlock: a receiver that answers an error, one
// that hangs past the timeout, and one that is not there: Notify returns
// at once each time, the failure is logged with the receiver's host and
// never its secret path or its answer, and a notification beyond
// MaxInFlight is dropped and logged. (Only the hanging receiver holds the
// one slot for sure when the second notification comes: a refused
// connection can fail and free it first, and the second is then sent.)
func TestWebhookFailureDoesNotBlock(t *testing.T) {
	refusing := newReceiver(t, http.StatusInternalServerError)
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(release) })
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct {
		name, url, want string
		drops           bool // the second notification finds the slot taken
	}{
		{"error status", refusing.URL, "status=500", false},
		{"hangs", hanging.URL, "Timeout", true},
		{"not there", gone.URL, "connection refused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &mcptest.SyncBuffer{}
			w, err := notify.New(notify.Options{URL: tc.url + secretPath, Timeout: 200 * time.Millisecond, MaxInFlight: 1, Logger: slog.New(slog.NewTextHandler(log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			w.Notify(notice("Delete the file «a»?"))
			w.Notify(notice("Delete the file «b»?")) // beyond MaxInFlight while the first is in flight: dropped
			if took := time.Since(start); took > 100*time.Millisecond {
				t.Errorf("Notify took %v: it must not wait for the receiver", took)
			}
			w.Wait()
			out := log.String()
			if !strings.Contains(out, tc.want) || !strings.Contains(out, strings.TrimPrefix(tc.url, "http://")) {
				t.Errorf("log %q: want the failure (%s) and the receiver's host", out, tc.want)
			}
			if tc.drops && !strings.Contains(out, "dropped") {
				t.Errorf("log %q: want the second notification dropped", out)
			}
			if strings.Contains(out, "secret-token") || strings.Contains(out, "receiver-answer") {
				t.Errorf("log %q leaks the webhook's path or the receiver's answer", out)
			}
		})
	}
}

// Only https, or http on loopback, and the error never repeats the URL.
func TestWebhookURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.slack.com/services/T/B/secret-token", true},
		{"http://127.0.0.1:9/secret-token", true},
		{"http://[::1]:9/secret-token", true},
		{"http://localhost:9/secret-token", true},
		{"http://hooks.example.com/secret-token", false},
		// http to an address or name that is not loopback: the question
		// and link cross a network in clear.
		{"http://10.0.0.1:9/secret-token", false},
		{"http://[fe80::1]:9/secret-token", false},
		{"http://localhost.evil.example:9/secret-token", false},
		{"ftp://hooks.example.com/secret-token", false},
		{"https://user:secret-token@hooks.example.com/", false},
		{"/services/secret-token", false},
		{"", false},
	} {
		_, err := notify.New(notify.Options{URL: tc.url})
		if (err == nil) != tc.ok {
			t.Errorf("New(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "secret-token") {
			t.Errorf("New(%q): the error %q repeats the URL", tc.url, err)
		}
	}
}

// New refuses a negative Timeout or MaxInFlight (which would disable the
// bound a caller asked for); zero takes the defaults (the control).
func TestWebhookOptionsRefused(t *testing.T) {
	const url = "https://hooks.example.com/secret-token"
	for _, o := range []notify.Options{{URL: url, Timeout: -time.Second}, {URL: url, MaxInFlight: -1}} {
		if _, err := notify.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := notify.New(notify.Options{URL: url}); err != nil {
		t.Errorf("control: %v", err)
	}
}

// A webhook that answers with a redirect is not followed: the message
// would go where the operator did not send it. The receiver redirected to
// gets nothing; the failure is logged without the URL.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	other := newReceiver(t, http.StatusOK)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+secretPath, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	var logs mcptest.SyncBuffer
	w, err := notify.New(notify.Options{URL: redirect.URL + secretPath, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Notify(notice("Delete a.txt?"))
	w.Wait()
	select {
	case <-other.posts:
		t.Fatal("the redirect was followed: the message reached another receiver")
	default:
	}
	if !strings.Contains(logs.String(), "refused the notification") || strings.Contains(logs.String(), "secret-token") {
		t.Fatalf("log: %s", logs.String())
	}
}

// A link that could not stand in Slack's <url|text> markup as it is — a
// character that ends or splits it, or not http(s) — is shown as escaped
// text, never as markup: the message then holds no markup at all. The
// page's own link is markup (the control, in checkMessage).
func TestWebhookUnsafeLinkNotMarkup(t *testing.T) {
	for _, l := range []string{
		"https://confirm.example.com/a|<!channel>",
		"https://evil.example/x|confirm.example.com",
		"https://confirm.example.com/a>b",
		"https://confirm.example.com/a b",
		"https://confirm.example.com/a&amp;b",
		"https://confirm.example.com/a`b",
		"javascript:alert(1)",
		"mailto:x@example.com",
	} {
		n := notice("Delete a.txt?")
		n.Link = l
		var m struct{ Text string }
		if err := json.Unmarshal(notify.Message(n), &m); err != nil {
			t.Fatal(err)
		}
		if got := markupRE.FindAllString(m.Text, -1); len(got) != 0 {
			t.Errorf("link %q: markup %q in %q", l, got, m.Text)
		}
	}
}
