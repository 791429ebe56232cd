package linearizability_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/linearizability"
)

// Record races a store from many goroutines; Verify asks porcupine whether
// the history has a linearization. A test would call
// linearizability.Check(t, h, timeout) instead, which fails the test on
// Illegal or on a timeout and writes the visualization.
func Example() {
	store := ledger.NewMemory(ledger.MemoryOptions{})
	h, err := linearizability.Record(context.Background(), store, linearizability.Workload{
		Goroutines: 8,
		Operations: 1000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := linearizability.Verify(h, 0)
	fmt.Println(len(h.Operations), "operations:", r.Result)
	// Output: 1000 operations: Ok
}

// A Client records operations over any transport — here a store and a
// ledger, but equally calls through an MCP server — as long as the answer
// is reported with the ledger's sentinel errors.
func ExampleClient_Do() {
	rec, _ := linearizability.NewRecorder(linearizability.RecorderOptions{})
	store := ledger.NewMemory(ledger.MemoryOptions{})
	l, _ := ledger.New(store, ledger.Options{})
	ctx := context.Background()
	c := rec.Client()

	conf := ledger.Confirmation{ID: ledger.ID{1}, Tool: "delete_file", Expires: time.Now().Add(time.Minute)}
	_, err := c.Do(linearizability.OpIssue, conf.ID, conf.Expires, func() (ledger.Confirmation, error) {
		return ledger.Confirmation{}, store.Add(ctx, conf)
	})
	fmt.Println("issue:", ledger.ResultOf(err))
	for range 2 {
		_, err := c.Do(linearizability.OpRedeem, conf.ID, time.Time{}, func() (ledger.Confirmation, error) {
			return l.Redeem(ctx, conf.ID)
		})
		fmt.Println("redeem:", ledger.ResultOf(err))
	}
	fmt.Println(linearizability.Verify(rec.History(), 0).Result)
	// Output:
	// issue: ok
	// redeem: ok
	// redeem: spent
	// Ok
}
