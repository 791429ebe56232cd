package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoute is where a relayed progress notification goes.
type progressRoute struct {
	ctx   context.Context // the downstream call's (its stream, over HTTP)
	ss    *mcp.ServerSession
	token any // the downstream client's own token
}

// progressGrace is how long after a forwarded call returns the relay still
// relays its progress notifications.
const progressGrace = time.Second

// withProgress rewrites a downstream progress token in m to one unique in
// this relay, so that tokens chosen by different clients never collide on
// the shared connection, and routes the upstream's notifications for it back
// to ss until the returned function is called.
func (r *Relay) withProgress(ctx context.Context, ss *mcp.ServerSession, m mcp.Meta) (mcp.Meta, func()) {
	tok, ok := m["progressToken"]
	if !ok || tok == nil {
		return m, func() {}
	}
	ours := "mcp-confirm-proxy-" + strconv.FormatUint(r.nextTok.Add(1), 10)
	r.mu.Lock()
	r.progress[ours] = progressRoute{ctx: ctx, ss: ss, token: tok}
	r.mu.Unlock()
	m["progressToken"] = ours
	return m, func() {
		// go-sdk hands a reply to its caller before it has run the
		// handlers of notifications read ahead of it: keep routing the
		// call's progress a little longer, so none is dropped.
		time.AfterFunc(progressGrace, func() {
			r.mu.Lock()
			delete(r.progress, ours)
			r.mu.Unlock()
		})
	}
}

// relayProgress sends an upstream progress notification to the call it
// belongs to, under that caller's own token.
func (r *Relay) relayProgress(params *mcp.ProgressNotificationParams) {
	key, _ := params.ProgressToken.(string)
	r.mu.Lock()
	route, ok := r.progress[key]
	r.mu.Unlock()
	if !ok || route.ss == nil {
		r.log.Debug("relay: progress for no call in flight", "token", params.ProgressToken)
		return
	}
	cp := *params
	cp.ProgressToken = route.token
	// The call may be over (see progressGrace): keep its values (its stream,
	// over HTTP), not its cancellation.
	if err := route.ss.NotifyProgress(context.WithoutCancel(route.ctx), &cp); err != nil {
		r.log.Debug("relay: progress not relayed", "err", err)
	}
}
