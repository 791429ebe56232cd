package bearer_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/internal/bearer"
)

// echo answers with the principal the middleware let through.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "hello "+auth.TokenInfoFromContext(r.Context()).UserID)
})

func serve(t *testing.T, opts bearer.Options) *httptest.Server {
	t.Helper()
	mw, err := bearer.Middleware(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mw(echo))
	t.Cleanup(hs.Close)
	return hs
}

func get(t *testing.T, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// staticVerifier knows two tokens; "noscope" verifies without scopes.
func staticVerifier(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	switch token {
	case "alice-token":
		return &auth.TokenInfo{UserID: "alice", Scopes: []string{"mcp:tools"}}, nil
	case "noscope-token":
		return &auth.TokenInfo{UserID: "bob"}, nil
	case "nobody-token":
		return &auth.TokenInfo{Scopes: []string{"mcp:tools"}}, nil
	}
	return nil, auth.ErrInvalidToken
}

// TestMiddleware checks the challenge of each refusal (RFC 6750, RFC
// 9728), the metadata, and that a good token passes with its principal.
func TestMiddleware(t *testing.T) {
	hs := serve(t, bearer.Options{
		Verify:               staticVerifier,
		Resource:             "https://files.example.com/mcp",
		AuthorizationServers: []string{"https://auth.example.com"},
		Scopes:               []string{"mcp:tools"},
		Name:                 "files",
	})
	const meta = `resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`
	tests := []struct {
		name, token string
		code        int
		challenge   string // the whole WWW-Authenticate header; "" for none
	}{
		{"no token", "", 401, `Bearer ` + meta + `, scope="mcp:tools"`},
		{"unknown token", "mallory-token", 401, `Bearer ` + meta + `, scope="mcp:tools", error="invalid_token"`},
		{"missing scope", "noscope-token", 403, `Bearer ` + meta + `, scope="mcp:tools", error="insufficient_scope"`},
		{"no principal", "nobody-token", 401, `Bearer ` + meta + `, scope="mcp:tools", error="invalid_token"`},
		{"good", "alice-token", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := get(t, hs.URL+"/mcp", tt.token)
			if res.StatusCode != tt.code || res.Header.Get("WWW-Authenticate") != tt.challenge {
				t.Fatalf("%d, WWW-Authenticate %q; want %d, %q (body %q)", res.StatusCode, res.Header.Get("WWW-Authenticate"), tt.code, tt.challenge, body)
			}
			if tt.code == 200 && body != "hello alice" {
				t.Fatalf("body %q, want alice let through", body)
			}
		})
	}
	for _, path := range []string{bearer.MetadataPath + "/mcp", bearer.MetadataPath} {
		res, body := get(t, hs.URL+path, "")
		var m struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
			Methods              []string `json:"bearer_methods_supported"`
		}
		if res.StatusCode != 200 || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
		if m.Resource != "https://files.example.com/mcp" || !slices.Equal(m.AuthorizationServers, []string{"https://auth.example.com"}) ||
			!slices.Equal(m.Scopes, []string{"mcp:tools"}) || !slices.Equal(m.Methods, []string{"header"}) {
			t.Fatalf("GET %s: metadata %+v", path, m)
		}
	}
}

// TestMiddlewareResourceFromHost: without a configured resource, the
// metadata and the challenge name the URL the request was sent to.
func TestMiddlewareResourceFromHost(t *testing.T) {
	hs := serve(t, bearer.Options{Verify: staticVerifier})
	res, _ := get(t, hs.URL, "")
	if want := `Bearer resource_metadata="` + hs.URL + bearer.MetadataPath + `"`; res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("%d %q, want 401 %q", res.StatusCode, res.Header.Get("WWW-Authenticate"), want)
	}
	_, body := get(t, hs.URL+bearer.MetadataPath, "")
	if !strings.Contains(body, `"resource":"`+hs.URL+`"`) || strings.Contains(body, "authorization_servers") {
		t.Fatalf("metadata %s", body)
	}
}

func TestMiddlewareOptions(t *testing.T) {
	for _, opts := range []bearer.Options{
		{},
		{Verify: staticVerifier, Resource: "files.example.com/mcp"},
		{Verify: staticVerifier, Resource: "ftp://files.example.com"},
		{Verify: staticVerifier, Resource: "https://files.example.com/#x"},
	} {
		if _, err := bearer.Middleware(opts); err == nil {
			t.Errorf("Middleware(%+v) succeeded", opts)
		}
	}
}
