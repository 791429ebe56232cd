package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// ErrLedgerURL reports a --ledger URL this server cannot use.
var ErrLedgerURL = errors.New("unsupported ledger URL")

// CheckStoreURL reports whether rawURL names a store OpenStore can open,
// without connecting: "memory:", "redis://", "rediss://", "unix://" (Redis
// over a socket), "postgres://" or "postgresql://".
func CheckStoreURL(rawURL string) error {
	_, err := storeScheme(rawURL)
	return err
}

func storeScheme(rawURL string) (string, error) {
	if rawURL == "" || rawURL == "memory:" {
		return "memory", nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse quotes the whole URL, password included: say less.
		return "", fmt.Errorf("%w: not a URL", ErrLedgerURL)
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix":
		return "redis", nil
	case "postgres", "postgresql":
		return "postgres", nil
	}
	return "", fmt.Errorf("%w: scheme %q (want memory:, redis://, rediss://, unix:// or postgres://)", ErrLedgerURL, u.Scheme)
}

// OpenStore opens the ledger store rawURL names, its key space namespaced
// by audience (the server name), so servers of different audiences sharing
// one Redis or database never see each other's confirmations. It connects
// and checks the store answers: an unreachable store is an error here, at
// start-up, not at the first confirmation. The returned function releases
// the store.
func OpenStore(ctx context.Context, rawURL, audience string) (ledger.Store, func(), error) {
	scheme, err := storeScheme(rawURL)
	if err != nil {
		return nil, nil, err
	}
	switch scheme {
	case "redis":
		s, err := redisledger.Open(ctx, rawURL, redisledger.Options{Namespace: "mcp-confirm:{" + audience + "}:"})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	case "postgres":
		s, err := pgledger.Open(ctx, rawURL, pgledger.Options{Namespace: audience})
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	return ledger.NewMemory(ledger.MemoryOptions{}), func() {}, nil
}
