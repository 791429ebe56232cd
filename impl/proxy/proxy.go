package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// DefaultName is the proxy's server name and the default audience of its
// requestState.
const DefaultName = "mcp-confirm-proxy"

// Options configures a [Proxy]. Zero values are secure defaults, except
// Connect, which is required.
type Options struct {
	// Setup holds the options every confirming front end shares (name,
	// version, keys, TTL, lease, store, principal, logger, clock,
	// observer); its Name defaults to [DefaultName]. The Lease bounds an
	// approved call upstream, from its redemption to its outcome being
	// recorded; the Logger also receives the audit record of every
	// question.
	confirm.Setup
	// Connect returns a new transport to the upstream each time it is
	// called: the proxy opens one connection at start-up and one more per
	// downstream session of the older protocol era whose client declared
	// elicitation, sampling or roots (see Connections in the package doc). For a command, return a fresh mcp.CommandTransport; for
	// a URL, a fresh mcp.StreamableClientTransport.
	Connect func(ctx context.Context) (mcp.Transport, error)
	// UpstreamProtocol is the protocol version the proxy asks the upstream
	// for; "" means the newest go-sdk speaks (2026-07-28), falling back to
	// the older handshake if the upstream does not.
	UpstreamProtocol string
	// Policy decides which tools are asked, allowed or denied; nil asks for
	// every tool.
	Policy *Policy
	// MaxSessions bounds the older-era downstream sessions that hold an
	// upstream connection of their own at once (for a command upstream,
	// a process each); an initialize beyond it is refused until one ends.
	// Default DefaultMaxSessions; negative is an error.
	MaxSessions int
}

// ErrUpstream reports an upstream the proxy cannot reach or use.
var ErrUpstream = relay.ErrUpstream

// DefaultMaxSessions is Options.MaxSessions when zero.
const DefaultMaxSessions = 32

// A Proxy is a downstream MCP server that forwards to one upstream server
// through the relay, and gates every tools/call.
type Proxy struct {
	log          *slog.Logger
	policy       *Policy
	boundary     *requeststate.Boundary
	ledger       *ledger.Ledger
	flow         *confirm.Flow
	relay        *relay.Relay
	schemas      schemaCache
	fingerprints fingerprintCache
	obs          *observe.Telemetry // nil: none
}

// New connects to the upstream, checks the policy against the tools it
// lists, and assembles the downstream server. Call Close to disconnect.
func New(ctx context.Context, opts Options) (*Proxy, error) {
	if opts.Connect == nil {
		return nil, errors.New("proxy: Options.Connect is required")
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.MaxSessions < 0:
		return nil, fmt.Errorf("proxy: Options.MaxSessions %d is negative", opts.MaxSessions)
	case opts.MaxSessions == 0:
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Policy.OutOfBand() && opts.Page == nil {
		// Every call its approval tables name would be refused.
		return nil, fmt.Errorf("%w: its approval tables need the approval page (Options.Page: --public-url and the approvers' sign-in)", ErrPolicy)
	}
	p := &Proxy{log: opts.Logger, policy: opts.Policy, obs: opts.Telemetry}
	parts, err := confirm.Assemble(opts.Setup)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.boundary, p.ledger, p.flow = parts.Boundary, parts.Ledger, parts.Flow
	p.relay, err = relay.New(ctx, relay.Options{
		Connect:          opts.Connect,
		UpstreamProtocol: opts.UpstreamProtocol,
		Implementation:   parts.Implementation,
		Logger:           opts.Logger,
		MaxSessions:      opts.MaxSessions,
		// The boundary wraps the relay, so every requestState that crosses
		// the wire is sealed and verified before the gate reads it
		// (parts.Middleware: the boundary, inside the tracing span if any).
		Receiving: parts.Middleware,
		CallTool:  p.callTool,
		// A denied tool is not offered to the model at all.
		Listed: func(t *mcp.Tool) bool { return !p.policy.Hidden(t.Name) },
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	up, err := p.relay.Upstream(ctx, nil)
	var tools []*mcp.Tool
	if err == nil {
		tools, err = up.Tools(ctx)
	}
	if err == nil {
		err = p.policy.Check(tools)
	}
	if err != nil {
		p.relay.Close()
		return nil, err
	}
	return p, nil
}

// MCP returns the downstream go-sdk server, to run over any transport.
func (p *Proxy) MCP() *mcp.Server { return p.relay.Server() }

// Close disconnects from the upstream (every connection).
func (p *Proxy) Close() error { return p.relay.Close() }
