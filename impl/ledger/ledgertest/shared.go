package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Namespaced returns a Factory for a store that server replicas share,
// its ledgers told apart by namespace. New calls fresh, which returns an
// empty store in a namespace of its own (through one connection) and that
// namespace; Replica calls replica with the namespace of the store New
// made, which returns the same ledger through a second connection, as
// another replica would open it.
func Namespaced(fresh func(t testing.TB) (ledger.Store, string), replica func(t testing.TB, ns string) ledger.Store) Factory {
	var mu sync.Mutex
	namespaces := map[ledger.Store]string{}
	return Factory{
		New: func(t testing.TB) ledger.Store {
			s, ns := fresh(t)
			mu.Lock()
			namespaces[s] = ns
			mu.Unlock()
			return s
		},
		Replica: func(t testing.TB, s ledger.Store) ledger.Store {
			mu.Lock()
			ns, ok := namespaces[s]
			mu.Unlock()
			if !ok {
				t.Fatalf("Replica of a store the factory did not make")
			}
			return replica(t, ns)
		},
	}
}

// Namespaces checks that two stores f.New makes, which must be on one
// server (and table) in different namespaces, are separate ledgers: an id
// added in one is unknown in the other, and can be added and spent there
// too.
func Namespaces(t *testing.T, f Factory) {
	ctx := context.Background()
	a, b := f.New(t), f.New(t)
	conf := Fresh(t)
	if err := a.Add(ctx, conf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Spend(ctx, conf.ID, ledger.Acting, Long); !errors.Is(err, ledger.ErrUnknown) {
		t.Fatalf("Spend in another namespace = %v, want ErrUnknown", err)
	}
	if err := b.Add(ctx, conf); err != nil {
		t.Fatalf("the same id in another namespace: %v", err)
	}
	for _, s := range []ledger.Store{a, b} {
		if _, err := s.Spend(ctx, conf.ID, ledger.Acting, Long); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, conf.ID, outcome(ledger.OutcomeDone)); err != nil {
			t.Fatal(err)
		}
	}
}

// RedeemOnce checks that s works under a Ledger: a confirmation issued
// through it is redeemed once, its outcome recorded, and its replay
// answered with that outcome (ErrDone), running nothing.
func RedeemOnce(t *testing.T, s ledger.Store) {
	ctx := context.Background()
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := l.Issue(ctx, Fresh(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Redeem(ctx, conf.ID); err != nil {
		t.Fatal(err)
	}
	result := []byte(`{"content":[{"type":"text","text":"Deleted a."}]}`)
	if err := l.Complete(ctx, conf.ID, ledger.OutcomeDone, result); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Redeem(ctx, conf.ID)
	if !errors.Is(err, ledger.ErrDone) || !errors.Is(err, ledger.ErrSpent) {
		t.Fatalf("second Redeem = %v, want ErrDone", err)
	}
	if rec.State != ledger.Done || !bytes.Equal(rec.Outcome.Result, result) || !equal(rec.Confirmation, conf) {
		t.Fatalf("second Redeem answered %v %q for %+v, want done %q for %+v", rec.State, rec.Outcome.Result, rec.Confirmation, result, conf)
	}
}
