package redisledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

// testStore returns a store in a namespace of its own, or skips.
func testStore(t *testing.T, opts Options) (*Store, *redis.Client) {
	t.Helper()
	u := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if u == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run the Redis store tests")
	}
	ropts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(ropts)
	t.Cleanup(func() { c.Close() })
	var b [8]byte
	rand.Read(b[:])
	opts.Namespace = "mcp-confirm-test:{" + hex.EncodeToString(b[:]) + "}:"
	s, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// deleteKeys deletes confirmation conf's keys, the pending set and its
// principal's set when t ends.
func deleteKeys(t *testing.T, s *Store, c *redis.Client, conf ledger.Confirmation) {
	t.Cleanup(func() {
		entry, record, _ := s.keys(conf.ID)
		if err := c.Del(context.Background(), entry, record, s.pendingKey, s.principalKey(conf.Principal)).Err(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// TestRetryOfSameCall checks the scripts' nonces: a second run of the very
// same Add, Spend or Complete (what go-redis does after a reply lost to a
// dropped connection) gets the success back, while any other call is
// refused. The
// namespace (or the principal) holds one pending confirmation, so that Add
// is tried both on its path with room and on its path when full.
func TestRetryOfSameCall(t *testing.T) {
	for _, opts := range []Options{{MaxPending: 1}, {MaxPendingPerPrincipal: 1}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) { retryOfSameCall(t, opts) })
	}
}

func retryOfSameCall(t *testing.T, opts Options) {
	ctx := context.Background()
	s, c := testStore(t, opts)
	conf := ledgertest.Fresh(t)
	deleteKeys(t, s, c, conf)

	v, err := encode(conf)
	if err != nil {
		t.Fatal(err)
	}
	other, err := encode(conf) // the same confirmation, another Add's nonce
	if err != nil {
		t.Fatal(err)
	}
	adds := []struct {
		name string
		v    []byte
		want error
	}{
		{"the add", v, nil},
		{"its retry", v, nil}, // full from here on
		{"another add", other, ledger.ErrExists},
	}
	for _, tt := range adds {
		if err := s.add(ctx, conf, tt.v); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s: add = %v, want %v", tt.name, err, tt.want)
		}
	}

	first, another := [nonceLen]byte{1}, [nonceLen]byte{2}
	spends := []struct {
		name  string
		nonce [nonceLen]byte
		to    ledger.State
		want  error
	}{
		{"the call", first, ledger.Acting, nil},
		{"its retry", first, ledger.Acting, nil},
		{"its retry again", first, ledger.Acting, nil},
		{"another call", another, ledger.Acting, ledger.ErrInProgress},
		{"same nonce, other target", first, ledger.Cancelled, ledger.ErrInProgress},
	}
	for _, tt := range spends {
		got, err := s.spend(ctx, conf.ID, tt.to, time.Hour, tt.nonce)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s: spend = %v, want %v", tt.name, err, tt.want)
		}
		if !same(got.Confirmation, conf) {
			t.Fatalf("%s: spend returned %+v, want %+v", tt.name, got, conf)
		}
	}
	// Spent, the entry no longer counts: the Add's retry and another Add
	// now take the path with room, with the same answers.
	for _, tt := range adds[1:] {
		if err := s.add(ctx, conf, tt.v); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s, after the spend: add = %v, want %v", tt.name, err, tt.want)
		}
	}

	o := ledger.Outcome{Kind: ledger.OutcomeDone, Result: []byte("r"), Size: 1}
	completes := []struct {
		name  string
		nonce [nonceLen]byte
		want  error
	}{
		{"the complete", first, nil},
		{"its retry", first, nil},
		{"another complete", another, ledger.ErrDone},
	}
	for _, tt := range completes {
		if err := s.complete(ctx, conf.ID, o, tt.nonce); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s: complete = %v, want %v", tt.name, err, tt.want)
		}
	}
	if rec, err := s.spend(ctx, conf.ID, ledger.Acting, time.Hour, another); !errors.Is(err, ledger.ErrDone) || string(rec.Outcome.Result) != "r" {
		t.Fatalf("a retry after the outcome: %v %q, want ErrDone and the outcome", err, rec.Outcome.Result)
	}
}

// same reports whether a and b are the same confirmation, Expires as the
// same instant.
func same(a, b ledger.Confirmation) bool {
	at, bt := a.Expires, b.Expires
	a.Expires, b.Expires = time.Time{}, time.Time{}
	return a == b && at.Equal(bt)
}

// TestEncode checks that an entry's value decodes to the confirmation it
// was made from, whatever its fields hold, and that its header carries
// Expires for the scripts.
func TestEncode(t *testing.T) {
	long := strings.Repeat("\x00\xff", 200)                               // a length of more than one uvarint byte
	at := time.Unix(1_893_456_000, 6_001).In(time.FixedZone("", 3600+30)) // rounds up to ...007 µs
	tests := []struct {
		name string
		c    ledger.Confirmation
		exp  string // the header's digits
	}{
		{"fresh", ledgertest.Fresh(t), ""},
		{"empty fields", ledger.Confirmation{Expires: at}, "0001893456000000007"},
		{"long fields", ledger.Confirmation{Tool: long, ArgsDigest: "a", Principal: long, Subject: "", Expires: at.UTC()}, "0001893456000000007"},
		{"whole microsecond", ledger.Confirmation{Expires: time.UnixMicro(42)}, "0000000000000000042"},
		{"before 1970", ledger.Confirmation{Subject: "s", Expires: time.Unix(-5, 1)}, "0000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.ID = ledgertest.NewID(t)
			v, err := encode(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if other, err := encode(tt.c); err != nil || string(other[:offExp]) == string(v[:offExp]) {
				t.Fatalf("two encodings share the Add nonce %x (%v)", v[:offExp], err)
			}
			if exp := string(v[offExp:headLen]); tt.exp != "" && exp != tt.exp {
				t.Fatalf("exp = %s, want %s", exp, tt.exp)
			}
			got, err := decode(tt.c.ID, string(v))
			if err != nil {
				t.Fatal(err)
			}
			if !same(got, tt.c) {
				t.Fatalf("decode = %+v, want %+v", got, tt.c)
			}
			if got.Expires.String() != tt.c.Expires.String() {
				t.Fatalf("Expires = %v, want %v (zone offset too)", got.Expires, tt.c.Expires)
			}
			// Every truncation is refused, never read as other fields.
			for n := range len(v) {
				if _, err := decode(tt.c.ID, string(v[:n])); err == nil {
					t.Fatalf("decode of the first %d of %d bytes succeeded", n, len(v))
				}
			}
		})
	}
}

// TestRecordLayout checks what the scripts write into a record, at the
// offsets Go reads: the state, the Spend's nonce, the lease's end in
// microseconds on the server's clock, the Complete's nonce and the outcome;
// and that both keys then live to the lease's end plus grace, when that is
// after Expires plus grace.
func TestRecordLayout(t *testing.T) {
	ctx := context.Background()
	s, c := testStore(t, Options{Grace: time.Second})
	conf := ledgertest.Fresh(t)
	conf.Expires = time.Now().Add(time.Minute)
	deleteKeys(t, s, c, conf)
	if err := s.Add(ctx, conf); err != nil {
		t.Fatal(err)
	}
	spendNonce, completeNonce := [nonceLen]byte{7, 7}, [nonceLen]byte{9, 9}
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.spend(ctx, conf.ID, ledger.Acting, time.Hour, spendNonce); err != nil {
		t.Fatal(err)
	}
	after, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	entry, record, _ := s.keys(conf.ID)
	r, err := c.Get(ctx, record).Result()
	if err != nil {
		t.Fatal(err)
	}
	lease, err := strconv.ParseInt(r[recLease:recComplete], 10, 64)
	if err != nil || r[0] != stateActing || r[1:recLease] != string(spendNonce[:]) || len(r) != recHead ||
		r[recComplete:recHead] != strings.Repeat("\x00", nonceLen) {
		t.Fatalf("record after the spend: %q (%v)", r, err)
	}
	if end := time.UnixMicro(lease); end.Before(before.Add(time.Hour)) || end.After(after.Add(time.Hour)) {
		t.Fatalf("lease ends at %v, want an hour after the spend, in [%v, %v]", end, before.Add(time.Hour), after.Add(time.Hour))
	}
	for _, key := range []string{entry, record} {
		at, err := c.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := time.UnixMicro(lease).Add(time.Second); time.UnixMilli(at.Milliseconds()).Sub(want).Abs() > time.Millisecond {
			t.Fatalf("%s expires at %v, want the lease's end plus grace, %v", key, time.UnixMilli(at.Milliseconds()), want)
		}
	}
	o := ledger.Outcome{Kind: ledger.OutcomeFailed, Result: []byte("refused"), Size: 7}
	if err := s.complete(ctx, conf.ID, o, completeNonce); err != nil {
		t.Fatal(err)
	}
	want, _ := o.MarshalBinary()
	if r2, err := c.Get(ctx, record).Result(); err != nil || r2 != string(stateFailed)+r[1:recComplete]+string(completeNonce[:])+string(want) {
		t.Fatalf("record after the complete: %q (%v)", r2, err)
	}
}
