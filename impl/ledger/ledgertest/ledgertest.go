// Package ledgertest is the conformance suite every [ledger.Store] must
// pass: the in-memory store, Redis and PostgreSQL run the same tests, the
// same rapid model test and the same concurrency checks.
//
// Stores that server replicas share over the network (Redis, PostgreSQL)
// also run the checks only a networked store needs: [Namespaces],
// [GoneAway] (a server closed, not listening or hanging, at [ClosedAddr]
// and [SilentAddr]), [OpenErrors] (Open errors name the server and never
// echo the password) and [RedeemOnce] on the store their Open returns;
// and [BenchmarkIssueRedeem] beside a floor of their own, run with
// [BenchmarkOp]. [Namespaced] makes their Factory.
//
// Expiry is exercised with absolute times around the real clock (entries
// issued already expired, or expiring an hour from now), because shared
// stores decide expiry on their own server's clock, which a test cannot
// move.
package ledgertest

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Factory makes stores for the suite.
type Factory struct {
	// New returns a new, empty store. It registers its own cleanup. The
	// model test calls it once per rapid check (hundreds of times in one
	// test), so for a networked store it should hand out fresh namespaces
	// on shared connections rather than open a pool each time.
	New func(t testing.TB) ledger.Store
	// NewAt, if set, returns a new, empty store that decides expiry on the
	// clock now, so the model test can move time. Nil for stores that run
	// on their own server's clock.
	NewAt func(t testing.TB, now func() time.Time) ledger.Store
	// Replica, if set, returns a second handle on the same backing store as
	// s, as another server replica would open it. Nil for stores that cannot
	// be shared (memory).
	Replica func(t testing.TB, s ledger.Store) ledger.Store
}

// Run runs the whole suite against the stores f makes.
func Run(t *testing.T, f Factory) {
	t.Run("Conformance", func(t *testing.T) { Conformance(t, f) })
	t.Run("Concurrent", func(t *testing.T) { Concurrent(t, f) })
	t.Run("Model", func(t *testing.T) { Model(t, f) })
	if f.Replica != nil {
		t.Run("Replicas", func(t *testing.T) { Replicas(t, f) })
	}
}

// TB is the part of testing.TB (and *rapid.T) the helpers need.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// NewID returns a random confirmation id.
func NewID(t TB) ledger.ID {
	var id ledger.ID
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// Fresh returns a confirmation that expires an hour from now, with fields
// that a lossy store would mangle (NUL, invalid UTF-8, non-ASCII).
func Fresh(t TB) ledger.Confirmation {
	return ledger.Confirmation{
		ID:         NewID(t),
		Tool:       "delete_file",
		ArgsDigest: "5f2b1c0e",
		Principal:  "user-\x00-\xff-é",
		Subject:    "dev=1 ino=2 size=12 «a\\nb»",
		Expires:    time.Now().Add(time.Hour).Truncate(time.Millisecond),
	}
}

// Expired returns a confirmation whose expiry passed a second ago, recent
// enough that every store still remembers it.
func Expired(t TB) ledger.Confirmation {
	c := Fresh(t)
	c.Expires = time.Now().Add(-time.Second).Truncate(time.Millisecond)
	return c
}

func add(t testing.TB, s ledger.Store, c ledger.Confirmation) {
	t.Helper()
	if err := s.Add(context.Background(), c); err != nil {
		t.Fatalf("Add(%s): %v", c.ID, err)
	}
}

func equal(a, b ledger.Confirmation) bool {
	return a.ID == b.ID && a.Tool == b.Tool && a.ArgsDigest == b.ArgsDigest &&
		a.Principal == b.Principal && a.Subject == b.Subject &&
		a.Expires.Equal(b.Expires)
}

// Conformance checks each transition of a single confirmation.
func Conformance(t *testing.T, f Factory) {
	ctx := context.Background()
	type step struct {
		to   ledger.State
		want error // nil: success
	}
	tests := []struct {
		name  string
		make  func(TB) ledger.Confirmation
		added bool
		steps []step
	}{
		{"redeem once", Fresh, true, []step{{ledger.Redeemed, nil}}},
		{"redeem twice", Fresh, true, []step{{ledger.Redeemed, nil}, {ledger.Redeemed, ledger.ErrSpent}}},
		{"redeem then cancel", Fresh, true, []step{{ledger.Redeemed, nil}, {ledger.Cancelled, ledger.ErrSpent}}},
		{"cancel then redeem", Fresh, true, []step{{ledger.Cancelled, nil}, {ledger.Redeemed, ledger.ErrCancelled}}},
		{"cancel twice", Fresh, true, []step{{ledger.Cancelled, nil}, {ledger.Cancelled, ledger.ErrCancelled}}},
		{"unknown", Fresh, false, []step{{ledger.Redeemed, ledger.ErrUnknown}, {ledger.Cancelled, ledger.ErrUnknown}}},
		{"expired", Expired, true, []step{{ledger.Redeemed, ledger.ErrExpired}, {ledger.Cancelled, ledger.ErrExpired}, {ledger.Redeemed, ledger.ErrExpired}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := f.New(t)
			c := tt.make(t)
			if tt.added {
				add(t, s, c)
			}
			for i, st := range tt.steps {
				got, err := s.Spend(ctx, c.ID, st.to)
				if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
					t.Fatalf("step %d: Spend(%v) error = %v, want %v", i, st.to, err, st.want)
				}
				if err == nil && !equal(got, c) {
					t.Fatalf("step %d: Spend returned %+v, want %+v", i, got, c)
				}
			}
		})
	}

	t.Run("duplicate id", func(t *testing.T) {
		s := f.New(t)
		c := Fresh(t)
		add(t, s, c)
		dup := c
		dup.Tool = "other"
		if err := s.Add(ctx, dup); !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("second Add = %v, want ErrExists", err)
		}
		got, err := s.Spend(ctx, c.ID, ledger.Redeemed)
		if err != nil || !equal(got, c) {
			t.Fatalf("Spend after duplicate Add = %+v, %v; want the original", got, err)
		}
	})

	t.Run("isolation", func(t *testing.T) {
		s := f.New(t)
		a, b := Fresh(t), Fresh(t)
		add(t, s, a)
		add(t, s, b)
		if _, err := s.Spend(ctx, a.ID, ledger.Redeemed); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Spend(ctx, b.ID, ledger.Cancelled); err != nil {
			t.Fatalf("spending a changed b: %v", err)
		}
	})

	t.Run("invalid target state", func(t *testing.T) {
		s := f.New(t)
		c := Fresh(t)
		add(t, s, c)
		if _, err := s.Spend(ctx, c.ID, ledger.Pending); err == nil {
			t.Fatal("Spend(Pending) succeeded")
		}
		if _, err := s.Spend(ctx, c.ID, ledger.Redeemed); err != nil {
			t.Fatalf("a refused Spend(Pending) changed the entry: %v", err)
		}
	})
}

// Concurrent races many goroutines spending the same confirmations: for
// each, exactly one succeeds and every other gets a spent/cancelled error.
func Concurrent(t *testing.T, f Factory) {
	const ids, racers = 16, 32
	s := f.New(t)
	stores := []ledger.Store{s}
	if f.Replica != nil {
		stores = append(stores, f.Replica(t, s))
	}
	cs := make([]ledger.Confirmation, ids)
	for i := range cs {
		cs[i] = Fresh(t)
		add(t, s, cs[i])
	}
	wins := make([]int, ids)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := range racers {
		for i, c := range cs {
			wg.Go(func() {
				to := ledger.Redeemed
				if r%4 == 3 {
					to = ledger.Cancelled
				}
				_, err := stores[r%len(stores)].Spend(context.Background(), c.ID, to)
				switch {
				case err == nil:
					mu.Lock()
					wins[i]++
					mu.Unlock()
				case errors.Is(err, ledger.ErrSpent), errors.Is(err, ledger.ErrCancelled):
				default:
					t.Errorf("Spend(%s): unexpected error %v", c.ID, err)
				}
			})
		}
	}
	wg.Wait()
	for i, w := range wins {
		if w != 1 {
			t.Errorf("confirmation %d was spent %d times, want exactly 1", i, w)
		}
	}
}

// Replicas checks that a confirmation added through one handle is spent,
// once, through another.
func Replicas(t *testing.T, f Factory) {
	ctx := context.Background()
	a := f.New(t)
	b := f.Replica(t, a)
	c := Fresh(t)
	add(t, a, c)
	got, err := b.Spend(ctx, c.ID, ledger.Redeemed)
	if err != nil || !equal(got, c) {
		t.Fatalf("replica B Spend = %+v, %v; want the confirmation A added", got, err)
	}
	if _, err := a.Spend(ctx, c.ID, ledger.Redeemed); !errors.Is(err, ledger.ErrSpent) {
		t.Fatalf("replica A Spend after B = %v, want ErrSpent", err)
	}
}
