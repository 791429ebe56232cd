package confirm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
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
}

// Parts are what a confirming server is built from. Install the boundary
// as the server's receiving middleware (Run refuses to work without it),
// run confirmed tools on the flow, and name the server (and any client it
// opens) with Implementation.
type Parts struct {
	Boundary       *requeststate.Boundary
	Ledger         *ledger.Ledger
	Flow           *Flow
	Implementation *mcp.Implementation // Setup.Name and Setup.Version
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
	boundary, err := requeststate.New(requeststate.Options{
		Keys:      s.Keys,
		TTL:       s.TTL,
		Audience:  s.Name,
		Principal: s.Principal,
		Now:       s.Now,
		Logger:    s.Logger,
	})
	if err != nil {
		return Parts{}, fmt.Errorf("confirm: %w", err)
	}
	l, err := ledger.New(s.Store, ledger.Options{TTL: s.TTL, Lease: s.Lease, Now: s.Now, Observe: s.Observe})
	if err != nil {
		return Parts{}, fmt.Errorf("confirm: %w", err)
	}
	flow, err := New(Options{Ledger: l, Logger: s.Logger})
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Boundary:       boundary,
		Ledger:         l,
		Flow:           flow,
		Implementation: &mcp.Implementation{Name: s.Name, Version: s.Version},
	}, nil
}
