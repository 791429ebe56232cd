package approve

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"golang.org/x/sys/unix"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

// Passkeys configures the approvers' second way to sign in: a passkey
// (WebAuthn, discoverable, user verification required), enrolled through a
// one-time link ([EnrolLink]) for a [Holder]. Signed in with it, the
// holder is [SubjectPrefix] + their Principal, a member of the group
// [PasskeyPrefix] + its Name; or, for a holder who makes no MCP calls,
// [PasskeyPrefix] + its Name.
type Passkeys struct {
	// File keeps the enrolled passkeys (their public keys, one JSON line
	// each): the page creates it (mode 0600) and appends to it, and reads
	// it at each passkey sign-in. Replicas must share it (one host, or a
	// shared file system with working flock). It must be a regular file
	// (not a symbolic link) of the server's user or root that group and
	// others may not write: whoever can write it can add a passkey. The
	// page refuses any other.
	File string
	// DisplayName is the relying party's name authenticators show.
	// Default "mcp-confirm".
	DisplayName string
}

// PasskeyPrefix names the passkeys approvers may be listed by:
// "passkey:" + the name it was enrolled as.
const PasskeyPrefix = "passkey:"

// A Holder is the person a passkey is enrolled for, by [EnrolLink].
//
// A passkey names its holder's MCP principal so that its holder is
// excluded from approving their own calls: the flow names a call's
// requester [SubjectPrefix] + the caller's principal
// (confirm.Options.Requester), and a passkey with no principal could not
// be matched against it, whoever holds it. Exactly one of Principal and
// NotCaller is set; a passkey enrolled with neither (before passkeys
// named their holder) signs no one in.
type Holder struct {
	// Name is the passkey's name, which approvers list as PasskeyPrefix +
	// Name: 1 to 128 bytes of UTF-8.
	Name string
	// Principal is the principal the holder's own MCP calls carry (their
	// bearer token's subject). Signed in with the passkey, the holder is
	// SubjectPrefix + Principal: the requester of those calls, who never
	// approves them, and the same approver as their sign-in at the issuer
	// (a subject whose tokens carry the same principal), so that one
	// person counts once towards the approvals a call needs.
	Principal string
	// NotCaller says the holder makes no MCP calls at all (holds no
	// token the front door accepts): signed in with the passkey, they
	// are PasskeyPrefix + Name, whom no requester is. Anyone who is both
	// must be enrolled with Principal: a NotCaller passkey of a caller
	// approves that caller's own calls.
	NotCaller bool
}

// check reports whether h can be enrolled.
func (h Holder) check() error {
	switch {
	case h.Name == "" || len(h.Name) > maxEnrolName || !utf8.ValidString(h.Name):
		return fmt.Errorf("approve: passkey name of %d bytes: want 1 to %d of UTF-8", len(h.Name), maxEnrolName)
	// Self-approval: a passkey whose holder's principal is unknown
	// cannot be excluded from approving its holder's own calls.
	case h.Principal == "" && !h.NotCaller:
		return errors.New("approve: passkey holder: name the principal of their MCP calls, or say they make none (NotCaller)")
	case h.Principal != "" && h.NotCaller:
		return errors.New("approve: passkey holder: a principal and NotCaller: choose one")
	case len(SubjectPrefix+h.Principal) > ledger.MaxName || !utf8.ValidString(h.Principal):
		return fmt.Errorf("approve: passkey holder's principal of %d bytes: want at most %d of UTF-8", len(h.Principal), ledger.MaxName-len(SubjectPrefix))
	}
	return nil
}

// approver is who signs in with a passkey enrolled for h.
func (h Holder) approver() (ledger.Approver, error) {
	if err := h.check(); err != nil {
		return ledger.Approver{}, err
	}
	if h.NotCaller {
		return ledger.Approver{ID: PasskeyPrefix + h.Name}, nil
	}
	return ledger.Approver{ID: SubjectPrefix + h.Principal, Groups: []string{PasskeyPrefix + h.Name}}, nil
}

// Why go-webauthn: it is the maintained Go WebAuthn relying party (a
// fork of duo-labs/webauthn, which it replaced), and it checks what a
// hand-written verifier gets wrong: the client data's type, challenge
// and origin, the RP ID hash, the user-present and user-verified flags,
// the signature under the enrolled public key, and the attestation
// formats.

// maxEnrolName bounds a passkey's name.
const maxEnrolName = 128

// enrolment is what an enrolment link holds, sealed.
type enrolment struct {
	Name      string `json:"n"`
	Principal string `json:"p,omitempty"`
	NotCaller bool   `json:"c,omitempty"`
	Nonce     []byte `json:"x"` // one-time: recorded with the passkey it enrolled
	Exp       int64  `json:"e"`
}

func (e enrolment) holder() Holder {
	return Holder{Name: e.Name, Principal: e.Principal, NotCaller: e.NotCaller}
}

// purposeEnrol seals enrolment links; purposeCeremony the WebAuthn
// ceremony in flight (its challenge).
const (
	purposeEnrol    = "enrol"
	purposeCeremony = "ceremony"
)

// EnrolLink returns a link that enrols one passkey for its holder h,
// once, before ttl has passed: for `mcp-confirm approvers add`. key and
// publicURL are the page's [Options.Key] and [Options.PublicURL].
// Whoever opens the link first enrols: send it to the person only.
func EnrolLink(key []byte, publicURL string, h Holder, ttl time.Duration) (string, error) {
	if err := h.check(); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", fmt.Errorf("approve: enrolment TTL %v: want positive", ttl)
	}
	base, _, _, err := checkPublicURL(publicURL)
	if err != nil {
		return "", err
	}
	k, err := deriveKeys(key)
	if err != nil {
		return "", err
	}
	e := enrolment{Name: h.Name, Principal: h.Principal, NotCaller: h.NotCaller, Nonce: make([]byte, 16), Exp: time.Now().Add(ttl).Unix()}
	rand.Read(e.Nonce)
	plain, _ := json.Marshal(e)
	return base + "/approve/" + enrolPath + k.seal(purposeEnrol, plain), nil
}

// enrolPath is where enrolment links live under the prefix.
const enrolPath = "enrol/"

// A passkey is one enrolled credential, as a line of Passkeys.File.
type passkey struct {
	Name       string              `json:"name"`
	Principal  string              `json:"principal,omitempty"` // Holder.Principal
	NotCaller  bool                `json:"notCaller,omitempty"` // Holder.NotCaller
	Handle     []byte              `json:"handle"`              // the WebAuthn user handle: random per enrolment
	Enrolment  []byte              `json:"enrolment"`           // the nonce of the link that enrolled it
	Credential webauthn.Credential `json:"credential"`
}

// passkeyUser is a webauthn.User: one enrolment's name, handle and
// credential.
type passkeyUser struct {
	name   string
	handle []byte
	creds  []webauthn.Credential
}

func (u *passkeyUser) WebAuthnID() []byte                         { return u.handle }
func (u *passkeyUser) WebAuthnName() string                       { return u.name }
func (u *passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// passkeys is the configured passkey sign-in.
type passkeys struct {
	wa   *webauthn.WebAuthn
	file string
	mu   sync.Mutex // with flock on the file: one enrolment at a time
}

func newPasskeys(p *Passkeys, origin, host string) (*passkeys, error) {
	if p.File == "" {
		return nil, errors.New("approve: passkeys: no file")
	}
	name := p.DisplayName
	if name == "" {
		name = "mcp-confirm"
	}
	wa, err := webauthn.New(&webauthn.Config{RPID: host, RPDisplayName: name, RPOrigins: []string{origin}})
	if err != nil {
		return nil, fmt.Errorf("approve: passkeys: %w", err)
	}
	pk := &passkeys{wa: wa, file: p.File}
	// Self-approval: a passkey that does not say whose calls are its
	// holder's could approve them; refuse to start rather than let its
	// every sign-in fail later.
	all, err := pk.load()
	if err != nil {
		return nil, err
	}
	for _, k := range all {
		if err := k.holder().check(); err != nil {
			return nil, fmt.Errorf("approve: passkeys file %s: passkey %q names no holder (%w): enrol it again with a principal or as not a caller, and delete its line", p.File, k.Name, err)
		}
	}
	return pk, nil
}

// holder is whom k was enrolled for.
func (k passkey) holder() Holder {
	return Holder{Name: k.Name, Principal: k.Principal, NotCaller: k.NotCaller}
}

// open opens the passkeys file with flag and checks it: a regular file of
// this user's or root's that group and others may not write, in
// directories they may not write either.
func (p *passkeys) open(flag int) (*os.File, error) {
	// Planted passkeys: another user who may write a directory above
	// could rename a file of theirs into place. Checked before an add
	// creates the file.
	if err := ownfile.Dirs(p.file); err != nil {
		return nil, fmt.Errorf("approve: passkeys file: %w", err)
	}
	// O_NOFOLLOW: another local user's symlink must not choose the file
	// (nor, on an add, create one where it points). O_NONBLOCK: a FIFO
	// there must not hold the open; it is refused below.
	f, err := os.OpenFile(p.file, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	// Planted passkeys: a file others can write lets them add one.
	if err := ownfile.Check(f, ownfile.Options{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("approve: passkeys file: %w", err)
	}
	return f, nil
}

// load returns every enrolled passkey. A missing file holds none.
func (p *passkeys) load() ([]passkey, error) {
	f, err := p.open(os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	var all []passkey
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var k passkey
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			return nil, fmt.Errorf("approve: passkeys file %s: %w", p.file, err)
		}
		all = append(all, k)
	}
	return all, sc.Err()
}

// errEnrolled refuses a second use of an enrolment link.
var errEnrolled = errors.New("approve: this enrolment link was used already")

// add records k unless its enrolment nonce is recorded already: under a
// lock on the file, so that of two replicas finishing the same link at
// once, one enrols.
func (p *passkeys) add(k passkey) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := p.open(os.O_RDWR | os.O_CREATE | os.O_APPEND)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	all, err := p.load()
	if err != nil {
		return err
	}
	for _, o := range all {
		if bytes.Equal(o.Enrolment, k.Enrolment) {
			return errEnrolled
		}
	}
	line, err := json.Marshal(k)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// used reports whether the enrolment nonce enrolled a passkey already.
func (p *passkeys) used(nonce []byte) (bool, error) {
	all, err := p.load()
	for _, o := range all {
		if bytes.Equal(o.Enrolment, nonce) {
			return true, err
		}
	}
	return false, err
}

// ceremony is a WebAuthn ceremony in flight, as its cookie holds it.
type ceremony struct {
	Session webauthn.SessionData `json:"s"`
	Handle  []byte               `json:"h,omitempty"` // registration: the new user handle
	Exp     int64                `json:"e"`
}

// ceremonyTTL bounds a ceremony from its options to its answer.
const ceremonyTTL = 5 * time.Minute

// maxCeremonyBody bounds a ceremony's answer (a credential's JSON).
const maxCeremonyBody = 64 << 10

// enrolment returns the enrolment a link's token holds, if it is valid
// and unexpired.
func (h *Handler) enrolment(token string) (enrolment, bool) {
	var e enrolment
	plain, err := h.keys.open(purposeEnrol, token)
	if err != nil || json.Unmarshal(plain, &e) != nil || e.holder().check() != nil || len(e.Nonce) != 16 || h.now().Unix() >= e.Exp {
		return enrolment{}, false
	}
	return e, true
}

// enrolPage serves GET on an enrolment link.
func (h *Handler) enrolPage(w http.ResponseWriter, token string) {
	e, ok := h.enrolment(token)
	if !ok || h.passkeys == nil {
		h.render(w, http.StatusNotFound, page{Title: "No such enrolment", Message: "This enrolment link is invalid or has expired: ask for a new one."})
		return
	}
	if used, err := h.passkeys.used(e.Nonce); err != nil || used {
		h.render(w, http.StatusGone, page{Title: "Enrolment used", Message: "This enrolment link was used already: ask for a new one."})
		return
	}
	a, _ := e.holder().approver()
	h.render(w, http.StatusOK, page{Title: "Create a passkey", Message: "Create a passkey to approve requests as " + PasskeyPrefix + e.Name + "." + youAre(a),
		Passkey: &passkeyButton{Label: "Create a passkey", Kind: "create", Begin: h.prefix + enrolPath + token + "/begin",
			Finish: h.prefix + enrolPath + token + "/finish"}, Script: h.prefix + scriptPath})
}

// passkeyJSON answers a ceremony step with JSON.
func passkeyJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ceremonyStep serves the POSTs of the WebAuthn ceremonies: kind
// "enrol" (token: the enrolment link's) or "signin" (token: the approval
// link's), step "begin" or "finish".
func (h *Handler) ceremonyStep(w http.ResponseWriter, r *http.Request, kind, token, step string) {
	fail := func(status int, msg string, attrs ...any) {
		h.log.Warn("approve: passkey refused: "+msg, attrs...)
		passkeyJSON(w, status, map[string]string{"error": msg})
	}
	// Cross-site request forgery: a ceremony is begun and finished by
	// this page's own script only.
	if !h.sameOrigin(r) {
		fail(http.StatusForbidden, "a passkey can only be used from this page itself")
		return
	}
	if h.passkeys == nil {
		fail(http.StatusNotFound, "passkeys are not configured")
		return
	}
	var e enrolment
	switch kind {
	case "enrol":
		var ok bool
		if e, ok = h.enrolment(token); !ok {
			fail(http.StatusNotFound, "this enrolment link is invalid or has expired")
			return
		}
		if used, err := h.passkeys.used(e.Nonce); err != nil || used {
			fail(http.StatusGone, "this enrolment link was used already")
			return
		}
	default:
		if _, ok := h.keys.parseLink(token); !ok {
			fail(http.StatusNotFound, "no such request")
			return
		}
	}
	if step == "begin" {
		var c ceremony
		var opts any
		var err error
		var session *webauthn.SessionData
		if kind == "enrol" {
			c.Handle = make([]byte, 32)
			rand.Read(c.Handle)
			opts, session, err = h.passkeys.wa.BeginRegistration(&passkeyUser{name: e.Name, handle: c.Handle},
				webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
					ResidentKey: protocol.ResidentKeyRequirementRequired, UserVerification: protocol.VerificationRequired}))
		} else {
			opts, session, err = h.passkeys.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
		}
		if err != nil {
			fail(http.StatusInternalServerError, "the ceremony could not begin", "err", err)
			return
		}
		c.Session, c.Exp = *session, h.now().Add(ceremonyTTL).Unix()
		if err := h.setCookie(w, purposeCeremony, c, ceremonyTTL); err != nil {
			fail(http.StatusInternalServerError, "the ceremony could not begin", "err", err)
			return
		}
		passkeyJSON(w, http.StatusOK, opts)
		return
	}
	var c ceremony
	ok := h.openCookie(r, purposeCeremony, &c)
	h.clearCookie(w, purposeCeremony)
	// Replay: the answer must sign this browser's challenge, once.
	if !ok || h.now().Unix() >= c.Exp {
		fail(http.StatusBadRequest, "the passkey ceremony was not begun in this browser, or took too long")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCeremonyBody)
	if kind == "enrol" {
		u := &passkeyUser{name: e.Name, handle: c.Handle}
		cred, err := h.passkeys.wa.FinishRegistration(u, c.Session, r)
		if err != nil {
			fail(http.StatusBadRequest, "the passkey was not accepted", "err", err)
			return
		}
		switch err := h.passkeys.add(passkey{Name: e.Name, Principal: e.Principal, NotCaller: e.NotCaller, Handle: c.Handle, Enrolment: e.Nonce, Credential: *cred}); {
		case errors.Is(err, errEnrolled):
			fail(http.StatusGone, "this enrolment link was used already")
			return
		case err != nil:
			fail(http.StatusInternalServerError, "the passkey could not be kept", "err", err)
			return
		}
		a, _ := e.holder().approver()
		h.log.Info("approve: passkey enrolled", "passkey", PasskeyPrefix+e.Name, "approver", a.ID)
		passkeyJSON(w, http.StatusOK, map[string]string{"message": "Passkey created: you can approve requests as " + PasskeyPrefix + e.Name + "." + youAre(a)})
		return
	}
	all, err := h.passkeys.load()
	if err != nil {
		fail(http.StatusInternalServerError, "the passkeys could not be read", "err", err)
		return
	}
	var found passkey
	_, _, err = h.passkeys.wa.FinishPasskeyLogin(func(rawID, handle []byte) (webauthn.User, error) {
		for _, k := range all {
			if bytes.Equal(k.Handle, handle) && bytes.Equal(k.Credential.ID, rawID) {
				found = k
				return &passkeyUser{name: k.Name, handle: k.Handle, creds: []webauthn.Credential{k.Credential}}, nil
			}
		}
		return nil, errors.New("no such passkey")
	}, c.Session, r)
	if err != nil {
		fail(http.StatusForbidden, "the passkey was not accepted", "err", err)
		return
	}
	// Self-approval: the holder is named as the flow names the requester
	// of their own calls; a passkey whose holder is unknown signs no one in.
	a, err := found.holder().approver()
	if err != nil {
		fail(http.StatusForbidden, "this passkey names no holder: enrol it again (mcp-confirm approvers add --principal or --not-a-caller)", "passkey", PasskeyPrefix+found.Name, "err", err)
		return
	}
	s := session{SID: make([]byte, 16), ID: a.ID, Groups: a.Groups, Exp: h.now().Add(h.sessionTTL).Unix()}
	rand.Read(s.SID)
	if err := h.setCookie(w, purposeSession, s, h.sessionTTL); err != nil {
		fail(http.StatusInternalServerError, "the session could not be made", "err", err)
		return
	}
	h.log.Info("approve: signed in", "approver", a.ID, "with", PasskeyPrefix+found.Name)
	passkeyJSON(w, http.StatusOK, map[string]string{"redirect": h.prefix + token})
}

// youAre tells a passkey's holder, enrolled for their principal, who they
// are once signed in with it ("" for a holder who makes no calls).
func youAre(a ledger.Approver) string {
	if len(a.Groups) == 0 {
		return ""
	}
	return " Signed in with it, you are " + a.ID + ", who never approves their own calls."
}
