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
