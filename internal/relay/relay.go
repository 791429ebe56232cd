package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/serve"
)

// ErrUpstream reports an upstream the relay cannot reach or use.
var ErrUpstream = errors.New("upstream unavailable")

// Options configures a [Relay]. Connect, Implementation and MaxSessions are
// required.
type Options struct {
	// Connect returns a new transport to the upstream each time it is
	// called: the relay opens one connection in New and one more per
	// downstream session of the older protocol era.
	Connect func(ctx context.Context) (mcp.Transport, error)
	// UpstreamProtocol is the protocol version asked of the upstream; ""
	// means the newest go-sdk speaks, falling back to the older handshake
	// if the upstream does not.
	UpstreamProtocol string
	// Implementation names the relay: the downstream server's serverInfo
	// and the upstream connections' clientInfo.
	Implementation *mcp.Implementation
	// Logger receives what the relay could not deliver; nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxSessions bounds the older-era downstream sessions that hold an
	// upstream connection of their own at once; it must be positive.
	MaxSessions int
	// Receiving is middleware run on every downstream request before the
	// relay sees it, the first outermost.
	Receiving []mcp.Middleware
	// CallTool answers one round of a downstream tools/call, forwarding
	// through up what it forwards. nil forwards every round unchanged.
	CallTool func(ctx context.Context, up Upstream, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)
	// Listed reports whether tools/list shows t downstream; nil shows every
	// tool the upstream lists.
	Listed func(t *mcp.Tool) bool
}

// Upstream is the upstream connection that serves one downstream request:
// the shared one, or the older-era session's own. It is all a gate needs
// to decide a tools/call.
type Upstream interface {
	// Tool returns the upstream's definition of the named tool, or nil if
	// it lists none, from the connection's cache when f accepts it, else
	// read from the upstream now (every page of its list, which then
	// refills the cache).
	Tool(ctx context.Context, name string, f Freshness) (*mcp.Tool, error)
	// Tools reads every tool the upstream lists now.
	Tools(ctx context.Context) ([]*mcp.Tool, error)
	// CallTool forwards one round of the downstream tools/call req, once:
	// its name and _meta, with args ({} when empty), the upstream's own
	// requestState and the input responses for it. The result is fresh
	// (the upstream's result type is for the upstream's hop); progress the
	// upstream reports for it reaches req's caller.
	CallTool(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error)
}

// A Relay is a downstream MCP server whose requests one upstream server
// answers.
type Relay struct {
	life     context.Context    // ends when Close is called
	end      context.CancelFunc // ends life
	opts     Options
	log      *slog.Logger
	server   *mcp.Server
	upstream *mcp.InitializeResult // what the upstream said when New connected
	marks    *marks

	redial   sync.Mutex      // one reconnection at a time
	mu       sync.Mutex      // guards server (until New returns), early, shared, sessions, joined, attached, closing and progress
	early    map[string]bool // list changes announced before the server existed
	shared   *conn
	sessions map[*mcp.ServerSession]*conn
	// joined holds the older-era sessions on the shared connection, with
	// the resource subscriptions each holds there (URI → count).
	joined   map[*mcp.ServerSession]map[string]int
	attached int  // sessions holding (or dialling) a connection of their own
	closing  bool // Close was called: connect no more
	progress map[string]progressRoute
	nextTok  atomic.Uint64
	// unannounced: a read caught the upstream changing a tool without
	// announcing it (Unannounced).
	unannounced atomic.Bool
}

// New connects to the upstream and assembles the downstream server, with
// the upstream's capabilities and instructions. Call Close to disconnect.
func New(ctx context.Context, opts Options) (*Relay, error) {
	switch {
	case opts.Connect == nil:
		return nil, errors.New("relay: Options.Connect is required")
	case opts.Implementation == nil:
		return nil, errors.New("relay: Options.Implementation is required")
	case opts.MaxSessions < 1:
		return nil, fmt.Errorf("relay: Options.MaxSessions %d is not positive", opts.MaxSessions)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	marks, err := newMarks()
	if err != nil {
		return nil, err
	}
	life, end := context.WithCancel(context.Background())
	r := &Relay{
		life:     life,
		end:      end,
		opts:     opts,
		log:      opts.Logger,
		marks:    marks,
		sessions: map[*mcp.ServerSession]*conn{},
		joined:   map[*mcp.ServerSession]map[string]int{},
		progress: map[string]progressRoute{},
	}
	shared, err := r.dial(ctx, nil, nil)
	if err != nil {
		return nil, err
	}
	r.upstream = shared.cs.InitializeResult()
	s := r.newServer()
	// The upstream may announce a list change as soon as it is connected,
	// before the downstream server exists: such changes wait in early and
	// are announced once, now.
	r.mu.Lock()
	r.shared, r.server = shared, s
	early := r.early
	r.early = nil
	r.mu.Unlock()
	for _, kind := range []string{"tools", "prompts", "resources"} {
		if early[kind] {
			r.announce(kind)
		}
	}
	return r, nil
}

// downstream returns the downstream server, or nil while New has not
// assembled it yet.
func (r *Relay) downstream() *mcp.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.server
}

// Server returns the downstream go-sdk server, to run over any transport.
func (r *Relay) Server() *mcp.Server { return r.server }

// Upstream returns the live connection that serves ss: its own if it is an
// older-era session, else the shared one (also for a nil ss). A connection
// the upstream ended is opened again first.
func (r *Relay) Upstream(ctx context.Context, ss *mcp.ServerSession) (Upstream, error) {
	return r.live(ctx, ss)
}

// Close disconnects from the upstream (every connection).
func (r *Relay) Close() error {
	r.end() // ends the requests in flight upstream
	r.mu.Lock()
	r.closing = true
	conns := []*conn{r.shared}
	for _, c := range r.sessions {
		conns = append(conns, c)
	}
	r.sessions = map[*mcp.ServerSession]*conn{}
	r.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.cs.Close())
	}
	return errors.Join(errs...)
}

// Placeholders registered on the downstream server only so that go-sdk
// sends its list-changed notifications (to older-era sessions directly, to
// 2026-07-28 ones through their subscriptions/listen) when the upstream's
// lists change. They are never listed or called: the relay answers every
// list, call, get and read from the upstream.
const (
	placeholderName = "mcp-confirm-proxy.list-changed"
	placeholderURI  = "mcp-confirm-proxy:list-changed"
)

// newServer assembles the downstream server: Options.Receiving, then the
// relay's forwarding middleware, with the upstream's capabilities and
// instructions.
func (r *Relay) newServer() *mcp.Server {
	caps := &mcp.ServerCapabilities{}
	if r.upstream.Capabilities != nil {
		c := *r.upstream.Capabilities
		caps = &c
	}
	sopts := &mcp.ServerOptions{
		// go-sdk's Info lines (a session's start and end, three for each
		// 2026-07-28 request over HTTP) at Debug.
		Logger:       serve.ServerLogger(r.log),
		Instructions: r.upstream.Instructions,
		Capabilities: caps,
		//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
		RootsListChangedHandler: func(ctx context.Context, req *mcp.RootsListChangedRequest) {
			if c := r.dedicated(req.Session); c != nil && c.rootsClient != nil {
				// go-sdk notifies the upstream when the client's roots
				// change; roots/list itself is answered from downstream.
				//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them: AddRoots makes go-sdk announce a change upstream
				c.rootsClient.AddRoots(&mcp.Root{URI: placeholderURI})
			}
		},
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		sopts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			if err := r.conn(req.Session).subscribe(ctx, req.Params); err != nil {
				return err
			}
			r.held(req.Session, req.Params.URI, 1)
			return nil
		}
		sopts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			r.held(req.Session, req.Params.URI, -1)
			return r.conn(req.Session).unsubscribe(ctx, req.Params)
		}
	}
	s := mcp.NewServer(r.opts.Implementation, sopts)
	// The first runs first: Options.Receiving wraps the relay.
	s.AddReceivingMiddleware(append(append([]mcp.Middleware{}, r.opts.Receiving...), r.middleware)...)
	return s
}

// announce makes go-sdk tell the downstream clients that a list changed.
// Only a list the upstream declared changing is announced: a placeholder
// of another kind would make go-sdk infer a capability the upstream lacks.
// A change announced before New has assembled the server is kept and
// announced then.
func (r *Relay) announce(kind string) {
	r.mu.Lock()
	s := r.server
	if s == nil {
		if r.early == nil {
			r.early = map[string]bool{}
		}
		r.early[kind] = true
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	caps := r.upstream.Capabilities
	if caps == nil {
		return
	}
	switch {
	case kind == "tools" && caps.Tools != nil && caps.Tools.ListChanged:
		s.AddTool(&mcp.Tool{Name: placeholderName, InputSchema: map[string]any{"type": "object"}}, nil)
	case kind == "prompts" && caps.Prompts != nil && caps.Prompts.ListChanged:
		s.AddPrompt(&mcp.Prompt{Name: placeholderName}, nil)
	case kind == "resources" && caps.Resources != nil && caps.Resources.ListChanged:
		s.AddResource(&mcp.Resource{URI: placeholderURI, Name: placeholderName}, nil)
	}
}
