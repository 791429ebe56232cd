package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
)

// A server replica opens the shared store for its audience (creating the
// table on first use); a confirmation it issues can be redeemed, once, by
// any replica of the same audience. (Not run: it needs a database.)
func Example() {
	ctx := context.Background()
	store, err := pgledger.Open(ctx, "postgres://mcp@db.internal:5432/mcp?sslmode=verify-full", pgledger.Options{
		Namespace: "files.example.com",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	l, err := ledger.New(store, ledger.Options{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", Principal: "alice", Subject: "report.txt"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := l.Redeem(ctx, c.ID); err != nil {
		log.Fatal(err)
	}
	// … delete the file, then record what that did …
	if err := l.Complete(ctx, c.ID, ledger.OutcomeDone, []byte(`"deleted"`)); err != nil {
		log.Fatal(err)
	}
	r, err := l.Redeem(ctx, c.ID) // a replayed approval: answered, nothing runs
	fmt.Println(errors.Is(err, ledger.ErrDone), string(r.Outcome.Result))
}
