package redisledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// getdelScript is the cheapest a script can be: one call, the floor's own.
var getdelScript = redis.NewScript(`return redis.call('GETDEL', KEYS[1])`)

// oldSpendScript is the store's Spend before 3 December (layout "c2:"): a
// compare-and-set in Lua over an entry whose first 52 bytes are its state,
// the nonces of its Spend and Add, and its expiry in unix microseconds.
var oldSpendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local state, exp = string.sub(v, 1, 1), tonumber(string.sub(v, 34, 52))
if #v < 52 or not exp then return redis.error_reply('corrupt entry') end
if string.sub(v, 1, 17) == ARGV[1] then return v end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= exp then return 1 end
if state == 'r' then return 2 end
if state == 'c' then return 3 end
if state ~= 'p' then return redis.error_reply('corrupt entry state') end
redis.call('SETRANGE', KEYS[1], 0, ARGV[1])
redis.call('ZREM', KEYS[2], string.sub(KEYS[1], -32))
return v
`)

// oldValue is a pending entry of c in oldSpendScript's layout, the fields
// stood in for by filler of their length.
func oldValue(c ledger.Confirmation) string {
	return fmt.Sprintf("p%s%019d%s", strings.Repeat("\x00", 32), c.Expires.UnixMicro(),
		strings.Repeat("v", 4+len(c.Tool+c.ArgsDigest+c.Principal+c.Subject)+15))
}

// BenchmarkSpendDesigns weighs the store's Spend against the floor and
// against the designs BENCHMARKS.md considered for it, each taking one
// entry that the same client put just before (each put timed apart):
//
//   - getdel: the floor, a bare GETDEL of a value the entry's size.
//   - script: EVALSHA of a script that makes that one GETDEL: what any
//     script costs before it does anything.
//   - store: Store.Spend into Acting: the spend script (GET of the entry
//     and of the record, TIME, SET of the record with the lease's end,
//     PEXPIREAT of the entry, ZREM from the pending set), which outcomes
//     and leases need (layout 4).
//   - pipeline: the store's Spend before outcomes were recorded (layout
//     3): LPUSHX of its marker onto a pending token, GET of the entry,
//     ZREM from the pending set, in one pipeline — no script, and no
//     clock reading, so no lease.
//   - storetx: pipeline's three commands in MULTI/EXEC, what making that
//     Spend one atomic step would cost.
//   - oldscript: the store's Spend before 3 December, a Lua script of four
//     calls (GET, TIME, SETRANGE, ZREM) over an entry holding its state.
//   - multi: a compare-and-set without a script, for Redis 7.0, in one
//     MULTI/EXEC: LPUSHX the spender's marker onto a pending token (a
//     list whose key expires at Expires, so that the server's clock
//     decides expiry), LMOVE it onto the entry, DEL the token, ZREM the
//     id from the pending set, LRANGE the entry and TIME (for the loser's
//     answer). Sound — only the first LPUSHX finds the token, an expired
//     token is gone, and a resent transaction finds its own marker — but
//     eight commands.
//
// serial: the designs take call by call in turn, the order rotating, so that
// all see the same machine. parallel: from GOMAXPROCS goroutines, in 20 ms
// phases of one design each, so that a design's takes run beside its own.
// Each take is checked: a design that did not take its entry fails the
// benchmark. Each reports every design's mean time per take (ns/take) and
// its ratio to getdel, and its mean time per put (ns/put).
func BenchmarkSpendDesigns(b *testing.B) {
	ctx := context.Background()
	c := newClient(b)
	ns := namespace(b, c)
	store := newStore(b, c, redisledger.Options{Namespace: ns})
	proto := ledgertest.Fresh(b)
	// The entry's size: header, four length-prefixed fields, the expiry.
	value := strings.Repeat("v", 35+4+len(proto.Tool+proto.ArgsDigest+proto.Principal+proto.Subject)+15)
	marker := "r" + strings.Repeat("n", 16)
	oldLen := len(oldValue(proto)) // every entry's: Fresh's fields never change
	pendingSet := ns + "design:pending"

	type design struct {
		name string
		put  func(key string, c ledger.Confirmation) error
		take func(key string, c ledger.Confirmation) error
	}
	setValue := func(key string, _ ledger.Confirmation) error { return c.Set(ctx, key, value, time.Hour).Err() }
	// putWithToken puts a pending token for key, expiring at Expires, the
	// entry that putEntry writes, and the key in the pending set.
	putWithToken := func(key string, conf ledger.Confirmation, putEntry func(redis.Pipeliner)) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, key+":token", "p")
			p.PExpireAt(ctx, key+":token", conf.Expires)
			putEntry(p)
			p.ZAdd(ctx, pendingSet, redis.Z{Score: float64(conf.Expires.UnixMicro()), Member: key})
			return nil
		})
		return err
	}
	putTokenEntry := func(key string, conf ledger.Confirmation) error {
		return putWithToken(key, conf, func(p redis.Pipeliner) { p.Set(ctx, key, value, time.Hour) })
	}
	// tokenTake is layout 3's Spend of an entry putTokenEntry put: LPUSHX
	// onto its token, GET of the entry, ZREM from the pending set, sent by
	// send (a pipeline, or MULTI/EXEC).
	tokenTake := func(name string, send func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)) func(string, ledger.Confirmation) error {
		return func(key string, _ ledger.Confirmation) error {
			var pushed *redis.IntCmd
			var entry *redis.StringCmd
			_, err := send(ctx, func(p redis.Pipeliner) error {
				pushed = p.LPushX(ctx, key+":token", marker)
				entry = p.Get(ctx, key)
				p.ZRem(ctx, pendingSet, key)
				return nil
			})
			if err == nil && (pushed.Val() != 2 || entry.Val() != value) {
				err = fmt.Errorf("%s did not take its entry: LPUSHX %d, entry %d bytes", name, pushed.Val(), len(entry.Val()))
			}
			return err
		}
	}
	storeSpend := func(_ string, conf ledger.Confirmation) error {
		_, err := store.Spend(ctx, conf.ID, ledger.Acting, ledger.DefaultLease)
		return err
	}
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
			put:  func(_ string, conf ledger.Confirmation) error { return store.Add(ctx, conf) },
			take: storeSpend},
		{name: "pipeline", put: putTokenEntry, take: tokenTake("pipeline", c.Pipelined)},
		{name: "storetx", put: putTokenEntry, take: tokenTake("storetx", c.TxPipelined)},
		{name: "oldscript",
			put: func(key string, conf ledger.Confirmation) error {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, key, oldValue(conf), time.Hour)
					p.ZAdd(ctx, pendingSet, redis.Z{Score: float64(conf.Expires.UnixMicro()), Member: key[len(key)-32:]})
					return nil
				})
				return err
			},
			take: func(key string, _ ledger.Confirmation) error {
				v, err := oldSpendScript.Run(ctx, c, []string{key, pendingSet}, marker).Text()
				if err == nil && len(v) != oldLen {
					err = fmt.Errorf("oldscript took %q, want the entry", v)
				}
				return err
			}},
		{name: "multi",
			put: func(key string, conf ledger.Confirmation) error {
				return putWithToken(key, conf, func(p redis.Pipeliner) {
					p.RPush(ctx, key, value)
					p.PExpireAt(ctx, key, conf.Expires.Add(time.Minute))
				})
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

	// take puts a fresh entry for design d and takes it, timing each.
	take := func(b *testing.B, d int) (put, took time.Duration, err error) {
		conf := ledgertest.Fresh(b)
		key := fmt.Sprintf("%sdesign:%s:%s", ns, designs[d].name, conf.ID)
		t0 := time.Now()
		if err := designs[d].put(key, conf); err != nil {
			return 0, 0, fmt.Errorf("%s: put: %w", designs[d].name, err)
		}
		t1 := time.Now()
		if err := designs[d].take(key, conf); err != nil {
			return 0, 0, fmt.Errorf("%s: take: %w", designs[d].name, err)
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
	report := func(b *testing.B, puts, took []time.Duration, takes []int64) {
		for d := range designs {
			if takes[d] == 0 {
				return // a run shorter than a round of phases: nothing to compare
			}
		}
		mean := func(d int) float64 { return float64(took[d].Nanoseconds()) / float64(takes[d]) }
		for d := range designs {
			b.ReportMetric(mean(d), designs[d].name+"-ns/take")
			b.ReportMetric(float64(puts[d].Nanoseconds())/float64(takes[d]), designs[d].name+"-ns/put")
		}
		for d := 1; d < len(designs); d++ {
			b.ReportMetric(mean(d)/mean(0), designs[d].name+"/getdel")
		}
	}

	// serial: the designs take in turn, call by call, the order rotating.
	b.Run("serial", func(b *testing.B) {
		puts := make([]time.Duration, len(designs))
		took := make([]time.Duration, len(designs))
		takes := make([]int64, len(designs))
		i := 0
		for b.Loop() {
			for j := range designs {
				d := (i + j) % len(designs)
				p, t, err := take(b, d)
				if err != nil {
					b.Fatal(err)
				}
				puts[d] += p
				took[d] += t
				takes[d]++
			}
			i++
		}
		report(b, puts, took, takes)
	})

	// parallel: GOMAXPROCS goroutines; time is cut into 20 ms phases, one
	// design per phase in turn, and every goroutine takes with the design
	// of the phase it is in, so that a design's takes run beside takes of
	// the same design (as BenchmarkVersusFloor's parallel phases do), and
	// with a fixed number of goroutines the ratio of two designs' mean
	// times per take is the inverse ratio of their throughputs.
	b.Run("parallel", func(b *testing.B) {
		const phase = 20 * time.Millisecond
		var (
			puts  = make([]atomic.Int64, len(designs))
			took  = make([]atomic.Int64, len(designs))
			takes = make([]atomic.Int64, len(designs))
		)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				d := int(time.Now().UnixNano() / int64(phase) % int64(len(designs)))
				p, t, err := take(b, d)
				if err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
				puts[d].Add(int64(p))
				took[d].Add(int64(t))
				takes[d].Add(1)
			}
		})
		putSums := make([]time.Duration, len(designs))
		sums := make([]time.Duration, len(designs))
		counts := make([]int64, len(designs))
		for d := range designs {
			putSums[d], sums[d], counts[d] = time.Duration(puts[d].Load()), time.Duration(took[d].Load()), takes[d].Load()
		}
		report(b, putSums, sums, counts)
	})
}
