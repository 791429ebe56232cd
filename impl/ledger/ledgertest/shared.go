package ledgertest

import (
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
	if _, err := b.Spend(ctx, conf.ID, ledger.Redeemed); !errors.Is(err, ledger.ErrUnknown) {
		t.Fatalf("Spend in another namespace = %v, want ErrUnknown", err)
	}
	if err := b.Add(ctx, conf); err != nil {
		t.Fatalf("the same id in another namespace: %v", err)
	}
	for _, s := range []ledger.Store{a, b} {
		if _, err := s.Spend(ctx, conf.ID, ledger.Redeemed); err != nil {
			t.Fatal(err)
		}
	}
}

// RedeemOnce checks that s works under a Ledger: a confirmation issued
// through it is redeemed once, and its replay is refused with ErrSpent.
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
	if _, err := l.Redeem(ctx, conf.ID); !errors.Is(err, ledger.ErrSpent) {
		t.Fatalf("second Redeem = %v, want ErrSpent", err)
	}
}
