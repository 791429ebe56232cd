package approve

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
)

// A page is what one response shows.
type page struct {
	Title    string
	Message  string
	SignIn   string // a sign-in link
	Refresh  string // reload at once to this path (same site)
	Continue string // a link on to the request
	Notice   string // what came of a decision sent
	Who      []segment
	Question []segment
	Deadline string
	Expired  bool
	Required int
	// Decisions are those recorded so far.
	Decisions []decisionView
	Outcome   string
	Form      bool
	Action    string
	Token     string
	Passkey   *passkeyButton // a passkey ceremony's button
	Script    string         // the page's script, for Passkey
}

// passkeyButton starts a WebAuthn ceremony (the script's): Kind "create"
// or "get", its options from Begin, its answer to Finish.
type passkeyButton struct {
	Label, Kind, Begin, Finish string
}

type decisionView struct {
	Who     []segment
	Approve bool
	At      string
	Mine    bool
}

// style is the page's only style, allowed by its hash: the page runs no
// script and loads nothing.
const style = `body{font:16px/1.5 system-ui,sans-serif;max-width:42em;margin:2em auto;padding:0 1em;color:#111;background:#fff}
#question{white-space:pre-wrap;overflow-wrap:anywhere;border:2px solid #333;padding:1em;background:#f6f6f6}
.notice{border-left:4px solid #b00;padding-left:.8em}
button{font-size:1.1em;padding:.4em 1.2em;margin-right:1em}
.small{color:#555;font-size:.9em}`

// csp is the page's Content-Security-Policy: nothing is loaded or run
// (but, with passkeys, the page's one script, by its URL, which fetches
// only from this origin), the one inline style is allowed by its hash,
// forms post only here, and no page may frame it.
func csp(passkeys bool, script string) string {
	sum := sha256.Sum256([]byte(style))
	p := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	if passkeys {
		p += "; script-src " + script + "; connect-src 'self'"
	}
	return p
}

// script runs the passkey ceremonies (WebAuthn Level 3's JSON forms): the
// options from the button's begin URL, the browser's answer to its
// finish URL.
const script = `"use strict";
const button = document.getElementById("passkey");
const status = document.getElementById("passkey-status");
async function post(url, body) {
  const res = await fetch(url, {method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {})});
  const out = await res.json();
  if (!res.ok) throw new Error(out.error || res.statusText);
  return out;
}
button.addEventListener("click", async () => {
  button.disabled = true;
  status.textContent = "Waiting for your passkey…";
  try {
    const options = await post(button.dataset.begin);
    const cred = button.dataset.kind === "create"
      ? await navigator.credentials.create({publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)})
      : await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)});
    const out = await post(button.dataset.finish, cred.toJSON());
    if (out.redirect) { location.assign(out.redirect); return; }
    status.textContent = out.message;
  } catch (e) {
    status.textContent = "Failed: " + e.message;
    button.disabled = false;
  }
});
`

// tmpl renders every page. The question is rendered from its segments:
// text is escaped by html/template, each isolate is a <bdi>.
var tmpl = template.Must(template.New("page").Parse(`{{define "segs"}}{{range .}}{{if .Isolate}}<bdi{{with .Dir}} dir="{{.}}"{{end}}>{{template "segs" .Children}}</bdi>{{else}}{{.Text}}{{end}}{{end}}{{end}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{with .Refresh}}<meta http-equiv="refresh" content="0;url={{.}}">{{end}}
<title>{{.Title}} · mcp-confirm</title>
<style>` + style + `</style></head>
<body>
<h1>{{.Title}}</h1>
{{with .Message}}<p id="message">{{.}}</p>{{end}}
{{with .SignIn}}<p><a id="signin" href="{{.}}">Sign in</a></p>{{end}}
{{with .Passkey}}<p><button id="passkey" type="button" data-kind="{{.Kind}}" data-begin="{{.Begin}}" data-finish="{{.Finish}}">{{.Label}}</button></p>
<p id="passkey-status" role="status"></p>{{end}}
{{with .Continue}}<p><a id="continue" href="{{.}}">Continue to the request</a></p>{{end}}
{{with .Notice}}<p class="notice" id="notice">{{.}}</p>{{end}}
{{if .Question}}
<p class="small">Signed in as <span id="who">{{template "segs" .Who}}</span>. An agent asked to run this call; it runs only if approved.</p>
<div id="question">{{template "segs" .Question}}</div>
<p id="deadline">{{if .Expired}}Expired at{{else}}Decide before{{end}} {{.Deadline}}.</p>
<p id="outcome">{{.Outcome}}</p>
<h2>Decisions ({{.Required}} approval{{if ne .Required 1}}s{{end}} needed)</h2>
<ul id="decisions">{{range .Decisions}}<li>{{template "segs" .Who}}{{if .Mine}} (you){{end}} {{if .Approve}}approved{{else}}declined{{end}} at {{.At}}</li>{{else}}<li>None yet.</li>{{end}}</ul>
{{if .Form}}<form method="post" action="{{.Action}}">
<input type="hidden" name="token" value="{{.Token}}">
<button id="approve" type="submit" name="decision" value="approve">Approve</button>
<button id="decline" type="submit" name="decision" value="decline">Decline</button>
</form>{{end}}
{{end}}
{{with .Script}}<script src="{{.}}"></script>{{end}}
</body></html>
`))

// render writes p with status.
func (h *Handler) render(w http.ResponseWriter, status int, p page) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		h.log.Error("approve: render", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
