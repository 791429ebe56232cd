package bearer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataPath is where RFC 9728 puts a resource's metadata: at this path
// on the resource's host, followed by the resource's own path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Options configures [Middleware].
type Options struct {
	// Verify checks a bearer token and says whose it is; required. A token
	// that is not good must fail with an error wrapping
	// auth.ErrInvalidToken.
	Verify auth.TokenVerifier
	// Resource is the server's resource identifier: the URL its clients
	// connect to, as RFC 9728's "resource" and the audience a JWT must
	// name. Empty means each request's own URL, as its Host header says:
	// fit only for tokens that name no audience ([Tokens], [Generate]).
	Resource string
	// AuthorizationServers are the issuers whose tokens this resource
	// accepts, advertised in its metadata.
	AuthorizationServers []string
	// Scopes are required of every token, and advertised.
	Scopes []string
	// Name is the resource's human-readable name in its metadata.
	Name string
	// Leeway tolerates clock skew when go-sdk checks a token's expiry.
	Leeway time.Duration
	// Logger receives each refusal's reason at debug level (an attacker
	// can cause any number of them); nil means slog.Default().
	Logger *slog.Logger
}

// ErrNoPrincipal refuses a token that verified but names no one: the empty
// principal is the one every unauthenticated caller shares.
var ErrNoPrincipal = fmt.Errorf("%w: it names no principal", auth.ErrInvalidToken)

// Middleware returns an http middleware that serves the resource's metadata
// and lets through only requests with a good bearer token, their
// auth.TokenInfo (UserID: the principal) in the request's context.
func Middleware(opts Options) (func(http.Handler) http.Handler, error) {
	if opts.Verify == nil {
		return nil, errors.New("bearer: no verifier")
	}
	var resourcePath string
	if opts.Resource != "" {
		u, err := url.Parse(opts.Resource)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return nil, fmt.Errorf("bearer: resource %q: want an absolute http(s) URL without a fragment", opts.Resource)
		}
		resourcePath = strings.TrimSuffix(u.Path, "/")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		ti, err := opts.Verify(ctx, token, r)
		if err == nil && (ti == nil || ti.UserID == "") {
			err = ErrNoPrincipal
		}
		if err != nil {
			log.DebugContext(ctx, "bearer: token refused", "remote", r.RemoteAddr, "err", err)
			return nil, err
		}
		return ti, nil
	}
	// resource is the resource identifier of r: the configured one, or r's
	// own URL.
	resource := func(r *http.Request) (id, metadataURL string) {
		if opts.Resource != "" {
			u, _ := url.Parse(opts.Resource)
			return opts.Resource, u.Scheme + "://" + u.Host + MetadataPath + resourcePath
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		return scheme + "://" + r.Host, scheme + "://" + r.Host + MetadataPath
	}
	metadata := func(r *http.Request) http.Handler {
		id, _ := resource(r)
		return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               id,
			AuthorizationServers:   opts.AuthorizationServers,
			ScopesSupported:        opts.Scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           opts.Name,
		})
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := r.URL.Path; p == MetadataPath || (resourcePath != "" && p == MetadataPath+resourcePath) {
				metadata(r).ServeHTTP(w, r)
				return
			}
			_, metadataURL := resource(r)
			require := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
				ResourceMetadataURL: metadataURL,
				Scopes:              opts.Scopes,
				ClockSkew:           opts.Leeway,
				// Static tokens carry no expiry; a JWT's exp is required
				// by its verifier.
				AllowMissingExpiration: true,
			})
			// The refusal goes through challenge, which adds RFC 6750's
			// error code; a request that passes gets w itself, so the MCP
			// handler can flush and stream.
			pass := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) })
			require(pass).ServeHTTP(&challenge{ResponseWriter: w, sentToken: r.Header.Get("Authorization") != ""}, r)
		})
	}, nil
}

// challenge adds RFC 6750's error attribute to the WWW-Authenticate header
// go-sdk writes with a 401 or 403, which it leaves out: clients such as
// the TypeScript SDK ask for more scopes only on error="insufficient_scope".
type challenge struct {
	http.ResponseWriter
	sentToken bool
	done      bool
}

func (c *challenge) WriteHeader(code int) {
	if !c.done {
		c.done = true
		switch {
		case code == http.StatusForbidden:
			addError(c.Header(), "insufficient_scope")
		case code == http.StatusUnauthorized && c.sentToken:
			// RFC 6750 §3.1: no error code when no credentials were sent.
			addError(c.Header(), "invalid_token")
		case code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "":
			c.Header().Set("WWW-Authenticate", "Bearer")
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *challenge) Write(b []byte) (int, error) {
	if !c.done {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func addError(h http.Header, code string) {
	v := h.Get("WWW-Authenticate")
	switch {
	case v == "":
		v = "Bearer error=" + `"` + code + `"`
	case v == "Bearer":
		v += " error=" + `"` + code + `"`
	default:
		v += `, error="` + code + `"`
	}
	h.Set("WWW-Authenticate", v)
}
