package storeurl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/internal/redistest"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"memory:", true},
		{"redis://127.0.0.1:6379/0", true},
		{"REDIS://127.0.0.1:6379/0", true},
		{"rediss://u:pw@redis.example.com:6380/1", true},
		{"unix:///run/redis.sock", true},
		{"redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster?replicas=1&wait=500ms", true},
		{"redis://127.0.0.1:6379/0?replicas=1", true},
		{"postgres://u@10.0.0.1:5432,10.0.0.2:5432/db?target_session_attrs=read-write", true},
		{"postgres://u@127.0.0.1:5432/db", true},
		{"postgresql://u@127.0.0.1:5432/db", true},
		{"memory", false}, // no colon: a relative path, not the memory store
		{"memory://", false},
		{"ftp://x", false},
		{"mysql://u:s3cret@h/db", false},
		{"::::", false},
		{"host=127.0.0.1 dbname=test", false}, // pgx reads it; an operator's URL is a URL
	} {
		err := storeurl.Check(tt.url)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, storeurl.ErrUnsupported)) {
			t.Errorf("Check(%q) = %v, want ok: %v", tt.url, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%q): the error echoes the password: %v", tt.url, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"mcp-confirm": true, "files.example.com": true, "a": true, "A_1-b.c": true, strings.Repeat("a", 64): true,
		"": false, "-x": false, ".x": false, "{x}": false, "a}:b": false, "a b": false, "a:b": false,
		strings.Repeat("a", 65): false, "é": false, "a\x00": false,
	} {
		err := storeurl.CheckName(name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, storeurl.ErrName)) {
			t.Errorf("CheckName(%q) = %v, want ok: %v", name, err, ok)
		}
		// Open refuses what CheckName refuses, before connecting.
		if _, _, err := storeurl.Open(t.Context(), "memory:", name, storeurl.Options{}); (err == nil) != ok {
			t.Errorf("Open(memory:, %q) = %v, want ok: %v", name, err, ok)
		}
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"ftp://x", "mysql://u:s3cret@h/db", "::::", "memory"} {
		_, _, err := storeurl.Open(context.Background(), u, "x", storeurl.Options{})
		if !errors.Is(err, storeurl.ErrUnsupported) {
			t.Errorf("Open(%q) = %v, want ErrUnsupported", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, u := range []string{"redis://:s3cret@127.0.0.1:1/0", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2"} {
		_, _, err := storeurl.Open(ctx, u, "x", storeurl.Options{})
		if err == nil {
			t.Errorf("Open(%q) connected to a closed port", u)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
}

// uniqueName is a fresh service name, so concurrent tests never share a
// namespace in the shared stores.
func uniqueName(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	return "storeurl-test-" + hex.EncodeToString(b)
}

// Two services of different names on one shared store: a confirmation one
// issued is unknown to the other, and spent by a second handle of the same
// name (a replica); in Redis, its keys sit under the name's hash tag.
func TestOpenNamespaces(t *testing.T) {
	stores := []struct{ kind, url string }{
		{"memory", "memory:"},
		{"redis", os.Getenv("MCP_CONFIRM_REDIS_URL")},
		{"postgres", os.Getenv("MCP_CONFIRM_POSTGRES_URL")},
	}
	for _, s := range stores {
		t.Run(s.kind, func(t *testing.T) {
			if s.url == "" {
				t.Skipf("set MCP_CONFIRM_%s_URL to run against a real %s", strings.ToUpper(s.kind), s.kind)
			}
			a, b := uniqueName(t), uniqueName(t)
			switch s.kind {
			case "redis":
				t.Cleanup(func() { deleteRedisKeys(t, s.url, "mcp-confirm:{"+a+"}:*") })
			case "postgres":
				t.Cleanup(func() { deletePostgresNamespace(t, s.url, a) })
			}
			open := func(name string) *ledger.Ledger {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				store, release, err := storeurl.Open(ctx, s.url, name, storeurl.Options{})
				if err != nil {
					t.Fatalf("Open(%s, %s): %v", s.kind, name, err)
				}
				t.Cleanup(release)
				l, err := ledger.New(store, ledger.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			issuer, other := open(a), open(b)
			c, err := issuer.Issue(t.Context(), ledger.Confirmation{Tool: "delete_file", ArgsDigest: "d", Subject: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if s.kind == "memory" {
				// memory: is this handle's own: another handle, even of the
				// same name, never sees it (replicas need a shared store).
				if _, err := open(a).Redeem(t.Context(), c.ID); !errors.Is(err, ledger.ErrUnknown) {
					t.Fatalf("memory: another handle redeemed: %v", err)
				}
				return
			}
			if _, err := other.Redeem(t.Context(), c.ID); !errors.Is(err, ledger.ErrUnknown) {
				t.Fatalf("a service of another name redeemed: %v, want ErrUnknown", err)
			}
			if s.kind == "redis" && (countRedisKeys(t, s.url, "mcp-confirm:{"+a+"}:*") == 0 || countRedisKeys(t, s.url, "mcp-confirm:{"+b+"}:*") != 0) {
				t.Fatal("the confirmation is not kept under its name's namespace alone")
			}
			if _, err := open(a).Redeem(t.Context(), c.ID); err != nil {
				t.Fatalf("a replica of the same name: %v", err)
			}
		})
	}
}

// A Redis that takes RDB snapshots is refused, naming the setting; with
// AllowRollback it opens and the risk is logged; a Redis without
// persistence opens without a warning.
func TestOpenRefusesRollback(t *testing.T) {
	risky := redistest.Start(t, "--save", "3600 1", "--appendonly", "no")
	safe := redistest.Start(t, "--save", "", "--appendonly", "no")
	for _, tt := range []struct {
		name          string
		url           string
		allow         bool
		refused, warn bool
	}{
		{"snapshots", risky.URL(), false, true, false},
		{"snapshots, allowed", risky.URL(), true, false, true},
		{"no persistence", safe.URL(), false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			store, release, err := storeurl.Open(ctx, tt.url, "x", storeurl.Options{AllowRollback: tt.allow, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if tt.refused {
				if !errors.Is(err, storeurl.ErrNotDurable) || !strings.Contains(err.Error(), `save "3600 1"`) || store != nil {
					t.Fatalf("Open = %v, %v; want ErrNotDurable naming the setting, and no store", store, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer release()
			if got := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "RDB snapshots"); got != tt.warn {
				t.Fatalf("warned: %v, want %v; log:\n%s", got, tt.warn, log.String())
			}
		})
	}
}

func redisClient(t *testing.T, url string) *redis.Client {
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func countRedisKeys(t *testing.T, url, pattern string) int {
	keys, err := redisClient(t, url).Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

func deleteRedisKeys(t *testing.T, url, pattern string) {
	ctx := context.Background()
	c := redisClient(t, url)
	keys, err := c.Keys(ctx, pattern).Result()
	if err == nil && len(keys) > 0 {
		err = c.Del(ctx, keys...).Err()
	}
	if err != nil {
		t.Errorf("cleanup of %s: %v", pattern, err)
	}
}

func deletePostgresNamespace(t *testing.T, url, ns string) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Error(err)
		return
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DELETE FROM "+pgledger.DefaultTable+" WHERE namespace = $1", ns); err != nil {
		t.Errorf("cleanup of namespace %s: %v", ns, err)
	}
}

// With Audit, a Redis store keeps its trail under the name's namespace and
// Trail returns it; without, Trail returns nil and nothing is recorded.
func TestOpenRedisAudit(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL to run against a real Redis")
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			name := uniqueName(t)
			t.Cleanup(func() { deleteRedisKeys(t, url, "mcp-confirm:{"+name+"}:*") })
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			store, release, err := storeurl.Open(ctx, url, name, storeurl.Options{Audit: on})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(release)
			l, err := ledger.New(store, ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", ArgsDigest: "d", Subject: "s"}); err != nil {
				t.Fatal(err)
			}
			tr := storeurl.Trail(store)
			logged := countRedisKeys(t, url, "mcp-confirm:{"+name+"}:a1:log")
			if !on {
				if tr != nil || logged != 0 {
					t.Fatalf("without Audit: Trail %v, %d trail keys", tr, logged)
				}
				return
			}
			if tr == nil || logged != 1 {
				t.Fatalf("with Audit: Trail %v, %d trail keys under the name's namespace", tr, logged)
			}
			if seq, _, err := tr.Head(ctx); err != nil || seq != 1 {
				t.Fatalf("Head after one Issue: %d, %v", seq, err)
			}
		})
	}
}
