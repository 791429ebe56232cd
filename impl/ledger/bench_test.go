package ledger_test

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// representative returns the i-th confirmation as the delete_file flow
// records it, every string freshly allocated as a decoded request's would
// be: tool "delete_file" (11 bytes), a hex SHA-256 argument digest (64), a
// 23-byte principal shared by 100 confirmations each, and the file identity
// as internal/filetool encodes it (82): 180 bytes of payload.
func representative(i int) ledger.Confirmation {
	sum := sha256.Sum256([]byte(fmt.Sprint(i)))
	return ledger.Confirmation{
		Tool:       strings.Clone("delete_file"),
		ArgsDigest: hex.EncodeToString(sum[:]),
		Principal:  fmt.Sprintf("user-%06d@example.com", i/100),
		Subject:    fmt.Sprintf(`{"dev":2049,"ino":%08d,"mode":420,"mtime_ns":1780000000123456789,"size":48213}`, i),
	}
}

func TestRepresentativeSizes(t *testing.T) {
	c := representative(123456)
	got := [...]int{len(c.Tool), len(c.ArgsDigest), len(c.Principal), len(c.Subject)}
	if want := [...]int{11, 64, 23, 82}; got != want {
		t.Fatalf("field sizes %v, want %v (the documented sizes)", got, want)
	}
}

// cpuNanos returns the CPU time the process has used (user and system, all
// threads, the garbage collector's included). On a machine shared with
// other jobs, wall-clock ns/op grows with the load; CPU time per op does
// not, so the benchmarks report both.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start int64) {
	b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
}

// steadyClock is a clock the benchmark moves by hand, safe for concurrent use.
type steadyClock struct{ ns atomic.Int64 }

func (c *steadyClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *steadyClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// BenchmarkMemoryIssueRedeem measures one Issue plus one Redeem of a
// representative confirmation through a Ledger over the in-memory store
// (crypto/rand ids), serially and from GOMAXPROCS goroutines with one
// principal each.
//
// steady: the store holds about 101,000 confirmations, as a busy server
// does (100 confirmations a second over a 10-minute TTL and 1-minute
// grace remember 66,000): each goroutine moves the store's clock 10 µs
// every 10 pairs, with a 100 ms TTL, a 20 ms lease and 1 ms grace, so on
// average each pair also sweeps one expired confirmation.
//
// growing: default options on the real clock; nothing expires during the
// run, so the store remembers every redeemed confirmation (b.N of them, up
// to millions), as in a server's first eleven minutes at full speed.
func BenchmarkMemoryIssueRedeem(b *testing.B) {
	ctx := context.Background()
	proto := representative(1)
	pair := func(l *ledger.Ledger, c ledger.Confirmation) error {
		issued, err := l.Issue(ctx, c)
		if err != nil {
			return err
		}
		_, err = l.Redeem(ctx, issued.ID)
		return err
	}
	for _, mode := range []string{"steady", "growing"} {
		setup := func(b *testing.B) (*ledger.Ledger, func(n int)) {
			var (
				m    *ledger.Memory
				opts ledger.Options
				tick = func(int) {}
			)
			switch mode {
			case "steady":
				clock := &steadyClock{}
				clock.Advance(time.Since(time.Unix(0, 0)))
				m = ledger.NewMemory(ledger.MemoryOptions{Grace: time.Millisecond, Now: clock.Now})
				// The default TTL and lease, scaled alike (10 min : 2 min).
				opts = ledger.Options{TTL: 100 * time.Millisecond, Lease: 20 * time.Millisecond, Now: clock.Now}
				tick = func(n int) {
					if n%10 == 0 {
						clock.Advance(10 * time.Microsecond)
					}
				}
			case "growing":
				m = ledger.NewMemory(ledger.MemoryOptions{})
			}
			l, err := ledger.New(m, opts)
			if err != nil {
				b.Fatal(err)
			}
			return l, tick
		}
		b.Run("serial/"+mode, func(b *testing.B) {
			l, tick := setup(b)
			n := 0
			start := cpuNanos()
			for b.Loop() {
				if err := pair(l, proto); err != nil {
					b.Fatal(err)
				}
				n++
				tick(n)
			}
			reportCPU(b, start)
		})
		b.Run("parallel/"+mode, func(b *testing.B) {
			l, tick := setup(b)
			var goroutines atomic.Int64
			start := cpuNanos()
			b.RunParallel(func(pb *testing.PB) {
				// One principal per goroutine, as concurrent callers are.
				c := proto
				c.Principal = fmt.Sprintf("user-%06d@example.com", goroutines.Add(1))
				n := 0
				for pb.Next() {
					if err := pair(l, c); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
					n++
					tick(n)
				}
			})
			reportCPU(b, start)
		})
	}
}

// BenchmarkScalingControl is the yardstick for the parallel benchmarks:
// SHA-256 of 1 KiB, no shared state at all, serially and from GOMAXPROCS
// goroutines. On idle cores parallel ns/op is serial ns/op divided by the
// cores; on a machine busy with other jobs it shows how much parallelism
// was actually available during the run.
func BenchmarkScalingControl(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		buf := make([]byte, 1024)
		for b.Loop() {
			sha256.Sum256(buf)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 1024)
			for pb.Next() {
				sha256.Sum256(buf)
			}
		})
	})
}

// BenchmarkScalingMapControl is the yardstick for memory-bound work: what
// the in-memory store does per pair — a fresh 16-byte random id, an entry
// and its 157 bytes of fields allocated, one map insert and one lookup, the
// oldest entry deleted in FIFO order — on a map of 100,000 entries, but
// each goroutine with a map of its own, so that no cache line is shared.
// If parallel ns/op here is near serial ns/op divided by the cores while
// the store's is not, what stops the store from scaling is what its
// goroutines share, not the machine's memory.
func BenchmarkScalingMapControl(b *testing.B) {
	type entry struct {
		id     ledger.ID
		fields string
	}
	const size = 100_000
	churn := func(next func() bool) {
		m := make(map[ledger.ID]*entry, size)
		fifo := make([]ledger.ID, 0, 2*size)
		newID := func() ledger.ID {
			var id ledger.ID
			crand.Read(id[:])
			return id
		}
		for range size {
			id := newID()
			m[id] = &entry{id: id}
			fifo = append(fifo, id)
		}
		fields := make([]byte, 157)
		for next() {
			id := newID()
			m[id] = &entry{id: id, fields: string(fields)}
			fifo = append(fifo, id)
			if m[id] == nil {
				panic("lost an entry")
			}
			delete(m, fifo[0])
			if fifo = fifo[1:]; cap(fifo) == len(fifo) {
				fifo = append(make([]ledger.ID, 0, 2*size), fifo...)
			}
		}
		if len(m) != size {
			panic(fmt.Sprintf("map holds %d entries, want %d", len(m), size))
		}
	}
	b.Run("serial", func(b *testing.B) { churn(b.Loop) })
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) { churn(pb.Next) })
	})
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemoryPending reports the live heap one pending confirmation
// costs (B/pending), everything it keeps included: the store copies Tool,
// ArgsDigest and Subject into one allocation of its own and keeps one copy
// of each principal, so nothing the caller allocated stays reachable. It
// also reports the live heap of one redeemed confirmation still remembered
// for a retry (B/spent: it keeps its bindings, for the retry's check), and
// of one whose outcome is recorded, a representative tool result of 107
// bytes (B/done). All are measured over 1,000,000 representative
// confirmations (180 bytes of payload) from 10,000 principals. ns/op is
// the time to fill the store.
func BenchmarkMemoryPending(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	expires := time.Now().Add(time.Hour)
	var perPending, perSpent, perDone float64
	result := []byte(`{"content":[{"type":"text","text":"Deleted «` + "\u2068" + `/home/alice/projects/report-2026/drafts/final.pdf` + "\u2069" + `»."}]}`)
	for b.Loop() {
		b.StopTimer()
		ids := make([]ledger.ID, n)
		for i := range ids {
			ids[i][0], ids[i][1], ids[i][2], ids[i][15] = byte(i), byte(i>>8), byte(i>>16), 1
		}
		base := heapInUse()
		cs := make([]ledger.Confirmation, n)
		for i := range cs {
			cs[i] = representative(i)
			cs[i].ID, cs[i].Expires = ids[i], expires
		}
		b.StartTimer()
		m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: n})
		for _, c := range cs {
			if err := m.Add(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cs = nil // what the store kept of it stays live
		if _, pending := m.Len(); pending != n {
			b.Fatalf("pending %d, want %d", pending, n)
		}
		perPending = float64(int64(heapInUse())-int64(base)) / n
		for _, id := range ids {
			if _, err := m.Spend(ctx, id, ledger.Acting, ledger.DefaultLease); err != nil {
				b.Fatal(err)
			}
		}
		perSpent = float64(int64(heapInUse())-int64(base)) / n
		o := ledger.Outcome{Kind: ledger.OutcomeDone, Result: result, Size: int64(len(result))}
		for _, id := range ids {
			if err := m.Complete(ctx, id, o); err != nil {
				b.Fatal(err)
			}
		}
		perDone = float64(int64(heapInUse())-int64(base)) / n
		runtime.KeepAlive(m)
		b.StartTimer()
	}
	b.ReportMetric(perPending, "B/pending")
	b.ReportMetric(perSpent, "B/spent")
	b.ReportMetric(perDone, "B/done")
}

// floodGrowth issues fill never-answered confirmations to a store capped
// at maxPending, then flood more, and returns the heap growth across the
// flood and how many of the flood were refused. With expire set, the clock
// jumps past expiry plus grace after every maxPending questions, so the
// flood also sweeps and replaces the whole store again and again.
func floodGrowth(tb testing.TB, maxPending, fill, flood int, expire bool) (growth int64, refused int) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: maxPending, Now: clock.Now})
	l, err := ledger.New(m, ledger.Options{TTL: time.Minute, Now: clock.Now})
	if err != nil {
		tb.Fatal(err)
	}
	var start uint64
	for i := range fill + flood {
		if i == fill {
			start = heapInUse()
		}
		if expire && i > 0 && i%maxPending == 0 {
			clock.Advance(time.Minute + ledger.DefaultGrace)
		}
		_, err := l.Issue(ctx, representative(i))
		switch {
		case errors.Is(err, ledger.ErrFull) && i >= fill:
			refused++
		case err != nil:
			tb.Fatalf("question %d: %v", i, err)
		}
	}
	if remembered, _ := m.Len(); remembered > maxPending {
		tb.Fatalf("store remembers %d confirmations, cap %d", remembered, maxPending)
	}
	growth = int64(heapInUse()) - int64(start)
	runtime.KeepAlive(m)
	return growth, refused
}

// TestMemoryFloodHeapFlat floods a full store and checks that the heap
// stays flat: 100,000 more never-answered questions, all refused (or, with
// the clock moving, each replacing an expired one), leave less than 64 KiB
// behind — under one byte per question, where a stored one costs hundreds.
// The control floods a store whose cap is never reached: the same
// measurement must see the heap grow by more than the bound.
func TestMemoryFloodHeapFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("floods up to 1,100,000 questions")
	}
	const maxPending, flood, flat = 10_000, 100_000, 64 << 10
	tests := []struct {
		name        string
		maxPending  int
		fill        int
		expire      bool
		wantRefused int
		wantFlat    bool
	}{
		{"refused at the cap", maxPending, maxPending, false, flood, true},
		// Each shard's map grows its tables to the most entries the
		// shard held in any refill (its principals' share of the cap,
		// which varies from refill to refill), and a Go map also grows to
		// absorb the tombstones of deleted keys, once. Those sizes settle
		// after tens of refills: the flood grew the heap by 181–211 KB
		// when measured after 20 refills, by -96 B to 5 KB after 100. So
		// it is measured after 100.
		{"expiring and replaced at the cap", maxPending, 100 * maxPending, true, 0, true},
		{"control: cap never reached", maxPending + flood, maxPending, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			growth, refused := floodGrowth(t, tt.maxPending, tt.fill, flood, tt.expire)
			t.Logf("%d questions after the first %d: %d refused, heap grew %d bytes", flood, tt.fill, refused, growth)
			if refused != tt.wantRefused {
				t.Fatalf("%d refused, want %d", refused, tt.wantRefused)
			}
			if gotFlat := growth < flat; gotFlat != tt.wantFlat {
				t.Fatalf("heap grew %d bytes during the flood; want flat (< %d bytes): %v", growth, flat, tt.wantFlat)
			}
		})
	}
}

// BenchmarkMemoryFlood reports the heap growth per question while a full
// store refuses a flood (B/refused; 0 means flat) and the cost of refusing.
func BenchmarkMemoryFlood(b *testing.B) {
	const maxPending = 10_000
	ctx := context.Background()
	m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: maxPending})
	l, err := ledger.New(m, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range maxPending {
		if _, err := l.Issue(ctx, representative(i)); err != nil {
			b.Fatal(err)
		}
	}
	c := representative(maxPending)
	c.Principal = "flooder"
	start := heapInUse()
	for b.Loop() {
		if _, err := l.Issue(ctx, c); !errors.Is(err, ledger.ErrFull) {
			b.Fatalf("Issue on a full store: %v, want ErrFull", err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(int64(heapInUse())-int64(start))/float64(b.N), "B/refused")
	runtime.KeepAlive(m)
}

// TestMemorySweepOrder guards the expiry queue the benchmarks above led to
// (a FIFO for confirmations that arrive in expiry order, a heap for the
// rest): with expiries arriving in order, out of order and tied, the store
// must forget exactly the confirmations past expiry plus grace, no more
// and no fewer, at every step of the clock.
func TestMemorySweepOrder(t *testing.T) {
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	const grace = time.Minute
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, pattern := range []string{"ascending", "descending", "shuffled", "runs", "ties"} {
		t.Run(pattern, func(t *testing.T) {
			clock := &fakeClock{t: base}
			m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: 1 << 20, MaxPendingPerPrincipal: 1 << 20, Grace: grace, Now: clock.Now})
			const n = 3000
			offsets := make([]int, n) // expiry, in seconds after base, less one
			for i := range offsets {
				switch pattern {
				case "ascending":
					offsets[i] = i
				case "descending":
					offsets[i] = n - i
				case "shuffled":
					offsets[i] = rnd.IntN(n)
				case "runs": // mostly in order, now and then a step back
					offsets[i] = i
					if i%7 == 0 {
						offsets[i] = max(i-rnd.IntN(200), 0)
					}
				case "ties":
					offsets[i] = rnd.IntN(10) * 300
				}
			}
			var ids []ledger.ID
			forget := make([]time.Time, n) // when each may be forgotten, less grace
			for i, off := range offsets {
				c := representative(i)
				c.ID[0], c.ID[1], c.ID[15] = byte(i), byte(i>>8), 7
				c.Expires = base.Add(time.Duration(off+1) * time.Second)
				forget[i] = c.Expires
				if err := m.Add(ctx, c); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, c.ID)
				// Some spent, some pending; of the spent, some with a lease
				// that outlives the expiry, remembered until its end.
				lease := time.Second
				if i%15 == 0 {
					lease = time.Duration(off+1+rnd.IntN(500)) * time.Second
					forget[i] = base.Add(lease)
				}
				if i%3 == 0 {
					if _, err := m.Spend(ctx, c.ID, ledger.Acting, lease); err != nil {
						t.Fatal(err)
					}
				}
			}
			never := ledger.ID{0xff, 0xee}
			for step := 0; step <= n+500+int(grace/time.Second)+1; step += 37 {
				clock.t = base.Add(time.Duration(step) * time.Second)
				// Any call sweeps; a never-issued id changes nothing else.
				if _, err := m.Spend(ctx, never, ledger.Cancelled, 0); !errors.Is(err, ledger.ErrUnknown) {
					t.Fatalf("Spend(never issued) = %v, want ErrUnknown", err)
				}
				want := 0
				for i, off := range offsets {
					remembered := clock.t.Before(forget[i].Add(grace))
					if remembered {
						want++
					}
					if i%97 == 0 || i%15 == 0 && i%3 == 0 { // spot-check single ids: forgotten reads as unknown
						_, err := m.Spend(ctx, ids[i], ledger.Cancelled, 0)
						if errors.Is(err, ledger.ErrUnknown) == remembered {
							t.Fatalf("t+%ds: confirmation %d (expires t+%ds, forgotten after t+%v): Spend = %v, remembered should be %v", step, i, off+1, forget[i].Sub(base)+grace, err, remembered)
						}
					}
				}
				if got, _ := m.Len(); got != want {
					t.Fatalf("t+%ds: store remembers %d, want %d", step, got, want)
				}
			}
		})
	}
}

// TestMemoryShrinksDrainedShard fills one shard (one principal's) with
// 200,000 confirmations, lets them all pass their grace, and checks that
// once swept the store gives back the map's tables: the live heap returns
// to within 512 KiB of where it started, where the tables alone take
// megabytes (the control, which keeps the confirmations, shows how many).
func TestMemoryShrinksDrainedShard(t *testing.T) {
	if testing.Short() {
		t.Skip("issues 200,000 confirmations")
	}
	const n, bound = 200_000, 512 << 10
	for _, tt := range []struct {
		name   string
		expire bool
	}{
		{"drained", true},
		{"control: kept", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			m := ledger.NewMemory(ledger.MemoryOptions{MaxPending: n, MaxPendingPerPrincipal: n, Now: clock.Now})
			l, err := ledger.New(m, ledger.Options{TTL: time.Minute, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			base := heapInUse()
			c := representative(1)
			for range n {
				if _, err := l.Issue(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if tt.expire {
				clock.Advance(time.Minute + ledger.DefaultGrace)
			}
			remembered, _ := m.Len() // sweeps
			growth := int64(heapInUse()) - int64(base)
			runtime.KeepAlive(m)
			t.Logf("%d remembered, heap %+d bytes", remembered, growth)
			if got, want := growth < bound, tt.expire; got != want {
				t.Fatalf("heap grew %d bytes with %d remembered; want under %d: %v", growth, remembered, bound, want)
			}
		})
	}
}
