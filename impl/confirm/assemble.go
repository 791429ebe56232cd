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

// Setup configures [Assemble]: the options a confirming server gives its
// requestState boundary, its ledger and its flow. Zero values are the same
// secure defaults for every server built on this package (the reference
// server and the proxy).
type Setup struct {
	// Audience is the requestState audience, the server's name. Replicas
	// behind one load balancer share it; other services must not. Required.
	Audience string
	// Keys are the requestState secrets (requeststate.Options.Keys); nil
	// means an ephemeral key known to this process only.
	Keys [][]byte
	// TTL bounds how long a question may wait for its answer, in the sealed
	// requestState and in the ledger alike. Default requeststate.DefaultTTL.
	TTL time.Duration
	// Lease bounds how long an approved action may run before its outcome
	// is recorded (ledger.Options.Lease). Default ledger.DefaultLease.
	Lease time.Duration
	// Store holds confirmations; nil means an in-memory store.
	Store ledger.Store
	// Principal overrides who the caller is (requeststate.Options.Principal).
	Principal func(ctx context.Context, req mcp.Request) (string, error)
	// Logger receives refusal reasons; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe traces ledger events (ledger.Options.Observe).
	Observe func(ledger.Event)
}

// Parts are what a confirming server is built from. Install the boundary
// as the server's receiving middleware (Run refuses to work without it) and
// run confirmed tools on the flow.
type Parts struct {
	Boundary *requeststate.Boundary
	Ledger   *ledger.Ledger
	Flow     *Flow
}

// Assemble builds the boundary, the ledger and the flow of s, with one TTL
// for the sealed state and the ledger, so that every retry the boundary
// still admits is answered from the ledger's record.
func Assemble(s Setup) (Parts, error) {
	if s.Audience == "" {
		return Parts{}, errors.New("confirm: Setup.Audience is required")
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
		Audience:  s.Audience,
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
	return Parts{Boundary: boundary, Ledger: l, Flow: flow}, nil
}
