package pgledger

import (
	"context"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

var _ ledger.PendingCounter = (*Store)(nil)

// Pending implements [ledger.PendingCounter]: a count of the namespace's
// pending rows whose expiry is after the database's clock, read from the
// partial index of pending rows (at most MaxPending of them unexpired).
func (s *Store) Pending(ctx context.Context) (int, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.table+`
WHERE namespace = $1 AND state = 'pending' AND expires_at > clock_timestamp()`, s.ns).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgledger: pending: %w", err)
	}
	return n, nil
}
