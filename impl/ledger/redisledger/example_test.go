package redisledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// A server replica opens the shared store for its audience; a confirmation
// it issues can be redeemed, once, by any replica of the same audience.
// (Not run: it needs a Redis server.)
func Example() {
	ctx := context.Background()
	store, err := redisledger.Open(ctx, "redis://127.0.0.1:6379/0", redisledger.Options{
		Namespace: "mcp-confirm:{files.example.com}:",
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
