// Package storeurl opens the [ledger.Store] a URL names, as an operator
// gives it to a confirming server: "memory:" (or ""), "redis://",
// "rediss://" and "unix://" (Redis over TCP, TLS or a socket),
// "redis-sentinel://" (a Redis primary its Sentinels fail over; see
// redisledger.Open for the syntax, and the replicas= and wait= parameters
// that make every write wait for the replicas), and "postgres://" or
// "postgresql://" (several hosts and target_session_attrs=read-write
// follow a promoted standby, as pgx reads them). Every replica of one
// service opens the same URL under the same name.
//
// # What it guarantees
//
//   - Namespaces: the name (the service's requestState audience) namespaces
//     the store — the Redis keys live under "mcp-confirm:{NAME}:" (the name
//     is the Redis Cluster hash tag), the PostgreSQL rows under namespace
//     NAME of pgledger's table — so services of different names sharing one
//     Redis or database never see each other's confirmations. Only names of
//     1 to 64 letters, digits, '.', '_' and '-', starting with a letter or
//     digit, are accepted ([CheckName]).
//   - Start-up failures: [Open] connects and checks that the store answers,
//     so an unreachable store is an error at start-up, not at the first
//     confirmation; and it refuses, with [ErrNotDurable] naming each setting,
//     a Redis or PostgreSQL store whose configuration can make a spent
//     confirmation pending again (redisledger.Store.CheckDurability,
//     pgledger.Store.CheckDurability), unless Options.AllowRollback.
//   - Secrets: no error names the URL's password.
//
// # What it does not do
//
// It does not make "memory:" shared: that store lives in this process, so
// replicas behind a load balancer need a Redis or PostgreSQL URL. It does
// not watch the store after Open: a configuration changed later (snapshots
// switched on, a replica made asynchronous) is not noticed. It does not
// check that replicas share their name or their requestState keys: a
// replica of another name is simply another service. Connection pools,
// TLS and timeouts are those the URL asks for, as go-redis and pgx read it.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// ErrUnsupported reports a URL that names no store this package opens.
var ErrUnsupported = errors.New("unsupported ledger URL")

// ErrName reports a service name this package will not namespace a store
// by.
var ErrName = errors.New("unusable service name")

// ErrNotDurable reports a shared store [Open] refused because its
// configuration can make a spent confirmation pending again.
var ErrNotDurable = errors.New("the ledger store can undo a redemption")

// scheme is a kind of store.
type scheme int

const (
	memory scheme = iota
	redisStore
	postgresStore
)

// Check reports whether rawURL names a store [Open] can open, without
// connecting. An error wraps [ErrUnsupported].
func Check(rawURL string) error {
	_, err := parse(rawURL)
	return err
}

func parse(rawURL string) (scheme, error) {
	if rawURL == "" || rawURL == "memory:" {
		return memory, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse quotes the whole URL, password included: say less.
		return 0, fmt.Errorf("%w: not a URL", ErrUnsupported)
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix", redisledger.SentinelScheme:
		return redisStore, nil
	case "postgres", "postgresql":
		return postgresStore, nil
	}
	return 0, fmt.Errorf("%w: scheme %q (want memory:, redis://, rediss://, unix://, redis-sentinel:// or postgres://)", ErrUnsupported, u.Scheme)
}

// validName keeps a name usable as a Redis hash tag and a log field.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName reports whether name can namespace a store. An error wraps
// [ErrName].
func CheckName(name string) error {
	// A name holding '}' or ':' could make one service's Redis key space a
	// prefix of another's, and let it read or spend the other's approvals.
	if !validName.MatchString(name) {
		return fmt.Errorf("%w %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrName, name)
	}
	return nil
}

// redisNamespace is the prefix of every Redis key of the service name.
func redisNamespace(name string) string { return "mcp-confirm:{" + name + "}:" }

// Options configures [Open]. The zero value is the secure default.
type Options struct {
	// AllowRollback accepts a shared store whose configuration can make a
	// spent confirmation pending again (snapshots, unsynced writes,
	// asynchronous replicas: see redisledger.Store.CheckDurability and
	// pgledger.Store.CheckDurability). The risk is logged instead of
	// refused.
	AllowRollback bool
	// Logger receives that warning; nil means slog.Default().
	Logger *slog.Logger
	// Audit keeps the service's audit trail (package audit) in the store:
	// PostgreSQL in tables beside the ledger's (pgledger.Options.Audit);
	// Redis in keys of the namespace (redisledger.Options.Audit); memory:
	// in AuditFile, which it needs. [Trail] returns it.
	Audit bool
	// AuditFile is the JSONL file of a memory: store's trail (created
	// 0600; one process at a time).
	AuditFile string
}

// Trail returns the audit trail a store Open returned keeps, or nil if it
// keeps none.
func Trail(s ledger.Store) audit.Trail {
	if t, ok := s.(interface{ Trail() audit.Trail }); ok {
		return t.Trail()
	}
	return nil
}

// Open opens the store rawURL names, namespaced by name (see the package
// doc), connects and checks that it answers and that its configuration
// cannot undo a redemption (else an error wrapping [ErrNotDurable] that
// names each setting, unless opts.AllowRollback). The returned function
// releases the store.
func Open(ctx context.Context, rawURL, name string, opts Options) (ledger.Store, func(), error) {
	kind, err := parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckName(name); err != nil {
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
	switch kind {
	case redisStore:
		s, err := redisledger.Open(ctx, rawURL, redisledger.Options{Namespace: redisNamespace(name), Audit: opts.Audit})
		if err != nil {
			return nil, nil, err
		}
		store, closer, durable, notDurable = s, func() { s.Close() }, s.CheckDurability, redisledger.ErrNotDurable
	case postgresStore:
		s, err := pgledger.Open(ctx, rawURL, pgledger.Options{Namespace: name, Audit: opts.Audit})
		if err != nil {
			return nil, nil, err
		}
		store, closer, durable, notDurable = s, s.Close, s.CheckDurability, pgledger.ErrNotDurable
	default:
		if !opts.Audit {
			return ledger.NewMemory(ledger.MemoryOptions{}), func() {}, nil
		}
		if opts.AuditFile == "" {
			return nil, nil, errors.New("an audit trail of a memory: ledger needs a file (AuditFile)")
		}
		f, err := audit.OpenFile(opts.AuditFile, audit.FileOptions{})
		if err != nil {
			return nil, nil, err
		}
		return ledger.NewMemory(ledger.MemoryOptions{Audit: f}), func() { f.Close() }, nil
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
