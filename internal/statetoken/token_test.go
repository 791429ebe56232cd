package statetoken

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// secret returns a distinct 32-byte test secret.
func secret(c byte) []byte { return bytes.Repeat([]byte{c}, 32) }

func newTestRing(t testing.TB, secrets ...[]byte) *Ring {
	t.Helper()
	r, err := NewRing(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testClaims are claims as requeststate fills them, principal claim
// included.
func testClaims(r *Ring, state string) Claims {
	return Claims{
		IssuedAt:   1785240000000,
		Expiry:     1785240600000,
		Method:     "tools/call",
		Target:     "delete_file",
		ArgsDigest: strings.Repeat("ab", 32),
		Audience:   "srv",
		Principal:  r.PrincipalClaim("alice"),
		State:      state,
	}
}

func mustSeal(t testing.TB, r *Ring, state string) string {
	t.Helper()
	tok, err := r.Seal(testClaims(r, state))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawToken splits a token into its decoded bytes.
func rawToken(t testing.TB, tok string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, Prefix))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func encodeToken(raw []byte) string { return Prefix + base64.RawURLEncoding.EncodeToString(raw) }

// sealPlaintext seals arbitrary plaintext under r's first key, bypassing the
// claims encoder, to test Open's claims checks.
func sealPlaintext(r *Ring, pt string) string {
	k := &r.keys[0]
	raw := k.aead.Seal(append([]byte(nil), k.id[:]...), nil, []byte(pt), aad(k.id))
	return encodeToken(raw)
}

func TestSealOpenRoundTrip(t *testing.T) {
	r := newTestRing(t, secret(1), secret(2))
	for _, state := range []string{"", "plain", "ünïcödé ✓", strings.Repeat("x", 1<<16)} {
		c := testClaims(r, state)
		tok, err := r.Seal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, k, err := r.Open(tok)
		if err != nil {
			t.Fatal(err)
		}
		c.Version = 1
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("Open = %+v, want %+v", got, c)
		}
		if k != &r.keys[0] {
			t.Fatal("Open did not name the sealing key")
		}
		if !k.PrincipalMatches(got.Principal, "alice") || k.PrincipalMatches(got.Principal, "bob") {
			t.Fatal("principal claim does not match exactly its principal")
		}
		if strings.Contains(tok, "alice") || (state != "" && strings.Contains(tok, state)) {
			t.Fatalf("token shows plaintext: %s", tok)
		}
	}
	// Two seals of one state differ (random nonce and salt).
	if a, b := mustSeal(t, r, "s"), mustSeal(t, r, "s"); a == b {
		t.Fatal("two seals produced the same token")
	}
}

func TestOpenRejects(t *testing.T) {
	r := newTestRing(t, secret(1), secret(2))
	tok := mustSeal(t, r, "state")
	body := strings.TrimPrefix(tok, Prefix)
	raw := rawToken(t, tok)
	otherTok := mustSeal(t, newTestRing(t, secret(3)), "state")

	// A token sealed by ring key 2 relabelled with ring key 1's id: the key
	// id is bound as associated data.
	secondRaw := rawToken(t, mustSeal(t, newTestRing(t, secret(2)), "state"))
	relabelled := bytes.Clone(secondRaw)
	copy(relabelled, raw[:KeyIDLen])

	lastBitsFlipped := func() string {
		// The final character carries padding bits; flipping one of them
		// keeps the decoded bytes but is non-canonical.
		last := body[len(body)-1]
		idx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last)
		return Prefix + body[:len(body)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[idx^1])
	}()

	// The canonical encoding of some bytes that need padding, with padding.
	padded := ""
	for n := 0; !strings.HasSuffix(padded, "="); n++ {
		padded = Prefix + base64.URLEncoding.EncodeToString(raw[:len(raw)-n])
	}

	tests := []struct {
		name, tok string
		want      error
	}{
		{"empty", "", ErrMalformed},
		{"prefix only", Prefix, ErrMalformed},
		{"no prefix", body, ErrMalformed},
		{"wrong version prefix", "v2." + body, ErrMalformed},
		{"upper-case prefix", "V1." + body, ErrMalformed},
		{"double prefix", Prefix + tok, ErrMalformed},
		{"CRLF inside", Prefix + body[:10] + "\r\n" + body[10:], ErrMalformed},
		{"LF inside", Prefix + body[:10] + "\n" + body[10:], ErrMalformed},
		{"CR at end", tok + "\r", ErrMalformed},
		{"LF at end", tok + "\n", ErrMalformed},
		{"space at end", tok + " ", ErrMalformed},
		{"leading space", " " + tok, ErrMalformed},
		{"one pad", tok + "=", ErrMalformed},
		{"two pads", tok + "==", ErrMalformed},
		{"std alphabet", Prefix + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 30)), ErrMalformed},
		{"padded", padded, ErrMalformed},
		{"non-zero padding bits", lastBitsFlipped, ErrMalformed},
		{"too short", encodeToken(raw[:KeyIDLen+Overhead-1]), ErrMalformed},
		{"only kid and nonce and tag", encodeToken(raw[:KeyIDLen+Overhead]), ErrAuth},
		{"tag removed", encodeToken(raw[:len(raw)-16]), ErrAuth},
		{"byte appended", encodeToken(append(bytes.Clone(raw), 0)), ErrAuth},
		{"unknown kid", encodeToken(append([]byte{0, 0, 0, 0}, raw[KeyIDLen:]...)), ErrUnknownKey},
		{"other key", otherTok, ErrUnknownKey},
		{"kid swapped within ring", encodeToken(relabelled), ErrAuth},
		{"claims not JSON", sealPlaintext(r, "not json"), ErrMalformed},
		{"claims version 2", sealPlaintext(r, `{"v":2,"iat":1,"exp":2,"m":"tools/call","t":"x","a":"","aud":"srv","p":null,"s":""}`), ErrMalformed},
		{"claims version missing", sealPlaintext(r, `{"iat":1,"exp":2}`), ErrMalformed},
		{"claims unknown field", sealPlaintext(r, `{"v":1,"x":1}`), ErrMalformed},
		{"claims trailing data", sealPlaintext(r, `{"v":1}{"v":1}`), ErrMalformed},
		{"claims array", sealPlaintext(r, `[1]`), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := r.Open(tt.tok); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// Negative control: the genuine token passes the same path.
	if _, _, err := r.Open(tok); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestSealRejectsInvalidUTF8(t *testing.T) {
	r := newTestRing(t, secret(1))
	for _, c := range []Claims{{State: "a\xffb"}, {Target: "\xed\xa0\x80"}, {Method: "\x80"}, {Audience: "\xc0"}} {
		if _, err := r.Seal(c); err == nil {
			t.Fatalf("Seal(%+v) accepted invalid UTF-8", c)
		}
	}
	if _, err := r.Seal(Claims{State: "a\uFFFDb"}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestNewRingValidates(t *testing.T) {
	for name, secrets := range map[string][][]byte{
		"no keys":       {},
		"short key":     {make([]byte, MinSecretLen-1)},
		"nil key":       {nil},
		"duplicate key": {secret(1), secret(2), secret(1)},
	} {
		if _, err := NewRing(secrets); !errors.Is(err, ErrKey) {
			t.Errorf("%s: err = %v, want ErrKey", name, err)
		}
	}
	// A repeated secret (a botched rotation) is named as such, not as a
	// key id collision that asks for a new secret.
	if _, err := NewRing([][]byte{secret(1), secret(2), secret(1)}); err == nil || !strings.Contains(err.Error(), "key 2 duplicates key 0") {
		t.Errorf("a repeated secret: %v, want one naming the duplicate", err)
	}
	if _, err := NewRing([][]byte{secret(1), secret(2)}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// counterSecret returns 32 bytes, zero but for n in the last eight (big
// endian).
func counterSecret(n uint64) []byte {
	s := make([]byte, 32)
	binary.BigEndian.PutUint64(s[24:], n)
	return s
}

// TestNewRingRefusesKeyIDCollision: two different secrets whose 4-byte key
// ids collide (found by a birthday search over counterSecret) are refused,
// since Open looks a token's key up by id alone and would try only one of
// them.
func TestNewRingRefusesKeyIDCollision(t *testing.T) {
	a, b := counterSecret(13260), counterSecret(91028)
	ka, err := deriveKey(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := deriveKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if ka.id != kb.id || bytes.Equal(ka.aeadBytes, kb.aeadBytes) {
		t.Fatalf("test vector: ids %x %x should collide, keys differ", ka.id, kb.id)
	}
	if _, err := NewRing([][]byte{a, b}); !errors.Is(err, ErrKey) {
		t.Fatalf("colliding key ids: err = %v, want ErrKey", err)
	}
	// Negative control: either secret with another one is fine.
	if _, err := NewRing([][]byte{a, counterSecret(13261)}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestKeyDerivationSeparates: the AEAD key, the principal-hash key and the
// key id come from distinct HKDF labels, so the public key id and the
// principal hash reveal nothing about the AEAD key.
func TestKeyDerivationSeparates(t *testing.T) {
	k, err := deriveKey(secret(1))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k.macKey, k.aeadBytes) || bytes.HasPrefix(k.aeadBytes, k.id[:]) || bytes.HasPrefix(k.macKey, k.id[:]) {
		t.Fatalf("derived keys share material: aead %x mac %x id %x", k.aeadBytes, k.macKey, k.id)
	}
	// Negative control: derivation is deterministic, so equal secrets do
	// give equal keys (the inequalities above are not chance).
	k2, _ := deriveKey(secret(1))
	if !bytes.Equal(k.macKey, k2.macKey) || !bytes.Equal(k.aeadBytes, k2.aeadBytes) || k.id != k2.id {
		t.Fatal("control: derivation is not deterministic")
	}
}

// TestWireFormatAsDocumented: a token is what the package doc and
// NewRing's labels say, read and written here by an independent
// implementation with the standard library alone: the key id, AES key and
// principal key derived by HKDF-SHA256 under their labels; AES-256-GCM
// with a 12-byte nonce after the key id and "v1." ‖ key id as associated
// data (a token relabelled to another format or key id fails); the claims
// as JSON under their short names; the principal claim salt ‖
// HMAC-SHA256(principal key, salt ‖ principal). A token sealed here under
// the ring's second key opens, naming that key.
func TestWireFormatAsDocumented(t *testing.T) {
	derive := func(s []byte, label string, n int) []byte {
		k, err := hkdf.Key(sha256.New, s, nil, label, n)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	gcm := func(s []byte) cipher.AEAD {
		b, err := aes.NewCipher(derive(s, "mcp-confirm/requeststate/v1/aes-256-gcm", 32))
		if err != nil {
			t.Fatal(err)
		}
		g, err := cipher.NewGCM(b)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	r := newTestRing(t, secret(1), secret(2))
	raw := rawToken(t, mustSeal(t, r, "st"))
	kid := derive(secret(1), "mcp-confirm/requeststate/v1/key-id", 4)
	if !bytes.Equal(raw[:4], kid) {
		t.Fatalf("key id %x, want %x", raw[:4], kid)
	}
	nonce, sealed := raw[4:16], raw[16:]
	pt, err := gcm(secret(1)).Open(nil, nonce, sealed, append([]byte("v1."), kid...))
	if err != nil {
		t.Fatalf("opening with the documented key and associated data: %v", err)
	}
	for _, ad := range [][]byte{[]byte("v1."), append([]byte("v2."), kid...), append([]byte("v1."), 0, 0, 0, 0)} {
		if _, err := gcm(secret(1)).Open(nil, nonce, sealed, ad); err == nil {
			t.Fatalf("the token opened with associated data %q", ad)
		}
	}
	var claims map[string]any
	if err := json.Unmarshal(pt, &claims); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range claims {
		names = append(names, k)
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != "a aud exp iat m p s t v" {
		t.Fatalf("claims %s, want a aud exp iat m p s t v", got)
	}
	p, _ := base64.StdEncoding.DecodeString(claims["p"].(string))
	mac := hmac.New(sha256.New, derive(secret(1), "mcp-confirm/requeststate/v1/principal-hmac-sha256", 32))
	mac.Write(p[:16])
	mac.Write([]byte("alice"))
	if len(p) != 48 || !hmac.Equal(p[16:], mac.Sum(nil)) {
		t.Fatalf("principal claim %x is not salt ‖ HMAC(principal key, salt ‖ principal)", p)
	}

	// Written here, under the second key, read by the ring.
	kid2 := derive(secret(2), "mcp-confirm/requeststate/v1/key-id", 4)
	nonce2 := bytes.Repeat([]byte{7}, 12)
	out := append(append(slices.Clone(kid2), nonce2...), gcm(secret(2)).Seal(nil, nonce2,
		[]byte(`{"v":1,"iat":1,"exp":2,"m":"tools/call","t":"x","a":"","aud":"srv","p":null,"s":"mine"}`),
		append([]byte("v1."), kid2...))...)
	got, k, err := r.Open(encodeToken(out))
	if err != nil || got.State != "mine" || k != &r.keys[1] {
		t.Fatalf("Open of an independently sealed token = %+v, key %p, %v; want state mine under the second key %p", got, k, err, &r.keys[1])
	}
}

// TestPrincipalClaimSalted: the salt is inside the MAC, so two claims of
// one principal share nothing, and a claim with its salt changed no longer
// matches.
func TestPrincipalClaimSalted(t *testing.T) {
	r := newTestRing(t, secret(1))
	a, b := r.PrincipalClaim("alice"), r.PrincipalClaim("alice")
	if bytes.Equal(a[saltLen:], b[saltLen:]) {
		t.Fatal("two claims of one principal carry the same MAC: they can be linked")
	}
	k := &r.keys[0]
	if !k.PrincipalMatches(a, "alice") {
		t.Fatal("control: the claim does not match its principal")
	}
	a[0] ^= 1
	if k.PrincipalMatches(a, "alice") {
		t.Fatal("a claim with its salt changed still matches")
	}
}
