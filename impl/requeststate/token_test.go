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

	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
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
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, statetoken.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func encodeToken(raw []byte) string {
	return statetoken.Prefix + base64.RawURLEncoding.EncodeToString(raw)
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
	c, _, err := b.ring.Open(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || c.IssuedAt != t0.UnixMilli() || c.Expiry != t0.Add(DefaultTTL).UnixMilli() ||
		c.Method != testBind.Method || c.Target != testBind.Target || c.ArgsDigest != testBind.ArgsDigest ||
		c.Audience != "srv" || c.State != "st" || len(c.Principal) != statetoken.PrincipalClaimLen {
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
			want := statetoken.ErrAuth
			region := "ciphertext"
			switch {
			case i < statetoken.KeyIDLen:
				want, region = statetoken.ErrUnknownKey, "kid"
			case i < statetoken.KeyIDLen+12:
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
		{"at expiry", t0, t0.Add(ttl), testBind, errExpired},
		{"long after expiry", t0, t0.Add(24 * time.Hour), testBind, errExpired},
		{"issued within skew", t0.Add(skew), t0, testBind, nil},
		{"issued beyond skew", t0.Add(skew + time.Millisecond), t0, testBind, errFuture},
		{"issued far future", t0.Add(365 * 24 * time.Hour), t0, testBind, errFuture},
		{"other method", t0, t0, with(func(b *Binding) { b.Method = "prompts/get" }), errMismatch},
		{"other target", t0, t0, with(func(b *Binding) { b.Target = "delete_all" }), errMismatch},
		{"other arguments", t0, t0, with(func(b *Binding) { b.ArgsDigest = mustDigest(`{"path":"b.txt"}`) }), errMismatch},
		{"digest prefix", t0, t0, with(func(b *Binding) { b.ArgsDigest = b.ArgsDigest[:63] }), errMismatch},
		{"other principal", t0, t0, with(func(b *Binding) { b.Principal = "bob" }), errMismatch},
		{"principal dropped", t0, t0, with(func(b *Binding) { b.Principal = "" }), errMismatch},
		{"principal extended", t0, t0, with(func(b *Binding) { b.Principal = "alice\x00" }), errMismatch},
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
	if _, err := b.verify(tok, testBind); !errors.Is(err, errMismatch) {
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
	if _, err := short.verify(tok, testBind); !errors.Is(err, errExpired) {
		t.Fatalf("err = %v, want errExpired", err)
	}
	if _, err := long.verify(tok, testBind); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestVerifyMalformedPrincipalClaim(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	for _, p := range [][]byte{nil, {}, make([]byte, statetoken.PrincipalClaimLen-1), make([]byte, statetoken.PrincipalClaimLen), make([]byte, statetoken.PrincipalClaimLen+1)} {
		tok, err := b.ring.Seal(statetoken.Claims{IssuedAt: t0.UnixMilli(), Expiry: t0.Add(time.Minute).UnixMilli(),
			Method: testBind.Method, Target: testBind.Target, ArgsDigest: testBind.ArgsDigest, Audience: "srv", Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.verify(tok, testBind); !errors.Is(err, errMismatch) {
			t.Fatalf("p of %d bytes: err = %v", len(p), err)
		}
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

	if !bytes.Equal(rawToken(t, p1Tok)[:statetoken.KeyIDLen], rawToken(t, oldTok)[:statetoken.KeyIDLen]) {
		t.Fatal("phase 1 did not seal with the first key")
	}
	if bytes.Equal(rawToken(t, newTok)[:statetoken.KeyIDLen], rawToken(t, oldTok)[:statetoken.KeyIDLen]) {
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
		if _, err := r.b.verify(r.tok, testBind); !errors.Is(err, statetoken.ErrUnknownKey) {
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
	if _, err := b.verify(tok, testBind); !errors.Is(err, statetoken.ErrUnknownKey) {
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
			strings.Contains(msg, strings.TrimPrefix(tok, statetoken.Prefix)[:16]) {
			t.Errorf("case %d: error shows secret material: %q", i, msg)
		}
	}
}

// TestVerifyLifetimeOneMillisecondBeyondTTL: a token whose lifetime
// exceeds the TTL by a single millisecond is refused (a key holder
// stretching a token's life), one of exactly the TTL is not.
func TestVerifyLifetimeOneMillisecondBeyondTTL(t *testing.T) {
	clk := &clock{t0}
	b := newTestBoundary(t, clk, secret(1))
	for _, tt := range []struct {
		life time.Duration
		ok   bool
	}{{DefaultTTL + time.Millisecond, false}, {DefaultTTL, true}} {
		tok, err := b.ring.Seal(statetoken.Claims{IssuedAt: t0.UnixMilli(), Expiry: t0.Add(tt.life).UnixMilli(),
			Method: testBind.Method, Target: testBind.Target, ArgsDigest: testBind.ArgsDigest, Audience: "srv",
			Principal: b.ring.PrincipalClaim(testBind.Principal)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.verify(tok, testBind)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, errExpired) {
			t.Errorf("lifetime %v: err = %v, want ok=%v", tt.life, err, tt.ok)
		}
	}
}
