package ledger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

func Example() {
	ctx := context.Background()
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		panic(err)
	}
	// Ask: record what the person is being asked to approve.
	c, err := l.Issue(ctx, ledger.Confirmation{
		Tool:       "transfer",
		ArgsDigest: "to=Bob amount=500GBP",
		Principal:  "alice",
		Subject:    "account:42",
	})
	if err != nil {
		panic(err)
	}
	// The person approved: spend the confirmation, then act.
	if _, err := l.Redeem(ctx, c.ID); err == nil {
		fmt.Println("transfer once")
	}
	// The same approval, replayed: refused.
	_, err = l.Redeem(ctx, c.ID)
	fmt.Println(errors.Is(err, ledger.ErrSpent))
	// Output:
	// transfer once
	// true
}

// An approval needed from two people other than the requester, reached
// outside the chat: the client's retry waits until both have approved.
func ExampleLedger_Decide() {
	ctx := context.Background()
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		panic(err)
	}
	c, err := l.Issue(ctx, ledger.Confirmation{
		Tool:       "transfer",
		ArgsDigest: "to=Bob amount=500GBP",
		Principal:  "agent-7",
		Approval: &ledger.Approval{
			Required:  2,
			Approvers: []string{"group:finance"},
			Requester: "sub:alice", // Alice asked; she may not approve
			Question:  "Transfer 500 GBP to Bob?",
		},
	})
	if err != nil {
		panic(err)
	}
	finance := []string{"group:finance"}
	_, err = l.Redeem(ctx, c.ID) // the client retries at once
	fmt.Println(errors.Is(err, ledger.ErrAwaitingApproval))
	_, err = l.Decide(ctx, c.ID, ledger.Approver{ID: "sub:alice", Groups: finance}, true)
	fmt.Println(errors.Is(err, ledger.ErrSelfApproval))
	_, _ = l.Decide(ctx, c.ID, ledger.Approver{ID: "sub:bob", Groups: finance}, true)
	_, err = l.Decide(ctx, c.ID, ledger.Approver{ID: "sub:bob", Groups: finance}, false)
	fmt.Println(errors.Is(err, ledger.ErrDecided)) // Bob's approval stands
	_, _ = l.Decide(ctx, c.ID, ledger.Approver{ID: "sub:carol", Groups: finance}, true)
	rec, err := l.Redeem(ctx, c.ID)
	fmt.Println(err, rec.Decisions[0].Approver, rec.Decisions[1].Approver)
	// Output:
	// true
	// true
	// true
	// <nil> sub:bob sub:carol
}
