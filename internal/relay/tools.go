package relay

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Freshness says how recently the definition [Upstream.Tool] returns must
// have been read from the upstream.
type Freshness uint8

const (
	// Cached accepts the definition the connection read last, however old:
	// what may only lead to a refusal later (the tool's definition a
	// question is asked about, which is checked again before forwarding).
	// It reads the upstream when the connection has read no list yet, or
	// none since the upstream announced a change, or when the tool is not
	// in it and the list is not current (see Current).
	Cached Freshness = iota
	// Current accepts the cache only while the upstream keeps it current:
	// it declared tools.listChanged, it has announced no change since the
	// list was read, and no read has caught it changing a tool without
	// announcing it (see [Relay.Unannounced]). Otherwise it reads the
	// upstream.
	Current
	// Fresh reads the upstream.
	Fresh
)

// toolCache is the tools an upstream connection listed last, by name.
//
// An upstream that declares tools.listChanged promises to announce every
// change; each announcement empties the cache, so between announcements
// the cache is what the upstream lists. A read that overlaps an
// announcement may hold the list from before it: it is kept for Cached
// lookups but is not current.
type toolCache struct {
	mu        sync.Mutex
	announces bool                 // the upstream declared tools.listChanged
	gen       uint64               // announcements heard
	byName    map[string]*mcp.Tool // the last complete list read; nil: none since the last announcement
	current   bool                 // byName was read entirely after announcement gen
}

// changed records an announcement (notifications/tools/list_changed).
func (tc *toolCache) changed() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.gen++
	tc.byName, tc.current = nil, false
}

// lookup returns the cached definition of name when f accepts the cache.
func (tc *toolCache) lookup(name string, f Freshness) (t *mcp.Tool, ok bool, gen uint64) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.byName == nil {
		return nil, false, tc.gen
	}
	t = tc.byName[name]
	switch f {
	case Cached:
		// A tool the list lacks may have been added since, unannounced,
		// unless the list is current.
		return t, t != nil || tc.announces && tc.current, tc.gen
	case Current:
		// A current list lacks the tool: the upstream does not have it.
		return t, tc.announces && tc.current, tc.gen
	}
	return nil, false, tc.gen
}

// fill stores a list read after announcement gen: complete (every page),
// or one page of it. It reports whether the read shows a change the
// upstream did not announce: the cache was current (the upstream declared
// tools.listChanged, and announced nothing since the cached list was read
// nor while this one was), and a tool differs in any field, or, for a
// complete list, was added or removed. A page only updates the tools it
// shows when it shows such a change (the cache is then not current).
func (tc *toolCache) fill(gen uint64, tools []*mcp.Tool, complete bool) (unannounced bool) {
	byName := make(map[string]*mcp.Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if gen == tc.gen && tc.announces && tc.current && tc.byName != nil {
		unannounced = complete && len(byName) != len(tc.byName)
		for name, t := range byName {
			if old, ok := tc.byName[name]; !ok || !reflect.DeepEqual(old, t) {
				unannounced = true
				break
			}
		}
	}
	switch {
	case !complete:
		if unannounced {
			tc.byName, tc.current = nil, false
		}
	case gen < tc.gen && tc.byName != nil:
		// A read that began after the announcement is already here.
	default:
		tc.byName, tc.current = byName, gen == tc.gen
	}
	return unannounced
}

// toolsChanged empties the tool cache of every connection, and of c, which
// heard an announcement (it may be dialling still).
func (r *Relay) toolsChanged(c *conn) {
	c.tools.changed()
	r.forgetTools(c)
}

// Unannounced reports whether a read of the upstream's tools (the relay's
// own, or a downstream client's tools/list passing through) has caught the
// upstream changing a tool it had listed, without announcing it, although
// it declared tools.listChanged. From then on [Current] reads the upstream
// every time, on every connection, for as long as the relay runs: an
// upstream known to break its promise once is not taken at its word again.
func (r *Relay) Unannounced() bool { return r.unannounced.Load() }

// observed records what a read of the upstream's tools on c showed (every
// page, or one); a change the upstream did not announce ends the trust in
// its announcements, and empties every connection's list.
func (r *Relay) observed(c *conn, gen uint64, tools []*mcp.Tool, complete bool) {
	if !c.tools.fill(gen, tools, complete) {
		return
	}
	if !r.unannounced.Swap(true) {
		// An upstream that changes a tool silently would have the proxy
		// check an approval against a definition it no longer holds.
		r.log.Warn("relay: the upstream changed a tool without announcing it; its tool list is read before every confirmed call from now on")
	}
	r.forgetTools(c)
}

// forgetTools empties the tool cache of every connection but c.
func (r *Relay) forgetTools(c *conn) {
	r.mu.Lock()
	conns := make([]*conn, 0, len(r.sessions)+1)
	if r.shared != nil {
		conns = append(conns, r.shared)
	}
	for _, s := range r.sessions {
		conns = append(conns, s)
	}
	r.mu.Unlock()
	for _, o := range conns {
		if o != c {
			o.tools.changed()
		}
	}
}

// Tool implements [Upstream].
func (c *conn) Tool(ctx context.Context, name string, f Freshness) (*mcp.Tool, error) {
	if f == Current && c.r.unannounced.Load() {
		f = Fresh
	}
	t, ok, gen := c.tools.lookup(name, f)
	if ok {
		return t, nil
	}
	tools, err := c.readTools(ctx, gen)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

// Tools implements [Upstream].
func (c *conn) Tools(ctx context.Context) ([]*mcp.Tool, error) {
	_, _, gen := c.tools.lookup("", Fresh)
	return c.readTools(ctx, gen)
}

// readTools reads every page of the upstream's tools and caches them, as
// read after announcement gen.
func (c *conn) readTools(ctx context.Context, gen uint64) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("%w: tools/list: %v", ErrUpstream, err)
		}
		out = append(out, t)
	}
	c.r.observed(c, gen, out, true)
	return out, nil
}
