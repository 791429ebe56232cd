package ledgertest

import (
	"context"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// Pending checks a store's [ledger.PendingCounter]: it counts the
// confirmations pending and unexpired, and neither an expired one, nor a
// redeemed, cancelled or completed one; and counting changes nothing (the
// pending one is still redeemable, the expired one still refused as
// expired). A store that is no PendingCounter fails.
func Pending(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f.New(t)
	pc, ok := s.(ledger.PendingCounter)
	if !ok {
		t.Fatalf("%T is not a ledger.PendingCounter", s)
	}
	count := func(want int) {
		t.Helper()
		n, err := pc.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("Pending = %d, want %d", n, want)
		}
	}
	count(0)
	var cs []ledger.Confirmation
	for range 4 {
		c := Fresh(t)
		if err := s.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	expired := Expired(t)
	if err := s.Add(ctx, expired); err != nil {
		t.Fatal(err)
	}
	count(4)
	if _, err := s.Spend(ctx, cs[0].ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Spend(ctx, cs[1].ID, ledger.Cancelled, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Spend(ctx, cs[2].ID, ledger.Acting, Long); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, cs[2].ID, outcome(ledger.OutcomeDone)); err != nil {
		t.Fatal(err)
	}
	count(1)
	count(1) // counting changed nothing
	if _, err := s.Spend(ctx, expired.ID, ledger.Acting, Long); ledger.ResultOf(err) != ledger.ResultExpired {
		t.Fatalf("Spend of the expired one after counting = %v, want ErrExpired", err)
	}
	if _, err := s.Spend(ctx, cs[3].ID, ledger.Acting, Long); err != nil {
		t.Fatalf("Spend of the pending one after counting: %v", err)
	}
	count(0)
}
