package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

// proxyConfig is the parsed command line of the proxy subcommand.
type proxyConfig struct {
	command     []string // the upstream command and its arguments
	upstreamEnv upstreamEnvFlag
	version     bool // --version: print it and exit
	upstreamURL string
	policy      string
	maxUpstream int
	lease       time.Duration
	ttl         time.Duration
	logLevel    slog.Level
	shared      sharedFlags
	front       frontFlags
	approval    approvalFlags
}

const proxyUsage = `mcp-confirm proxy — single-use, honest confirmations in front of any MCP server.

Usage:
  mcp-confirm proxy [flags] -- COMMAND [ARGS...]   upstream over stdio (the proxy starts it)
  mcp-confirm proxy [flags] --upstream URL         upstream over streamable HTTP

Every tools/call the policy does not allow is asked: the person sees the
proxy's own question (the upstream's name, the tool, every argument), and
the approved call is forwarded exactly once. Everything else passes through
unchanged. Without --policy, every tool is asked. It serves MCP on stdio
unless --http is given.

Flags:
`

func parseProxy(args []string, stderr io.Writer) (proxyConfig, error) {
	var c proxyConfig
	fs := flag.NewFlagSet("mcp-confirm proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.upstreamURL, "upstream", "", "connect to an upstream MCP server over streamable HTTP at this URL, instead of starting COMMAND")
	fs.Var(&c.upstreamEnv, "upstream-env", "`NAME` or NAME=VALUE: pass the proxy's variable NAME, or set NAME to VALUE, in the upstream command's environment\n(repeatable). The command gets only these and "+strings.Join(inheritedDescription(), ", ")+";\nthe proxy's own "+reservedEnvPrefix+"* variables never")
	fs.StringVar(&c.policy, "policy", "", "TOML policy: name (the upstream's name in questions), allow/ask/deny lists of tool globs, default,\nallow_read_only_hint, [questions] templates, [[approval]] tables of tools approved out of band.\nWithout it, every tool is asked in band")
	fs.IntVar(&c.maxUpstream, "max-upstream-sessions", proxy.DefaultMaxSessions, "how many older-era client sessions may hold an upstream connection of their own at once\n(for a command upstream, a process each); an initialize beyond it is refused")
	fs.DurationVar(&c.lease, "lease", ledger.DefaultLease, "how long an approved call may take upstream before its outcome is recorded;\na slower call still answers, but its retries are told it may or may not have happened")
	c.shared.register(fs, proxy.DefaultName)
	fs.DurationVar(&c.ttl, "ttl", requeststate.DefaultTTL, "how long a confirmation question stays answerable")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level on stderr: debug, info, warn or error")
	c.front.register(fs)
	c.approval.register(fs, false)
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), proxyUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
	}
	c.command = fs.Args()
	switch {
	case c.upstreamURL == "" && len(c.command) == 0:
		return c, errors.New("no upstream: give -- COMMAND [ARGS...] or --upstream URL")
	case c.upstreamURL != "" && len(c.command) > 0:
		return c, fmt.Errorf("both --upstream and a command (%q) given; choose one", c.command[0])
	case c.upstreamURL != "" && len(c.upstreamEnv) > 0:
		return c, errors.New("--upstream-env applies to an upstream COMMAND, not --upstream URL")
	case c.upstreamURL != "":
		u, err := url.Parse(c.upstreamURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("--upstream %q: want an http:// or https:// URL", c.upstreamURL)
		}
	}
	if c.ttl <= 0 {
		return c, fmt.Errorf("--ttl %v: must be positive", c.ttl)
	}
	if c.lease <= 0 {
		return c, fmt.Errorf("--lease %v: must be positive", c.lease)
	}
	if c.maxUpstream <= 0 {
		return c, fmt.Errorf("--max-upstream-sessions %d: must be positive", c.maxUpstream)
	}
	if err := c.shared.resolve(os.Getenv); err != nil {
		return c, err
	}
	if err := c.front.resolve(fs, c.ttl); err != nil {
		return c, err
	}
	return c, nil
}

// runProxy runs the proxy subcommand.
func runProxy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseProxy(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\nRun mcp-confirm proxy --help for usage.\n", err)
		return 2
	}
	if c.version {
		return printVersion(stdout)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	var policy *proxy.Policy
	if c.policy != "" {
		// The policy decides what is asked: a file another local user
		// could write would let them allow any call unasked.
		f, err := ownfile.Open(c.policy, ownfile.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "mcp-confirm proxy: --policy: %v\n", err)
			return 2
		}
		policy, err = proxy.ParsePolicy(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "mcp-confirm proxy: --policy %s: %v\n", c.policy, err)
			return 2
		}
	}
	if err := c.approval.resolve(c.front.httpAddr, c.front.auth.publicURL, c.shared.keyFile != "", policy.OutOfBand(), os.Getenv); err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\nRun mcp-confirm proxy --help for usage.\n", err)
		return 2
	}
	shared, code, err := c.shared.open(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\n", err)
		return code
	}
	defer shared.close()
	tel, stopTelemetry, err := c.front.observe.open(ctx, log, c.shared.url, c.shared.name)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\n", err)
		return 2
	}
	defer stopTelemetry()

	env, unset := upstreamEnv(os.Environ(), runtime.GOOS, c.upstreamEnv)
	for _, name := range unset {
		log.Warn("--upstream-env names a variable the proxy's environment does not hold; not passed", "name", name)
	}
	connect := func(context.Context) (mcp.Transport, error) {
		if c.upstreamURL != "" {
			return &mcp.StreamableClientTransport{Endpoint: c.upstreamURL}, nil
		}
		// A fresh process per connection: the proxy opens one at start-up
		// and one per older-era downstream session whose client declared
		// elicitation, sampling or roots (see package proxy).
		cmd := exec.Command(c.command[0], c.command[1:]...)
		// Never nil: a nil Env inherits the proxy's whole environment,
		// $MCP_CONFIRM_LEDGER and its password included.
		cmd.Env = append([]string{}, env...)
		cmd.Stderr = stderr
		return &mcp.CommandTransport{Command: cmd}, nil
	}
	setup := confirm.Setup{Name: c.shared.name, Keys: shared.keys, TTL: c.ttl, Lease: c.lease, Store: shared.store, Logger: log, Telemetry: tel}
	if err := c.approval.apply(ctx, &setup, c.front.auth.publicURL, shared.keys, log); err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\n", err)
		return 2
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	p, err := proxy.New(startCtx, proxy.Options{
		Setup:       setup,
		Connect:     connect,
		Policy:      policy,
		MaxSessions: c.maxUpstream,
	})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\n", err)
		if errors.Is(err, proxy.ErrPolicy) {
			return 2
		}
		return 1
	}
	defer p.Close()
	c.front.page = c.approval.page
	c.front.tel = tel

	err = c.front.serve(ctx, p.MCP(), nil, stdin, stdout, log, "upstream", policy.Name())
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "mcp-confirm proxy: %v\n", err)
		return 1
	}
	return 0
}
