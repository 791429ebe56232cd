package confirm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// Setup is what every confirming server shares: its name, its requestState
// boundary, its ledger and its flow. The front ends (the reference server
// and the proxy) embed it in their own Options and build their parts with
// [Assemble]. Zero values are secure defaults, the same for every front end.
type Setup struct {
	// Name is the server's name: its serverInfo.name and its requestState
	// audience. Replicas behind one load balancer share it; other services
	// must not. Each front end has its own default; [Assemble] requires it.
	Name string
	// Version is the server's serverInfo.version. Default [Version]: the
	// mcp-confirm this program was built from.
	Version string
	// Keys are the requestState secrets (requeststate.Options.Keys); nil
	// means an ephemeral key known to this process only.
	Keys [][]byte
	// TTL bounds how long a question may wait for its answer, in the sealed
	// requestState and in the ledger alike. Default requeststate.DefaultTTL.
	TTL time.Duration
	// Lease bounds how long an approved action may take to run and have
	// its outcome recorded (ledger.Options.Lease): a slower action still
	// answers its own call and is never run again, but the retries of its
	// approval are told it may or may not have happened. Default
	// ledger.DefaultLease.
	Lease time.Duration
	// Store holds confirmations; nil means an in-memory store. Replicas
	// must share a Redis or PostgreSQL store.
	Store ledger.Store
	// Principal overrides who the caller is (requeststate.Options.Principal).
	Principal func(ctx context.Context, req mcp.Request) (string, error)
	// Logger receives refusal reasons (and, for the proxy, the audit record
	// of every question); nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe traces ledger events (ledger.Options.Observe).
	Observe func(ledger.Event)

	// Approval is who approves the confirmed calls that do not name
	// their own (confirm.Step.Approval): the zero value, the person asked
	// in band. Out-of-band approval needs Page.
	Approval Approval
	// Page, if set, makes the approval page over the flow's ledger
	// (package approve's New, say); Assemble calls it once. Without it,
	// every call that needs out-of-band approval is refused.
	Page func(*ledger.Ledger) (Page, error)
	// Notify, if set, tells approvers of each call that waits for them
	// (a webhook); it must not block.
	Notify func(Notice)
	// Requester names the caller, given its principal, the way the
	// approval page names approvers (Options.Requester). Default:
	// SubjectPrefix + principal.
	Requester func(principal string) string

	// Telemetry, if set, counts and traces what the parts do: the store's
	// latency, the boundary's refusals, the flow's steps, a span per
	// tools/call (package observe). nil, the default, costs nothing. One
	// Telemetry serves one server.
	Telemetry *observe.Telemetry
}

// Parts are what a confirming server is built from. Install Middleware
// as the server's receiving middleware (it holds the boundary, without
// which Run refuses to work), run confirmed tools on the flow, and name
// the server (and any client it opens) with Implementation.
type Parts struct {
	Boundary       *requeststate.Boundary
	Ledger         *ledger.Ledger
	Flow           *Flow
	Implementation *mcp.Implementation // Setup.Name and Setup.Version
	// Page is what Setup.Page made, to serve beside the MCP endpoint;
	// nil without one.
	Page Page
	// Middleware is the receiving middleware to install, the first
	// outermost: Setup.Telemetry's span per tools/call, if it traces,
	// then the boundary's.
	Middleware []mcp.Middleware
}

// Assemble builds the boundary, the ledger and the flow of s, with one TTL
// for the sealed state and the ledger, so that every retry the boundary
// still admits is answered from the ledger's record.
func Assemble(s Setup) (Parts, error) {
	if s.Name == "" {
		return Parts{}, errors.New("confirm: Setup.Name is required")
	}
	if s.Version == "" {
		s.Version = Version()
	}
	if s.TTL == 0 {
		s.TTL = requeststate.DefaultTTL
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Store == nil {
		s.Store = ledger.NewMemory(ledger.MemoryOptions{Now: s.Now})
	}
	opts := requeststate.Options{
		Keys:      s.Keys,
		TTL:       s.TTL,
		Audience:  s.Name,
		Principal: s.Principal,
		Now:       s.Now,
		Logger:    s.Logger,
	}
	events := s.Observe
	if t := s.Telemetry; t != nil {
		s.Store = t.Store(s.Store)
		opts.Refused = t.Refused
		switch traced := s.Observe; {
		case !t.Metrics():
		case traced != nil:
			events = func(e ledger.Event) { traced(e); t.LedgerEvent(e) }
		default:
			events = t.LedgerEvent
		}
	}
	boundary, err := requeststate.New(opts)
	if err != nil {
		return Parts{}, fmt.Errorf("confirm: %w", err)
	}
	l, err := ledger.New(s.Store, ledger.Options{TTL: s.TTL, Lease: s.Lease, Now: s.Now, Observe: events})
	if err != nil {
		return Parts{}, fmt.Errorf("confirm: %w", err)
	}
	var page Page
	if s.Page != nil {
		if page, err = s.Page(l); err != nil {
			return Parts{}, fmt.Errorf("confirm: approval page: %w", err)
		}
	}
	flow, err := New(Options{Ledger: l, Logger: s.Logger, Approval: s.Approval, Page: page,
		Notify: s.Notify, Requester: s.Requester, Now: s.Now, Telemetry: s.Telemetry})
	if err != nil {
		return Parts{}, err
	}
	p := Parts{
		Boundary:       boundary,
		Ledger:         l,
		Flow:           flow,
		Implementation: &mcp.Implementation{Name: s.Name, Version: s.Version},
		Page:           page,
	}
	if mw := s.Telemetry.Middleware(); mw != nil {
		p.Middleware = append(p.Middleware, mw)
	}
	p.Middleware = append(p.Middleware, boundary.Middleware())
	return p, nil
}
