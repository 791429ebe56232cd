package approve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// OIDC configures the approvers' sign-in: OpenID Connect's authorization
// code flow with PKCE (S256), state and nonce, at one issuer.
type OIDC struct {
	// Issuer is the issuer identifier; its discovery document
	// (/.well-known/openid-configuration) names the endpoints. https
	// unless AllowHTTPIssuer.
	Issuer string
	// ClientID and ClientSecret are the page's client at the issuer,
	// whose redirect URI is [Handler.RedirectURL]. An empty secret: a
	// public client (PKCE alone authenticates the exchange).
	ClientID     string
	ClientSecret string
	// GroupsClaim, if set, names the ID token claim (a list of strings,
	// or one string) whose values become the approver's groups, each
	// named GroupPrefix + value. Empty: approvers are named by subject
	// only.
	GroupsClaim string
	// Scopes are requested besides "openid" (e.g. "groups", if the issuer
	// puts the groups claim behind a scope).
	Scopes []string
	// HTTPClient talks to the issuer. Default: one with a 10 s timeout.
	HTTPClient *http.Client
	// AllowHTTPIssuer accepts an http:// issuer. Insecure: whoever can
	// answer at that address (anyone on the path; on loopback, any local
	// user who binds the port while the issuer is down) signs in as any
	// approver. For tests.
	AllowHTTPIssuer bool
}

// signIn is the configured sign-in.
type signIn struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	groups   string
	client   *http.Client
}

// Why coreos/go-oidc and x/oauth2: they are the OpenID Connect client
// most Go services use (Kubernetes, Dex, oauth2-proxy), kept by their
// authors for a decade: discovery with the issuer checked, ID token
// verification on go-jose with the issuer's published algorithms, and
// x/oauth2's PKCE (GenerateVerifier, S256ChallengeOption). Their known
// weak spots do not reach here: go-oidc refetches the key set on every
// unknown key id, but the only ID tokens verified are those the issuer's
// token endpoint returned for a code, never one a browser sends.
func newSignIn(ctx context.Context, o OIDC, redirect string) (*signIn, error) {
	u, err := url.Parse(o.Issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return nil, fmt.Errorf("approve: OIDC issuer %q: want an https URL", o.Issuer)
	// Impersonation: whoever answers at an http issuer's address makes
	// ID tokens for any approver.
	case u.Scheme == "http" && !o.AllowHTTPIssuer:
		return nil, fmt.Errorf("approve: OIDC issuer %q: http needs AllowHTTPIssuer; use https", o.Issuer)
	case o.ClientID == "":
		return nil, errors.New("approve: OIDC: no client ID")
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, client), o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("approve: OIDC discovery at %s: %w", o.Issuer, err)
	}
	return &signIn{
		oauth: oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: redirect, Scopes: append([]string{oidc.ScopeOpenID}, o.Scopes...)},
		verifier: p.Verifier(&oidc.Config{ClientID: o.ClientID}),
		groups:   o.GroupsClaim,
		client:   client,
	}, nil
}

// pending is a sign-in on its way to the issuer and back, as the sign-in
// cookie holds it.
type pending struct {
	State    string `json:"s"` // login CSRF: the redirect back must carry it
	Nonce    string `json:"n"` // ID token replay: the token must carry it
	Verifier string `json:"v"` // PKCE: the code is useless without it
	Link     string `json:"l"` // where to go once signed in
	Exp      int64  `json:"e"`
}

// random returns n random bytes in base64url.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return b64.EncodeToString(b)
}

// startSignIn serves GET on a link's /signin: off to the issuer.
func (h *Handler) startSignIn(w http.ResponseWriter, r *http.Request, link string) {
	if _, ok := h.keys.parseLink(link); !ok {
		h.render(w, http.StatusNotFound, notFound)
		return
	}
	p := pending{State: random(16), Nonce: random(16), Verifier: oauth2.GenerateVerifier(), Link: link,
		Exp: h.now().Add(signInTTL).Unix()}
	if err := h.setCookie(w, purposeSignIn, p, signInTTL); err != nil {
		h.render(w, http.StatusInternalServerError, page{Title: "Sign-in failed", Message: "The sign-in could not be started."})
		return
	}
	to := h.signIn.oauth.AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// callback serves the issuer's redirect back: the code is exchanged
// (with the PKCE verifier) for an ID token, whose nonce must be the
// sign-in's, and the approver it names gets a session.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	var p pending
	ok := h.openCookie(r, purposeSignIn, &p)
	h.clearCookie(w, purposeSignIn)
	q := r.URL.Query()
	fail := func(status int, msg string, attrs ...any) {
		h.log.Warn("approve: sign-in refused: "+msg, attrs...)
		h.render(w, status, page{Title: "Sign-in failed", Message: "Sign-in failed: " + msg + "."})
	}
	switch {
	case !ok || h.now().Unix() >= p.Exp:
		fail(http.StatusBadRequest, "it was not started in this browser, or took too long; open the approval link again")
		return
	// Login CSRF: a redirect the sign-in did not start (another
	// person's code, sent to this browser) is refused.
	case !hmac.Equal([]byte(q.Get("state")), []byte(p.State)):
		fail(http.StatusBadRequest, "the issuer's answer does not belong to this sign-in")
		return
	case q.Get("error") != "":
		fail(http.StatusForbidden, "the issuer refused it", "error", q.Get("error"))
		return
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), h.signIn.client), 30*time.Second)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, h.signIn.client)
	tok, err := h.signIn.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.Verifier))
	if err != nil {
		fail(http.StatusBadGateway, "the issuer did not exchange the code", "err", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := h.signIn.verifier.Verify(ctx, raw)
	if err != nil {
		fail(http.StatusBadGateway, "the issuer's ID token did not verify", "err", err)
		return
	}
	// Replay: an ID token issued for another sign-in (its nonce) is
	// not this one's.
	if !hmac.Equal([]byte(idt.Nonce), []byte(p.Nonce)) {
		fail(http.StatusBadRequest, "the ID token belongs to another sign-in")
		return
	}
	a, err := h.signIn.approver(idt)
	if err != nil {
		fail(http.StatusForbidden, "the ID token does not name an approver", "err", err)
		return
	}
	s := session{SID: make([]byte, 16), ID: a.ID, Groups: a.Groups, Exp: h.now().Add(h.sessionTTL).Unix()}
	rand.Read(s.SID)
	if err := h.setCookie(w, purposeSession, s, h.sessionTTL); err != nil {
		fail(http.StatusForbidden, "the session would be too large for a cookie (too many groups)", "err", err)
		return
	}
	h.log.Info("approve: signed in", "approver", a.ID, "groups", len(a.Groups))
	// The session cookie is SameSite=Strict and this request came from
	// the issuer's site, so a redirect would still be cross-site and go
	// without it: the page is opened from here, this site, instead.
	h.render(w, http.StatusOK, page{Title: "Signed in", Message: "Signed in. Opening the request…",
		Refresh: h.prefix + p.Link, Continue: h.prefix + p.Link})
}

// approver returns the approver an ID token names: SubjectPrefix + its
// subject, and its groups.
func (s *signIn) approver(idt *oidc.IDToken) (ledger.Approver, error) {
	var claims struct {
		AZP string `json:"azp"`
	}
	if err := idt.Claims(&claims); err != nil {
		return ledger.Approver{}, err
	}
	// Token substitution: a token for several audiences must have been
	// issued to this client (OpenID Connect Core 3.1.3.7).
	if len(idt.Audience) > 1 && claims.AZP != s.oauth.ClientID {
		return ledger.Approver{}, fmt.Errorf("ID token for %d audiences, azp %q", len(idt.Audience), claims.AZP)
	}
	if idt.Subject == "" || !utf8.ValidString(idt.Subject) {
		return ledger.Approver{}, errors.New("no subject")
	}
	a := ledger.Approver{ID: SubjectPrefix + idt.Subject}
	if s.groups != "" {
		var all map[string]json.RawMessage
		if err := idt.Claims(&all); err != nil {
			return ledger.Approver{}, err
		}
		var groups []string
		if raw, ok := all[s.groups]; ok {
			var one string
			if json.Unmarshal(raw, &groups) != nil {
				if err := json.Unmarshal(raw, &one); err != nil {
					return ledger.Approver{}, fmt.Errorf("claim %q is neither a string nor a list of strings", s.groups)
				}
				groups = []string{one}
			}
		}
		for _, g := range groups {
			if g != "" && !slices.Contains(a.Groups, GroupPrefix+g) {
				a.Groups = append(a.Groups, GroupPrefix+g)
			}
		}
	}
	return a, a.Check()
}
