package approve

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// TestApproverFromIDToken: the approver an ID token names, once go-oidc
// has verified it (signature, issuer, audience, expiry): a token for
// several audiences is refused unless its azp is this client (token
// substitution: a token another client obtained, naming this one too); a
// token without a subject names no one; groups are the claim's non-empty
// values, once each, prefixed. The tokens that pass are the controls.
func TestApproverFromIDToken(t *testing.T) {
	const issuer, client = "https://issuer.example", "page"
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	verifier := oidc.NewVerifier(issuer, &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.Public()}},
		&oidc.Config{ClientID: client, SupportedSigningAlgs: []string{oidc.ES256}})
	s := &signIn{oauth: oauth2.Config{ClientID: client}, groups: "groups"}
	for _, c := range []struct {
		name   string
		claims map[string]any
		id     string // "": refused
		groups []string
	}{
		{"one audience", map[string]any{"sub": "alice"}, "sub:alice", nil},
		{"two audiences, azp this client", map[string]any{"sub": "alice", "aud": []string{client, "other"}, "azp": client}, "sub:alice", nil},
		{"two audiences, azp another client", map[string]any{"sub": "alice", "aud": []string{client, "other"}, "azp": "other"}, "", nil},
		{"two audiences, no azp", map[string]any{"sub": "alice", "aud": []string{"other", client}}, "", nil},
		{"no subject", map[string]any{"sub": ""}, "", nil},
		{"groups", map[string]any{"sub": "carol", "groups": []string{"ops", "", "audit", "ops"}}, "sub:carol", []string{"group:ops", "group:audit"}},
		{"one group as a string", map[string]any{"sub": "carol", "groups": "ops"}, "sub:carol", []string{"group:ops"}},
		{"an empty group", map[string]any{"sub": "carol", "groups": ""}, "sub:carol", nil},
		{"groups neither", map[string]any{"sub": "carol", "groups": 7}, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			claims := map[string]any{"iss": issuer, "aud": client, "exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix()}
			for k, v := range c.claims {
				claims[k] = v
			}
			payload, err := json.Marshal(claims)
			if err != nil {
				t.Fatal(err)
			}
			jws, err := signer.Sign(payload)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := jws.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			idt, err := verifier.Verify(context.Background(), raw)
			if err != nil {
				t.Fatalf("go-oidc refused the token: %v", err)
			}
			a, err := s.approver(idt)
			switch {
			case c.id == "" && err == nil:
				t.Errorf("approver: %+v, want refused", a)
			case c.id != "" && (err != nil || a.ID != c.id || !slices.Equal(a.Groups, c.groups)):
				t.Errorf("approver: %+v, %v; want %s in %q", a, err, c.id, c.groups)
			}
		})
	}
}
