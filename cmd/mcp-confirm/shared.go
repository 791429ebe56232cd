package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

// ledgerEnv names the environment variable that may hold the ledger URL:
// a process's environment is readable by its own user and root only,
// unlike its arguments.
const ledgerEnv = "MCP_CONFIRM_LEDGER"

// sharedFlags are what the replicas of one service share: its name, its
// key file and its ledger. The server and the proxy both use them.
type sharedFlags struct {
	name          string
	keyFile       string
	ledger        string // as given by --ledger
	ledgerFile    string
	allowRollback bool
	audit         auditFlags

	url      string   // the ledger URL in force, once resolved
	source   string   // where it came from, for messages
	warnings []string // to log once a logger exists
}

// register defines the flags on fs; defaultName is the service's name.
func (s *sharedFlags) register(fs *flag.FlagSet, defaultName string) {
	fs.StringVar(&s.name, "name", defaultName, "the service's name: the requestState audience and the ledger's namespace. Replicas of one service share it;\ndifferent services sharing a Redis or PostgreSQL must not. Letters, digits, '.', '_' and '-'")
	fs.StringVar(&s.keyFile, "key-file", "", "file of requestState keys, one "+keyfile.Prefix+"… line each, as `mcp-confirm keygen FILE` writes\n(the first seals, all verify; '#' starts a comment). It must be readable by its owner only. Share it between\nreplicas. Without it, a random key known only to this process is used")
	fs.StringVar(&s.ledger, "ledger", "", "where pending confirmations are kept: memory: (this process only), redis://HOST:PORT/DB or\npostgres://USER@HOST:PORT/DB. Replicas behind one load balancer must share a redis:// or postgres:// ledger.\nA URL with a password belongs in $"+ledgerEnv+" or --ledger-file, not here, where every local user can\nread it (default: $"+ledgerEnv+", else memory:)")
	fs.BoolVar(&s.allowRollback, "allow-ledger-rollback", false, "accept a Redis or PostgreSQL ledger whose configuration can bring a spent approval back (RDB snapshots,\nappendfsync other than always, fsync or synchronous_commit off, asynchronous replicas): the risk is logged instead\nof refused at start-up")
	s.audit.register(fs)
	fs.StringVar(&s.ledgerFile, "ledger-file", "", "read the ledger URL from this file (its first line that is not blank or a '#' comment); the file must be\nreadable by its owner only")
}

// resolve checks the flags and finds the ledger URL: --ledger, else
// --ledger-file, else $MCP_CONFIRM_LEDGER, else memory:. getenv reads the
// environment.
func (s *sharedFlags) resolve(getenv func(string) string) error {
	if err := storeurl.CheckName(s.name); err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	switch {
	case s.ledger != "" && s.ledgerFile != "":
		return errors.New("--ledger and --ledger-file both given; choose one")
	case s.ledger != "":
		s.url, s.source = s.ledger, "--ledger"
		if hasPassword(s.ledger) {
			s.warnings = append(s.warnings, "--ledger carries a password on the command line, where every local user can read it (ps, /proc); pass the URL in $"+ledgerEnv+" or --ledger-file instead")
		}
	case s.ledgerFile != "":
		u, err := readLedgerFile(s.ledgerFile)
		if err != nil {
			return fmt.Errorf("--ledger-file: %w", err)
		}
		s.url, s.source = u, "--ledger-file "+s.ledgerFile
	case getenv(ledgerEnv) != "":
		s.url, s.source = getenv(ledgerEnv), "$"+ledgerEnv
	default:
		s.url, s.source = "memory:", "--ledger"
	}
	if err := storeurl.Check(s.url); err != nil {
		return fmt.Errorf("%s: %w", s.source, err)
	}
	return s.audit.resolve(s.url)
}

// hasPassword reports whether a ledger URL carries a password.
func hasPassword(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.Contains(raw, "@") // unparsable: assume the worst
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	q := u.Query()
	return q.Has("password") || q.Has("sslpassword")
}

// readLedgerFile reads the URL of a ledger file, checked like a key file.
func readLedgerFile(path string) (string, error) {
	f, err := keyfile.OpenSecret(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var found string
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#':
		case found != "":
			return "", fmt.Errorf("%s: line %d: a second URL (the file holds one)", path, n)
		default:
			found = line
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if found == "" {
		return "", fmt.Errorf("%s holds no URL", path)
	}
	return found, nil
}

// opened is what sharedFlags.open returns.
type opened struct {
	keys  [][]byte // nil without --key-file
	store ledger.Store
	close func()
}

// open reads --key-file and opens the ledger store, its keys namespaced by
// the name. On error, code is the exit status: 2 for a key file refused,
// 1 for a store that cannot be used.
func (s *sharedFlags) open(ctx context.Context, log *slog.Logger) (o opened, code int, err error) {
	if s.keyFile != "" {
		if o.keys, err = keyfile.Read(s.keyFile); err != nil {
			return o, 2, fmt.Errorf("--key-file: %w", err)
		}
	}
	for _, w := range s.warnings {
		log.Warn(w)
	}
	key, err := s.audit.readKey()
	if err != nil {
		return o, 2, err
	}
	life := ctx
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	o.store, o.close, err = storeurl.Open(ctx, s.url, s.name, storeurl.Options{AllowRollback: s.allowRollback, Logger: log,
		Audit: s.audit.on, AuditFile: s.audit.file})
	if errors.Is(err, storeurl.ErrNotDurable) {
		return o, 1, fmt.Errorf("%s: %w\nFix the store's configuration, or accept the risk with --allow-ledger-rollback", s.source, err)
	}
	if err != nil {
		return o, 1, fmt.Errorf("%s: %w", s.source, err)
	}
	o.close = s.audit.start(life, storeurl.Trail(o.store), key, s.name, log, o.close)
	return o, 0, nil
}
