package fuzz

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/internal/luasha256"
)

// FuzzLuaSHA256 asserts that the Lua SHA-256 the Redis store's scripts
// hash with, run inside Redis, agrees with crypto/sha256 on every message:
// whole (sha256hex), and resumed from Go's midstate at any split
// (sha256resume), as the store's scripts finish a record Go began.
func FuzzLuaSHA256(f *testing.F) {
	u := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if u == "" {
		f.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run the Lua SHA-256 in Redis")
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		f.Fatal(err)
	}
	c := redis.NewClient(opts)
	f.Cleanup(func() { c.Close() })
	script := redis.NewScript(luasha256.Source() + `
return {sha256hex(ARGV[1]), sha256resume(ARGV[2], ARGV[3], ARGV[4])}`)
	for _, seed := range []struct {
		msg   []byte
		split uint
	}{
		{nil, 0}, {[]byte("abc"), 1}, {bytes.Repeat([]byte{0x80}, 55), 0}, {bytes.Repeat([]byte{0}, 56), 56},
		{bytes.Repeat([]byte{0xff}, 64), 64}, {bytes.Repeat([]byte("a"), 129), 65},
	} {
		f.Add(seed.msg, seed.split)
	}
	f.Fuzz(func(t *testing.T, msg []byte, split uint) {
		split %= uint(len(msg)) + 1
		state, n, rest, err := luasha256.Midstate(msg[:split])
		if err != nil {
			t.Fatal(err)
		}
		got, err := script.Run(context.Background(), c, nil, msg, state, n, append(rest[:len(rest):len(rest)], msg[split:]...)).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(msg)
		if want := hex.EncodeToString(sum[:]); got[0] != want || got[1] != want {
			t.Errorf("SHA-256 of %d bytes (split at %d): sha256hex %s, sha256resume %s; crypto/sha256 %s", len(msg), split, got[0], got[1], want)
		}
	})
}
