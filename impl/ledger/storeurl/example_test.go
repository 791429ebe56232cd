package storeurl_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
)

// A server opens the store its operator named, under its service name, at
// start-up; replicas would give a redis:// or postgres:// URL instead.
func ExampleOpen() {
	ctx := context.Background()
	store, release, err := storeurl.Open(ctx, "memory:", "files.example.com", storeurl.Options{})
	if err != nil {
		panic(err)
	}
	defer release()
	l, err := ledger.New(store, ledger.Options{})
	if err != nil {
		panic(err)
	}
	c, err := l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", ArgsDigest: "d", Subject: "s"})
	if err != nil {
		panic(err)
	}
	_, err = l.Redeem(ctx, c.ID)
	fmt.Println("redeemed:", err == nil)

	// A URL of another kind is refused before anything is opened, and a
	// password in it is never echoed.
	_, _, err = storeurl.Open(ctx, "mysql://app:s3cret@db/ledger", "files.example.com", storeurl.Options{})
	fmt.Println(errors.Is(err, storeurl.ErrUnsupported), err)
	// Output:
	// redeemed: true
	// true unsupported ledger URL: scheme "mysql" (want memory:, redis://, rediss://, unix://, redis-sentinel:// or postgres://)
}
