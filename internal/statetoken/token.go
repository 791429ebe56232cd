// Package statetoken is the wire format of a sealed requestState: the key
// ring derived from the operator's secrets, and sealing and opening of the
// claims under it,
//
//	"v1." + base64url(kid ‖ nonce ‖ ciphertext ‖ tag)   (no padding)
//
// AES-256-GCM with associated data "v1." ‖ kid, over the claims as JSON.
//
// What it guarantees: [Ring.Open] accepts only a token sealed by a key of
// the ring, spelled exactly as [Ring.Seal] spelled it (one canonical
// encoding, no padding, no line breaks), with a claims layout of this
// version and no unknown fields; its errors wrap [ErrMalformed],
// [ErrUnknownKey] or [ErrAuth] and never contain the token.
//
// What it does not do: check time, binding or audience. An opened claim
// says only that a holder of the ring's keys sealed it. Package
// requeststate checks every claim against the request it arrived on before
// a handler sees the state; it is the only way a library user can seal or
// open a token, which is why this package is internal. Its tests, the
// fuzz targets and the tests that forge states with the keys (as only a
// holder of them could) use it directly.
package statetoken

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

// Reasons a key ring cannot be built or a token cannot be opened, for the
// server log and for tests: the wire only ever carries requeststate's one
// rejection. They keep the "requeststate:" prefix: they are that
// package's errors, and requeststate.ErrKey is ErrKey. Check them with
// errors.Is.
var (
	// ErrKey: key material is unusable (constructors only).
	ErrKey = errors.New("requeststate: unusable key")
	// ErrMalformed: not a token this package could have written (prefix,
	// base64url, length, claims encoding or version).
	ErrMalformed = errors.New("requeststate: malformed token")
	// ErrUnknownKey: the token names a key id that is not in the ring.
	ErrUnknownKey = errors.New("requeststate: unknown key id")
	// ErrAuth: AES-GCM authentication failed (tampered, or another key).
	ErrAuth = errors.New("requeststate: token failed authentication")
)

// Prefix names the format; it is also bound into the AEAD associated
// data, so a token cannot be re-labelled as another format version.
const Prefix = "v1."

// claimsVersion is the only claims layout Open accepts.
const claimsVersion = 1

// Overhead is what sealing adds to the claims: nonce (12) plus tag (16).
const Overhead = 12 + 16

// Claims is the plaintext sealed inside a token.
//
// Times are Unix milliseconds. Principal is never the principal itself but
// salt ‖ HMAC-SHA256(k, salt ‖ principal), k derived from the sealing
// secret ([Ring.PrincipalClaim]), so the claim is unreadable even to
// someone who sees the plaintext.
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

// Seal encrypts c under the first key of the ring and returns the token.
// Seal sets c.Version and seals the other fields as given: requeststate
// fills Principal with [Ring.PrincipalClaim]. String fields must be valid
// UTF-8: JSON would silently replace invalid bytes with U+FFFD and so make
// two different values share a claim.
func (r *Ring) Seal(c Claims) (string, error) {
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
	k := &r.keys[0]
	raw := make([]byte, 0, KeyIDLen+Overhead+len(pt))
	raw = append(raw, k.id[:]...)
	raw = k.aead.Seal(raw, nil, pt, aad(k.id))
	return Prefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// Open authenticates and decrypts a token and decodes its claims, and
// returns the key that opened it (to check the principal claim with). It
// checks format, key and version only; the caller checks time and binding.
// Errors wrap [ErrMalformed], [ErrUnknownKey] or [ErrAuth] and never
// contain the token.
func (r *Ring) Open(token string) (Claims, *Key, error) {
	var c Claims
	body, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return c, nil, fmt.Errorf("%w: missing %q prefix", ErrMalformed, Prefix)
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
	if len(raw) < KeyIDLen+Overhead {
		return c, nil, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(raw))
	}
	var id [KeyIDLen]byte
	copy(id[:], raw)
	k := r.key(id)
	if k == nil {
		return c, nil, ErrUnknownKey
	}
	pt, err := k.aead.Open(nil, nil, raw[KeyIDLen:], aad(id))
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

func (r *Ring) key(id [KeyIDLen]byte) *Key {
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

func aad(id [KeyIDLen]byte) []byte {
	return append([]byte(Prefix), id[:]...)
}

// PrincipalClaim returns salt ‖ HMAC-SHA256(k, salt ‖ principal) with a
// fresh random salt, k the principal-hash key of the sealing key.
func (r *Ring) PrincipalClaim(principal string) []byte {
	out := make([]byte, saltLen, PrincipalClaimLen)
	rand.Read(out) // crypto/rand.Read never returns an error and never fails silently.
	return r.keys[0].principalMAC(out, principal)
}

func (k *Key) principalMAC(salt []byte, principal string) []byte {
	m := hmac.New(sha256.New, k.macKey)
	m.Write(salt)
	m.Write([]byte(principal))
	return m.Sum(salt[:saltLen:saltLen])
}

// PrincipalMatches reports in constant time whether claim was made by
// PrincipalClaim for principal under k.
func (k *Key) PrincipalMatches(claim []byte, principal string) bool {
	if len(claim) != PrincipalClaimLen {
		return false
	}
	want := k.principalMAC(bytes.Clone(claim[:saltLen]), principal)
	return hmac.Equal(claim, want)
}
