package bearer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
	"github.com/mcp-confirm/mcp-confirm/internal/bearer/bearertest"
)

// kid returns the kid in a JWT's header.
func kid(t *testing.T, token string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

// TestRealAuthorizationServer runs against a third-party authorization
// server (oauth2-mock-server from npm): its metadata and JWKS are
// discovered, the tokens it issues are accepted for their own user, a
// token it issued for another resource is refused, and after it rotates
// in a key of another algorithm, the tokens signed with that key are
// accepted.
func TestRealAuthorizationServer(t *testing.T) {
	as := bearertest.Start(t)
	ctx := context.Background()
	j, err := bearer.NewJWT(ctx, bearer.JWTOptions{Issuer: as.Issuer, Audience: resource})
	if err != nil {
		t.Fatalf("NewJWT against %s: %v", as.Issuer, err)
	}
	if want := as.Issuer + "/jwks"; j.JWKSURI() != want {
		t.Fatalf("discovered jwks_uri %q, want %q", j.JWKSURI(), want)
	}
	for _, user := range []string{"alice", "bob"} {
		ti, err := j.Verify(ctx, as.Token(t, user, "mcp:tools", resource), nil)
		if err != nil || ti.UserID != user || !slices.Equal(ti.Scopes, []string{"mcp:tools"}) {
			t.Fatalf("%s's token: %+v, %v", user, ti, err)
		}
	}
	if _, err := j.Verify(ctx, as.Token(t, "alice", "mcp:tools", "https://other.example.com/mcp"), nil); !errors.Is(err, bearer.ErrAudience) {
		t.Fatalf("token for another resource: %v, want ErrAudience", err)
	}

	first := kid(t, as.Token(t, "alice", "mcp:tools", resource))
	rotated := as.Rotate(t, "ES256")
	seen := map[string]bool{}
	// The server signs with its keys in turn: a few tokens use both.
	for range 4 {
		tok := as.Token(t, "alice", "mcp:tools", resource)
		seen[kid(t, tok)] = true
		if ti, err := j.Verify(ctx, tok, nil); err != nil || ti.UserID != "alice" {
			t.Fatalf("after rotation, token with kid %s: %+v, %v", kid(t, tok), ti, err)
		}
	}
	if !seen[rotated] || !seen[first] {
		t.Fatalf("tokens used kids %v, want the first %s and the rotated %s", seen, first, rotated)
	}
}
