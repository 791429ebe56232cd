package luasha256_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/internal/luasha256"
)

// newClient connects to the Redis server of MCP_CONFIRM_REDIS_URL, or
// skips. The scripts here touch no key.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	u := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if u == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run the Lua SHA-256 in Redis")
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// hasher runs a Lua source's sha256hex and sha256resume in Redis.
type hasher struct {
	c              *redis.Client
	whole, resumed *redis.Script
}

func newHasher(c *redis.Client, src string) hasher {
	return hasher{c,
		redis.NewScript(src + "\nreturn sha256hex(ARGV[1])"),
		redis.NewScript(src + "\nreturn sha256resume(ARGV[1], ARGV[2], ARGV[3])")}
}

// sum is sha256hex(msg), or the script's error.
func (h hasher) sum(msg []byte) (string, error) {
	return h.whole.Run(context.Background(), h.c, nil, msg).Text()
}

// resume hashes first and second as one message: Go's Midstate of
// first, then the script's sha256resume.
func (h hasher) resume(first, second []byte) (string, error) {
	state, n, rest, err := luasha256.Midstate(first)
	if err != nil {
		return "", err
	}
	return h.resumed.Run(context.Background(), h.c, nil, state, n, append(rest[:len(rest):len(rest)], second...)).Text()
}

func goSum(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

// vectors are the messages every Lua SHA-256 is checked on: FIPS 180-4's
// examples (with their published digests, which do not depend on Go), and
// every length around a padding boundary, whose digest is
// crypto/sha256's.
func vectors() []struct {
	name string
	msg  []byte
	want string // "" for crypto/sha256's
} {
	vs := []struct {
		name string
		msg  []byte
		want string
	}{
		{"empty", nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", []byte("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"448 bits", []byte("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{"896 bits", []byte("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 55, 56, 57, 63, 64, 65, 119, 120, 121, 127, 128, 129, 1024, 4099} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32()) // every byte value: NUL, 0x80, 0xff
		}
		vs = append(vs, struct {
			name string
			msg  []byte
			want string
		}{fmt.Sprintf("%d random bytes", n), b, ""})
	}
	vs = append(vs, struct {
		name string
		msg  []byte
		want string
	}{"64 KiB of 0xff", bytes.Repeat([]byte{0xff}, 64<<10), ""})
	return vs
}

// mismatches checks src's sha256hex, and sha256resume at every split
// point the vectors allow, against the vectors, and describes each wrong
// digest and each error.
func mismatches(t *testing.T, c *redis.Client, src string) []string {
	h := newHasher(c, src)
	var bad []string
	for _, v := range vectors() {
		want := v.want
		if want == "" {
			want = goSum(v.msg)
		} else if got := goSum(v.msg); got != want {
			t.Fatalf("%s: crypto/sha256 says %s, FIPS 180-4 %s", v.name, got, want)
		}
		if got, err := h.sum(v.msg); got != want || err != nil {
			bad = append(bad, fmt.Sprintf("sha256hex(%s) = %s, %v; want %s", v.name, got, err, want))
		}
		for _, split := range []int{0, 1, 63, 64, 65, 128, len(v.msg)} {
			if split > len(v.msg) {
				continue
			}
			if got, err := h.resume(v.msg[:split], v.msg[split:]); got != want || err != nil {
				bad = append(bad, fmt.Sprintf("sha256resume(%s split at %d) = %s, %v; want %s", v.name, split, got, err, want))
			}
		}
	}
	return bad
}

func TestVectors(t *testing.T) {
	for _, m := range mismatches(t, newClient(t), luasha256.Source()) {
		t.Error(m)
	}
}

// TestVectorsCatchBrokenHashes is the negative control: each variant, one
// mistake away from SHA-256, fails the vectors.
func TestVectorsCatchBrokenHashes(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct{ name, old, new string }{
		{"a round constant", "0x428a2f98", "0x428a2f99"},
		{"the last round constant", "0xc67178f2", "0xc67178f3"},
		{"a rotation of Σ1", "ror(e, 25)", "ror(e, 24)"},
		{"σ0's shift", "rshift(x, 3)", "rshift(x, 2)"},
		{"Maj as Ch", "bor(band(a, b), band(c, bor(a, b)))", "bxor(c, band(a, bxor(b, c)))"},
		{"the padding's zeros", "(55 - len) % 64", "(56 - len) % 64"},
		{"the length in bytes, not bits", "local bits = (n + len) * 8", "local bits = (n + len)"},
		{"the resumed length ignored", "local bits = (n + len) * 8", "local bits = len * 8"},
		{"an initial value", "0x5be0cd19)", "0x5be0cd18)"},
		{"no final addition", "h7 = tobit(h4 + e), tobit(h5 + f), tobit(h6 + g), tobit(h7 + h)", "h7 = e, f, g, h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := luasha256.Source()
			if strings.Count(src, tc.old) != 1 {
				t.Fatalf("the source holds %q %d times, want once", tc.old, strings.Count(src, tc.old))
			}
			if len(mismatches(t, c, strings.Replace(src, tc.old, tc.new, 1))) == 0 {
				t.Errorf("the vectors pass a SHA-256 with %s broken", tc.name)
			}
		})
	}
}

func TestResumeRefusesBadState(t *testing.T) {
	h := newHasher(newClient(t), luasha256.Source())
	good := strings.Repeat("0", 64)
	for _, tc := range []struct {
		state string
		n     any
	}{
		{good[:63], 0}, {good + "0", 0}, {"-" + good[1:], 0}, {"G" + good[1:], 0}, {" " + good[1:], 0},
		{good, 1}, {good, -64}, {good, "x"},
	} {
		if s, err := h.resumed.Run(context.Background(), h.c, nil, tc.state, tc.n, "").Text(); err == nil {
			t.Errorf("sha256resume(%q, %v) = %s, want an error", tc.state, tc.n, s)
		}
	}
}

func TestMidstate(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 200} {
		p := bytes.Repeat([]byte{'x'}, n)
		state, k, rest, err := luasha256.Midstate(p)
		if err != nil {
			t.Fatal(err)
		}
		if k != n&^63 || !bytes.Equal(rest, p[k:]) || len(state) != 64 {
			t.Errorf("Midstate(%d bytes) = %s, %d, %d bytes", n, state, k, len(rest))
		}
		if k == 0 && state != "6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19" {
			t.Errorf("Midstate(%d bytes) = %s, want SHA-256's initial value", n, state)
		}
	}
}

// BenchmarkLuaSHA256 measures what hashing costs a script, inside Redis:
// each size runs, interleaved, a script that hashes a record of that size
// and the same script told not to, and reports the difference per hash
// (µs/hash) — what the hash adds to a script's time, with Redis blocked.
func BenchmarkLuaSHA256(b *testing.B) {
	c := newClient(b)
	script := redis.NewScript(luasha256.Source() + `
local r = ''
for i = 1, tonumber(ARGV[2]) do r = sha256hex(ARGV[1]) end
return r`)
	const reps = 20 // hashes per call, so the round trip's noise is shared out
	for _, size := range []int{100, 300, 1000} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msg := bytes.Repeat([]byte{'x'}, size)
			ctx := context.Background()
			if err := script.Run(ctx, c, nil, msg, 1).Err(); err != nil {
				b.Fatal(err)
			}
			var with, without time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := script.Run(ctx, c, nil, msg, reps).Err(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := script.Run(ctx, c, nil, msg, 0).Err(); err != nil {
					b.Fatal(err)
				}
				with, without = with+t1.Sub(t0), without+time.Since(t1)
			}
			b.ReportMetric(float64((with-without).Microseconds())/float64(b.N*reps), "µs/hash")
			b.ReportMetric(float64((with-without).Microseconds())/float64(b.N*reps)/float64((size+9+63)/64), "µs/block")
		})
	}
}
