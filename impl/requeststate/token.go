package requeststate

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Reasons a token or request is refused. They are for the server log and for
// tests: the wire only ever carries [Rejection]. Check them with errors.Is.
var (
	// ErrKey: key material or a key file is unusable (constructors only).
	ErrKey = errors.New("requeststate: unusable key")
	// ErrMalformed: not a token this package could have written (prefix,
	// base64url, length, claims encoding or version).
	ErrMalformed = errors.New("requeststate: malformed token")
	// ErrUnknownKey: the token names a key id that is not in the ring.
	ErrUnknownKey = errors.New("requeststate: unknown key id")
	// ErrAuth: AES-GCM authentication failed (tampered, or another key).
	ErrAuth = errors.New("requeststate: token failed authentication")
	// ErrExpired: the token's expiry has passed, or its lifetime exceeds the TTL.
	ErrExpired = errors.New("requeststate: token expired")
	// ErrFuture: the token's issue time lies beyond the allowed clock skew.
	ErrFuture = errors.New("requeststate: token issued in the future")
	// ErrMismatch: the token is bound to another method, target, arguments,
	// audience or principal.
	ErrMismatch = errors.New("requeststate: token bound to a different request")
	// ErrArguments: request arguments are not acceptable JSON (see [ArgumentsDigest]).
	ErrArguments = errors.New("requeststate: unacceptable arguments")
	// ErrPrincipal: the principal could not be determined.
	ErrPrincipal = errors.New("requeststate: principal unavailable")
)

// tokenPrefix names the format; it is also bound into the AEAD associated
// data, so a token cannot be re-labelled as another format version.
const tokenPrefix = "v1."

// claimsVersion is the only claims layout Open accepts.
const claimsVersion = 1

// gcmOverhead is nonce (12) plus tag (16).
const gcmOverhead = 12 + 16

// Claims is the plaintext sealed inside a token. The middleware fills it;
// [Boundary.Seal] and [Boundary.Open] expose the codec on its own.
//
// Times are Unix milliseconds. Principal is never the principal itself but
// salt ‖ HMAC-SHA256(k, salt ‖ principal), k derived from the sealing
// secret, so the claim is unreadable even to someone who sees the plaintext.
type Claims struct {
	Version    int    `json:"v"`   // set to 1 by Seal
	IssuedAt   int64  `json:"iat"` // Unix ms
	Expiry     int64  `json:"exp"` // Unix ms; refused at or after this instant
	Method     string `json:"m"`   // tools/call, prompts/get or resources/read
	Target     string `json:"t"`   // tool or prompt name, or resource URI
	ArgsDigest string `json:"a"`   // hex SHA-256 of the canonical arguments
	Audience   string `json:"aud"` // the server the token is for
	Principal  []byte `json:"p"`   // salted keyed hash of the principal
	State      string `json:"s"`   // the handler's plaintext requestState
}

// Seal encrypts c under the first key of the ring and returns the token
//
//	"v1." + base64url(kid ‖ nonce ‖ ciphertext ‖ tag)   (no padding)
//
// with associated data "v1." ‖ kid. Seal sets c.Version and seals the other
// fields as given: the middleware fills Principal (only it holds the hash
// key), so Seal on its own serves tests and fuzzing. String fields must
// be valid UTF-8: JSON would silently replace invalid bytes with U+FFFD and
// so make two different values share a claim.
func (b *Boundary) Seal(c Claims) (string, error) {
	c.Version = claimsVersion
	for _, f := range [...]struct{ name, v string }{
		{"method", c.Method}, {"target", c.Target}, {"args digest", c.ArgsDigest},
		{"audience", c.Audience}, {"state", c.State},
	} {
		// Stops two distinct strings collapsing to one claim through U+FFFD.
		if !utf8.ValidString(f.v) {
			return "", fmt.Errorf("requeststate: sealing: %s is not valid UTF-8", f.name)
		}
	}
	pt, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("requeststate: sealing: %w", err)
	}
	k := &b.ring[0]
	raw := make([]byte, 0, keyIDLen+gcmOverhead+len(pt))
	raw = append(raw, k.id[:]...)
	raw = k.aead.Seal(raw, nil, pt, aad(k.id))
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// Open authenticates and decrypts a token and decodes its claims. It checks
// format, key and version only; the middleware then checks time and binding.
// Errors wrap [ErrMalformed], [ErrUnknownKey] or [ErrAuth] and never contain
// the token.
func (b *Boundary) Open(token string) (Claims, error) {
	c, _, err := b.open(token)
	return c, err
}

func (b *Boundary) open(token string) (Claims, *ringKey, error) {
	var c Claims
	body, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return c, nil, fmt.Errorf("%w: missing %q prefix", ErrMalformed, tokenPrefix)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		return c, nil, fmt.Errorf("%w: base64url: %v", ErrMalformed, err)
	}
	// Strict() still skips \r and \n: only the one canonical spelling of the
	// bytes is accepted, so a token cannot be varied without breaking it.
	if base64.RawURLEncoding.EncodeToString(raw) != body {
		return c, nil, fmt.Errorf("%w: non-canonical base64url", ErrMalformed)
	}
	if len(raw) < keyIDLen+gcmOverhead {
		return c, nil, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(raw))
	}
	var id [keyIDLen]byte
	copy(id[:], raw)
	k := b.key(id)
	if k == nil {
		return c, nil, ErrUnknownKey
	}
	pt, err := k.aead.Open(nil, nil, raw[keyIDLen:], aad(id))
	if err != nil {
		return c, nil, ErrAuth
	}
	dec := json.NewDecoder(bytes.NewReader(pt))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Claims{}, nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Claims{}, nil, fmt.Errorf("%w: claims: trailing data", ErrMalformed)
	}
	if c.Version != claimsVersion {
		return Claims{}, nil, fmt.Errorf("%w: claims version %d", ErrMalformed, c.Version)
	}
	return c, k, nil
}

func (b *Boundary) key(id [keyIDLen]byte) *ringKey {
	for i := range b.ring {
		if b.ring[i].id == id {
			return &b.ring[i]
		}
	}
	return nil
}

func aad(id [keyIDLen]byte) []byte {
	return append([]byte(tokenPrefix), id[:]...)
}

// principalClaim returns salt ‖ HMAC-SHA256(k.macKey, salt ‖ principal) with
// a fresh random salt.
func (k *ringKey) principalClaim(principal string) []byte {
	out := make([]byte, saltLen, principalN)
	rand.Read(out) // crypto/rand.Read never returns an error and never fails silently.
	return k.principalMAC(out, principal)
}

func (k *ringKey) principalMAC(salt []byte, principal string) []byte {
	m := hmac.New(sha256.New, k.macKey)
	m.Write(salt)
	m.Write([]byte(principal))
	return m.Sum(salt[:saltLen:saltLen])
}

// principalMatches reports in constant time whether claim was made by
// principalClaim for principal under k.
func (k *ringKey) principalMatches(claim []byte, principal string) bool {
	if len(claim) != principalN {
		return false
	}
	want := k.principalMAC(bytes.Clone(claim[:saltLen]), principal)
	return hmac.Equal(claim, want)
}
