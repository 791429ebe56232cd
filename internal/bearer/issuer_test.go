package bearer_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is a local authorization server for the tests: it serves RFC
// 8414 metadata (or only OpenID Connect's) and a JWKS that a test can
// change, and counts the JWKS fetches.
type issuer struct {
	t       *testing.T
	srv     *httptest.Server
	url     string // the issuer identifier
	mu      sync.Mutex
	keys    []jose.JSONWebKey // published (public)
	fetches atomic.Int64
	// metadata overrides the document served, if set.
	metadata func(iss string) map[string]any
	oidcOnly bool
}

// signer is a private key a test signs tokens with.
type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

var (
	keyOnce sync.Once
	rsaKeys [3]*rsa.PrivateKey
)

// rsaKey returns one of three RSA keys, made once per test binary (making
// them is slow).
func rsaKey(i int) *rsa.PrivateKey {
	keyOnce.Do(func() {
		for j := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[j] = k
		}
	})
	return rsaKeys[i]
}

func newRSASigner(kid string, i int) signer {
	return signer{kid: kid, alg: jose.RS256, key: rsaKey(i)}
}

func newECSigner(t *testing.T, kid string) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: jose.ES256, key: k}
}

// newIssuer starts an issuer at path (e.g. "" or "/realms/x") publishing
// the public keys of signers.
func newIssuer(t *testing.T, path string, signers ...signer) *issuer {
	t.Helper()
	is := &issuer{t: t}
	for _, s := range signers {
		is.publish(s)
	}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, _ *http.Request) {
		doc := map[string]any{"issuer": is.url, "jwks_uri": is.srv.URL + "/jwks", "token_endpoint": is.url + "/token"}
		if is.metadata != nil {
			doc = is.metadata(is.url)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	}
	mux.HandleFunc("GET /.well-known/oauth-authorization-server"+path, func(w http.ResponseWriter, r *http.Request) {
		if is.oidcOnly {
			http.NotFound(w, r)
			return
		}
		meta(w, r)
	})
	mux.HandleFunc("GET "+path+"/.well-known/openid-configuration", meta)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), is.keys...)}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL + path
	return is
}

// publish adds s's public key to the JWKS, with its algorithm.
func (is *issuer) publish(s signer) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"})
}

// claims returns the claims of a good token for resource, now.
func (is *issuer) claims(resource string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":   is.url,
		"sub":   "alice",
		"aud":   resource,
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(time.Hour).Unix(),
		"scope": "mcp:tools openid",
	}
}

// sign makes a JWT of claims signed by s.
func sign(t *testing.T, s signer, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if s.kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), s.kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsigned makes a JWT with header and claims and the signature sig,
// whatever they are.
func unsigned(t *testing.T, header, claims map[string]any, sig []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return strings.Join([]string{enc(header), enc(claims), base64.RawURLEncoding.EncodeToString(sig)}, ".")
}
