package bearer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"
)

// DefaultAlgorithms returns, in a new slice each time, the signature
// algorithms a [JWT] accepts unless told otherwise: asymmetric ones only.
// "none" and the HMAC algorithms are never accepted: with HMAC, a verifier
// handed the issuer's public key as the secret accepts tokens anyone can
// make.
func DefaultAlgorithms() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{
		jose.RS256, jose.RS384, jose.RS512,
		jose.PS256, jose.PS384, jose.PS512,
		jose.ES256, jose.ES384, jose.ES512,
		jose.EdDSA,
	}
}

// Defaults of [JWTOptions].
const (
	DefaultPrincipalClaim     = "sub"
	DefaultLeeway             = 30 * time.Second
	MaxLeeway                 = 5 * time.Minute
	DefaultRefreshInterval    = 15 * time.Minute
	DefaultUnknownKeyInterval = time.Minute
)

// maxTokenBytes bounds a token: a JWT of ordinary claims is a few KiB.
const maxTokenBytes = 16 << 10

// JWTOptions configures [NewJWT].
type JWTOptions struct {
	// Issuer is the authorization server's issuer identifier, an https URL
	// (http only on a loopback address); required. Its metadata is found
	// by RFC 8414 discovery, or else OpenID Connect Discovery, and must
	// name this very issuer.
	Issuer string
	// Audience is this resource's identifier (its public URL); required.
	// A token's aud must name it (RFC 8707, RFC 9068), compared as go-sdk's
	// oauthex.MatchesResource does: exactly, but for a trailing slash.
	// It stops a token issued for another service from being used here.
	Audience string
	// PrincipalClaim names the claim that says who the caller is, a
	// non-empty string. Default "sub".
	PrincipalClaim string
	// Algorithms are the signature algorithms accepted. Default
	// [DefaultAlgorithms]; "none" and HS* are refused even if listed.
	Algorithms []jose.SignatureAlgorithm
	// Leeway tolerates clock skew between the issuer and this server when
	// checking exp, nbf and iat. Default [DefaultLeeway], at most
	// [MaxLeeway].
	Leeway time.Duration
	// RefreshInterval is how old the cached JWKS may grow before the next
	// verification refetches it. Default [DefaultRefreshInterval].
	RefreshInterval time.Duration
	// UnknownKeyInterval spaces the refetches a token with an unknown kid
	// causes (a key just rotated in): at most one per interval, and a token
	// with an unknown kid beyond that is refused at once. Default
	// [DefaultUnknownKeyInterval].
	UnknownKeyInterval time.Duration
	// HTTPClient fetches the metadata and the JWKS. Default: a client with
	// a 10-second timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives failed JWKS refreshes; nil means slog.Default().
	Logger *slog.Logger
}

// JWT verifies access tokens issued as JWTs by one authorization server.
// It is safe for concurrent use and starts no goroutines.
type JWT struct {
	issuer, audience, claim string
	algs                    []jose.SignatureAlgorithm
	leeway                  time.Duration
	now                     func() time.Time
	keys                    *keySet
	jwksURI                 string
}

// NewJWT discovers the issuer's metadata and fetches its JWKS: an issuer
// that cannot be reached, or whose metadata or keys are unusable, is an
// error here, at start-up, not at the first token.
func NewJWT(ctx context.Context, opts JWTOptions) (*JWT, error) {
	if err := checkFetchURL(opts.Issuer); err != nil {
		return nil, fmt.Errorf("bearer: issuer: %w", err)
	}
	if u, _ := url.Parse(opts.Issuer); u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("bearer: issuer %q: an issuer has no query or fragment (RFC 8414)", opts.Issuer)
	}
	if opts.Audience == "" {
		return nil, errors.New("bearer: no audience: tokens must name this resource")
	}
	j := &JWT{
		issuer:   opts.Issuer,
		audience: opts.Audience,
		claim:    opts.PrincipalClaim,
		leeway:   opts.Leeway,
		now:      opts.Now,
	}
	if j.claim == "" {
		j.claim = DefaultPrincipalClaim
	}
	if j.leeway == 0 {
		j.leeway = DefaultLeeway
	}
	if j.leeway < 0 || j.leeway > MaxLeeway {
		return nil, fmt.Errorf("bearer: leeway %v: want between 0 and %v", j.leeway, MaxLeeway)
	}
	if j.now == nil {
		j.now = time.Now
	}
	algs := opts.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms()
	}
	for _, a := range algs {
		if !asymmetric(a) {
			return nil, fmt.Errorf("bearer: algorithm %q: only asymmetric signatures are accepted", a)
		}
	}
	// A copy: stops the caller's later write to its slice from widening
	// the allowlist past the check above.
	j.algs = slices.Clone(algs)
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: fetchTimeout}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	refresh, unknown := opts.RefreshInterval, opts.UnknownKeyInterval
	if refresh <= 0 {
		refresh = DefaultRefreshInterval
	}
	if unknown <= 0 {
		unknown = DefaultUnknownKeyInterval
	}
	var err error
	if j.jwksURI, err = discover(ctx, client, opts.Issuer); err != nil {
		return nil, fmt.Errorf("bearer: issuer %s: %w", opts.Issuer, err)
	}
	j.keys = &keySet{
		url:     j.jwksURI,
		client:  client,
		maxAge:  refresh,
		unknown: rate.NewLimiter(rate.Every(unknown), 1),
		now:     j.now,
		log:     log,
	}
	if err := j.keys.refresh(ctx); err != nil {
		return nil, fmt.Errorf("bearer: issuer %s: %w", opts.Issuer, err)
	}
	return j, nil
}

// JWKSURI returns where the issuer's keys were found.
func (j *JWT) JWKSURI() string { return j.jwksURI }

// Issuer returns the issuer whose tokens j accepts.
func (j *JWT) Issuer() string { return j.issuer }

// asymmetric reports whether a is one of the algorithms of
// [DefaultAlgorithms]. A fresh list each call: no global a package could
// append HS256 to.
func asymmetric(a jose.SignatureAlgorithm) bool {
	return slices.Contains(DefaultAlgorithms(), a)
}

// Reasons a token is refused, wrapped in auth.ErrInvalidToken. They name
// the check that failed, never the key material or the library's words.
var (
	ErrMalformed   = fmt.Errorf("%w: not a JWS-signed JWT in compact form, or its algorithm is not allowed", auth.ErrInvalidToken)
	ErrUnknownKey  = fmt.Errorf("%w: signed with a key the issuer does not publish", auth.ErrInvalidToken)
	ErrSignature   = fmt.Errorf("%w: signature does not verify", auth.ErrInvalidToken)
	ErrIssuer      = fmt.Errorf("%w: issued by another issuer", auth.ErrInvalidToken)
	ErrAudience    = fmt.Errorf("%w: not issued for this resource", auth.ErrInvalidToken)
	ErrExpired     = fmt.Errorf("%w: expired, or without an expiry", auth.ErrInvalidToken)
	ErrNotYetValid = fmt.Errorf("%w: not valid yet", auth.ErrInvalidToken)
	ErrPrincipal   = fmt.Errorf("%w: no usable principal claim", auth.ErrInvalidToken)
)

// Verify implements auth.TokenVerifier.
func (j *JWT) Verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if len(token) > maxTokenBytes {
		return nil, ErrMalformed
	}
	// Exact form first: canonical base64url, exact JSON. go-jose alone
	// accepts both, and would let what reads the token and what was
	// signed disagree.
	if err := exactForm(token); err != nil {
		return nil, ErrMalformed
	}
	// The allow-list is checked here, before any key is looked at.
	tok, err := jwt.ParseSigned(token, j.algs)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrMalformed
	}
	h := tok.Headers[0]
	key, err := j.keys.key(ctx, h.KeyID)
	if err != nil {
		return nil, ErrUnknownKey
	}
	// A key the issuer published for one algorithm is used for no other.
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return nil, ErrSignature
	}
	var payload json.RawMessage
	if err := tok.Claims(key, &payload); err != nil {
		return nil, ErrSignature
	}
	// Claims by their exact names, from a map: encoding/json matches a
	// struct's fields case-insensitively, so a past "exp" beside a future
	// "EXP", or a wrong "aud" beside a right "Aud", would pass. (exactForm
	// refused duplicate names, so no claim can hide behind a later one.)
	// A claim of a type the checks do not expect elsewhere (a numeric sub)
	// is not a decoding error.
	var all map[string]json.RawMessage
	if json.Unmarshal(payload, &all) != nil {
		return nil, ErrMalformed
	}
	var claims jwt.Claims
	for name, dst := range map[string]any{
		"iss": &claims.Issuer, "aud": &claims.Audience,
		"exp": &claims.Expiry, "nbf": &claims.NotBefore, "iat": &claims.IssuedAt,
	} {
		if raw, ok := all[name]; ok && json.Unmarshal(raw, dst) != nil {
			return nil, ErrMalformed
		}
	}
	if claims.Expiry == nil {
		return nil, ErrExpired
	}
	switch err := claims.ValidateWithLeeway(jwt.Expected{Issuer: j.issuer, Time: j.now()}, j.leeway); {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, ErrIssuer
	case errors.Is(err, jwt.ErrExpired):
		return nil, ErrExpired
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, ErrNotYetValid
	case err != nil:
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if !oauthex.MatchesResource(claims.Audience, j.audience) {
		return nil, ErrAudience
	}
	var principal string
	if raw, ok := all[j.claim]; !ok || json.Unmarshal(raw, &principal) != nil || checkPrincipal(principal) != nil {
		return nil, ErrPrincipal
	}
	return &auth.TokenInfo{
		UserID:     principal,
		Scopes:     scopes(all),
		Expiration: claims.Expiry.Time(),
	}, nil
}

// exactForm checks that token is three parts of canonical base64url
// (RFC 7515's unpadded alphabet, unused bits zero, no line breaks, which
// Go's decoder would skip) and that its header and payload are UTF-8 JSON
// objects in which no object, at any depth, names a member twice.
func exactForm(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not three parts")
	}
	for i, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		// Stops token malleability: two strings differing in a part's
		// unused trailing bits, or in a line break, decode the same and
		// would both verify.
		if err != nil || base64.RawURLEncoding.EncodeToString(b) != p {
			return fmt.Errorf("part %d: not canonical base64url", i)
		}
		if i < 2 {
			if err := exactJSON(b); err != nil {
				return fmt.Errorf("part %d: %w", i, err)
			}
		}
	}
	return nil
}

// exactJSON checks that b is one UTF-8 JSON object in which no object
// names a member twice, comparing names by their decoded text. RFC 7515
// and RFC 7519 let a parser take the last of two names or refuse; taking
// one when another part of a system takes the other is how a claim or a
// header parameter hides.
func exactJSON(b []byte) error {
	if !utf8.Valid(b) || !json.Valid(b) {
		return errors.New("not UTF-8 JSON")
	}
	type object struct {
		names   map[string]bool
		wantKey bool
	}
	var stack []*object // nil entries are arrays
	done := func() {    // a value ended: its object's next token is a name
		if n := len(stack); n > 0 && stack[n-1] != nil {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if first && tok != json.Delim('{') {
			return errors.New("not a JSON object")
		}
		if n := len(stack); n > 0 && stack[n-1] != nil && stack[n-1].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				done()
				continue
			}
			name := tok.(string) // json.Valid: a name is all that can stand here
			if stack[n-1].names[name] {
				return fmt.Errorf("member name %q twice", name)
			}
			stack[n-1].names[name], stack[n-1].wantKey = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{names: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, nil)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
	}
}

// scopes reads the token's scopes: "scope", a space-separated string (RFC
// 9068, RFC 8693), or "scp", a list or a string (as Microsoft Entra and
// Okta issue them).
func scopes(claims map[string]json.RawMessage) []string {
	var scope, scp any
	json.Unmarshal(claims["scope"], &scope) // absent or not JSON: nil
	json.Unmarshal(claims["scp"], &scp)
	if s, ok := scope.(string); ok {
		return strings.Fields(s)
	}
	switch v := scp.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// discover finds the issuer's jwks_uri: in its RFC 8414 metadata, else its
// OpenID Connect configuration (at the path inserted after the host, as
// RFC 8414 places it, then appended to the issuer, as OpenID Connect
// Discovery does). The first document found decides; its issuer must be
// the issuer, character for character (RFC 8414 §3.3), or a document
// someone else serves could name keys of its own.
func discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	u, _ := url.Parse(issuer)
	origin, path := u.Scheme+"://"+u.Host, strings.TrimSuffix(u.Path, "/")
	candidates := []string{origin + "/.well-known/oauth-authorization-server" + path}
	if path != "" {
		candidates = append(candidates, origin+"/.well-known/openid-configuration"+path)
	}
	candidates = append(candidates, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration")
	var tried []string
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		err := getJSON(ctx, client, c, 1<<20, &meta)
		cancel()
		if se, ok := errors.AsType[*statusError](err); ok && se.code >= 400 && se.code < 500 {
			tried = append(tried, fmt.Sprintf("%s (%d)", c, se.code))
			continue
		}
		if err != nil {
			return "", fmt.Errorf("metadata: %w", err)
		}
		if meta.Issuer != issuer {
			return "", fmt.Errorf("metadata at %s names issuer %q, not %q", c, meta.Issuer, issuer)
		}
		if err := checkFetchURL(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("metadata at %s: jwks_uri: %w", c, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no authorization server metadata: tried %s", strings.Join(tried, ", "))
}

// checkFetchURL accepts an https URL, or an http one on a loopback
// address: keys fetched in the clear from elsewhere could be anyone's.
func checkFetchURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q: want https (http only on a loopback address)", raw)
}

// loopback reports whether host is a loopback address or "localhost".
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
