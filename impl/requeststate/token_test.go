package requeststate

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// secret returns a distinct 32-byte test secret.
func secret(c byte) []byte { return bytes.Repeat([]byte{c}, 32) }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestBoundary(t testing.TB, clk *clock, keys ...[]byte) *Boundary {
	t.Helper()
	b, err := New(Options{
		Keys:     keys,
		Audience: "srv",
		Now:      clk.now,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var testBind = Binding{
	Method:     "tools/call",
	Target:     "delete_file",
	ArgsDigest: mustDigest(`{"path":"a.txt"}`),
	Principal:  "alice",
}

func mustDigest(s string) string {
	d, err := ArgumentsDigest([]byte(s))
	if err != nil {
		panic(err)
	}
	return d
}

// rawToken splits a token into its decoded bytes.
func rawToken(t testing.TB, tok string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, tokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func encodeToken(raw []byte) string { return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw) }

// sealPlaintext seals arbitrary plaintext under b's first key, bypassing the
// claims encoder, to test Open's claims checks.
func sealPlaintext(b *Boundary, pt string) string {
	k := &b.ring[0]
	raw := k.aead.Seal(append([]byte(nil), k.id[:]...), nil, []byte(pt), aad(k.id))
	return encodeToken(raw)
}

func TestRoundTrip(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	for _, state := range []string{"", "plain", "ünïcödé ✓", strings.Repeat("x", 1<<16)} {
		tok, err := b.issue(testBind, state)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.verify(tok, testBind)
		if err != nil || got != state {
			t.Fatalf("verify = %q, %v; want %q", got, err, state)
		}
		if strings.Contains(tok, "alice") || (state != "" && strings.Contains(tok, state)) {
			t.Fatalf("token shows plaintext: %s", tok)
		}
	}
	// Two seals of one state differ (random nonce and salt).
	a, _ := b.issue(testBind, "s")
	c, _ := b.issue(testBind, "s")
	if a == c {
		t.Fatal("two seals produced the same token")
	}
}

func TestOpenClaims(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	tok, err := b.issue(testBind, "st")
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Open(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || c.IssuedAt != t0.UnixMilli() || c.Expiry != t0.Add(DefaultTTL).UnixMilli() ||
		c.Method != testBind.Method || c.Target != testBind.Target || c.ArgsDigest != testBind.ArgsDigest ||
		c.Audience != "srv" || c.State != "st" || len(c.Principal) != principalN {
		t.Fatalf("claims = %+v", c)
	}
	if bytes.Contains(c.Principal, []byte("alice")) {
		t.Fatal("principal claim holds the principal")
	}
}

// TestTamperEveryByte flips bits in every decoded byte: key id, nonce,
// ciphertext and tag.
func TestTamperEveryByte(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	tok, err := b.issue(testBind, "state")
	if err != nil {
		t.Fatal(err)
	}
	raw := rawToken(t, tok)
	ctEnd := len(raw) - 16
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			mut := bytes.Clone(raw)
			mut[i] ^= bit
			_, err := b.verify(encodeToken(mut), testBind)
			want := ErrAuth
			region := "ciphertext"
			switch {
			case i < keyIDLen:
				want, region = ErrUnknownKey, "kid"
			case i < keyIDLen+12:
				region = "nonce"
			case i >= ctEnd:
				region = "tag"
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s byte %d ^%#x: err = %v, want %v", region, i, bit, err, want)
			}
		}
	}
}

// TestTamperEveryCharacter replaces every character of the token text.
func TestTamperEveryCharacter(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	tok, err := b.issue(testBind, "state")
	if err != nil {
		t.Fatal(err)
	}
	for i := range tok {
		for _, r := range []byte{'A', 'g', '-', '_', '.', '='} {
			if tok[i] == r {
				continue
			}
			mut := tok[:i] + string(r) + tok[i+1:]
			if _, err := b.verify(mut, testBind); err == nil {
				t.Fatalf("char %d %q→%q accepted", i, tok[i], r)
			}
		}
	}
	// Negative control: the unmodified token passes the same checker.
	if _, err := b.verify(tok, testBind); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1), secret(2))
	tok, err := b.issue(testBind, "state")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimPrefix(tok, tokenPrefix)
	raw := rawToken(t, tok)
	other := newTestBoundary(t, clk, secret(3))
	otherTok, _ := other.issue(testBind, "state")

	// A token sealed by ring key 2 relabelled with ring key 1's id: the key
	// id is bound as associated data.
	second := newTestBoundary(t, clk, secret(2))
	secondRaw := rawToken(t, mustIssue(t, second, testBind, "state"))
	relabelled := bytes.Clone(secondRaw)
	copy(relabelled, raw[:keyIDLen])

	lastBitsFlipped := func() string {
		// The final character carries padding bits; flipping one of them
		// keeps the decoded bytes but is non-canonical.
		last := body[len(body)-1]
		idx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last)
		return tokenPrefix + body[:len(body)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[idx^1])
	}()

	// The canonical encoding of some bytes that need padding, with padding.
	padded := ""
	for n := 0; !strings.HasSuffix(padded, "="); n++ {
		padded = tokenPrefix + base64.URLEncoding.EncodeToString(raw[:len(raw)-n])
	}

	tests := []struct {
		name, tok string
		want      error
	}{
		{"empty", "", ErrMalformed},
		{"prefix only", tokenPrefix, ErrMalformed},
		{"no prefix", body, ErrMalformed},
		{"wrong version prefix", "v2." + body, ErrMalformed},
		{"upper-case prefix", "V1." + body, ErrMalformed},
		{"double prefix", tokenPrefix + tok, ErrMalformed},
		{"CRLF inside", tokenPrefix + body[:10] + "\r\n" + body[10:], ErrMalformed},
		{"LF inside", tokenPrefix + body[:10] + "\n" + body[10:], ErrMalformed},
		{"CR at end", tok + "\r", ErrMalformed},
		{"LF at end", tok + "\n", ErrMalformed},
		{"space at end", tok + " ", ErrMalformed},
		{"leading space", " " + tok, ErrMalformed},
		{"one pad", tok + "=", ErrMalformed},
		{"two pads", tok + "==", ErrMalformed},
		{"std alphabet", tokenPrefix + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 30)), ErrMalformed},
		{"padded", padded, ErrMalformed},
		{"non-zero padding bits", lastBitsFlipped, ErrMalformed},
		{"too short", encodeToken(raw[:keyIDLen+gcmOverhead-1]), ErrMalformed},
		{"only kid and nonce and tag", encodeToken(raw[:keyIDLen+gcmOverhead]), ErrAuth},
		{"tag removed", encodeToken(raw[:len(raw)-16]), ErrAuth},
		{"byte appended", encodeToken(append(bytes.Clone(raw), 0)), ErrAuth},
		{"unknown kid", encodeToken(append([]byte{0, 0, 0, 0}, raw[keyIDLen:]...)), ErrUnknownKey},
		{"other key", otherTok, ErrUnknownKey},
		{"kid swapped within ring", encodeToken(relabelled), ErrAuth},
		{"claims not JSON", sealPlaintext(b, "not json"), ErrMalformed},
		{"claims version 2", sealPlaintext(b, `{"v":2,"iat":1,"exp":2,"m":"tools/call","t":"x","a":"","aud":"srv","p":null,"s":""}`), ErrMalformed},
		{"claims version missing", sealPlaintext(b, `{"iat":1,"exp":2}`), ErrMalformed},
		{"claims unknown field", sealPlaintext(b, `{"v":1,"x":1}`), ErrMalformed},
		{"claims trailing data", sealPlaintext(b, `{"v":1}{"v":1}`), ErrMalformed},
		{"claims array", sealPlaintext(b, `[1]`), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.verify(tt.tok, testBind)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if _, err := b.Open(tt.tok); err == nil {
				t.Fatal("Open accepted")
			}
		})
	}
	// Negative control: the genuine token passes the same path.
	if _, err := b.verify(tok, testBind); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func mustIssue(t testing.TB, b *Boundary, bind Binding, state string) string {
	t.Helper()
	tok, err := b.issue(bind, state)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestVerifyTimeAndBinding(t *testing.T) {
	ttl := DefaultTTL
	skew := DefaultMaxSkew
	with := func(f func(*Binding)) Binding { b := testBind; f(&b); return b }
	tests := []struct {
		name     string
		sealAt   time.Time
		verifyAt time.Time
		verifyB  Binding
		want     error // nil: accepted
	}{
		{"same instant", t0, t0, testBind, nil},
		{"just before expiry", t0, t0.Add(ttl - time.Millisecond), testBind, nil},
		{"at expiry", t0, t0.Add(ttl), testBind, ErrExpired},
		{"long after expiry", t0, t0.Add(24 * time.Hour), testBind, ErrExpired},
		{"issued within skew", t0.Add(skew), t0, testBind, nil},
		{"issued beyond skew", t0.Add(skew + time.Millisecond), t0, testBind, ErrFuture},
		{"issued far future", t0.Add(365 * 24 * time.Hour), t0, testBind, ErrFuture},
		{"other method", t0, t0, with(func(b *Binding) { b.Method = "prompts/get" }), ErrMismatch},
		{"other target", t0, t0, with(func(b *Binding) { b.Target = "delete_all" }), ErrMismatch},
		{"other arguments", t0, t0, with(func(b *Binding) { b.ArgsDigest = mustDigest(`{"path":"b.txt"}`) }), ErrMismatch},
		{"digest prefix", t0, t0, with(func(b *Binding) { b.ArgsDigest = b.ArgsDigest[:63] }), ErrMismatch},
		{"other principal", t0, t0, with(func(b *Binding) { b.Principal = "bob" }), ErrMismatch},
		{"principal dropped", t0, t0, with(func(b *Binding) { b.Principal = "" }), ErrMismatch},
		{"principal extended", t0, t0, with(func(b *Binding) { b.Principal = "alice\x00" }), ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{tt.sealAt}
			b := newTestBoundary(t, clk, secret(1))
			tok := mustIssue(t, b, testBind, "s")
			clk.t = tt.verifyAt
			_, err := b.verify(tok, tt.verifyB)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("err = %v, want accepted", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyAudience(t *testing.T) {
	clk := &clock{t0}
	k := [][]byte{secret(1)}
	a, _ := New(Options{Keys: k, Audience: "server-a", Now: clk.now})
	b, _ := New(Options{Keys: k, Audience: "server-b", Now: clk.now})
	tok := mustIssue(t, a, testBind, "s")
	if _, err := b.verify(tok, testBind); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other audience: err = %v", err)
	}
	if _, err := a.verify(tok, testBind); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestVerifyLifetimeBeyondTTL: a token whose expiry lies further from its
// issue time than the verifier's TTL is refused even before it expires.
func TestVerifyLifetimeBeyondTTL(t *testing.T) {
	clk := &clock{t0}
	k := [][]byte{secret(1)}
	long, _ := New(Options{Keys: k, Audience: "srv", Now: clk.now, TTL: time.Hour})
	short, _ := New(Options{Keys: k, Audience: "srv", Now: clk.now, TTL: time.Minute})
	tok := mustIssue(t, long, testBind, "s")
	if _, err := short.verify(tok, testBind); !errors.Is(err, ErrExpired) {
		t.Fatalf("err = %v, want ErrExpired", err)
	}
	if _, err := long.verify(tok, testBind); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestVerifyMalformedPrincipalClaim(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	for _, p := range [][]byte{nil, {}, make([]byte, principalN-1), make([]byte, principalN), make([]byte, principalN+1)} {
		tok, err := b.Seal(Claims{IssuedAt: t0.UnixMilli(), Expiry: t0.Add(time.Minute).UnixMilli(),
			Method: testBind.Method, Target: testBind.Target, ArgsDigest: testBind.ArgsDigest, Audience: "srv", Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.verify(tok, testBind); !errors.Is(err, ErrMismatch) {
			t.Fatalf("p of %d bytes: err = %v", len(p), err)
		}
	}
}

func TestSealRejectsInvalidUTF8(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	for _, c := range []Claims{{State: "a\xffb"}, {Target: "\xed\xa0\x80"}, {Method: "\x80"}, {Audience: "\xc0"}} {
		if _, err := b.Seal(c); err == nil {
			t.Fatalf("Seal(%+v) accepted invalid UTF-8", c)
		}
	}
	if _, err := b.Seal(Claims{State: "a\uFFFDb"}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestKeyRotation(t *testing.T) {
	clk := &clock{t0}
	old, next := secret(1), secret(2)
	phase0 := newTestBoundary(t, clk, old)       // [old]
	phase1 := newTestBoundary(t, clk, old, next) // [old, new]: new verifies, old still seals
	phase2 := newTestBoundary(t, clk, next, old) // [new, old]: new seals, old verifies
	phase3 := newTestBoundary(t, clk, next)      // [new]: old retired

	oldTok := mustIssue(t, phase0, testBind, "from-old")
	p1Tok := mustIssue(t, phase1, testBind, "from-p1")
	newTok := mustIssue(t, phase2, testBind, "from-new")

	if !bytes.Equal(rawToken(t, p1Tok)[:keyIDLen], rawToken(t, oldTok)[:keyIDLen]) {
		t.Fatal("phase 1 did not seal with the first key")
	}
	if bytes.Equal(rawToken(t, newTok)[:keyIDLen], rawToken(t, oldTok)[:keyIDLen]) {
		t.Fatal("phase 2 sealed with the old key")
	}
	accept := []struct {
		name string
		b    *Boundary
		tok  string
	}{
		{"phase1 verifies old", phase1, oldTok},
		{"phase1 verifies new", phase1, newTok},
		{"phase2 verifies old", phase2, oldTok},
		{"phase2 verifies phase1", phase2, p1Tok},
		{"phase3 verifies new", phase3, newTok},
		{"phase0 verifies phase1", phase0, p1Tok},
	}
	for _, a := range accept {
		if _, err := a.b.verify(a.tok, testBind); err != nil {
			t.Errorf("%s: %v", a.name, err)
		}
	}
	for _, r := range []struct {
		name string
		b    *Boundary
		tok  string
	}{
		{"phase3 refuses retired old", phase3, oldTok},
		{"phase0 refuses new", phase0, newTok},
	} {
		if _, err := r.b.verify(r.tok, testBind); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s: err = %v, want ErrUnknownKey", r.name, err)
		}
	}
}

func TestEphemeralKeys(t *testing.T) {
	clk := &clock{t0}
	a := newTestBoundary(t, clk)
	b := newTestBoundary(t, clk)
	tok := mustIssue(t, a, testBind, "s")
	if _, err := a.verify(tok, testBind); err != nil {
		t.Fatalf("same process: %v", err)
	}
	// Another process (or a restart) has another random key.
	if _, err := b.verify(tok, testBind); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("other ephemeral boundary: err = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	ok := [][]byte{secret(1)}
	tests := []struct {
		name string
		opts Options
	}{
		{"no audience", Options{Keys: ok}},
		{"empty key list", Options{Keys: [][]byte{}, Audience: "a"}},
		{"short key", Options{Keys: [][]byte{make([]byte, 31)}, Audience: "a"}},
		{"nil key", Options{Keys: [][]byte{nil}, Audience: "a"}},
		{"duplicate key", Options{Keys: [][]byte{secret(1), secret(2), secret(1)}, Audience: "a"}},
		{"negative TTL", Options{Keys: ok, Audience: "a", TTL: -time.Second}},
		{"sub-millisecond TTL", Options{Keys: ok, Audience: "a", TTL: time.Microsecond}},
		{"negative skew", Options{Keys: ok, Audience: "a", MaxSkew: -time.Second}},
	}
	for _, tt := range tests {
		if _, err := New(tt.opts); err == nil {
			t.Errorf("%s: New accepted", tt.name)
		}
	}
	if _, err := New(Options{Keys: ok, Audience: "a"}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// leaks reports whether s shows secret in any common spelling.
func leaks(s string, secret []byte) bool {
	for _, form := range []string{
		string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret),
		base64.RawURLEncoding.EncodeToString(secret), fmt.Sprintf("%v", secret), fmt.Sprintf("%q", secret),
	} {
		if strings.Contains(s, form) {
			return true
		}
	}
	// Any 8-byte window of the secret counts too.
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(s, string(secret[i:i+8])) {
			return true
		}
	}
	return false
}

func TestLeaksControl(t *testing.T) {
	s := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	for _, msg := range []string{fmt.Sprintf("bad key %s", s), fmt.Sprintf("bad key %x", s), fmt.Sprintf("key %v", s), "…" + string(s[5:20])} {
		if !leaks(msg, s) {
			t.Errorf("leaks missed %q", msg)
		}
	}
	if leaks("key 0 is 31 bytes", s) {
		t.Error("false positive")
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	short := []byte("SHORT-SECRET-abcdefghijkl") // 25 bytes
	long := []byte("LONG-SECRET-abcdefghijklmnopqrstuvwxyz-0123")
	var errs []error
	_, err := New(Options{Keys: [][]byte{short}, Audience: "a"})
	errs = append(errs, err)
	_, err = New(Options{Keys: [][]byte{long, long}, Audience: "a"})
	errs = append(errs, err)

	clk := &clock{t0}
	b := newTestBoundary(t, clk, long)
	tok := mustIssue(t, b, testBind, "SECRET-STATE-xyz")
	other := newTestBoundary(t, clk, secret(9))
	raw := rawToken(t, tok)
	raw[len(raw)-1] ^= 1
	for _, tk := range []string{tok + "\n", encodeToken(raw), "v1.!!!" + tok} {
		_, err := b.verify(tk, testBind)
		errs = append(errs, err)
	}
	_, err = other.verify(tok, testBind)
	errs = append(errs, err)
	_, err = b.verify(tok, Binding{Method: "tools/call", Target: "x", Principal: "alice"})
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		msg := err.Error()
		if leaks(msg, short) || leaks(msg, long) || strings.Contains(msg, "SECRET-STATE") ||
			strings.Contains(msg, strings.TrimPrefix(tok, tokenPrefix)[:16]) {
			t.Errorf("case %d: error shows secret material: %q", i, msg)
		}
	}
}
