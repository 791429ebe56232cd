package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// DefaultName is the proxy's server name and the default audience of its
// requestState.
const DefaultName = "mcp-confirm-proxy"

// Options configures a [Proxy]. Zero values are secure defaults, except
// Connect, which is required.
type Options struct {
	// Connect returns a new transport to the upstream each time it is
	// called: the proxy opens one connection at start-up and one more per
	// downstream session of the older protocol era (see [conn]). For a
	// command, return a fresh mcp.CommandTransport; for a URL, a fresh
	// mcp.StreamableClientTransport.
	Connect func(ctx context.Context) (mcp.Transport, error)
	// UpstreamProtocol is the protocol version the proxy asks the upstream
	// for; "" means the newest go-sdk speaks (2026-07-28), falling back to
	// the older handshake if the upstream does not.
	UpstreamProtocol string
	// Policy decides which tools are asked, allowed or denied; nil asks for
	// every tool.
	Policy *Policy
	// Name is the proxy's server name and the requestState audience.
	// Replicas behind one load balancer must share it. Default DefaultName.
	Name    string
	Version string
	// Keys are the requestState secrets (requeststate.Options.Keys); nil
	// means an ephemeral key known to this process only.
	Keys [][]byte
	// TTL bounds how long a question may wait for its answer, in the sealed
	// state and in the ledger. Default requeststate.DefaultTTL.
	TTL time.Duration
	// Store holds confirmations; nil means an in-memory store. Replicas
	// must share a Redis or PostgreSQL store.
	Store ledger.Store
	// Lease bounds how long an approved call may take upstream, from the
	// redemption to its outcome being recorded (ledger.Options.Lease): a
	// slower call still returns its result, but its retries are told it
	// may or may not have happened. Default ledger.DefaultLease.
	Lease time.Duration
	// Principal overrides who the caller is (requeststate.Options.Principal).
	Principal func(ctx context.Context, req mcp.Request) (string, error)
	// Logger receives refusal reasons and the audit record of every
	// question; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe traces ledger events (ledger.Options.Observe).
	Observe func(ledger.Event)
	// MaxSessions bounds the older-era downstream sessions that hold an
	// upstream connection of their own at once (for a command upstream,
	// a process each); an initialize beyond it is refused until one ends.
	// Default DefaultMaxSessions; negative is an error.
	MaxSessions int
}

// DefaultMaxSessions is Options.MaxSessions when zero.
const DefaultMaxSessions = 32

// A Proxy is a downstream MCP server that forwards to one upstream server.
type Proxy struct {
	opts     Options
	log      *slog.Logger
	policy   *Policy
	server   *mcp.Server
	boundary *requeststate.Boundary
	ledger   *ledger.Ledger
	flow     *confirm.Flow
	shared   *conn
	upstream *mcp.InitializeResult // what the upstream said at start-up

	redial   sync.Mutex // one reconnection at a time
	mu       sync.Mutex // guards shared, sessions and progress
	sessions map[*mcp.ServerSession]*conn
	progress map[string]progressRoute
	attached int  // sessions holding (or dialling) a connection of their own
	closing  bool // Close was called: connect no more
	nextTok  atomic.Uint64
}

// progressRoute is where a relayed progress notification goes.
type progressRoute struct {
	ctx   context.Context // the downstream call's (its stream, over HTTP)
	ss    *mcp.ServerSession
	token any // the downstream client's own token
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
	if opts.Version == "" {
		opts.Version = "dev"
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
	p := &Proxy{
		opts:     opts,
		log:      opts.Logger,
		policy:   opts.Policy,
		sessions: map[*mcp.ServerSession]*conn{},
		progress: map[string]progressRoute{},
	}
	parts, err := confirm.Assemble(confirm.Setup{
		Audience:  opts.Name,
		Keys:      opts.Keys,
		TTL:       opts.TTL,
		Lease:     opts.Lease,
		Store:     opts.Store,
		Principal: opts.Principal,
		Logger:    opts.Logger,
		Now:       opts.Now,
		Observe:   opts.Observe,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.boundary, p.ledger, p.flow = parts.Boundary, parts.Ledger, parts.Flow
	if p.shared, err = p.dial(ctx, nil, nil); err != nil {
		return nil, err
	}
	p.upstream = p.shared.cs.InitializeResult()
	tools, err := p.shared.tools(ctx)
	if err == nil {
		err = p.policy.Check(tools)
	}
	if err != nil {
		p.shared.cs.Close()
		return nil, err
	}
	p.server = p.newServer()
	return p, nil
}

// MCP returns the downstream go-sdk server, to run over any transport.
func (p *Proxy) MCP() *mcp.Server { return p.server }

// Close disconnects from the upstream (every connection).
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closing = true
	conns := []*conn{p.shared}
	for _, c := range p.sessions {
		conns = append(conns, c)
	}
	p.sessions = map[*mcp.ServerSession]*conn{}
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.cs.Close())
	}
	return errors.Join(errs...)
}

// Placeholders registered on the downstream server only so that go-sdk
// sends its list-changed notifications (to older-era sessions directly, to
// 2026-07-28 ones through their subscriptions/listen) when the upstream's
// lists change. They are never listed or called: the proxy answers every
// list, call, get and read from the upstream.
const (
	placeholderName = "mcp-confirm-proxy.list-changed"
	placeholderURI  = "mcp-confirm-proxy:list-changed"
)

// newServer assembles the downstream server: the requestState boundary,
// then the proxy's forwarding middleware, with the upstream's capabilities
// and instructions.
func (p *Proxy) newServer() *mcp.Server {
	caps := &mcp.ServerCapabilities{}
	if p.upstream.Capabilities != nil {
		c := *p.upstream.Capabilities
		caps = &c
	}
	sopts := &mcp.ServerOptions{
		Logger:       p.log,
		Instructions: p.upstream.Instructions,
		Capabilities: caps,
		//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
		RootsListChangedHandler: func(ctx context.Context, req *mcp.RootsListChangedRequest) {
			if c := p.dedicated(req.Session); c != nil && c.rootsClient != nil {
				// go-sdk notifies the upstream when the client's roots
				// change; roots/list itself is answered from downstream.
				//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them: AddRoots makes go-sdk announce a change upstream
				c.rootsClient.AddRoots(&mcp.Root{URI: placeholderURI})
			}
		},
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		sopts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return p.conn(req.Session).subscribe(ctx, req.Params)
		}
		sopts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return p.conn(req.Session).unsubscribe(ctx, req.Params)
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: p.opts.Name, Version: p.opts.Version}, sopts)
	// The boundary wraps the proxy, so every requestState that crosses the
	// wire is sealed and verified before the proxy reads it.
	s.AddReceivingMiddleware(p.boundary.Middleware(), p.middleware)
	return s
}

// poke makes go-sdk announce that a list changed.
// Only a list the upstream declared changing is announced: a placeholder
// of another kind would make go-sdk infer a capability the upstream lacks.
func (p *Proxy) poke(kind string) {
	caps := p.upstream.Capabilities
	if caps == nil {
		return
	}
	switch {
	case kind == "tools" && caps.Tools != nil && caps.Tools.ListChanged:
		p.server.AddTool(&mcp.Tool{Name: placeholderName, InputSchema: map[string]any{"type": "object"}}, nil)
	case kind == "prompts" && caps.Prompts != nil && caps.Prompts.ListChanged:
		p.server.AddPrompt(&mcp.Prompt{Name: placeholderName}, nil)
	case kind == "resources" && caps.Resources != nil && caps.Resources.ListChanged:
		p.server.AddResource(&mcp.Resource{URI: placeholderURI, Name: placeholderName}, nil)
	}
}

// dial opens a connection to the upstream. down is the older-era session it
// serves, with the capabilities that client declared; nil for the shared
// connection.
func (p *Proxy) dial(ctx context.Context, down *mcp.ServerSession, caps *mcp.ClientCapabilities) (*conn, error) {
	c := &conn{down: down, caps: caps, subs: map[string]int{}, closed: make(chan struct{})}
	copts := &mcp.ClientOptions{
		Logger: p.log,
		// input_required results go back to the downstream client as they
		// are; the proxy never answers an upstream's question itself.
		MultiRoundTrip:             &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { p.poke("tools") },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { p.poke("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { p.poke("resources") },
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			p.server.ResourceUpdated(ctx, req.Params)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			p.relayProgress(req.Params)
		},
		//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			if c.down == nil {
				p.log.Debug("proxy: upstream log message on the shared connection", "level", req.Params.Level, "logger", req.Params.Logger)
				return
			}
			rctx, cancel := c.relayContext(ctx)
			defer cancel()
			//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
			c.down.Log(rctx, req.Params)
		},
	}
	if down != nil {
		copts.Capabilities = relayed(caps)
	}
	if copts.Capabilities.Elicitation != nil {
		copts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			rctx, cancel := c.relayContext(ctx)
			defer cancel()
			return down.Elicit(rctx, req.Params)
		}
		copts.ElicitationCompleteHandler = func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			down.NotifyElicitationComplete(ctx, req.Params)
		}
	}
	//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
	if copts.Capabilities.Sampling != nil {
		//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
		copts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			rctx, cancel := c.relayContext(ctx)
			defer cancel()
			//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
			return down.CreateMessageWithTools(rctx, req.Params)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: p.opts.Name, Version: p.opts.Version}, copts)
	client.AddSendingMiddleware(zeroToolsTTL)
	//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
	if copts.Capabilities.RootsV2 != nil {
		c.rootsClient = client
		client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method != "roots/list" {
					return next(ctx, method, req)
				}
				//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
				params, _ := req.GetParams().(*mcp.ListRootsParams)
				rctx, cancel := c.relayContext(ctx)
				defer cancel()
				//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
				return down.ListRoots(rctx, params)
			}
		})
	}
	t, err := p.opts.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: p.opts.UpstreamProtocol})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	c.cs = cs
	go func() {
		cs.Wait()
		close(c.closed)
	}()
	return c, nil
}

// relayed returns the capabilities a connection declares to the upstream for
// a downstream client that declared caps: a copy of its elicitation,
// sampling and roots capabilities, and nothing else.
func relayed(caps *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	out := &mcp.ClientCapabilities{}
	if caps == nil {
		return out
	}
	out.Elicitation = clone(caps.Elicitation)
	//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
	out.Sampling = clone(caps.Sampling)
	//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
	out.RootsV2 = clone(caps.RootsV2)
	return out
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// conn returns the upstream connection that serves ss: its own if it is an
// older-era session, else the shared one.
func (p *Proxy) conn(ss *mcp.ServerSession) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.sessions[ss]; c != nil {
		return c
	}
	return p.shared
}

// liveConn is conn, connecting again if the upstream ended that connection
// (a crashed upstream process is started again). Calls in flight on the old
// connection are not retried: their outcome is the old connection's.
func (p *Proxy) liveConn(ctx context.Context, ss *mcp.ServerSession) (*conn, error) {
	c := p.conn(ss)
	if !c.dead() {
		return c, nil
	}
	p.redial.Lock()
	defer p.redial.Unlock()
	if c = p.conn(ss); !c.dead() {
		return c, nil // another call connected again first
	}
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("%w: the proxy is closing", ErrUpstream)
	}
	p.log.Warn("proxy: the upstream connection ended; connecting again")
	nc, err := p.dial(context.WithoutCancel(ctx), c.down, c.caps)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if c.down == nil {
		p.shared = nc
	} else {
		p.sessions[c.down] = nc
	}
	p.mu.Unlock()
	return nc, nil
}

func (p *Proxy) dedicated(ss *mcp.ServerSession) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[ss]
}

// attach dials a connection of ss's own when it initializes, and closes it
// when ss ends.
func (p *Proxy) attach(ctx context.Context, ss *mcp.ServerSession, params *mcp.InitializeParams) error {
	if ss == nil || p.dedicated(ss) != nil {
		return nil
	}
	// Each such session holds an upstream connection (for a command, a
	// process): a cap keeps a flood of sessions from starting a flood of
	// processes.
	p.mu.Lock()
	if p.attached >= p.opts.MaxSessions {
		p.mu.Unlock()
		p.log.Warn("proxy: refused a session: too many sessions hold an upstream connection", "max", p.opts.MaxSessions)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many sessions are connected through this proxy; try again later"}
	}
	p.attached++
	p.mu.Unlock()
	var caps *mcp.ClientCapabilities
	if params != nil {
		caps = params.Capabilities
	}
	c, err := p.dial(context.WithoutCancel(ctx), ss, caps)
	if err != nil {
		p.mu.Lock()
		p.attached--
		p.mu.Unlock()
		p.log.Error("proxy: cannot connect to the upstream for a new session", "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the proxy cannot reach its upstream server"}
	}
	p.mu.Lock()
	p.sessions[ss] = c
	p.mu.Unlock()
	go func() {
		ss.Wait()
		p.mu.Lock()
		cur := p.sessions[ss] // c, or the connection that replaced it
		delete(p.sessions, ss)
		p.attached--
		p.mu.Unlock()
		c.cs.Close()
		if cur != nil && cur != c {
			cur.cs.Close()
		}
	}()
	return nil
}

// withProgress rewrites a downstream progress token in m to one unique in
// this proxy, so that tokens chosen by different clients never collide on
// the shared connection, and routes the upstream's notifications for it back
// to ss until the returned function is called.
func (p *Proxy) withProgress(ctx context.Context, ss *mcp.ServerSession, m mcp.Meta) (mcp.Meta, func()) {
	tok, ok := m["progressToken"]
	if !ok || tok == nil {
		return m, func() {}
	}
	ours := "mcp-confirm-proxy-" + strconv.FormatUint(p.nextTok.Add(1), 10)
	p.mu.Lock()
	p.progress[ours] = progressRoute{ctx: ctx, ss: ss, token: tok}
	p.mu.Unlock()
	m["progressToken"] = ours
	return m, func() {
		// go-sdk hands a reply to its caller before it has run the
		// handlers of notifications read ahead of it: keep routing the
		// call's progress a little longer, so none is dropped.
		time.AfterFunc(progressGrace, func() {
			p.mu.Lock()
			delete(p.progress, ours)
			p.mu.Unlock()
		})
	}
}

// progressGrace is how long after a forwarded call returns the proxy still
// relays its progress notifications.
const progressGrace = time.Second

func (p *Proxy) relayProgress(params *mcp.ProgressNotificationParams) {
	key, _ := params.ProgressToken.(string)
	p.mu.Lock()
	r, ok := p.progress[key]
	p.mu.Unlock()
	if !ok || r.ss == nil {
		p.log.Debug("proxy: progress for no call in flight", "token", params.ProgressToken)
		return
	}
	cp := *params
	cp.ProgressToken = r.token
	// The call may be over (see progressGrace): keep its values (its stream,
	// over HTTP), not its cancellation.
	if err := r.ss.NotifyProgress(context.WithoutCancel(r.ctx), &cp); err != nil {
		p.log.Debug("proxy: progress not relayed", "err", err)
	}
}

// subscribe forwards a resource subscription, counting subscribers so that
// one session's unsubscribe does not end another's on the shared
// connection.
func (c *conn) subscribe(ctx context.Context, params *mcp.SubscribeParams) error {
	c.mu.Lock()
	n := c.subs[params.URI]
	c.subs[params.URI] = n + 1
	c.mu.Unlock()
	if n > 0 {
		return nil
	}
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: params.URI}); err != nil {
		c.mu.Lock()
		c.subs[params.URI]--
		c.mu.Unlock()
		return err
	}
	return nil
}

func (c *conn) unsubscribe(ctx context.Context, params *mcp.UnsubscribeParams) error {
	c.mu.Lock()
	n := c.subs[params.URI]
	if n > 1 {
		c.subs[params.URI] = n - 1
		c.mu.Unlock()
		return nil
	}
	delete(c.subs, params.URI)
	c.mu.Unlock()
	if n == 0 {
		return nil
	}
	return c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: params.URI})
}
