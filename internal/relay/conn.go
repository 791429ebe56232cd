package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/schemabound"
)

// metaPrefix is the _meta namespace the protocol reserves for itself
// (protocol version, client info and capabilities, log level, …).
const metaPrefix = "io.modelcontextprotocol/"

// A conn is one client connection to the upstream; it is the [Upstream]
// of the requests it serves.
//
// The shared conn serves every request that arrives in the 2026-07-28 era
// and every older-era session whose client declared no elicitation,
// sampling or roots capability: none of these clients can receive such
// server-initiated requests, so it declares none of them (an upstream on
// the 2026-07-28 era asks through input_required results instead, which
// the relay passes on in-band). A downstream session of the older era whose
// client declared one gets a conn of its own when it initializes,
// declaring what that client declared, so that the upstream's elicitation,
// sampling and roots requests reach exactly that client.
type conn struct {
	r      *Relay
	cs     *mcp.ClientSession
	down   *mcp.ServerSession      // nil for the shared conn
	caps   *mcp.ClientCapabilities // what down declared, to dial again
	closed chan struct{}           // closed when the connection ends
	// mux carries the relay's own tools/calls (mux.go); nil on a
	// connection go-sdk must keep to itself.
	mux *mux
	// declared is what the connection declared to the upstream; capsMeta
	// the same as the _meta of a 2026-07-28 request carries it.
	declared *mcp.ClientCapabilities
	capsMeta map[string]any
	// metaDefaults: capsMeta and the rest of a 2026-07-28 request's _meta,
	// encoded once (requestMeta).
	metaOnce     sync.Once
	metaDefaults []metaMember
	metaErr      error
	// rootsClient is the client of a conn that relays the downstream
	// client's roots; it announces their changes upstream.
	rootsClient *mcp.Client

	mu       sync.Mutex
	inflight []context.Context // contexts of the downstream calls in flight on down
	subs     map[string]int    // resource URI → downstream subscriptions

	tools toolCache // the upstream's tools, as this connection read them last
}

// dial opens a connection to the upstream. down is the older-era session it
// serves, with the capabilities that client declared; nil for the shared
// connection.
func (r *Relay) dial(ctx context.Context, down *mcp.ServerSession, caps *mcp.ClientCapabilities) (*conn, error) {
	c := &conn{r: r, down: down, caps: caps, subs: map[string]int{}, closed: make(chan struct{})}
	copts := &mcp.ClientOptions{
		Logger: r.log,
		// input_required results go back to the downstream client as they
		// are; the relay never answers an upstream's question itself.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities:   &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			// Forget the tools first, on every connection (the change may
			// reach them in any order): a client that hears of it and calls
			// a tool must not be checked against the old definition.
			r.toolsChanged(c)
			r.announce("tools")
		},
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { r.announce("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { r.announce("resources") },
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			s := r.downstream()
			if s == nil {
				// Before the server exists no client can have subscribed.
				r.log.Debug("relay: resource update before start-up dropped", "uri", req.Params.URI)
				return
			}
			s.ResourceUpdated(ctx, req.Params)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.relayProgress(req.Params)
		},
		//lint:ignore SA1019 logging (deprecated by SEP-2577) is still relayed to older-era clients
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			if c.down == nil {
				r.log.Debug("relay: upstream log message on the shared connection", "level", req.Params.Level, "logger", req.Params.Logger)
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
			if err := checkQuestion(req.Params); err != nil {
				return nil, err
			}
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
	client := mcp.NewClient(r.opts.Implementation, copts)
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
	// Added last, so it runs first: before go-sdk's own handlers, some of
	// which read params the upstream may leave out.
	client.AddReceivingMiddleware(requireParams)
	t, err := r.opts.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	mayMux := muxable(t)
	t = ownLines(t)
	// The guard comes first, so that the mux's own calls are guarded too.
	t = guard(t)
	var mt *muxTransport
	if mayMux {
		mt = &muxTransport{inner: t}
		t = mt
	}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: r.opts.UpstreamProtocol})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	c.cs, c.declared, c.capsMeta = cs, copts.Capabilities, declaredMeta(copts.Capabilities)
	if mt != nil {
		c.mux = mt.mux
	}
	if caps := cs.InitializeResult().Capabilities; caps != nil && caps.Tools != nil && caps.Tools.ListChanged {
		c.tools.mu.Lock()
		c.tools.announces = true
		c.tools.mu.Unlock()
	}
	go func() {
		cs.Wait()
		close(c.closed)
	}()
	return c, nil
}

// requireParams is a client receiving middleware that refuses a request,
// and drops a notification, that the upstream sent without the params its
// handling reads: go-sdk lets them through for elicitation/create,
// resources/updated and elicitation/complete, and then dereferences them
// (an upstream could crash the proxy with one line).
func requireParams(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "ping", "roots/list", "notifications/cancelled", "notifications/subscriptions/acknowledged",
			"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
			return next(ctx, method, req) // nothing reads their params
		}
		if p := req.GetParams(); p == nil || reflect.ValueOf(p).IsNil() {
			if strings.HasPrefix(method, "notifications/") {
				return nil, nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: missing params", method)}
		}
		return next(ctx, method, req)
	}
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

// dead reports whether the upstream ended this connection (its process
// exited, its HTTP session ended).
func (c *conn) dead() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// modern reports whether the upstream speaks 2026-07-28 or later.
func (c *conn) modern() bool {
	r := c.cs.InitializeResult()
	return r != nil && r.ProtocolVersion >= requeststate.ProtocolMRTR
}

// track records ctx as a downstream call in flight until the returned
// function is called. A relayed server-initiated request is sent with the
// context of such a call, so that over streamable HTTP it travels on the
// stream of a request the client is waiting on.
func (c *conn) track(ctx context.Context) func() {
	if c.down == nil {
		return func() {}
	}
	c.mu.Lock()
	c.inflight = append(c.inflight, ctx)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.inflight {
			if x == ctx {
				c.inflight = append(c.inflight[:i], c.inflight[i+1:]...)
				return
			}
		}
	}
}

// relayContext returns a context for a request relayed to down: the values
// of the latest downstream call in flight (its stream), cancelled with
// upCtx (the upstream's request).
func (c *conn) relayContext(upCtx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	base := context.Background()
	if n := len(c.inflight); n > 0 {
		base = context.WithoutCancel(c.inflight[n-1])
	}
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(base)
	stop := context.AfterFunc(upCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// CallTool implements [Upstream].
func (c *conn) CallTool(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	meta, done := c.r.withProgress(ctx, ss, c.forwardMeta(req.Params.Meta))
	defer done()
	if len(args) == 0 {
		args = json.RawMessage("{}") // never "null"
	}
	if c.mux != nil {
		// decodeResult's results are fresh already.
		return c.callTool(ctx, meta, req.Params.Name, args, state, responses)
	}
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: req.Params.Name, Arguments: args,
		InputResponses: responses, RequestState: state})
	if err != nil {
		return nil, err
	}
	return fresh(res), nil
}

// fresh returns a copy of res without its result type, which is for the
// upstream's hop.
func fresh(res *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: res.Meta, Content: res.Content, StructuredContent: res.StructuredContent,
		IsError: res.IsError, InputRequests: res.InputRequests, RequestState: res.RequestState}
}

// forwardMeta returns the _meta to send upstream for a downstream request's
// meta m: everything but the protocol's own keys, which describe the hop
// between the client and the relay (the go-sdk client writes its own). To
// an upstream of the 2026-07-28 era the downstream client's capabilities and
// log level travel on, since that upstream asks through input_required
// results, which the relay passes on to that same client.
func (c *conn) forwardMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta // allocated only if something travels on
	put := func(k string, v any) {
		if out == nil {
			out = make(mcp.Meta, len(m))
		}
		out[k] = v
	}
	for k, v := range m {
		if !strings.HasPrefix(k, metaPrefix) {
			put(k, v)
		}
	}
	if len(m) > 0 && c.modern() {
		//lint:ignore SA1019 the client's log level (logging is deprecated by SEP-2577) travels on to a 2026-07-28 upstream that asks in-band
		for _, k := range []string{mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel} {
			if v, ok := m[k]; ok {
				put(k, v)
			}
		}
	}
	return out
}

// zeroToolsTTL is a client sending middleware that clears the cache hint of
// every tools/list result before the go-sdk client's cache sees it: a gate
// that re-checks a tool's definition must read the upstream's current one,
// not one cached a minute ago.
func zeroToolsTTL(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ListToolsResult); ok && r != nil {
			r.TTLMs = 0
		}
		return res, err
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
	// A 2026-07-28 client unsubscribes by ending its subscriptions/listen
	// stream, and go-sdk calls this with that stream's context, already
	// cancelled: the unsubscribe must outlive it, bounded on its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubscribeTimeout)
	defer cancel()
	return c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: params.URI})
}

// unsubscribeTimeout bounds an unsubscribe sent upstream after the
// downstream request that caused it has ended.
const unsubscribeTimeout = 10 * time.Second

// errQuestionSchema is what an upstream is told of a question whose
// requested schema the relay will not put to a client, and, for an input
// request the relay plays itself, what the client's call fails with. It
// names nothing of the schema: the upstream wrote it.
var errQuestionSchema = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the proxy does not relay a question whose requested schema cannot be validated in bounded work"}

// checkQuestion refuses an upstream's question whose requested schema
// go-sdk could not validate an answer against: it validates an accepted
// answer on the downstream session and on the upstream client, and a
// schema that applies itself to the answer in a loop would end the
// relay's process for a stack overflow. Attack stopped: an upstream
// stopping the proxy (every client's) with one question.
func checkQuestion(p *mcp.ElicitParams) error {
	if p != nil && schemabound.CheckWire(p.RequestedSchema) != nil {
		return errQuestionSchema
	}
	return nil
}
