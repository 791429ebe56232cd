package redisledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// getdelScript is the cheapest a script can be: one call, the floor's own.
var getdelScript = redis.NewScript(`return redis.call('GETDEL', KEYS[1])`)

// BenchmarkSpendDesigns weighs the store's Spend against the floor and
// against the designs BENCHMARKS.md considered for it, each taking one
// entry that the same client put just before (the puts are not timed):
//
//   - getdel: the floor, a bare GETDEL of a value the entry's size.
//   - script: EVALSHA of a script that makes that one GETDEL: what any
//     script costs before it does anything.
//   - store: Store.Spend, the kept script (GET, TIME, SETRANGE, ZREM).
//   - multi: a compare-and-set without a script, for Redis 7.0, in one
//     MULTI/EXEC: LPUSHX the spender's marker onto a pending token (a
//     list whose key expires at Expires, so that the server's clock
//     decides expiry), LMOVE it onto the entry, DEL the token, ZREM the
//     id from the pending set, LRANGE the entry and TIME (for the loser's
//     answer). Sound — only the first LPUSHX finds the token, an expired
//     token is gone, and a resent transaction finds its own marker — but
//     eight commands.
//
// The four run call by call in turn, the order rotating, so that all see
// the same machine; serial only. Each take is checked: a design that did
// not take its entry fails the benchmark. It reports each design's mean
// time per take (ns/take) and its ratio to getdel.
func BenchmarkSpendDesigns(b *testing.B) {
	ctx := context.Background()
	c := newClient(b)
	ns := namespace(b, c)
	store := newStore(b, c, redisledger.Options{Namespace: ns})
	proto := ledgertest.Fresh(b)
	// The entry's size: header, four length-prefixed fields, the expiry.
	value := strings.Repeat("v", 52+4+len(proto.Tool+proto.ArgsDigest+proto.Principal+proto.Subject)+15)
	marker := "r" + strings.Repeat("n", 16)
	pendingSet := ns + "design:pending"

	type design struct {
		name string
		put  func(key string, c ledger.Confirmation) error
		take func(key string, c ledger.Confirmation) error
	}
	setValue := func(key string, _ ledger.Confirmation) error { return c.Set(ctx, key, value, time.Hour).Err() }
	designs := []design{
		{name: "getdel", put: setValue, take: func(key string, _ ledger.Confirmation) error {
			return c.GetDel(ctx, key).Err()
		}},
		{name: "script", put: setValue, take: func(key string, _ ledger.Confirmation) error {
			v, err := getdelScript.Run(ctx, c, []string{key}).Text()
			if err == nil && v != value {
				err = fmt.Errorf("script took %d bytes, want %d", len(v), len(value))
			}
			return err
		}},
		{name: "store",
			put: func(_ string, conf ledger.Confirmation) error { return store.Add(ctx, conf) },
			take: func(_ string, conf ledger.Confirmation) error {
				_, err := store.Spend(ctx, conf.ID, ledger.Redeemed)
				return err
			}},
		{name: "multi",
			put: func(key string, conf ledger.Confirmation) error {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.RPush(ctx, key+":token", "p")
					p.PExpireAt(ctx, key+":token", conf.Expires)
					p.RPush(ctx, key, value)
					p.PExpireAt(ctx, key, conf.Expires.Add(time.Minute))
					p.ZAdd(ctx, pendingSet, redis.Z{Score: float64(conf.Expires.UnixMicro()), Member: key})
					return nil
				})
				return err
			},
			take: func(key string, _ ledger.Confirmation) error {
				var pushed *redis.IntCmd
				var entry *redis.StringSliceCmd
				_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					pushed = p.LPushX(ctx, key+":token", marker)
					p.LMove(ctx, key+":token", key, "LEFT", "LEFT")
					p.Del(ctx, key+":token")
					p.ZRem(ctx, pendingSet, key)
					entry = p.LRange(ctx, key, 0, 1)
					p.Time(ctx)
					return nil
				})
				if err == nil && (pushed.Val() != 2 || len(entry.Val()) != 2 || entry.Val()[0] != marker) {
					err = fmt.Errorf("multi did not take its entry: LPUSHX %d, entry %q", pushed.Val(), entry.Val())
				}
				return err
			}},
	}

	took := make([]time.Duration, len(designs))
	keys := make([]string, len(designs))
	confs := make([]ledger.Confirmation, len(designs))
	i := 0
	for b.Loop() {
		for d := range designs {
			confs[d] = ledgertest.Fresh(b)
			keys[d] = fmt.Sprintf("%sdesign:%s:%s", ns, designs[d].name, confs[d].ID)
			if err := designs[d].put(keys[d], confs[d]); err != nil {
				b.Fatalf("%s: put: %v", designs[d].name, err)
			}
		}
		for j := range designs {
			d := (i + j) % len(designs)
			t0 := time.Now()
			err := designs[d].take(keys[d], confs[d])
			took[d] += time.Since(t0)
			if err != nil {
				b.Fatalf("%s: take: %v", designs[d].name, err)
			}
		}
		i++
	}
	for d := range designs {
		b.ReportMetric(float64(took[d].Nanoseconds())/float64(b.N), designs[d].name+"-ns/take")
	}
	for d := range designs[1:] {
		b.ReportMetric(float64(took[d+1])/float64(took[0]), designs[d+1].name+"/getdel")
	}
}
