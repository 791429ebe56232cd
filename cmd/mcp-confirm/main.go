// Command mcp-confirm is the reference MCP server of the mcp-confirm
// project: its delete_file tool deletes one file inside the --root
// directories, after the user confirms, at most once.
//
// Usage:
//
//	mcp-confirm --root DIR [--root DIR ...] [--http ADDR] [--key-file FILE] [--ttl 10m] [--ledger URL]
//
// It speaks MCP over stdio unless --http is given. Run mcp-confirm --help
// for every flag.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/impl/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	roots    []string
	keyFile  string
	ttl      time.Duration
	ledger   string
	logLevel slog.Level
	front    frontFlags
}

// rootsFlag collects repeated --root flags.
type rootsFlag []string

func (r *rootsFlag) String() string { return strings.Join(*r, ",") }
func (r *rootsFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty directory")
	}
	*r = append(*r, v)
	return nil
}

const usage = `mcp-confirm — an MCP server whose delete_file tool asks before it deletes, and deletes at most once.

Usage:
  mcp-confirm --root DIR [--root DIR ...] [flags]

It serves MCP over stdio unless --http is given. Without --root, every
delete_file call is refused. "mcp-confirm proxy --help" describes the
confirming proxy for other MCP servers.

Flags:
`

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	var roots rootsFlag
	fs := flag.NewFlagSet("mcp-confirm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&roots, "root", "a directory inside which files may be deleted; repeatable; fixed at start-up")
	fs.StringVar(&c.keyFile, "key-file", "", "file of requestState secrets, one per line (each at least 32 bytes; the first seals, all verify; '#' starts a comment).\nShare it between replicas. Without it, a random key known only to this process is used")
	fs.DurationVar(&c.ttl, "ttl", requeststate.DefaultTTL, "how long a confirmation question stays answerable")
	fs.StringVar(&c.ledger, "ledger", "memory:", "where pending confirmations are kept: memory: (this process only), redis://[:PASSWORD@]HOST:PORT/DB,\nor postgres://USER@HOST:PORT/DB. Replicas behind one load balancer must share a redis:// or postgres:// ledger\nand their --key-file")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level on stderr: debug, info, warn or error")
	c.front.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if c.ttl <= 0 {
		return c, fmt.Errorf("--ttl %v: must be positive", c.ttl)
	}
	if err := c.front.resolve(fs, c.ttl); err != nil {
		return c, err
	}
	if err := server.CheckStoreURL(c.ledger); err != nil {
		return c, fmt.Errorf("--ledger: %w", err)
	}
	c.roots = roots
	return c, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "proxy" {
		return runProxy(ctx, args[1:], stdin, stdout, stderr)
	}
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\nRun mcp-confirm --help for usage.\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	var keys [][]byte
	if c.keyFile != "" {
		if keys, err = readKeys(c.keyFile); err != nil {
			fmt.Fprintf(stderr, "mcp-confirm: --key-file: %v\n", err)
			return 2
		}
	}
	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	store, closeStore, err := server.OpenStore(openCtx, c.ledger, server.DefaultName)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: --ledger: %v\n", err)
		return 1
	}
	defer closeStore()
	srv, err := newServer(server.Options{Roots: c.roots, Keys: keys, TTL: c.ttl, Store: store, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 2
	}
	defer srv.Close()

	err = c.front.serve(ctx, srv.MCP(), nil, stdin, stdout, log, "roots", c.roots)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 1
	}
	return 0
}

func readKeys(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return requeststate.ReadKeyFile(bufio.NewReader(f))
}
