package redisledger

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

var _ ledger.PendingCounter = (*Store)(nil)

// pendingScript counts the members of the pending set (KEYS[1]) whose
// score, their expiry in unix microseconds, is after the server's clock:
// what [Store.Pending] returns. A Spend or a decline drops its id from the
// set; an expired one stays until a full namespace's Add trims it, so the
// clock decides.
var pendingScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), '+inf')
`)

// Pending implements [ledger.PendingCounter]: one ZCOUNT of the
// namespace's pending set, at most MaxPending members, on Redis's clock.
func (s *Store) Pending(ctx context.Context) (int, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	n, err := pendingScript.Run(ctx, s.client, []string{s.pendingKey}).Int()
	if err != nil {
		return 0, fmt.Errorf("redisledger: pending: %w", err)
	}
	return n, nil
}
