// Package bearer authenticates the callers of an MCP server over HTTP, as
// the MCP authorization specification asks of a server: an OAuth 2.1
// resource server that accepts bearer tokens and says, when it refuses
// one, where to get a better one.
//
// [Middleware] wraps the MCP handler. It serves the server's protected
// resource metadata (RFC 9728) at /.well-known/oauth-protected-resource
// (and at that path followed by the resource's own path); every other
// request must carry "Authorization: Bearer TOKEN", which a verifier turns
// into an [auth.TokenInfo]. Refusals are go-sdk's ([auth.RequireBearerToken])
// with RFC 6750's error codes added: 401 with
//
//	WWW-Authenticate: Bearer resource_metadata="…/.well-known/oauth-protected-resource", error="invalid_token"
//
// (no error code when no token was sent), and 403 with
// error="insufficient_scope" and the scopes required when a valid token
// lacks one. The token's principal becomes TokenInfo.UserID, which the
// requestState boundary binds every approval to and the ledger counts caps
// by (package requeststate's default Principal).
//
// Three verifiers:
//
//   - [JWT]: access tokens of an OAuth 2.1 / OpenID Connect authorization
//     server, found by discovery (RFC 8414, then OpenID Connect Discovery)
//     from its issuer URL. A token is read in one spelling only: three
//     parts of canonical base64url (no padding, no line break, unused
//     trailing bits zero), a header and a payload that are UTF-8 JSON
//     objects in which no object, at any depth, names a member twice; and
//     its claims are read by their exact names, so an "EXP" or an "Aud" is
//     another claim, never "exp" or "aud" (TestJWTClaimNamesExact,
//     TestJWTNonCanonicalSignature). It is accepted when its signature verifies
//     with a key of the issuer's JWKS under an allowed asymmetric
//     algorithm; iss is the issuer; aud names this resource (RFC 8707,
//     RFC 9068); exp is present and not past, nbf and iat not ahead,
//     each within [JWTOptions.Leeway] (30 s by default); the principal
//     claim ("sub" by default) is a non-empty string without control
//     characters; and the required scopes (in "scope", or "scp") are all
//     there. The JWKS is refetched every [JWTOptions.RefreshInterval] (15
//     minutes by default), and at once for a token with an unknown kid, at
//     most once per [JWTOptions.UnknownKeyInterval] (a minute).
//   - [Tokens], read from a file of SHA-256 hashes of tokens, each with
//     its principal, that only its owner can read or write ([ReadTokens]).
//   - [Generate]: one random token made at start, written to a file only
//     the operator can read, the convention of Jupyter and of MCP
//     Inspector since its unauthenticated-proxy CVE.
//
// # What it does not guarantee
//
// A token is a bearer credential: whoever holds it is its principal. The
// middleware does not bind tokens to a TLS connection or a key (no mTLS,
// no DPoP), does not check revocation (a JWT stays valid until its exp;
// a key the issuer withdraws from its JWKS is still trusted until the next
// refresh, at most [JWTOptions.RefreshInterval] later), and does not
// serve TLS: put it behind a TLS-terminating proxy, or on loopback. It
// authenticates; it does not rate-limit (the ledger's per-principal caps
// bound what one principal can hold, not how fast it asks).
//
// # Why go-jose
//
// JWTs are verified with github.com/go-jose/go-jose/v4, the JOSE library
// under coreos/go-oidc and Kubernetes' service-account tokens: its parser
// takes the allowed algorithms as a required argument (a token signed with
// none, or HS256 with the public key as its secret, fails before any key is
// touched), it parses and validates JWKS, and it checks exp, nbf and iat
// with a leeway. The alternatives were weighed: coreos/go-oidc v3 checks
// exp with no leeway and nbf with a fixed five minutes, compares aud to one
// client ID, and refetches the JWKS on every unknown kid with no rate
// limit; MicahParks/keyfunc v3 (a key lookup for golang-jwt, not go-jose)
// makes each request with an unknown kid wait on its refetch rate limiter,
// up to a minute by default, and runs the refetch under that same deadline,
// so a flood of made-up kids holds every connection; lestrrat-go/jwx v3
// does all of it, behind a far larger API and dependency tree. go-jose
// decodes base64url leniently (unused bits, line breaks) and leaves the
// claims to encoding/json, whose struct fields match names in any case
// and take the last of two: the exact form is checked here before go-jose
// parses, and claims are read from a map by exact name. What go-jose
// lacks, the JWKS cache, is keySet here: a set refreshed every
// RefreshInterval, refetched at once for an unknown kid at most once per
// [JWTOptions.UnknownKeyInterval] (a token with an unknown kid beyond that
// is refused at once, without waiting), concurrent fetches shared.
// Discovery is written here too: go-sdk's oauthex.GetAuthServerMeta is
// made for clients, and refuses an issuer on a private network, where a
// company's identity provider usually is.
package bearer
