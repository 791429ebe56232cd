package observe

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Store returns s timed: every operation's latency goes to
// mcp_confirm_ledger_seconds, labelled with Options.Store; and, if s is a
// [ledger.PendingCounter], the gauge mcp_confirm_pending reads its count
// when scraped. It returns s itself without metrics. A Telemetry serves
// one server: call Store once, with that server's store (a second call's
// store is timed too, but the gauge keeps counting the first's).
//
// The wrapper forwards [ledger.IDSource] when s is one (the memory store
// places a principal's confirmations by their ids), and any method the
// Store interface gains, untimed.
func (t *Telemetry) Store(s ledger.Store) ledger.Store {
	if !t.Metrics() || s == nil {
		return s
	}
	if pc, ok := s.(ledger.PendingCounter); ok {
		t.pending.mu.Lock()
		if t.pending.counter == nil {
			t.pending.counter = timedCounter{pc, t.m.ledgerOp[opPending]}
		}
		t.pending.mu.Unlock()
	}
	ts := &timedStore{Store: s, op: &t.m.ledgerOp}
	if ids, ok := s.(ledger.IDSource); ok {
		return &timedIDStore{timedStore: ts, ids: ids}
	}
	return ts
}

// timedStore times every operation of the Store it wraps.
type timedStore struct {
	ledger.Store
	op *[numOps]prometheus.Observer
}

func since(o prometheus.Observer, t0 time.Time) { o.Observe(time.Since(t0).Seconds()) }

func (s *timedStore) Add(ctx context.Context, c ledger.Confirmation) error {
	defer since(s.op[opAdd], time.Now())
	return s.Store.Add(ctx, c)
}

func (s *timedStore) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	defer since(s.op[opSpend], time.Now())
	return s.Store.Spend(ctx, id, to, lease)
}

func (s *timedStore) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	defer since(s.op[opComplete], time.Now())
	return s.Store.Complete(ctx, id, o)
}

func (s *timedStore) Decide(ctx context.Context, id ledger.ID, p ledger.Approver, approve bool) (ledger.Record, error) {
	defer since(s.op[opDecide], time.Now())
	return s.Store.Decide(ctx, id, p, approve)
}

func (s *timedStore) Lookup(ctx context.Context, id ledger.ID) (ledger.Record, error) {
	defer since(s.op[opLookup], time.Now())
	return s.Store.Lookup(ctx, id)
}

// timedIDStore is a timedStore over an [ledger.IDSource].
type timedIDStore struct {
	*timedStore
	ids ledger.IDSource
}

func (s *timedIDStore) NewID(principal string) ledger.ID { return s.ids.NewID(principal) }

// timedCounter times a store's pending count.
type timedCounter struct {
	pc ledger.PendingCounter
	o  prometheus.Observer
}

func (c timedCounter) Pending(ctx context.Context) (int, error) {
	defer since(c.o, time.Now())
	return c.pc.Pending(ctx)
}
