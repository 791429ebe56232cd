// Package notify tells approvers that a call waits for their out-of-band
// approval, by posting to a chat webhook (Slack's incoming webhooks, and
// the many that accept their JSON: Mattermost, Rocket.Chat, Discord's
// /slack endpoint) a message with the approval page's link and the
// sanitized question.
//
// What it guarantees:
//
//   - No untrusted value forms a link, a mention or markup in the
//     message. The question (already escaped by package prompt) goes in a
//     code block, where Slack formats nothing, with Slack's three control
//     characters & < > written as the entities Slack documents, so no
//     <url|text> link, <@user> or <!channel> mention can form, and every `
//     written \u{60}, in package prompt's escape grammar, so the block
//     cannot be closed early. The payload also asks for no parsing,
//     unfurling or name linking. The only link is the page's, from the
//     public URL the operator configured. TestWebhookEscapesUntrusted
//     checks this, with a control that does not escape.
//   - It never blocks the call: [Webhook.Notify] returns at once, the post
//     runs on its own, bounded by a timeout, with at most MaxInFlight at a
//     time (more are dropped, and logged); a failure (the receiver down,
//     an error status, a timeout) is logged and changes nothing else
//     (TestWebhookFailureDoesNotBlock).
//   - It does not leak the webhook's URL, which is a secret (Slack's
//     carries its token): neither the URL nor the receiver's answer is
//     logged, only the receiver's host and status, and redirects are not
//     followed.
//
// What it does not guarantee: delivery (a notification lost is not sent
// again; the client still shows the link), or that the receiver renders
// the message as Slack does.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
)

// Options configures a [Webhook]. URL is required.
type Options struct {
	// URL is the webhook: https, or http on a loopback host. It is a
	// secret, never logged.
	URL string
	// Timeout bounds one post. Default 10 seconds.
	Timeout time.Duration
	// MaxInFlight bounds the posts under way at once; a notification
	// beyond it is dropped, and logged. Default 16.
	MaxInFlight int
	// Logger receives failures. Default: slog.Default().
	Logger *slog.Logger
	// Transport sends the posts. Default: http.DefaultTransport.
	Transport http.RoundTripper
}

// Defaults of [Options].
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxInFlight = 16
)

// A Webhook posts notifications to one chat webhook. It is safe for
// concurrent use.
type Webhook struct {
	url    string
	host   string // for logs: the URL less its secret path
	client *http.Client
	log    *slog.Logger
	slots  chan struct{}
	wg     sync.WaitGroup
}

// New returns a Webhook posting to opts.URL.
func New(opts Options) (*Webhook, error) {
	u, err := url.Parse(opts.URL)
	switch {
	case err != nil || u.Host == "" || u.User != nil:
		// The URL is a secret: the error does not repeat it.
		return nil, errors.New("notify: the webhook URL is not an absolute http(s) URL without user info")
	// The question and the link would cross the network in clear.
	case u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname())):
		return nil, errors.New("notify: the webhook URL must be https (http only on a loopback host)")
	case opts.Timeout < 0 || opts.MaxInFlight < 0:
		return nil, errors.New("notify: negative Timeout or MaxInFlight")
	}
	w := &Webhook{url: opts.URL, host: u.Scheme + "://" + u.Host, log: opts.Logger}
	if w.log == nil {
		w.log = slog.Default()
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	n := opts.MaxInFlight
	if n == 0 {
		n = DefaultMaxInFlight
	}
	w.slots = make(chan struct{}, n)
	w.client = &http.Client{
		Transport: opts.Transport,
		Timeout:   timeout,
		// A redirect would carry the message where the operator did not
		// send it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return w, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Notify posts n, in the background: it never blocks. It is a
// confirm.Setup.Notify.
func (w *Webhook) Notify(n confirm.Notice) {
	select {
	case w.slots <- struct{}{}:
	default:
		w.log.Warn("notify: too many notifications under way; one dropped", "webhook", w.host)
		return
	}
	body := Message(n)
	w.wg.Go(func() {
		defer func() { <-w.slots }()
		w.post(body)
	})
}

// Wait waits for the posts under way to end.
func (w *Webhook) Wait() { w.wg.Wait() }

// post sends body, logging a failure without the URL or the answer.
func (w *Webhook) post(body []byte) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		w.log.Error("notify: webhook request could not be made", "webhook", w.host)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		// url.Error repeats the URL: log only what went wrong under it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		w.log.Warn("notify: webhook failed", "webhook", w.host, "err", err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		w.log.Warn("notify: webhook refused the notification", "webhook", w.host, "status", res.StatusCode)
	}
}

// timeLayout is how the message shows the deadline, as the page does.
const timeLayout = "2006-01-02 15:04:05 UTC"

// message is the JSON a webhook gets.
type message struct {
	Text        string `json:"text"`
	Parse       string `json:"parse"`
	LinkNames   bool   `json:"link_names"`
	UnfurlLinks bool   `json:"unfurl_links"`
	UnfurlMedia bool   `json:"unfurl_media"`
}

// Message returns the JSON posted for n: Slack's incoming-webhook
// message, its text the page's link and the question escaped (see the
// package doc).
func Message(n confirm.Notice) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*A call waits for out-of-band approval* (%s, before %s): ", approvals(n.Required), n.Expires.UTC().Format(timeLayout))
	if safeLink(n.Link) {
		b.WriteString("<" + n.Link + "|open the approval page>")
	} else {
		b.WriteString(Escape(n.Link))
	}
	b.WriteString("\n```\n" + Escape(n.Question) + "\n```")
	out, err := json.Marshal(message{Text: b.String(), Parse: "none"})
	if err != nil {
		panic(err) // strings and booleans always marshal
	}
	return out
}

func approvals(n int) string {
	if n <= 1 {
		return "1 approval"
	}
	return fmt.Sprintf("%d approvals by distinct approvers", n)
}

// safeLink reports whether link can stand in Slack's <url|text> markup
// as it is: an http(s) URL with none of the characters that end it or
// that Slack decodes.
func safeLink(link string) bool {
	return (strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "http://")) &&
		!strings.ContainsAny(link, "<>|& \t\r\n`")
}

// escaper writes Slack's control characters as the entities Slack
// documents, and the backtick as package prompt escapes a code point, so
// that text inside a code block can neither form markup nor close it.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "`", `\u{60}`)

// Escape returns s safe to put in a Slack code block (see the package
// doc).
func Escape(s string) string { return escaper.Replace(s) }
