package bearer_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
)

const resource = "https://files.example.com/mcp"

func newJWT(t *testing.T, is *issuer, opts bearer.JWTOptions) *bearer.JWT {
	t.Helper()
	opts.Issuer = is.url
	if opts.Audience == "" {
		opts.Audience = resource
	}
	j, err := bearer.NewJWT(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewJWT: %v", err)
	}
	return j
}

// TestJWTRefusals signs what a real authorization server will not issue
// and checks each is refused for its own reason, beside the good token it
// was made from (the negative control: the same verifier accepts it).
func TestJWTRefusals(t *testing.T) {
	k1, k2 := newRSASigner("k1", 0), newECSigner(t, "k2")
	is := newIssuer(t, "", k1, k2)
	j := newJWT(t, is, bearer.JWTOptions{})
	other := newRSASigner("k1", 1) // another key under the same kid
	pubDER, err := x509.MarshalPKIXPublicKey(rsaKey(0).Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	with := func(change func(c map[string]any)) map[string]any {
		c := is.claims(resource)
		change(c)
		return c
	}
	now := time.Now()
	hs256 := func(secret []byte) string {
		// HMAC over the token, the issuer's public key as the secret: what
		// a verifier that lets the token pick its algorithm would accept.
		h := map[string]any{"alg": "HS256", "typ": "JWT", "kid": "k1"}
		head := unsigned(t, h, is.claims(resource), nil)
		signing := head[:strings.LastIndex(head, ".")]
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(signing))
		return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	tests := []struct {
		name  string
		token string
		want  error // nil: accepted
	}{
		{"good, RS256", sign(t, k1, is.claims(resource)), nil},
		{"good, ES256", sign(t, k2, is.claims(resource)), nil},
		{"audience with a trailing slash", sign(t, k1, with(func(c map[string]any) { c["aud"] = resource + "/" })), nil},
		{"audience in a list", sign(t, k1, with(func(c map[string]any) { c["aud"] = []string{"https://other.example.com", resource} })), nil},
		{"expired within the leeway", sign(t, k1, with(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })), nil},
		{"forged signature", sign(t, other, is.claims(resource)), bearer.ErrSignature},
		{"signature of other claims", func() string {
			good := strings.Split(sign(t, k1, is.claims(resource)), ".")
			evil := strings.Split(sign(t, k1, with(func(c map[string]any) { c["sub"] = "root" })), ".")
			return good[0] + "." + evil[1] + "." + good[2]
		}(), bearer.ErrSignature},
		{"alg none", unsigned(t, map[string]any{"alg": "none", "kid": "k1"}, is.claims(resource), nil), bearer.ErrMalformed},
		{"alg none, no signature part", strings.TrimSuffix(unsigned(t, map[string]any{"alg": "none"}, is.claims(resource), nil), "."), bearer.ErrMalformed},
		{"HS256 keyed with the public key (PEM)", hs256(pubPEM), bearer.ErrMalformed},
		{"HS256 keyed with the public key (DER)", hs256(pubDER), bearer.ErrMalformed},
		{"key published for RS256 used with PS256", sign(t, signer{kid: "k1", alg: jose.PS256, key: rsaKey(0)}, is.claims(resource)), bearer.ErrSignature},
		{"wrong issuer", sign(t, k1, with(func(c map[string]any) { c["iss"] = "https://evil.example.com" })), bearer.ErrIssuer},
		{"issuer with a trailing slash", sign(t, k1, with(func(c map[string]any) { c["iss"] = is.url + "/" })), bearer.ErrIssuer},
		{"wrong audience", sign(t, k1, with(func(c map[string]any) { c["aud"] = "https://other.example.com/mcp" })), bearer.ErrAudience},
		{"audience of another path", sign(t, k1, with(func(c map[string]any) { c["aud"] = resource + "/admin" })), bearer.ErrAudience},
		{"no audience", sign(t, k1, with(func(c map[string]any) { delete(c, "aud") })), bearer.ErrAudience},
		{"expired", sign(t, k1, with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), bearer.ErrExpired},
		{"no expiry", sign(t, k1, with(func(c map[string]any) { delete(c, "exp") })), bearer.ErrExpired},
		{"not yet valid", sign(t, k1, with(func(c map[string]any) { c["nbf"] = now.Add(2 * time.Minute).Unix() })), bearer.ErrNotYetValid},
		{"issued in the future", sign(t, k1, with(func(c map[string]any) { c["iat"] = now.Add(2 * time.Minute).Unix() })), bearer.ErrNotYetValid},
		{"unknown kid", sign(t, newRSASigner("k9", 1), is.claims(resource)), bearer.ErrUnknownKey},
		{"no kid, two keys published", sign(t, signer{alg: jose.RS256, key: rsaKey(0)}, is.claims(resource)), bearer.ErrUnknownKey},
		{"no principal", sign(t, k1, with(func(c map[string]any) { delete(c, "sub") })), bearer.ErrPrincipal},
		{"empty principal", sign(t, k1, with(func(c map[string]any) { c["sub"] = "" })), bearer.ErrPrincipal},
		{"principal not a string", sign(t, k1, with(func(c map[string]any) { c["sub"] = 42 })), bearer.ErrPrincipal},
		{"principal with a newline", sign(t, k1, with(func(c map[string]any) { c["sub"] = "alice\nbob" })), bearer.ErrPrincipal},
		{"not a JWT", "opaque-access-token", bearer.ErrMalformed},
		{"too long", sign(t, k1, with(func(c map[string]any) { c["pad"] = strings.Repeat("x", 20<<10) })), bearer.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti, err := j.Verify(context.Background(), tt.token, nil)
			if tt.want == nil {
				if err != nil || ti.UserID != "alice" || !slices.Equal(ti.Scopes, []string{"mcp:tools", "openid"}) || ti.Expiration.IsZero() {
					t.Fatalf("Verify = %+v, %v; want alice with her scopes", ti, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Verify = %+v, %v; want %v", ti, err, tt.want)
			}
		})
	}
}

// TestJWTAlgorithmsFixedAtStart: the allowlist is the one NewJWT checked.
// A write to DefaultAlgorithms' result, or to the caller's Algorithms slice
// after NewJWT, changes nothing a verifier accepts.
func TestJWTAlgorithmsFixedAtStart(t *testing.T) {
	defaults := bearer.DefaultAlgorithms()
	defaults[0] = jose.HS256
	if again := bearer.DefaultAlgorithms(); slices.Contains(again, jose.HS256) || again[0] != jose.RS256 {
		t.Fatalf("DefaultAlgorithms = %v after a write to an earlier result", again)
	}
	k1 := newRSASigner("k1", 0)
	is := newIssuer(t, "", k1)
	ctx := context.Background()
	rs256 := sign(t, k1, is.claims(resource))
	ps256 := sign(t, signer{kid: "k1", alg: jose.PS256, key: rsaKey(0)}, is.claims(resource))

	algs := []jose.SignatureAlgorithm{jose.RS256}
	j := newJWT(t, is, bearer.JWTOptions{Algorithms: algs})
	algs[0] = jose.PS256
	if _, err := j.Verify(ctx, rs256, nil); err != nil {
		t.Fatalf("RS256 after the caller's slice changed: %v", err)
	}
	if _, err := j.Verify(ctx, ps256, nil); !errors.Is(err, bearer.ErrMalformed) {
		t.Fatalf("PS256 after the caller's slice changed: %v, want ErrMalformed", err)
	}
	// Negative control: a verifier that was given PS256 at start refuses
	// RS256, so had the slice been shared, the first check above would fail.
	if _, err := newJWT(t, is, bearer.JWTOptions{Algorithms: algs}).Verify(ctx, rs256, nil); !errors.Is(err, bearer.ErrMalformed) {
		t.Fatalf("control: RS256 under [PS256]: %v, want ErrMalformed", err)
	}
}

// TestJWTOptions checks what NewJWT refuses to start with.
func TestJWTOptions(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	is := newIssuer(t, "", k1)
	ctx := context.Background()
	tests := []struct {
		name string
		opts bearer.JWTOptions
		want string
	}{
		{"HS256 allowed", bearer.JWTOptions{Issuer: is.url, Audience: resource, Algorithms: []jose.SignatureAlgorithm{jose.RS256, jose.HS256}}, "only asymmetric"},
		{"none allowed", bearer.JWTOptions{Issuer: is.url, Audience: resource, Algorithms: []jose.SignatureAlgorithm{"none"}}, "only asymmetric"},
		{"no audience", bearer.JWTOptions{Issuer: is.url}, "no audience"},
		{"http issuer off loopback", bearer.JWTOptions{Issuer: "http://auth.example.com", Audience: resource}, "want https"},
		// A private address is not loopback: another host on the network
		// could serve keys of its own in the clear.
		{"http issuer on a private address", bearer.JWTOptions{Issuer: "http://10.0.0.1", Audience: resource}, "want https"},
		{"http issuer on a private address, v6", bearer.JWTOptions{Issuer: "http://[fd00::1]", Audience: resource}, "want https"},
		{"issuer with a query", bearer.JWTOptions{Issuer: is.url + "?x=1", Audience: resource}, "no query"},
		{"leeway too large", bearer.JWTOptions{Issuer: is.url, Audience: resource, Leeway: time.Hour}, "leeway"},
		{"unreachable issuer", bearer.JWTOptions{Issuer: "http://127.0.0.1:1", Audience: resource}, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bearer.NewJWT(ctx, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewJWT = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestDiscovery finds the JWKS by RFC 8414 metadata, by OpenID Connect
// Discovery when there is none, for issuers with and without a path; and
// refuses metadata that names another issuer, or keys served in the clear
// from elsewhere.
func TestDiscovery(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	tests := []struct {
		name     string
		path     string
		oidcOnly bool
		metadata func(iss string) map[string]any
		want     string // "" : discovered
	}{
		{"RFC 8414", "", false, nil, ""},
		{"RFC 8414, issuer with a path", "/tenant/a", false, nil, ""},
		{"OpenID Connect only", "", true, nil, ""},
		{"OpenID Connect only, issuer with a path", "/realms/mcp", true, nil, ""},
		{"metadata of another issuer", "", false, func(string) map[string]any {
			return map[string]any{"issuer": "https://evil.example.com", "jwks_uri": "https://evil.example.com/jwks"}
		}, "names issuer"},
		{"JWKS in the clear off loopback", "", false, func(iss string) map[string]any {
			return map[string]any{"issuer": iss, "jwks_uri": "http://keys.example.com/jwks"}
		}, "jwks_uri"},
		// RFC 8414 §3.3: character for character, so not even a trailing slash.
		{"metadata naming the issuer with a trailing slash", "", false, func(iss string) map[string]any {
			return map[string]any{"issuer": iss + "/", "jwks_uri": iss + "/jwks"}
		}, "names issuer"},
		{"no jwks_uri", "", false, func(iss string) map[string]any {
			return map[string]any{"issuer": iss}
		}, "jwks_uri"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := newIssuer(t, tt.path, k1)
			is.oidcOnly, is.metadata = tt.oidcOnly, tt.metadata
			j, err := bearer.NewJWT(context.Background(), bearer.JWTOptions{Issuer: is.url, Audience: resource})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("NewJWT = %v, want an error mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ti, err := j.Verify(context.Background(), sign(t, k1, is.claims(resource)), nil); err != nil || ti.UserID != "alice" {
				t.Fatalf("Verify = %+v, %v", ti, err)
			}
		})
	}
}

// TestJWKSRotation: a key the issuer adds is fetched the first time a token
// names it; a flood of tokens with made-up kids after that causes no
// further fetch, and each is refused at once; once the interval has
// passed, one more refetch is allowed; and the set is refetched when it
// grows older than RefreshInterval, so a withdrawn key stops working.
func TestJWKSRotation(t *testing.T) {
	k1, k2 := newRSASigner("k1", 0), newECSigner(t, "k2")
	is := newIssuer(t, "", k1)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const interval = 300 * time.Millisecond
	j := newJWT(t, is, bearer.JWTOptions{UnknownKeyInterval: interval, RefreshInterval: time.Hour, Now: clock})
	verify := func(s signer) error {
		_, err := j.Verify(context.Background(), sign(t, s, is.claims(resource)), nil)
		return err
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches at start, want 1", got)
	}

	is.publish(k2) // rotated in
	// The refetch limiter runs on the real clock: from its first refetch,
	// the one for k2, it allows one more each interval. Time is measured
	// from before that refetch, so the bound below holds however slowly
	// a loaded machine runs the flood.
	rotated := time.Now()
	if err := verify(k2); err != nil {
		t.Fatalf("token signed with the rotated-in key: %v", err)
	}
	if got := is.fetches.Load(); got != 2 {
		t.Fatalf("%d JWKS fetches after the rotation, want 2", got)
	}

	// The flood: 500 made-up kids, from 50 goroutines.
	tokens := make([]string, 500)
	for i := range tokens {
		tokens[i] = sign(t, signer{kid: fmt.Sprintf("made-up-%d", i), alg: jose.ES256, key: k2.key}, is.claims(resource))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			for i := g; i < len(tokens); i += 50 {
				if _, err := j.Verify(context.Background(), tokens[i], nil); !errors.Is(err, bearer.ErrUnknownKey) {
					t.Errorf("made-up kid: %v, want ErrUnknownKey", err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// The start-up fetch, k2's, and one per interval since k2's.
	allowed := 2 + int64(time.Since(rotated)/interval)
	if got := is.fetches.Load(); got > allowed {
		t.Fatalf("%d JWKS fetches after 500 unknown kids in %v, want at most %d (one refetch per %v)", got, took, allowed, interval)
	}
	t.Logf("500 unknown kids refused in %v; JWKS fetched %d times in all (at most %d allowed)", took, is.fetches.Load(), allowed)
	// Had k refusals waited for the limiter, the flood would have lasted
	// (k-1) intervals at least, whatever the machine's speed: within a
	// tenth of (500-1), at most a tenth of them can have waited.
	if waited := time.Duration(len(tokens)-1) * interval; took > waited/10 {
		t.Fatalf("the flood took %v, over a tenth of the %v it would if every refusal waited for the refetch limiter", took, waited)
	}

	// A key rotated in during the flood is fetched once the interval has
	// passed.
	k3 := newRSASigner("k3", 2)
	is.publish(k3)
	time.Sleep(interval + 50*time.Millisecond)
	if err := verify(k3); err != nil {
		t.Fatalf("key rotated in after the flood, once the interval passed: %v", err)
	}

	// Withdrawn: k1 leaves the set; it works until the set is refreshed.
	is.mu.Lock()
	is.keys = slices.DeleteFunc(is.keys, func(k jose.JSONWebKey) bool { return k.KeyID == "k1" })
	is.mu.Unlock()
	if err := verify(k1); err != nil {
		t.Fatalf("withdrawn key before the refresh: %v", err)
	}
	before := is.fetches.Load()
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	// (The tokens' own times are real: the clock moved an hour, within
	// their hour of validity only if signed now — sign with the moved
	// clock.)
	c := is.claims(resource)
	c["iat"], c["nbf"], c["exp"] = now.Unix(), now.Unix(), now.Add(time.Hour).Unix()
	if _, err := j.Verify(context.Background(), sign(t, k1, c), nil); !errors.Is(err, bearer.ErrUnknownKey) {
		t.Fatalf("withdrawn key after RefreshInterval: %v, want ErrUnknownKey", err)
	}
	if got := is.fetches.Load(); got != before+1 && got != before+2 {
		t.Fatalf("JWKS fetched %d times on the refresh, want 1 (and maybe the unknown-kid refetch)", got-before)
	}
}

// TestJWKSFiltering: keys the verifier must not use (HMAC, encryption,
// RSA under 2048 bits) are skipped, the rest
// kept.
func TestJWKSFiltering(t *testing.T) {
	good := newRSASigner("good", 0)
	is := newIssuer(t, "", good)
	is.mu.Lock()
	is.keys = append(is.keys,
		jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hmac", Algorithm: "HS256"},
		jose.JSONWebKey{Key: rsaKey(1).Public(), KeyID: "enc", Use: "enc"},
	)
	is.mu.Unlock()
	j := newJWT(t, is, bearer.JWTOptions{})
	if _, err := j.Verify(context.Background(), sign(t, good, is.claims(resource)), nil); err != nil {
		t.Fatalf("good key: %v", err)
	}
	if _, err := j.Verify(context.Background(), sign(t, newRSASigner("enc", 1), is.claims(resource)), nil); !errors.Is(err, bearer.ErrUnknownKey) {
		t.Fatalf("encryption key used to sign: %v, want ErrUnknownKey", err)
	}
	// A 1024-bit RSA key can be factored: a token it signs is refused.
	short, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	is.publish(signer{kid: "short", alg: jose.RS256, key: short})
	j = newJWT(t, is, bearer.JWTOptions{})
	if _, err := j.Verify(context.Background(), sign(t, signer{kid: "short", alg: jose.RS256, key: short}, is.claims(resource)), nil); !errors.Is(err, bearer.ErrUnknownKey) {
		t.Fatalf("1024-bit RSA key used to sign: %v, want ErrUnknownKey", err)
	}
	if _, err := j.Verify(context.Background(), sign(t, good, is.claims(resource)), nil); err != nil {
		t.Fatalf("good key beside the short one: %v", err)
	}
}

var _ auth.TokenVerifier = (*bearer.JWT)(nil).Verify
var _ = http.MethodGet

// TestJWTClock: exp and nbf are checked against the verifier's clock
// (JWTOptions.Now), not the wall clock: a token the wall clock would still
// accept is refused once the verifier's clock says it expired, and one not
// yet valid by the verifier's clock is refused too. The negative controls
// are tokens valid by the verifier's clock.
func TestJWTClock(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	is := newIssuer(t, "", k1)
	wall := time.Now()
	tests := []struct {
		name   string
		skew   time.Duration // the verifier's clock minus the wall clock
		change func(c map[string]any)
		want   error
	}{
		{"valid by the verifier's clock, ahead", 2 * time.Hour, func(c map[string]any) { c["exp"] = wall.Add(3 * time.Hour).Unix() }, nil},
		{"expired by the verifier's clock, valid by the wall's", 2 * time.Hour, func(c map[string]any) {}, bearer.ErrExpired},
		{"valid by the verifier's clock, behind", -2 * time.Hour, func(c map[string]any) {
			c["iat"], c["nbf"] = wall.Add(-3*time.Hour).Unix(), wall.Add(-3*time.Hour).Unix()
		}, nil},
		{"not yet valid by the verifier's clock, valid by the wall's", -2 * time.Hour, func(c map[string]any) {
			c["iat"], c["nbf"] = wall.Add(-time.Hour).Unix(), wall.Add(-time.Hour).Unix()
		}, bearer.ErrNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJWT(t, is, bearer.JWTOptions{Now: func() time.Time { return time.Now().Add(tt.skew) }})
			c := is.claims(resource)
			tt.change(c)
			ti, err := j.Verify(context.Background(), sign(t, k1, c), nil)
			wantAlice(t, ti, err, tt.want)
		})
	}
}

// TestJWTPrincipalClaim: with PrincipalClaim set, the principal is that
// claim and no other: a token whose sub names someone is not that someone,
// and a token without the claim is refused even though it has a sub.
func TestJWTPrincipalClaim(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	is := newIssuer(t, "", k1)
	j := newJWT(t, is, bearer.JWTOptions{PrincipalClaim: "email"})
	c := is.claims(resource)
	c["email"] = "bob@example.com"
	if ti, err := j.Verify(context.Background(), sign(t, k1, c), nil); err != nil || ti.UserID != "bob@example.com" {
		t.Fatalf("Verify = %+v, %v; want bob@example.com, the email claim, not sub", ti, err)
	}
	if ti, err := j.Verify(context.Background(), sign(t, k1, is.claims(resource)), nil); !errors.Is(err, bearer.ErrPrincipal) || ti != nil {
		t.Fatalf("Verify without the email claim = %+v, %v; want %v", ti, err, bearer.ErrPrincipal)
	}
}

// TestDiscoveryServerError: only "not found" (a 4xx) at a metadata
// location moves discovery on to the next; a server error there stops it,
// so an issuer whose RFC 8414 document is failing is not read from a
// document it may no longer maintain. The negative control is the same
// issuer answering 404 there.
func TestDiscoveryServerError(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	for _, tt := range []struct {
		status int
		ok     bool
	}{{http.StatusNotFound, true}, {http.StatusServiceUnavailable, false}} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			is := newIssuer(t, "/tenant/a", k1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-authorization-server") {
					w.WriteHeader(tt.status)
					return
				}
				// Everything else from the issuer, under this server's URL.
				u := is.srv.URL + r.URL.Path
				res, err := http.Get(u)
				if err != nil {
					t.Error(err)
					return
				}
				defer res.Body.Close()
				if res.StatusCode != http.StatusOK {
					w.WriteHeader(res.StatusCode)
					return
				}
				var doc map[string]any
				json.NewDecoder(res.Body).Decode(&doc)
				if _, ok := doc["issuer"]; ok {
					doc["issuer"] = strings.Replace(doc["issuer"].(string), is.srv.URL, "http://"+r.Host, 1)
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(doc)
			}))
			defer srv.Close()
			_, err := bearer.NewJWT(context.Background(), bearer.JWTOptions{Issuer: srv.URL + "/tenant/a", Audience: resource})
			if tt.ok != (err == nil) {
				t.Fatalf("NewJWT with %d at the RFC 8414 location = %v; want ok=%v", tt.status, err, tt.ok)
			}
			if !tt.ok && !strings.Contains(err.Error(), "503") {
				t.Fatalf("NewJWT = %v; want the 503 named", err)
			}
		})
	}
}

// TestJWTNoKid: a token without a kid is checked against the issuer's only
// key, never picked out among several, even when one of them has no kid
// either: which key a kid-less token meant is a guess the verifier does
// not make. The negative control is the same key published alone.
func TestJWTNoKid(t *testing.T) {
	anon := newECSigner(t, "")
	for _, tt := range []struct {
		name    string
		signers []signer
		want    error
	}{
		{"the only key", []signer{anon}, nil},
		{"one of two, the other with a kid", []signer{newRSASigner("k1", 0), anon}, bearer.ErrUnknownKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := newIssuer(t, "", tt.signers...)
			j := newJWT(t, is, bearer.JWTOptions{})
			ti, err := j.Verify(context.Background(), sign(t, anon, is.claims(resource)), nil)
			wantAlice(t, ti, err, tt.want)
		})
	}
}

// TestJWKSDuplicateKid: a JWKS naming two keys by one kid is refused
// whole: which of them a token's kid means would be a guess, and the
// verifier would check signatures against a key the issuer may have meant
// to withdraw. The negative control is the same issuer with one of them.
func TestJWKSDuplicateKid(t *testing.T) {
	is := newIssuer(t, "", newRSASigner("k1", 0))
	if _, err := bearer.NewJWT(context.Background(), bearer.JWTOptions{Issuer: is.url, Audience: resource}); err != nil {
		t.Fatalf("one key under k1: %v", err)
	}
	is.publish(newRSASigner("k1", 1))
	_, err := bearer.NewJWT(context.Background(), bearer.JWTOptions{Issuer: is.url, Audience: resource})
	if err == nil || !strings.Contains(err.Error(), `two keys with kid "k1"`) {
		t.Fatalf("NewJWT = %v; want two keys with kid k1 refused", err)
	}
}

// TestDiscoveryContentType: metadata and keys are read only when served as
// JSON: a file some user of the issuer's host could upload (served as
// text/plain, say) names no keys. The negative control serves the same
// document as application/json.
func TestDiscoveryContentType(t *testing.T) {
	for _, tt := range []struct {
		ctype string
		ok    bool
	}{{"application/json; charset=utf-8", true}, {"text/plain; charset=utf-8", false}} {
		t.Run(tt.ctype, func(t *testing.T) {
			is := newIssuer(t, "", newRSASigner("k1", 0))
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": is.srv.URL + "/jwks"})
			}))
			defer srv.Close()
			_, err := bearer.NewJWT(context.Background(), bearer.JWTOptions{Issuer: srv.URL, Audience: resource})
			if tt.ok != (err == nil) {
				t.Fatalf("NewJWT with metadata served as %s = %v; want ok=%v", tt.ctype, err, tt.ok)
			}
			if !tt.ok && !strings.Contains(err.Error(), "content type") {
				t.Fatalf("NewJWT = %v; want the content type named", err)
			}
		})
	}
}

// wantAlice checks Verify's answer: alice when want is nil, else no token
// info and an error that is want.
func wantAlice(t *testing.T, ti *auth.TokenInfo, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil || ti.UserID != "alice" {
			t.Fatalf("Verify = %+v, %v; want alice", ti, err)
		}
		return
	}
	if !errors.Is(err, want) || ti != nil {
		t.Fatalf("Verify = %+v, %v; want %v", ti, err, want)
	}
}
