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
	_, err := c.Do(linearizability.Call{Op: linearizability.OpIssue, ID: conf.ID, Expires: conf.Expires}, func() (ledger.Record, error) {
		return ledger.Record{}, store.Add(ctx, conf)
	})
	fmt.Println("issue:", ledger.ResultOf(err))
	redeem := linearizability.Call{Op: linearizability.OpRedeem, ID: conf.ID, Lease: l.Lease()}
	_, err = c.Do(redeem, func() (ledger.Record, error) { return l.Redeem(ctx, conf.ID) })
	fmt.Println("redeem:", ledger.ResultOf(err))
	// The action ran; what it returned is recorded, and a retry gets it.
	_, err = c.Do(linearizability.Call{Op: linearizability.OpComplete, ID: conf.ID, Kind: ledger.OutcomeDone, Tag: 7}, func() (ledger.Record, error) {
		return ledger.Record{}, l.Complete(ctx, conf.ID, ledger.OutcomeDone, linearizability.TagResult(7))
	})
	fmt.Println("complete:", ledger.ResultOf(err))
	r, err := c.Do(redeem, func() (ledger.Record, error) { return l.Redeem(ctx, conf.ID) })
	fmt.Println("redeem again:", ledger.ResultOf(err), linearizability.ResultTag(r.Outcome.Result))
	fmt.Println(linearizability.Verify(rec.History(), 0).Result)
	// Output:
	// issue: ok
	// redeem: ok
	// complete: ok
	// redeem again: done 7
	// Ok
}
