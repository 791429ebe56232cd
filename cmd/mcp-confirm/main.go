// Command mcp-confirm is the reference MCP server of the mcp-confirm
// project: its delete_file tool deletes one file inside the --root
// directories, after the user confirms, at most once.
//
// Usage:
//
//	mcp-confirm --root DIR [--root DIR ...] [--http ADDR] [--key-file FILE] [--ttl 10m] [--ledger-file FILE]
//	mcp-confirm keygen [FILE]
//	mcp-confirm approvers add --key-file FILE --public-url URL (--principal P | --not-a-caller) NAME
//	mcp-confirm proxy [flags] -- COMMAND [ARGS...]
//	mcp-confirm --version
//
// It speaks MCP over stdio unless --http is given. Run mcp-confirm --help
// for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	floor := heapFloor(os.Getenv)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	runtime.KeepAlive(floor)
	stop()
	os.Exit(code)
}

// heapFloorBytes is the heap the garbage collector counts as live beyond
// what is: a collection starts after about this much more is allocated.
const heapFloorBytes = 16 << 20

// heapFloor returns a block of heapFloorBytes to keep reachable while the
// process serves, unless the environment sets GOGC or GOMEMLIMIT (the
// operator's choice then stands). go-sdk allocates a fresh 32 KiB buffer
// for each JSON decode, several per message, so that with the runtime's
// 4 MiB minimum heap a proxy passing calls through collects every few
// calls, and the collector and its sweeping took half of its CPU (profile
// in the commit that added this). The block is never written, so the kernel
// need not back its pages: it costs address space more than memory. It
// raises the heap goal by its size, which for a small live heap means a
// collection about every 20 MiB allocated instead of every 4; for a large
// one it adds 16 MiB to the goal, where a higher GOGC would multiply it.
func heapFloor(getenv func(string) string) []byte {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return make([]byte, heapFloorBytes)
}

// config is the parsed command line.
type config struct {
	roots    []string
	version  bool // --version: print it and exit
	ttl      time.Duration
	logLevel slog.Level
	shared   sharedFlags
	front    frontFlags
	approval approvalFlags
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
  mcp-confirm keygen FILE      write a new key file for --key-file (owner-only)
  mcp-confirm keygen           print one new key line (to append when rotating)
  mcp-confirm keygen --audit FILE
                               write a new audit checkpoint signing key (--audit-key); print its public key
  mcp-confirm audit verify|export ...
                               verify the audit trail, or export it as JSONL (audit --help)
  mcp-confirm approvers add --key-file FILE --public-url URL (--principal P | --not-a-caller) NAME
                               print a one-time link enrolling NAME's passkey
  mcp-confirm proxy --help     the confirming proxy for other MCP servers
  mcp-confirm --version        print the version (also after proxy or keygen)

It serves MCP over stdio unless --http is given. Without --root, every
delete_file call is refused.

Flags:
`

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	var roots rootsFlag
	fs := flag.NewFlagSet("mcp-confirm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&roots, "root", "a directory inside which files may be deleted; repeatable; fixed at start-up")
	c.shared.register(fs, server.DefaultName)
	fs.DurationVar(&c.ttl, "ttl", requeststate.DefaultTTL, "how long a confirmation question stays answerable")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level on stderr: debug, info, warn or error")
	c.front.register(fs)
	c.approval.register(fs, true)
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
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
	if err := c.approval.resolve(c.front.httpAddr, c.front.auth.publicURL, c.shared.keyFile != "", false, os.Getenv); err != nil {
		return c, err
	}
	if err := c.shared.resolve(os.Getenv); err != nil {
		return c, err
	}
	c.roots = roots
	return c, nil
}

// printVersion writes the version line of --version: the same for the
// server, the proxy and keygen, and the serverInfo.version both front
// ends announce.
func printVersion(stdout io.Writer) int {
	fmt.Fprintln(stdout, "mcp-confirm", confirm.Version())
	return 0
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "proxy" {
		return runProxy(ctx, args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "keygen" {
		return runKeygen(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "audit" {
		return runAudit(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "approvers" {
		return runApprovers(args[1:], stdout, stderr)
	}
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\nRun mcp-confirm --help for usage.\n", err)
		return 2
	}
	if c.version {
		return printVersion(stdout)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	shared, code, err := c.shared.open(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return code
	}
	defer shared.close()
	tel, stopTelemetry, err := c.front.observe.open(ctx, log, c.shared.url, c.shared.name)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 2
	}
	defer stopTelemetry()
	setup := confirm.Setup{Name: c.shared.name, Keys: shared.keys, TTL: c.ttl, Store: shared.store, Logger: log, Telemetry: tel}
	if err := c.approval.apply(ctx, &setup, c.front.auth.publicURL, shared.keys, log); err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 2
	}
	srv, err := newServer(server.Options{Setup: setup, Roots: c.roots})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 2
	}
	defer srv.Close()
	c.front.page = c.approval.page
	c.front.tel = tel

	err = c.front.serve(ctx, srv.MCP(), nil, stdin, stdout, log, "roots", c.roots)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "mcp-confirm: %v\n", err)
		return 1
	}
	return 0
}
