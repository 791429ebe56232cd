package redisledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

// TestRetryOfSameCall checks the script's nonce: a second run of the very
// same Spend (what go-redis does after a reply lost to a dropped
// connection) gets the success back, while any other call is refused.
func TestRetryOfSameCall(t *testing.T) {
	u := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if u == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run the Redis store tests")
	}
	ctx := context.Background()
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	var b [8]byte
	rand.Read(b[:])
	ns := "mcp-confirm-test:{" + hex.EncodeToString(b[:]) + "}:"
	s, err := New(c, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	conf := ledgertest.Fresh(t)
	t.Cleanup(func() {
		if err := c.Del(context.Background(), s.key(conf.ID), s.pendingKey).Err(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := s.Add(ctx, conf); err != nil {
		t.Fatal(err)
	}

	const first, other = "nonce-of-the-first-call", "nonce-of-another-call"
	tests := []struct {
		name  string
		nonce string
		to    ledger.State
		want  error
	}{
		{"the call", first, ledger.Redeemed, nil},
		{"its retry", first, ledger.Redeemed, nil},
		{"its retry again", first, ledger.Redeemed, nil},
		{"another call", other, ledger.Redeemed, ledger.ErrSpent},
		{"same nonce, other target", first, ledger.Cancelled, ledger.ErrSpent},
	}
	for _, tt := range tests {
		got, err := s.spend(ctx, conf.ID, tt.to, tt.nonce)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s: spend = %v, want %v", tt.name, err, tt.want)
		}
		if err == nil && (got.Principal != conf.Principal || !got.Expires.Equal(conf.Expires)) {
			t.Fatalf("%s: spend returned %+v, want %+v", tt.name, got, conf)
		}
	}
}
