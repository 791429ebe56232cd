package redisledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
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
	aa, ba := a.Approval, b.Approval
	a.Expires, b.Expires, a.Approval, b.Approval = time.Time{}, time.Time{}, nil, nil
	sameApproval := aa == nil && ba == nil || aa != nil && ba != nil && aa.Required == ba.Required &&
		slices.Equal(aa.Approvers, ba.Approvers) && aa.Requester == ba.Requester && aa.Question == ba.Question
	return a == b && at.Equal(bt) && sameApproval
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
		{"out of band", ledgertest.OutOfBand(ledger.Confirmation{Tool: long, Expires: at}, 2, "bob\x00"), "A021893456000000007"},
		{"out of band, long approvers", ledger.Confirmation{Expires: at, Approval: &ledger.Approval{Required: 16,
			Approvers: []string{strings.Repeat("\x00é", 300), "b", strings.Repeat("é", 300)}, Question: strings.Repeat("q\u2068", 2000)}},
			"A161893456000000007"},
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

// TestRetryOfSameDecide checks the decide script's nonce: a second run of
// the very same Decide (what go-redis does after a reply lost to a
// dropped connection) gets the success back, while another Decide of the
// same approver is refused as decided; and a decline's record and the
// decisions' key live as long as the entry.
func TestRetryOfSameDecide(t *testing.T) {
	ctx := context.Background()
	s, c := testStore(t, Options{Grace: time.Second})
	conf := ledgertest.OutOfBand(ledgertest.Fresh(t), 2, "")
	deleteKeys(t, s, c, conf)
	t.Cleanup(func() { c.Del(context.Background(), s.decisionsKey(conf.ID)) })
	if err := s.Add(ctx, conf); err != nil {
		t.Fatal(err)
	}
	entry, record, _ := s.keys(conf.ID)
	v, err := c.Get(ctx, entry).Result()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(conf.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	approver := conf.Approval.Approvers[0]
	once, another := [nonceLen]byte{1}, [nonceLen]byte{2}
	for i, tt := range []struct {
		sign  string
		nonce [nonceLen]byte
		want  error
	}{
		{"+", once, nil},
		{"+", once, nil}, // the retry
		{"-", once, nil}, // still the retry: the first call's decision stands
		{"+", another, ledger.ErrDecided},
	} {
		rec, err := s.decide(ctx, conf.ID, got, v[:nonceLen], "a:"+approver, tt.sign, tt.nonce, entry, record)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("decide %d = %v, want %v", i, err, tt.want)
		}
		if len(rec.Decisions) != 1 || !rec.Decisions[0].Approve || rec.Decisions[0].Approver != approver || rec.State != ledger.Pending {
			t.Fatalf("decide %d recorded %+v in state %v, want one approval by %q", i, rec.Decisions, rec.State, approver)
		}
	}
	if _, err := s.decide(ctx, conf.ID, got, "another entry's", "a:"+approver, "+", another, entry, record); err == nil {
		t.Fatal("decide with another entry's nonce succeeded")
	}
	if _, err := s.Decide(ctx, conf.ID, ledger.Approver{ID: "x", Groups: conf.Approval.Approvers[1:]}, false); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{entry, record, s.decisionsKey(conf.ID)} {
		at, err := c.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := conf.Expires.Add(time.Second); time.UnixMilli(at.Milliseconds()).Sub(want).Abs() > time.Millisecond {
			t.Fatalf("%s expires at %v, want the expiry plus grace, %v", key, time.UnixMilli(at.Milliseconds()), want)
		}
	}
	if n, err := c.ZScore(ctx, s.pendingKey, hex.EncodeToString(conf.ID[:])).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the declined confirmation still counts as pending (score %v, %v)", n, err)
	}
}

// priorSpendScript is the Spend of the version before out-of-band approval
// (issue 28), kept to show what such a replica does with an entry
// that needs approval.
var priorSpendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local r = redis.call('GET', KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if r then
  if string.sub(r, 2, 17) == string.sub(ARGV[1], 2, 17) and (string.sub(r, 1, 1) == 'c') == (string.sub(ARGV[1], 1, 1) == 'c') then
    return {2, v, r} -- a client retry of this very Spend
  end
  local lease = tonumber(string.sub(r, 18, 36))
  if string.sub(r, 1, 1) == 'a' and lease and now >= lease then
    -- The lease ended with no outcome recorded: in doubt, for good.
    redis.call('SETRANGE', KEYS[2], 0, 'u')
    r = 'u' .. string.sub(r, 2)
  end
  return {3, v, r}
end
if not v then return {0} end
local exp = tonumber(string.sub(v, 17, 35))
if not exp then return redis.error_reply('corrupt entry') end
if now >= exp then return {1, v} end
local lease, keep = 0, exp
if string.sub(ARGV[1], 1, 1) == 'a' then
  lease = now + tonumber(ARGV[2])
  keep = math.max(exp, lease)
end
r = ARGV[1] .. string.format('%019d', lease) .. string.rep('\0', 16)
-- Both keys live to the later of Expires and the lease's end, plus grace:
-- the entry's key already does, unless the lease ends after Expires.
local deadline = math.ceil(keep / 1000) + tonumber(ARGV[3])
redis.call('SET', KEYS[2], r, 'PXAT', deadline)
if keep > exp then redis.call('PEXPIREAT', KEYS[1], deadline, 'GT') end
redis.call('ZREM', KEYS[3], string.sub(KEYS[1], -32))
return {2, v} -- the record is what the caller asked for
`)

// TestPriorVersionRefusesApprovalEntries checks the rolling-upgrade claim
// of the layout: a replica of the version before out-of-band approval,
// which would redeem any pending entry, finds no expiry in the header of
// one that needs approval and refuses it as a corrupt entry, with an error
// that is no ledger answer -- never redeems it unapproved. Its control: the
// same script redeems an in-band entry.
func TestPriorVersionRefusesApprovalEntries(t *testing.T) {
	ctx := context.Background()
	s, c := testStore(t, Options{})
	for _, tc := range []struct {
		name    string
		conf    ledger.Confirmation
		refused bool
	}{
		{"needs approval", ledgertest.OutOfBand(ledgertest.Fresh(t), 1, ""), true},
		{"in band (control)", ledgertest.Fresh(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deleteKeys(t, s, c, tc.conf)
			if err := s.Add(ctx, tc.conf); err != nil {
				t.Fatal(err)
			}
			entry, record, _ := s.keys(tc.conf.ID)
			marker := append([]byte{stateActing}, make([]byte, nonceLen)...)
			_, err := priorSpendScript.Run(ctx, c, []string{entry, record, s.pendingKey}, marker, 1_000_000, 1000).Result()
			if refused := err != nil && strings.Contains(err.Error(), "corrupt entry"); refused != tc.refused {
				t.Fatalf("the prior version's Spend = %v; refused as corrupt: %v, want %v", err, refused, tc.refused)
			}
			if n, _ := c.Exists(ctx, record).Result(); (n == 0) != tc.refused {
				t.Fatalf("record written: %v, want %v", n == 1, !tc.refused)
			}
		})
	}
}
