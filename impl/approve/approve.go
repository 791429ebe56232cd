package approve

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// Options configures a [Handler]. Ledger, PublicURL, Key and a way to
// sign in (OIDC, Passkeys, or both) are required.
type Options struct {
	// Ledger holds the confirmations the page shows and decides.
	Ledger *ledger.Ledger
	// PublicURL is the front door's base URL as approvers' browsers reach
	// it: scheme, host, optional port and path prefix (no query). The
	// page is served under its path followed by /approve/ (see
	// [Handler.Prefix]). It must be https, or http on a loopback host
	// (127.0.0.0/8, ::1, localhost). Cookies are Secure when it is https.
	PublicURL string
	// Key is a secret of at least [MinKeyLen] random bytes, the same on
	// every replica: links, session cookies and form tokens are derived
	// from it (HKDF-SHA256, labels of this package alone, so it may be the
	// secret of the requestState key file's first key). Anyone who holds
	// it can forge a session of any approver.
	Key []byte
	// OIDC is the approvers' sign-in at an OpenID Connect issuer; an
	// empty Issuer: none.
	OIDC OIDC
	// Passkeys, if set, lets approvers sign in with a passkey enrolled
	// through [EnrolLink].
	Passkeys *Passkeys
	// SessionTTL is how long a sign-in lasts. Default 15 minutes.
	SessionTTL time.Duration
	// Now is the page's clock: what it shows as expired, and when
	// sessions end. The ledger decides expiry on the store's clock.
	// Default time.Now.
	Now func() time.Time
	// Logger receives a line per sign-in and decision. Default: none.
	Logger *slog.Logger
}

// DefaultSessionTTL is the default of [Options.SessionTTL].
const DefaultSessionTTL = 15 * time.Minute

// signInTTL bounds a sign-in from the page to the issuer and back.
const signInTTL = 10 * time.Minute

// maxForm bounds a decision's body: a token and a word.
const maxForm = 4 << 10

// maxCookie bounds a sealed cookie's value: browsers keep 4096 bytes a
// cookie, name and attributes included.
const maxCookie = 3800

// Names of approvers, as [ledger.Approval.Approvers] lists them and
// [ledger.Approver] carries them: an approver signed in with subject S
// is "sub:S"; a group G of the group claim is "group:G".
const (
	SubjectPrefix = "sub:"
	GroupPrefix   = "group:"
)

// A Handler serves the approval page. It is safe for concurrent use, and
// holds nothing per request between requests: any replica holding the
// same Key and a Ledger over the same store serves any link.
type Handler struct {
	ledger     *ledger.Ledger
	base       string // PublicURL without a trailing slash
	origin     string // PublicURL's origin, as browsers send it in Origin
	prefix     string // the path served: PublicURL's path + "/approve/"
	secure     bool   // https: Secure and __Host- cookies
	keys       keys
	signIn     *signIn   // nil: no OpenID Connect
	passkeys   *passkeys // nil: no passkeys
	sessionTTL time.Duration
	now        func() time.Time
	log        *slog.Logger
	csp        string
}

// New returns the page, after OpenID Connect discovery at the issuer
// (which must answer, within ctx).
func New(ctx context.Context, opts Options) (*Handler, error) {
	if opts.Ledger == nil {
		return nil, errors.New("approve: no ledger")
	}
	base, origin, secure, err := checkPublicURL(opts.PublicURL)
	if err != nil {
		return nil, err
	}
	k, err := deriveKeys(opts.Key)
	if err != nil {
		return nil, err
	}
	if opts.SessionTTL < 0 {
		return nil, fmt.Errorf("approve: negative SessionTTL %v", opts.SessionTTL)
	}
	h := &Handler{ledger: opts.Ledger, base: base, origin: origin, secure: secure, keys: k,
		sessionTTL: opts.SessionTTL, now: opts.Now, log: opts.Logger}
	h.prefix = strings.TrimPrefix(base, origin) + "/approve/"
	if opts.OIDC.Issuer == "" && opts.Passkeys == nil {
		return nil, errors.New("approve: no way to sign in: configure OIDC, Passkeys, or both")
	}
	if opts.Passkeys != nil {
		u, _ := url.Parse(origin)
		if h.passkeys, err = newPasskeys(opts.Passkeys, origin, u.Hostname()); err != nil {
			return nil, err
		}
	}
	h.csp = csp(h.passkeys != nil, origin+h.prefix+scriptPath)
	if h.sessionTTL == 0 {
		h.sessionTTL = DefaultSessionTTL
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if opts.OIDC.Issuer != "" {
		if h.signIn, err = newSignIn(ctx, opts.OIDC, h.base+h.prefix+callbackPath); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// checkPublicURL returns the base URL (no trailing slash), its origin,
// and whether it is https.
func checkPublicURL(s string) (base, origin string, secure bool, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", false, fmt.Errorf("approve: public URL: %w", err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.Opaque != "":
		return "", "", false, fmt.Errorf("approve: public URL %q: want https://HOST[:PORT][/PATH]", s)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawPath != "":
		return "", "", false, fmt.Errorf("approve: public URL %q: no user, query, fragment or escaped path", s)
	// Sniffed sessions: over plain http, anyone on the path reads the
	// session cookie; loopback has no path.
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "", "", false, fmt.Errorf("approve: public URL %q: http only on a loopback host; use https", s)
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && !(u.Scheme == "https" && p == "443") && !(u.Scheme == "http" && p == "80") {
		host += ":" + p
	}
	origin = u.Scheme + "://" + host
	return origin + strings.TrimRight(u.Path, "/"), origin, u.Scheme == "https", nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Prefix is the path the page is served under, to mount the handler at
// (http.ServeMux.Handle(h.Prefix(), h)): PublicURL's path followed by
// /approve/. The handler answers 404 outside it.
func (h *Handler) Prefix() string { return h.prefix }

// Link returns the URL of the approval page of confirmation id, to send
// to the approvers (a URL elicitation, a notification): its last
// segment is id encrypted and tagged with Key, so the link does not
// show the id and cannot be made without the key. The same id always
// gets the same link.
func (h *Handler) Link(id ledger.ID) string { return h.base + h.prefix + h.keys.makeLink(id) }

// RedirectURL is the sign-in's redirect URI, to register with the
// OpenID Connect client at the issuer.
func (h *Handler) RedirectURL() string { return h.base + h.prefix + callbackPath }

// Paths under the prefix besides links.
const (
	callbackPath  = "callback"
	signInSuffix  = "/signin"
	scriptPath    = "passkey.js"
	passkeySuffix = "/passkey/"
)

// ServeHTTP serves the page (GET and POST on a link), the sign-in
// (GET on a link's /signin) and the issuer's redirect (GET callback).
// It never reads the Authorization header: the caller's bearer token
// is not an approver's sign-in.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Clickjacking: no page may frame this one (a framed Approve button
	// under a decoy is a click the approver did not mean).
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Frame-Options", "DENY")
	// The link is in the URL: no Referer carries it to the issuer or
	// any other site, and no cache keeps a page that names a request.
	// Not no-referrer: under it Chromium sends the page's own form with
	// "Origin: null" (measured), which the Origin check must refuse.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok {
		h.render(w, http.StatusNotFound, page{Title: "Not found", Message: "There is nothing here."})
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	post := r.Method == http.MethodPost
	switch {
	case rest == callbackPath && get && h.signIn != nil:
		h.callback(w, r)
	case strings.HasSuffix(rest, signInSuffix) && get && h.signIn != nil:
		h.startSignIn(w, r, strings.TrimSuffix(rest, signInSuffix))
	case rest == scriptPath && get && h.passkeys != nil:
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		io.WriteString(w, script)
	case strings.HasPrefix(rest, enrolPath) && get && !strings.Contains(rest[len(enrolPath):], "/"):
		h.enrolPage(w, rest[len(enrolPath):])
	case strings.HasPrefix(rest, enrolPath) && post:
		token, step, _ := strings.Cut(rest[len(enrolPath):], "/")
		if step != "begin" && step != "finish" {
			h.render(w, http.StatusNotFound, page{Title: "Not found", Message: "There is nothing here."})
			return
		}
		h.ceremonyStep(w, r, "enrol", token, step)
	case strings.Contains(rest, passkeySuffix) && post:
		link, step, _ := strings.Cut(rest, passkeySuffix)
		if step != "begin" && step != "finish" {
			h.render(w, http.StatusNotFound, page{Title: "Not found", Message: "There is nothing here."})
			return
		}
		h.ceremonyStep(w, r, "signin", link, step)
	case strings.Contains(rest, "/") || rest == callbackPath || rest == scriptPath:
		h.render(w, http.StatusNotFound, page{Title: "Not found", Message: "There is nothing here."})
	case get:
		h.view(w, r, rest)
	case post:
		h.decide(w, r, rest)
	default:
		hd.Set("Allow", "GET, HEAD, POST")
		h.render(w, http.StatusMethodNotAllowed, page{Title: "Method not allowed", Message: "Use the page's buttons."})
	}
}

// notFound is the answer to a link this key did not make, or whose
// confirmation the ledger does not hold (never issued here, or
// forgotten after its expiry): the two are not told apart.
var notFound = page{Title: "No such request", Message: "This approval link names no request that can be shown: it was mistyped, or the request is long gone."}

// view serves GET on a link.
func (h *Handler) view(w http.ResponseWriter, r *http.Request, link string) {
	id, ok := h.keys.parseLink(link)
	if !ok {
		h.render(w, http.StatusNotFound, notFound)
		return
	}
	s, ok := h.session(r)
	if !ok {
		h.askSignIn(w, r, link, http.StatusOK)
		return
	}
	rec, err := h.ledger.Lookup(r.Context(), id)
	if err != nil {
		h.ledgerError(w, err)
		return
	}
	h.show(w, link, s, rec, "", http.StatusOK)
}

// decide serves POST on a link: an approver's decision.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, link string) {
	// Cross-site request forgery, first layer: a form posted from any
	// other origin (or one that hides its origin) is refused before
	// anything else is read. SameSite=Strict keeps the session cookie
	// off such a request too; the form token is the third layer.
	if !h.sameOrigin(r) {
		h.log.Warn("approve: cross-origin decision refused", "origin", r.Header.Get("Origin"), "sec-fetch-site", r.Header.Get("Sec-Fetch-Site"))
		h.render(w, http.StatusForbidden, page{Title: "Refused", Message: "A decision can only be sent from this page itself."})
		return
	}
	id, ok := h.keys.parseLink(link)
	if !ok {
		h.render(w, http.StatusNotFound, notFound)
		return
	}
	s, ok := h.session(r)
	if !ok {
		h.askSignIn(w, r, link, http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		h.render(w, http.StatusUnsupportedMediaType, page{Title: "Refused", Message: "A decision is sent by the page's form."})
		return
	}
	if err := r.ParseForm(); err != nil {
		h.render(w, http.StatusBadRequest, page{Title: "Refused", Message: "The form could not be read."})
		return
	}
	// Cross-site request forgery, third layer: the token binds the form
	// to this session and this link.
	if !hmac.Equal([]byte(r.PostForm.Get("token")), []byte(h.keys.formToken(s.SID, link))) {
		h.render(w, http.StatusForbidden, page{Title: "Refused", Message: "This form was not made for your session: reload the page and decide again."})
		return
	}
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "decline":
	default:
		h.render(w, http.StatusBadRequest, page{Title: "Refused", Message: "Choose Approve or Decline."})
		return
	}
	rec, err := h.ledger.Decide(r.Context(), id, s.approver(), approve)
	h.log.Info("approve: decision", "id", id, "approver", s.ID, "approve", approve, "result", string(ledger.ResultOf(err)))
	switch {
	case err == nil:
		// Post/redirect/get: a reload does not send the decision again.
		http.Redirect(w, r, h.prefix+link, http.StatusSeeOther)
	case errors.Is(err, ledger.ErrDecided):
		h.show(w, link, s, rec, "Your decision was not recorded: this request was decided already. What was recorded is below.", http.StatusConflict)
	case errors.Is(err, ledger.ErrExpired):
		h.show(w, link, s, rec, "Your decision was not recorded: the request expired.", http.StatusGone)
	case errors.Is(err, ledger.ErrCancelled):
		h.show(w, link, s, rec, "Your decision was not recorded: the request was withdrawn.", http.StatusConflict)
	default:
		h.ledgerError(w, err)
	}
}

// sameOrigin reports whether r comes from a page of this origin, by the
// headers browsers set and pages cannot: Origin (required) and, when
// sent, Sec-Fetch-Site. http.CrossOriginProtection is not used: it lets
// through a request that sends neither, and compares with the Host
// header, which a proxy in front may rewrite.
func (h *Handler) sameOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") != h.origin {
		return false
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "" || site == "same-origin"
}

// ledgerError answers an error of Lookup or Decide that shows no record.
func (h *Handler) ledgerError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ledger.ErrUnknown), errors.Is(err, ledger.ErrInBand):
		h.render(w, http.StatusNotFound, notFound)
	case errors.Is(err, ledger.ErrSelfApproval):
		h.render(w, http.StatusForbidden, page{Title: "Not yours to decide", Message: "You asked for this call: another approver must decide it."})
	case errors.Is(err, ledger.ErrNotApprover):
		h.render(w, http.StatusForbidden, page{Title: "Not yours to decide", Message: "You are not an approver of this request."})
	default:
		h.log.Error("approve: ledger", "err", err)
		h.render(w, http.StatusServiceUnavailable, page{Title: "Try again", Message: "The ledger did not answer. A decision you sent may or may not be recorded: reload the page to see."})
	}
}

// show renders rec as approver s sees it, with notice above it.
func (h *Handler) show(w http.ResponseWriter, link string, s session, rec ledger.Record, notice string, status int) {
	if rec.Approval == nil {
		h.ledgerError(w, ledger.ErrInBand)
		return
	}
	// Only approvers see the question: the link is in the MCP client's
	// hands, and signing in proves who someone is, not that the request
	// is theirs to see.
	if err := rec.Approval.Eligible(s.approver()); err != nil {
		h.ledgerError(w, err)
		return
	}
	now := h.now()
	p := page{
		Title:    "Approve this request?",
		Who:      segments(prompt.Value(s.ID, prompt.Options{})),
		Notice:   notice,
		Question: segments(rec.Approval.Question),
		Deadline: rec.Expires.UTC().Format(timeLayout),
		Required: rec.Approval.Required,
	}
	for _, d := range rec.Decisions {
		p.Decisions = append(p.Decisions, decisionView{
			Who:     segments(prompt.Value(d.Approver, prompt.Options{})),
			Approve: d.Approve,
			At:      d.At.UTC().Format(timeLayout),
			Mine:    d.Approver == s.ID,
		})
	}
	_, mine := rec.DecisionOf(s.ID)
	declined, isDeclined := rec.Declined()
	approvals := rec.Approvals()
	switch {
	case isDeclined:
		p.Outcome = "Declined at " + declined.At.UTC().Format(timeLayout) + ": it will not run."
	case approvals >= rec.Approval.Required:
		p.Outcome = "Approved: " + approvedState(rec.State)
	case rec.State == ledger.Cancelled:
		p.Outcome = "Withdrawn by the caller: it will not run."
	case !now.Before(rec.Expires):
		p.Outcome = "Expired: no decision can be recorded, and it will not run."
		p.Expired = true
	default:
		p.Outcome = fmt.Sprintf("Waiting for %d more approval(s).", rec.Approval.Required-approvals)
		if !mine {
			p.Form = true
			p.Action = h.prefix + link
			p.Token = h.keys.formToken(s.SID, link)
		}
	}
	h.render(w, status, p)
}

// approvedState says what became of an approved request.
func approvedState(s ledger.State) string {
	switch s {
	case ledger.Pending:
		return "the caller may now run it, once."
	case ledger.Acting:
		return "it is running."
	case ledger.Done:
		return "it ran."
	case ledger.Failed:
		return "it ran and failed."
	case ledger.InDoubt:
		return "it may or may not have run."
	}
	return "it will not run."
}

// timeLayout is how the page shows instants: UTC, to the second.
const timeLayout = "2006-01-02 15:04:05 UTC"

// A session is an approver signed in, as the session cookie holds it.
type session struct {
	SID    []byte   `json:"s"` // random: binds the form tokens to this sign-in
	ID     string   `json:"i"` // ledger.Approver.ID
	Groups []string `json:"g,omitempty"`
	Exp    int64    `json:"e"` // Unix seconds
}

func (s session) approver() ledger.Approver { return ledger.Approver{ID: s.ID, Groups: s.Groups} }

// Cookie purposes, authenticated in each sealed value.
const (
	purposeSession = "session"
	purposeSignIn  = "signin"
)

// cookieName returns the cookie's name: __Host- over https, so that no
// other host (a sibling subdomain) can set or shadow it.
func (h *Handler) cookieName(purpose string) string {
	if h.secure {
		return "__Host-mcp-confirm-" + purpose
	}
	return "mcp-confirm-" + purpose
}

// session returns the approver signed in by r's session cookie, if any
// is valid and unexpired.
func (h *Handler) session(r *http.Request) (session, bool) {
	var s session
	if !h.openCookie(r, purposeSession, &s) || s.ID == "" || len(s.SID) != 16 || h.now().Unix() >= s.Exp {
		return session{}, false
	}
	return s, true
}

// openCookie opens r's cookie for purpose into v.
func (h *Handler) openCookie(r *http.Request, purpose string, v any) bool {
	c, err := r.Cookie(h.cookieName(purpose))
	if err != nil {
		return false
	}
	plain, err := h.keys.open(purpose, c.Value)
	return err == nil && json.Unmarshal(plain, v) == nil
}

// setCookie seals v into the cookie for purpose, for ttl. The session
// is SameSite=Strict: no other site's page, link or form sends it. The
// sign-in cookie is Lax: it must come back with the issuer's redirect,
// a navigation from another site.
func (h *Handler) setCookie(w http.ResponseWriter, purpose string, v any, ttl time.Duration) error {
	plain, err := json.Marshal(v)
	if err != nil {
		return err
	}
	value := h.keys.seal(purpose, plain)
	if len(value) > maxCookie {
		return fmt.Errorf("approve: %s cookie of %d bytes: at most %d (too many groups?)", purpose, len(value), maxCookie)
	}
	same := http.SameSiteStrictMode
	if purpose == purposeSignIn {
		same = http.SameSiteLaxMode
	}
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(purpose), Value: value, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: h.secure, SameSite: same})
	return nil
}

// clearCookie removes the cookie for purpose.
func (h *Handler) clearCookie(w http.ResponseWriter, purpose string) {
	same := http.SameSiteStrictMode
	if purpose == purposeSignIn {
		same = http.SameSiteLaxMode
	}
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(purpose), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: h.secure, SameSite: same})
}

// askSignIn answers a request without a session: a link to sign in, and
// nothing of the request. Arriving from another site (a link in a chat
// or a mail), the SameSite=Strict session cookie was not sent even if
// there is one: the page reloads itself once, from this site, which
// sends it.
func (h *Handler) askSignIn(w http.ResponseWriter, r *http.Request, link string, status int) {
	p := page{Title: "Sign in to decide", Message: "Sign in to see this request and decide it."}
	if h.signIn != nil {
		p.SignIn = h.prefix + link + signInSuffix
	}
	if h.passkeys != nil {
		p.Passkey = &passkeyButton{Label: "Sign in with a passkey", Kind: "get",
			Begin: h.prefix + link + passkeySuffix + "begin", Finish: h.prefix + link + passkeySuffix + "finish"}
		p.Script = h.prefix + scriptPath
	}
	if status == http.StatusOK && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		p.Refresh = h.prefix + link
	}
	h.render(w, status, p)
}
