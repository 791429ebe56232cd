package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolMRTR is the first protocol version with multi round-trip requests
// and per-request client capabilities.
const protocolMRTR = "2026-07-28"

// metaPrefix is the _meta namespace the protocol reserves for itself
// (protocol version, client info and capabilities, log level, …).
const metaPrefix = "io.modelcontextprotocol/"

// ErrUpstream reports an upstream the proxy cannot reach or use.
var ErrUpstream = errors.New("proxy: upstream unavailable")

// A conn is one client connection to the upstream.
//
// The shared conn serves every request that arrives in the 2026-07-28 era:
// such clients cannot receive server-initiated requests, so it declares no
// elicitation, sampling or roots capability (an upstream on that era asks
// through input_required results instead, which the proxy relays in-band).
// A downstream session of the older era gets a conn of its own when it
// initializes, declaring what that client declared, so that the upstream's
// elicitation, sampling and roots requests reach exactly that client.
type conn struct {
	cs     *mcp.ClientSession
	down   *mcp.ServerSession      // nil for the shared conn
	caps   *mcp.ClientCapabilities // what down declared, to dial again
	closed chan struct{}           // closed when the connection ends
	// rootsClient is the client of a conn that relays the downstream
	// client's roots; it announces their changes upstream.
	rootsClient *mcp.Client

	mu       sync.Mutex
	inflight []context.Context // contexts of the downstream calls in flight on down
	subs     map[string]int    // resource URI → downstream subscriptions
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
	return r != nil && r.ProtocolVersion >= protocolMRTR
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

// tool returns the upstream's current definition of the named tool, or nil
// if it lists none. It always asks the upstream (never a cache).
func (c *conn) tool(ctx context.Context, name string) (*mcp.Tool, error) {
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("%w: tools/list: %v", ErrUpstream, err)
		}
		if t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

// tools returns every tool the upstream lists.
func (c *conn) tools(ctx context.Context) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("%w: tools/list: %v", ErrUpstream, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// forwardMeta returns the _meta to send upstream for a downstream request's
// meta m: everything but the protocol's own keys, which describe the hop
// between the client and the proxy (the go-sdk client writes its own). To
// an upstream of the 2026-07-28 era the downstream client's capabilities and
// log level travel on, since that upstream asks through input_required
// results, which the proxy relays to that same client.
func (c *conn) forwardMeta(m mcp.Meta) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range m {
		if !strings.HasPrefix(k, metaPrefix) {
			out[k] = v
		}
	}
	if c.modern() {
		//lint:ignore SA1019 the client's log level (logging is deprecated by SEP-2577) travels on to a 2026-07-28 upstream that asks in-band
		for _, k := range []string{mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel} {
			if v, ok := m[k]; ok {
				out[k] = v
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// zeroToolsTTL is a client sending middleware that clears the cache hint of
// every tools/list result before the go-sdk client's cache sees it: the
// fingerprint check must read the upstream's current definition, not one
// cached a minute ago.
func zeroToolsTTL(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ListToolsResult); ok && r != nil {
			r.TTLMs = 0
		}
		return res, err
	}
}
