package linearizability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// Shared stores decide expiry on their server's clock (the workload's
// WallClock), by their own rounding: PostgreSQL to the microsecond; Redis
// to the millisecond, up to 2 ms early (redisledger's tokenDeadline).
// sharedSkew covers that rounding and the offset of a server on the same
// host (a container counts), with a millisecond to spare. A server on
// another machine needs its real clock offset added.
const sharedSkew = 3 * time.Millisecond

// opTimeout bounds each operation on a shared store; one that times out
// is recorded with its outcome unknown.
const opTimeout = 10 * time.Second

// randomName returns a name no other test run uses.
func randomName(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestRedis checks the Redis store through two handles (two replicas) on
// one namespace. It needs MCP_CONFIRM_REDIS_URL, e.g.
// redis://127.0.0.1:6379/0; without it the test is skipped, which is not
// a pass.
func TestRedis(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to check the Redis store")
	}
	ns := "mcp-confirm-linearizability:{" + randomName(t) + "}:"
	open := func() ledger.Store {
		s, err := redisledger.Open(t.Context(), url, redisledger.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Cleanup(func() { deleteRedisNamespace(t, url, ns) })
	checkShared(t, open(), open())
}

func deleteRedisNamespace(t *testing.T, url, ns string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Error(err)
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, ns+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("cleanup of %s: %v", ns, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("cleanup of %s: %v", ns, err)
			return
		}
		keys = keys[n:]
	}
}

// TestPostgres checks the PostgreSQL store through two handles (two
// replicas) on one namespace of a table of its own. It needs
// MCP_CONFIRM_POSTGRES_URL, e.g. postgres://user:pw@127.0.0.1:5432/db;
// without it the test is skipped, which is not a pass.
func TestPostgres(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_POSTGRES_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_POSTGRES_URL (e.g. postgres://user:pw@127.0.0.1:5432/db) to check the PostgreSQL store")
	}
	const table = "mcp_confirm_linearizability"
	ns := randomName(t)
	open := func() ledger.Store {
		s, err := pgledger.Open(t.Context(), url, pgledger.Options{Table: table, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	t.Cleanup(func() { deletePostgresNamespace(t, url, table, ns) })
	checkShared(t, open(), open())
}

func deletePostgresNamespace(t *testing.T, url, table, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Error(err)
		return
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DELETE FROM "+table+" WHERE namespace = $1", ns); err != nil {
		t.Errorf("cleanup of namespace %s: %v", ns, err)
	}
}

// checkShared runs the CI-size workload through two handles on one shared
// store and checks the history.
func checkShared(t *testing.T, a, b ledger.Store) {
	w := workload()
	w.Skew, w.OpTimeout, w.Replicas, w.WallClock = sharedSkew, opTimeout, []ledger.Store{b}, true
	begin := time.Now()
	h := record(t, a, w)
	t.Logf("recorded in %v", time.Since(begin).Round(time.Millisecond))
	covered(t, h)
	Check(t, h, checkTimeout)
}
