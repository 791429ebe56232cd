package bearer_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
)

// signRaw signs the header and payload bytes exactly as given, with an RSA
// signer under RS256: what an issuer that writes its JSON by hand issues.
func signRaw(t *testing.T, s signer, header, payload string) string {
	t.Helper()
	in := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sum := sha256.Sum256([]byte(in))
	sig, err := s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestJWTClaimNamesExact: claim and header parameter names are matched
// exactly, as RFC 7519 says they are compared, and a name given twice
// refuses the token. Each refused token stands beside a control that
// differs only in what is checked and is accepted: a claim whose name
// differs in case is another claim, not a duplicate.
func TestJWTClaimNamesExact(t *testing.T) {
	k1 := newRSASigner("k1", 0)
	is := newIssuer(t, "", k1)
	j := newJWT(t, is, bearer.JWTOptions{})
	now := time.Now()
	past, future := now.Add(-time.Hour).Unix(), now.Add(time.Hour).Unix()
	const head = `{"alg":"RS256","kid":"k1","typ":"at+jwt"}`
	// claims writes a payload by hand: the good claims, then extra members
	// (which may repeat or shadow them) in the order given.
	claims := func(extra string, drop ...string) string {
		members := []string{
			fmt.Sprintf(`"iss":%q`, is.url),
			`"sub":"alice"`,
			fmt.Sprintf(`"aud":%q`, resource),
			fmt.Sprintf(`"iat":%d`, now.Unix()),
			fmt.Sprintf(`"exp":%d`, future),
			`"scope":"mcp:tools openid"`,
		}
		members = slices.DeleteFunc(members, func(m string) bool {
			return slices.ContainsFunc(drop, func(d string) bool { return strings.HasPrefix(m, `"`+d+`":`) })
		})
		if extra != "" {
			members = append(members, extra)
		}
		return "{" + strings.Join(members, ",") + "}"
	}
	tests := []struct {
		name            string
		header, payload string
		want            error // nil: accepted as alice
	}{
		{"control: the good claims, written by hand", head, claims(""), nil},
		{"past exp beside a future EXP", head, claims(fmt.Sprintf(`"exp":%d,"EXP":%d`, past, future), "exp"), bearer.ErrExpired},
		{"control: future exp beside a past EXP", head, claims(fmt.Sprintf(`"EXP":%d`, past)), nil},
		{"only EXP, future", head, claims(fmt.Sprintf(`"EXP":%d`, future), "exp"), bearer.ErrExpired},
		{"wrong aud beside the right Aud", head, claims(fmt.Sprintf(`"aud":"https://other.example.com","Aud":%q`, resource), "aud"), bearer.ErrAudience},
		{"control: right aud beside a wrong Aud", head, claims(`"Aud":"https://other.example.com"`), nil},
		{"wrong iss beside the right Iss", head, claims(fmt.Sprintf(`"iss":"https://evil.example.com","Iss":%q`, is.url), "iss"), bearer.ErrIssuer},
		{"control: right iss beside a wrong ISS", head, claims(`"ISS":"https://evil.example.com"`), nil},
		{"control: Sub beside sub", head, claims(`"Sub":"mallory"`), nil},
		{"sub twice", head, claims(`"sub":"mallory"`), bearer.ErrMalformed},
		{"sub twice, once escaped", head, claims(`"s\u0075b":"mallory"`), bearer.ErrMalformed},
		{"exp twice", head, claims(fmt.Sprintf(`"exp":%d`, past)), bearer.ErrMalformed},
		{"a member twice inside a claim", head, claims(`"ext":{"a":1,"b":[{"c":1,"c":2}]}`), bearer.ErrMalformed},
		{"control: the same name in two objects", head, claims(`"ext":{"a":1,"b":[{"a":1},{"a":2}]}`), nil},
		{"header: kid twice", `{"alg":"RS256","kid":"k9","kid":"k1","typ":"at+jwt"}`, claims(""), bearer.ErrMalformed},
		{"header: alg twice", `{"alg":"none","alg":"RS256","kid":"k1"}`, claims(""), bearer.ErrMalformed},
		{"control: header without typ", `{"alg":"RS256","kid":"k1"}`, claims(""), nil},
		{"payload not an object", head, `["alice"]`, bearer.ErrMalformed},
		{"payload not UTF-8", head, claims("\"x\":\"\xff\""), bearer.ErrMalformed},
		// A time, issuer or audience the verifier cannot read fails closed:
		// a not-before written as a date string must not be skipped.
		{"nbf a date string", head, claims(`"nbf":"2099-01-01T00:00:00Z"`), bearer.ErrMalformed},
		{"iat a string", head, claims(fmt.Sprintf(`"iat":"%d"`, now.Unix()), "iat"), bearer.ErrMalformed},
		{"exp a string", head, claims(fmt.Sprintf(`"exp":"%d"`, future), "exp"), bearer.ErrMalformed},
		{"aud a number", head, claims(`"aud":1`, "aud"), bearer.ErrMalformed},
		{"iss an object", head, claims(fmt.Sprintf(`"iss":{"url":%q}`, is.url), "iss"), bearer.ErrMalformed},
		{"control: nbf a past number", head, claims(fmt.Sprintf(`"nbf":%d`, past)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti, err := j.Verify(context.Background(), signRaw(t, k1, tt.header, tt.payload), nil)
			if tt.want == nil {
				if err != nil || ti.UserID != "alice" || !slices.Equal(ti.Scopes, []string{"mcp:tools", "openid"}) {
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

// TestJWTNonCanonicalSignature: a token is accepted in one spelling only.
// Each variant decodes, with Go's lenient base64 decoder, to the very bytes
// of the good token, and go-jose alone verifies it (the control: the
// refusal is this package's check); the verifier refuses it and accepts
// the good token.
func TestJWTNonCanonicalSignature(t *testing.T) {
	k1, k2 := newRSASigner("k1", 0), newECSigner(t, "k2")
	is := newIssuer(t, "", k1, k2)
	j := newJWT(t, is, bearer.JWTOptions{})
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// unusedBit flips the lowest bit of a part's last character: a bit no
	// byte is made of when the part's length is not a multiple of 3 bytes.
	unusedBit := func(p string) string {
		i := strings.IndexByte(alphabet, p[len(p)-1])
		return p[:len(p)-1] + string(alphabet[i^1])
	}
	lineBreak := func(p string) string { return p[:4] + "\r\n" + p[4:] }
	// Claims padded so the payload's length leaves unused bits.
	c := is.claims(resource)
	for pad := ""; ; pad += "x" {
		c["pad"] = pad
		if b, _ := jwtPayload(t, k1, c); len(b)%3 != 0 {
			break
		}
	}
	for _, s := range []signer{k1, k2} {
		good := sign(t, s, c)
		parts := strings.Split(good, ".")
		for i, p := range parts {
			raw, _ := base64.RawURLEncoding.DecodeString(p)
			if len(raw)%3 == 0 {
				t.Fatalf("%s part %d: %d bytes leave no unused bits; the test needs some", s.alg, i, len(raw))
			}
		}
		variants := []struct {
			name string
			part int
			edit func(string) string
		}{
			{"signature: an unused bit set", 2, unusedBit},
			{"payload: an unused bit set", 1, unusedBit},
			{"header: an unused bit set", 0, unusedBit},
			{"signature: a line break inside", 2, lineBreak},
			{"payload: a line break inside", 1, lineBreak},
		}
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s/%s", s.alg, v.name), func(t *testing.T) {
				ps := slices.Clone(parts)
				ps[v.part] = v.edit(ps[v.part])
				odd := strings.Join(ps, ".")
				if odd == good {
					t.Fatal("the variant is the good token")
				}
				a, _ := base64.RawURLEncoding.DecodeString(parts[v.part])
				b, err := base64.RawURLEncoding.DecodeString(ps[v.part])
				if err != nil || string(a) != string(b) {
					t.Fatalf("control: the variant's part decodes to other bytes (%v)", err)
				}
				tok, err := jwt.ParseSigned(odd, []jose.SignatureAlgorithm{s.alg})
				var m map[string]any
				if err != nil || tok.Claims(s.key.Public(), &m) != nil || m["sub"] != "alice" {
					t.Fatalf("control: go-jose alone refuses the variant (%v), so it does not test this package", err)
				}
				if ti, err := j.Verify(context.Background(), odd, nil); !errors.Is(err, bearer.ErrMalformed) {
					t.Fatalf("Verify(variant) = %+v, %v; want ErrMalformed", ti, err)
				}
				if ti, err := j.Verify(context.Background(), good, nil); err != nil || ti.UserID != "alice" {
					t.Fatalf("Verify(good) = %+v, %v", ti, err)
				}
			})
		}
	}
}

// jwtPayload returns the payload bytes sign writes for claims.
func jwtPayload(t *testing.T, s signer, claims map[string]any) ([]byte, error) {
	t.Helper()
	parts := strings.Split(sign(t, s, claims), ".")
	return base64.RawURLEncoding.DecodeString(parts[1])
}
