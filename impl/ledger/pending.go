package ledger

import "context"

// A PendingCounter is a [Store] that can count the confirmations it holds
// pending, for a gauge of questions awaiting an answer (package observe
// reads it when it is scraped). Every store of this module is one.
type PendingCounter interface {
	// Pending returns how many confirmations are pending and unexpired on
	// the store's clock: issued, not yet redeemed or cancelled, before
	// their expiry; those awaiting out-of-band approval included. For a
	// shared store it counts those of every replica sharing the
	// namespace. The count is a reading, not a step ordered with the
	// other calls: confirmations issued or spent while it reads may or
	// may not be counted. It changes nothing.
	Pending(ctx context.Context) (int, error)
}

var _ PendingCounter = (*Memory)(nil)

// Pending counts the pending, unexpired confirmations of every shard, each
// shard under its lock in turn. It costs one pass over the entries the
// store remembers: meant for a scrape every few seconds, not for every
// call.
func (m *Memory) Pending(context.Context) (int, error) {
	at := m.now().Sub(m.epoch)
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, e := range s.entries {
			if e.state == Pending && at < e.expires {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n, nil
}
