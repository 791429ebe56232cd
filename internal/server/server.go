// Package server assembles the reference mcp-confirm server: a go-sdk
// server with the requestState boundary in its receiving chain, a ledger,
// the confirmation flow and the delete_file tool.
//
// What it guarantees: every tools/call, prompts/get and resources/read
// passes through the boundary (installed before any tool can run), and
// delete_file acts only through the confirmation flow. Over HTTP it serves
// both protocol eras from one address. TestFrontEndSuite runs the contract
// every confirming front end keeps (package confirmtest) against it,
// counting the files deleted.
//
// What it does not do: authenticate clients. Its Handler serves whoever
// reaches it, every caller the same (empty) principal, unless it runs
// behind an authentication middleware (package bearer, as the binary puts
// it through serve.HTTPOptions.Auth): then the token's principal binds
// every approval and counts against the ledger's caps.
package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath"
	"github.com/mcp-confirm/mcp-confirm/internal/filetool"
)

// DefaultName is the server's name, and the default audience of its
// requestState.
const DefaultName = "mcp-confirm"

// Options configures a [Server]. Zero values are secure defaults.
type Options struct {
	// Setup holds the options every confirming front end shares (name,
	// version, keys, TTL, lease, store, principal, logger, clock,
	// observer); its Name defaults to [DefaultName].
	confirm.Setup
	// Roots are the directories delete_file may delete inside. None means
	// every call is refused.
	Roots []string
	// Beneath configures how delete_file resolves paths beneath its roots
	// (zero: openat2 where the kernel has it).
	Beneath beneath.Options
}

// Server is an assembled mcp-confirm server.
type Server struct {
	mcp  *mcp.Server
	flow *confirm.Flow
	tool *filetool.Tool
	ttl  time.Duration
	log  *slog.Logger
}

// New assembles a server. It opens the roots; call Close to release them.
func New(opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	parts, err := confirm.Assemble(opts.Setup)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	flow := parts.Flow
	tool, err := filetool.New(filetool.Options{Roots: opts.Roots, Flow: flow, Beneath: opts.Beneath})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if len(opts.Roots) == 0 {
		opts.Logger.Warn("no --root given: every delete_file call will be refused")
	}
	// go-sdk's Info lines (a session's start and end, three for each
	// 2026-07-28 request over HTTP) at Debug.
	s := mcp.NewServer(parts.Implementation, &mcp.ServerOptions{Logger: serve.ServerLogger(opts.Logger)})
	// The boundary wraps everything after go-sdk's own legacy-era shim, so
	// every requestState that crosses the wire is sealed and verified
	// (parts.Middleware: the boundary, inside the tracing span if any).
	s.AddReceivingMiddleware(parts.Middleware...)
	tool.Register(s)
	return &Server{mcp: s, flow: flow, tool: tool, ttl: parts.Ledger.TTL(), log: opts.Logger}, nil
}

// MCP returns the go-sdk server, to run over any transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Flow returns the confirmation flow delete_file runs on — the server's own
// ledger — so further confirmed tools registered on MCP() share it.
func (s *Server) Flow() *confirm.Flow { return s.flow }

// Close releases the roots.
func (s *Server) Close() error { return s.tool.Close() }

// Handler serves streamable HTTP for both protocol eras from one address,
// with package serve's default limits (see [serve.NewHTTP]) but for the
// two tied to the TTL ([serve.HTTPOptions.ForTTL]). The binary runs
// [serve.HTTP.Serve], with its flags.
func (s *Server) Handler() http.Handler {
	h, err := serve.NewHTTP(s.mcp, s.HTTPOptions())
	if err != nil {
		panic(err) // HTTPOptions are valid by construction
	}
	return h
}

// HTTPOptions returns the HTTP front door's options this server needs: its
// logger, and the timeouts its TTL calls for ([serve.HTTPOptions.ForTTL]).
func (s *Server) HTTPOptions() serve.HTTPOptions {
	return serve.HTTPOptions{Logger: s.log}.ForTTL(s.ttl)
}
