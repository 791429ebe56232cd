package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// StoreOptions configures [OpenStore]. The zero value is the secure default.
type StoreOptions struct {
	// AllowRollback accepts a shared store whose configuration can make a
	// spent confirmation pending again (snapshots, unsynced writes,
	// asynchronous replicas: see redisledger.Store.CheckDurability and
	// pgledger.Store.CheckDurability). The risk is logged instead of
	// refused.
	AllowRollback bool
	// Logger receives that warning; nil means slog.Default().
	Logger *slog.Logger
}

// OpenStore opens the ledger store rawURL names, its key space namespaced
// by audience (the server name), so servers of different audiences sharing
// one Redis or database never see each other's confirmations. It connects
// and checks the store answers: an unreachable store is an error here, at
// start-up, not at the first confirmation. A Redis or PostgreSQL store
// whose configuration can bring a spent confirmation back is refused with
// an error wrapping [ErrNotDurable] that names each setting, unless
// opts.AllowRollback. The returned function releases the store.
func OpenStore(ctx context.Context, rawURL, audience string, opts StoreOptions) (ledger.Store, func(), error) {
	scheme, err := storeScheme(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var (
		store      ledger.Store
		closer     func()
		durable    func(context.Context) error
		notDurable error
	)
	switch scheme {
	case "redis":
		s, err := redisledger.Open(ctx, rawURL, redisledger.Options{Namespace: "mcp-confirm:{" + audience + "}:"})
		if err != nil {
			return nil, nil, err
		}
		store, closer, durable, notDurable = s, func() { s.Close() }, s.CheckDurability, redisledger.ErrNotDurable
	case "postgres":
		s, err := pgledger.Open(ctx, rawURL, pgledger.Options{Namespace: audience})
		if err != nil {
			return nil, nil, err
		}
		store, closer, durable, notDurable = s, s.Close, s.CheckDurability, pgledger.ErrNotDurable
	default:
		return ledger.NewMemory(ledger.MemoryOptions{}), func() {}, nil
	}
	err = durable(ctx)
	switch {
	case err == nil:
	case errors.Is(err, notDurable) && opts.AllowRollback:
		opts.Logger.Warn("the ledger's store can bring a spent approval back, and the risk was accepted (AllowRollback)", "risk", err.Error())
	case errors.Is(err, notDurable):
		closer()
		return nil, nil, fmt.Errorf("%w: %w", ErrNotDurable, err)
	default:
		closer()
		return nil, nil, err
	}
	return store, closer, nil
}

// ErrNotDurable reports a shared store [OpenStore] refused because its
// configuration can make a spent confirmation pending again.
var ErrNotDurable = errors.New("the ledger store can undo a redemption")
