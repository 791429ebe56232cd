package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// CapsFactory returns two handles on one new, empty store that admits at
// most maxPending pending confirmations in all and perPrincipal for any
// one principal: the second as another server replica would open it, or
// the first again for a store that cannot be shared.
type CapsFactory func(t testing.TB, maxPending, perPrincipal int) (a, b ledger.Store)

// Caps checks a store's caps on pending confirmations: one principal who
// fills its own cap leaves room for the others; the store as a whole
// admits no more than its cap; a refused Add stores nothing; spending a
// confirmation frees its slot; and Adds racing through two handles, as two
// replicas would make them, never admit one past a cap; confirmations
// awaiting out-of-band approval count too.
func Caps(t *testing.T, f CapsFactory) {
	t.Run("sequential", func(t *testing.T) { capsSequential(t, f) })
	t.Run("racing at the caps", func(t *testing.T) { capsBoundary(t, f) })
	t.Run("racing replicas", func(t *testing.T) { capsRacing(t, f) })
	t.Run("awaiting approval", func(t *testing.T) { capsAwaiting(t, f) })
}

// capsAwaiting checks that confirmations awaiting out-of-band approval
// count against both caps, approved or not, until redeemed, declined or
// withdrawn: a flood of questions no approver answers is capped too.
func capsAwaiting(t *testing.T, f CapsFactory) {
	ctx := context.Background()
	a, b := f(t, 3, 2)
	add := func(s ledger.Store, p string, outOfBand bool) (ledger.Confirmation, error) {
		c := pendingFor(t, p)
		if outOfBand {
			c = OutOfBand(c, 1, "")
		}
		return c, s.Add(ctx, c)
	}
	must := func(c ledger.Confirmation, err error) ledger.Confirmation {
		t.Helper()
		if err != nil {
			t.Fatalf("Add with room: %v", err)
		}
		return c
	}
	refuse := func(_ ledger.Confirmation, err error) {
		t.Helper()
		if !errors.Is(err, ledger.ErrFull) {
			t.Fatalf("Add past a cap = %v, want ErrFull", err)
		}
	}
	first, second := must(add(a, "alice", true)), must(add(b, "alice", true))
	refuse(add(a, "alice", false)) // her cap of 2, awaiting approval
	must(add(b, "bob", false))
	refuse(add(a, "carol", true)) // the store's cap of 3
	if _, err := b.Decide(ctx, first.ID, alice, true); err != nil {
		t.Fatal(err)
	}
	refuse(add(a, "alice", true)) // approved, not yet redeemed: still pending
	if _, err := a.Decide(ctx, second.ID, carol, false); err != nil {
		t.Fatal(err)
	}
	must(add(a, "alice", false)) // the declined one freed her slot
	if _, err := b.Spend(ctx, first.ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	must(add(b, "carol", true)) // the redeemed one freed the store's
}

// capsBoundary releases many Adds at once, through both handles, at a store
// two short of its cap, and at a principal two short of its own: exactly
// two must be admitted. Each is tried a few times over, so that a store
// whose Add checks, then inserts, is caught whenever the Adds overlap.
func capsBoundary(t *testing.T, f CapsFactory) {
	ctx := context.Background()
	const maxPending, perPrincipal, racers, rounds = 40, 12, 16, 3
	fill := func(stores []ledger.Store, n int, principal func(i int) string) {
		t.Helper()
		for i := range n {
			if err := stores[i%2].Add(ctx, pendingFor(t, principal(i))); err != nil {
				t.Fatalf("filling: %v", err)
			}
		}
	}
	race := func(stores []ledger.Store, principal func(i int) string) int {
		start := make(chan struct{})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := pendingFor(t, principal(i))
			wg.Go(func() {
				<-start
				switch err := stores[i%2].Add(ctx, c); {
				case err == nil:
					admitted.Add(1)
				case !errors.Is(err, ledger.ErrFull):
					t.Errorf("racing Add: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		return int(admitted.Load())
	}
	for round := range rounds {
		a, b := f(t, maxPending, perPrincipal)
		stores := []ledger.Store{a, b}
		// Five fillers of 7 or 8 each: none near its own cap.
		fill(stores, maxPending-2, func(i int) string { return fmt.Sprintf("filler-%d", i%5) })
		if n := race(stores, func(i int) string { return fmt.Sprintf("racer-%d", i) }); n != 2 {
			t.Fatalf("round %d: %d of %d racing Adds admitted with 2 slots left in the store", round, n, racers)
		}
		a, b = f(t, maxPending, perPrincipal)
		stores = []ledger.Store{a, b}
		fill(stores, perPrincipal-2, func(int) string { return "alice" })
		if n := race(stores, func(int) string { return "alice" }); n != 2 {
			t.Fatalf("round %d: %d of %d racing Adds admitted with 2 slots left in alice's cap", round, n, racers)
		}
	}
}

// pendingFor returns a fresh confirmation of principal p.
func pendingFor(t TB, p string) ledger.Confirmation {
	c := Fresh(t)
	c.Principal = p
	return c
}

func capsSequential(t *testing.T, f CapsFactory) {
	ctx := context.Background()
	a, b := f(t, 5, 3)
	mustAdd := func(s ledger.Store, p string) ledger.Confirmation {
		t.Helper()
		c := pendingFor(t, p)
		if err := s.Add(ctx, c); err != nil {
			t.Fatalf("Add for %q with room: %v", p, err)
		}
		return c
	}
	mustRefuse := func(s ledger.Store, p, why string) {
		t.Helper()
		c := pendingFor(t, p)
		if err := s.Add(ctx, c); !errors.Is(err, ledger.ErrFull) {
			t.Fatalf("Add for %q past %s = %v, want ErrFull", p, why, err)
		}
		// Refused means not stored: the id is unknown.
		if _, err := a.Spend(ctx, c.ID, ledger.Cancelled, 0); !errors.Is(err, ledger.ErrUnknown) {
			t.Fatalf("Spend of a refused Add = %v, want ErrUnknown", err)
		}
	}
	alice := []ledger.Confirmation{mustAdd(a, "alice"), mustAdd(b, "alice"), mustAdd(a, "alice")}
	mustRefuse(b, "alice", "her own cap of 3")
	mustRefuse(a, "alice", "her own cap of 3")
	// Alice at her cap does not starve Bob.
	bob := []ledger.Confirmation{mustAdd(b, "bob"), mustAdd(a, "bob")}
	mustRefuse(a, "carol", "the store's cap of 5")
	// An id the store holds is reported as such even when full.
	if err := b.Add(ctx, alice[1]); !errors.Is(err, ledger.ErrExists) {
		t.Fatalf("duplicate Add when full = %v, want ErrExists", err)
	}
	// A redeemed confirmation frees its principal's slot and the store's.
	if _, err := b.Spend(ctx, alice[0].ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	mustAdd(a, "alice")
	mustRefuse(b, "alice", "her cap again")
	// A cancelled one too: Bob's slot goes to Carol.
	if _, err := a.Spend(ctx, bob[0].ID, ledger.Cancelled, 0); err != nil {
		t.Fatal(err)
	}
	mustAdd(b, "carol")
	mustRefuse(a, "dave", "the store's cap again")
	// Principals are compared byte for byte: a name that differs only in
	// a byte the others share is someone else.
	if _, err := a.Spend(ctx, bob[1].ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	mustAdd(a, "alice\x00")
}

func capsRacing(t *testing.T, f CapsFactory) {
	ctx := context.Background()
	const maxPending, perPrincipal, goroutines, each = 40, 12, 16, 30
	a, b := f(t, maxPending, perPrincipal)
	stores := []ledger.Store{a, b}
	principals := []string{"alice", "bob", "carol", "dave", "erin"} // 5 × 12 > 40
	var mu sync.Mutex
	accepted := map[string][]ledger.ID{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				p := principals[(g+i)%len(principals)]
				c := pendingFor(t, p)
				err := stores[(g+i)%2].Add(ctx, c)
				switch {
				case err == nil:
					mu.Lock()
					accepted[p] = append(accepted[p], c.ID)
					mu.Unlock()
				case !errors.Is(err, ledger.ErrFull):
					t.Errorf("Add: %v", err)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for p, ids := range accepted {
		if len(ids) > perPrincipal {
			t.Errorf("%s: %d pending admitted, cap %d", p, len(ids), perPrincipal)
		}
		total += len(ids)
	}
	// Exactly the cap: never more, and no fewer either, since nothing was
	// spent while the Adds raced.
	if total != maxPending {
		t.Fatalf("%d pending admitted in all, want exactly the cap %d (per principal: %v)", total, maxPending, counts(accepted))
	}
	// Spending one frees one slot, through either handle.
	for p, ids := range accepted {
		if _, err := b.Spend(ctx, ids[0], ledger.Acting, Long); err != nil {
			t.Fatal(err)
		}
		if err := a.Add(ctx, pendingFor(t, p)); err != nil {
			t.Fatalf("after a redeem, %s: %v", p, err)
		}
		if err := b.Add(ctx, pendingFor(t, p)); !errors.Is(err, ledger.ErrFull) {
			t.Fatalf("at the cap again, %s: %v, want ErrFull", p, err)
		}
		break
	}
}

func counts(m map[string][]ledger.ID) string {
	s := ""
	for p, ids := range m {
		s += fmt.Sprintf(" %s=%d", p, len(ids))
	}
	return s
}
