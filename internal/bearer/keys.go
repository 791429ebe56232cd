package bearer

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// errUnknownKey: the token's kid is in no key set fetched, and no refetch
// is allowed now.
var errUnknownKey = errors.New("no key with the token's kid")

// keySet is an issuer's JWKS, cached: fetched at start, again when it is
// older than maxAge (lazily, by the first verification that finds it so),
// and at once for a kid it does not hold, at most as often as unknown
// allows. Concurrent fetches are one fetch. A failed refresh keeps the keys
// it had.
type keySet struct {
	url     string
	client  *http.Client
	maxAge  time.Duration
	unknown *rate.Limiter
	now     func() time.Time
	log     *slog.Logger
	fetches singleflight.Group

	mu      sync.Mutex
	keys    map[string]jose.JSONWebKey // by kid; public signing keys only
	fetched time.Time
}

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

// key returns the key named kid ("" when the token names none: then the
// set's only key, if it has exactly one).
func (s *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	s.mu.Lock()
	stale := s.now().Sub(s.fetched) >= s.maxAge
	s.mu.Unlock()
	if stale {
		if err := s.refresh(ctx); err != nil {
			s.log.WarnContext(ctx, "bearer: JWKS refresh failed; keeping the keys fetched before", "url", s.url, "err", err)
		}
	}
	if k, ok := s.lookup(kid); ok {
		return k, nil
	}
	// Never wait for the limiter: under a flood of made-up kids every
	// request would queue behind it.
	if !s.unknown.Allow() {
		return jose.JSONWebKey{}, errUnknownKey
	}
	if err := s.refresh(ctx); err != nil {
		return jose.JSONWebKey{}, fmt.Errorf("%w (refetch: %v)", errUnknownKey, err)
	}
	if k, ok := s.lookup(kid); ok {
		return k, nil
	}
	return jose.JSONWebKey{}, errUnknownKey
}

func (s *keySet) lookup(kid string) (jose.JSONWebKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kid == "" && len(s.keys) == 1 {
		for _, k := range s.keys {
			return k, true
		}
	}
	k, ok := s.keys[kid]
	return k, ok && kid != ""
}

// refresh fetches the set, once for all concurrent callers. The fetch is
// not cancelled with any one caller's context.
func (s *keySet) refresh(ctx context.Context) error {
	ch := s.fetches.DoChan("", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		keys, err := fetchKeys(ctx, s.client, s.url)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.keys, s.fetched = keys, s.now()
		s.mu.Unlock()
		return nil, nil
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchTimeout bounds one fetch of a discovery document or a JWKS.
const fetchTimeout = 10 * time.Second

// fetchKeys fetches the JWKS at url and keeps its public signing keys by
// kid. Keys it cannot use (encryption keys, symmetric keys, RSA keys
// shorter than 2048 bits, types go-jose does not know) are skipped, so that
// one exotic key does not take the issuer's other keys down with it.
func fetchKeys(ctx context.Context, client *http.Client, url string) (map[string]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, client, url, maxJWKSBytes, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	keys := map[string]jose.JSONWebKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		// Public keys only: a symmetric key in the set would let HMAC
		// tokens through, were HS* ever allowed.
		pub := k.Public()
		switch key := pub.Key.(type) {
		case *rsa.PublicKey:
			if key.N.BitLen() < 2048 { // short RSA keys can be factored
				continue
			}
		case *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		if _, dup := keys[k.KeyID]; dup {
			return nil, fmt.Errorf("JWKS: two keys with kid %q", k.KeyID)
		}
		keys[k.KeyID] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS: no usable public signing key")
	}
	return keys, nil
}

// getJSON GETs url and decodes its JSON body, at most limit bytes, into v.
func getJSON(ctx context.Context, client *http.Client, url string, limit int64, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return &statusError{url: url, code: res.StatusCode}
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && mt != "application/jwk-set+json" {
		return fmt.Errorf("%s: content type %q, want application/json", url, res.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("%s: larger than %d bytes", url, limit)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: HTTP status %d", e.url, e.code) }
