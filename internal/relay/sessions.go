package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn returns the upstream connection that serves ss: its own if it is an
// older-era session, else the shared one.
func (r *Relay) conn(ss *mcp.ServerSession) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.sessions[ss]; c != nil {
		return c
	}
	return r.shared
}

// live is conn, connecting again if the upstream ended that connection
// (a crashed upstream process is started again). Calls in flight on the old
// connection are not retried: their outcome is the old connection's.
func (r *Relay) live(ctx context.Context, ss *mcp.ServerSession) (*conn, error) {
	c := r.conn(ss)
	if !c.dead() {
		return c, nil
	}
	r.redial.Lock()
	defer r.redial.Unlock()
	if c = r.conn(ss); !c.dead() {
		return c, nil // another call connected again first
	}
	r.mu.Lock()
	closing := r.closing
	r.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("%w: the relay is closing", ErrUpstream)
	}
	r.log.Warn("relay: the upstream connection ended; connecting again")
	nc, err := r.dial(context.WithoutCancel(ctx), c.down, c.caps)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if c.down == nil {
		r.shared = nc
	} else {
		r.sessions[c.down] = nc
	}
	r.mu.Unlock()
	return nc, nil
}

// dedicated returns ss's own connection, or nil.
func (r *Relay) dedicated(ss *mcp.ServerSession) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[ss]
}

// asks reports whether a client that declared caps can answer any of the
// upstream's server-initiated requests the relay passes on (elicitation,
// sampling, roots).
func asks(caps *mcp.ClientCapabilities) bool {
	c := relayed(caps)
	//lint:ignore SA1019 sampling and roots (deprecated by SEP-2577) are still relayed to the older-era client that declared them
	return c.Elicitation != nil || c.Sampling != nil || c.RootsV2 != nil
}

// attach dials a connection of ss's own when it initializes, and closes it
// when ss ends; a session whose client can answer no server-initiated
// request joins the shared connection instead.
func (r *Relay) attach(ctx context.Context, ss *mcp.ServerSession, params *mcp.InitializeParams) error {
	if ss == nil || r.dedicated(ss) != nil {
		return nil
	}
	var caps *mcp.ClientCapabilities
	if params != nil {
		caps = params.Capabilities
	}
	if !asks(caps) {
		r.join(ss)
		return nil
	}
	// Each such session holds an upstream connection (for a command, a
	// process): a cap keeps a flood of sessions from starting a flood of
	// processes.
	r.mu.Lock()
	if r.attached >= r.opts.MaxSessions {
		r.mu.Unlock()
		r.log.Warn("relay: refused a session: too many sessions hold an upstream connection", "max", r.opts.MaxSessions)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many sessions are connected through this proxy; try again later"}
	}
	r.attached++
	r.mu.Unlock()
	c, err := r.dial(context.WithoutCancel(ctx), ss, caps)
	if err != nil {
		r.mu.Lock()
		r.attached--
		r.mu.Unlock()
		r.log.Error("relay: cannot connect to the upstream for a new session", "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the proxy cannot reach its upstream server"}
	}
	r.mu.Lock()
	r.sessions[ss] = c
	r.mu.Unlock()
	go func() {
		ss.Wait()
		r.mu.Lock()
		cur := r.sessions[ss] // c, or the connection that replaced it
		delete(r.sessions, ss)
		r.attached--
		r.mu.Unlock()
		c.cs.Close()
		if cur != nil && cur != c {
			cur.cs.Close()
		}
	}()
	return nil
}

// join puts ss on the shared connection. Nothing the upstream sends there
// unasked reaches ss but what every session may see (list changes) or what
// it asked for itself (progress under its own rewritten token, updates of
// resources it subscribed to); the upstream's log messages, which name no
// session, are not relayed. When ss ends, the subscriptions it left behind
// are released.
func (r *Relay) join(ss *mcp.ServerSession) {
	r.mu.Lock()
	if _, ok := r.joined[ss]; ok {
		r.mu.Unlock()
		return
	}
	r.joined[ss] = map[string]int{}
	r.mu.Unlock()
	go func() {
		ss.Wait()
		r.mu.Lock()
		left := r.joined[ss]
		delete(r.joined, ss)
		c := r.shared
		r.mu.Unlock()
		if len(left) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		for uri, n := range left {
			for range n {
				if err := c.unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
					r.log.Debug("relay: a departed session's subscription was not released upstream", "uri", uri, "err", err)
				}
			}
		}
	}()
}

// releaseTimeout bounds releasing a departed session's subscriptions.
const releaseTimeout = 10 * time.Second

// held records that ss, on the shared connection, holds n more (or fewer)
// subscriptions to uri.
func (r *Relay) held(ss *mcp.ServerSession, uri string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if subs, ok := r.joined[ss]; ok {
		if subs[uri] += n; subs[uri] <= 0 {
			delete(subs, uri)
		}
	}
}
