package relay

import (
	"context"
	"fmt"

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

// attach dials a connection of ss's own when it initializes, and closes it
// when ss ends.
func (r *Relay) attach(ctx context.Context, ss *mcp.ServerSession, params *mcp.InitializeParams) error {
	if ss == nil || r.dedicated(ss) != nil {
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
	var caps *mcp.ClientCapabilities
	if params != nil {
		caps = params.Capabilities
	}
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
