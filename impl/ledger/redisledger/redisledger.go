// Package redisledger is a [ledger.Store] kept in Redis, shared by every
// server replica that opens the same namespace, so that a confirmation
// issued by one replica behind a load balancer is redeemed — once — by
// whichever replica the answer reaches, and survives a replica's restart.
//
// # What it guarantees
//
// Spend is one Lua script, which Redis runs atomically: it reads the entry,
// decides on the Redis server's clock (TIME) whether it has expired, and
// moves it from pending to redeemed or cancelled in the same step. Of any
// number of concurrent Spend calls for one id, from any number of processes,
// at most one succeeds. Add is a script too: it refuses an id that exists
// ([ledger.ErrExists], even when the namespace is full) and, when the
// namespace already holds [Options.MaxPending] unexpired pending
// confirmations, refuses with [ledger.ErrFull]. Every field round-trips
// byte for byte, and Expires to the nanosecond with its zone offset: the
// store encodes them, length-prefixed, into one binary-safe Redis string
// that the scripts never parse.
//
// Expires itself is set by the issuing replica's clock ([ledger.Ledger]'s
// Now): a skew between that clock and Redis's lengthens or shortens the
// TTL by the skew.
//
// Each entry carries a Redis key expiry at its Expires plus [Options.Grace]:
// until then a replayed or late answer is refused as spent, cancelled or
// expired; afterwards the key is gone and the answer is refused as unknown.
// Nothing needs sweeping and the store starts no goroutines.
//
// A command that go-redis retries after a lost reply (a dropped connection)
// is recognised by the script: each call carries a random nonce, kept in
// the entry, and a retry of the call that already added or spent the entry
// gets that success back instead of [ledger.ErrExists] or [ledger.ErrSpent].
//
// # What it does not guarantee
//
// At-most-once holds only while Redis keeps every acknowledged write. Redis
// replication is asynchronous: if the primary fails over to a replica that
// had not yet received a Spend, the entry is pending again there and can be
// redeemed a second time. Restoring an RDB snapshot or an AOF older than the
// last Spend does the same. Run a single primary, or persistence with
// appendfsync always, or no persistence at all (a restarted Redis forgets
// every confirmation, and forgotten confirmations are refused as unknown:
// safe, only the pending approvals are lost). Losing keys to eviction
// (maxmemory) is safe in the same way.
//
// Memory: every Add costs one string that lives until Expires+Grace,
// whatever its state (MEMORY USAGE reports 264 bytes for the default
// namespace and short fields, on Redis 7.0; long fields add their length),
// plus one sorted-set member (about 130 bytes) until it is spent. A member
// that expires unspent is dropped only when the namespace reaches
// MaxPending, or with the whole set when its last member expires.
// MaxPending bounds the pending confirmations of a namespace; it does not
// bound spent ones, which are at most the spend rate times (TTL + Grace).
// There is no per-principal cap (the in-memory store has one): callers who
// need it must rate-limit principals before Issue. Set maxmemory with
// headroom.
//
// Keys are Namespace+"c2:"+hex(id) for entries and Namespace+"pending"
// for the set of pending ids, scored by expiry. Add and Spend touch both
// keys in one script, so on Redis Cluster the namespace must contain a
// hash tag ("{...}", as the default does) to put them in one slot. An
// entry is one string: a fixed-width header (state, the nonces of its Add
// and Spend, its expiry in microseconds) that the scripts read and
// rewrite in place, then the confirmation. The store needs Redis 7.0 or
// later (SET NX GET, PEXPIREAT GT): [Open] checks; with [New], the caller
// must.
//
// Versions before this layout kept each entry as a hash under
// Namespace+"c:". Those entries are never read: a confirmation issued
// before an upgrade is refused as unknown (safe: the person is asked
// again), and its hash expires at its own Expires+Grace. Both layouts
// share the pending set, so during a rolling upgrade old and new replicas
// count against one MaxPending. A key in the namespace of a type this store
// does not write (WRONGTYPE), or a mangled entry, fails the call with an
// error that is no ledger answer, and Add never overwrites it.
//
// # Why go-redis
//
// github.com/redis/go-redis is the de-facto Go client, maintained by Redis
// itself. It has what this store needs and nothing exotic: [redis.Script]
// (EVALSHA, falling back to EVAL when the server's script cache was
// flushed), a connection pool, context deadlines on every command, RESP3,
// and one interface ([redis.UniversalClient]) over single servers, Sentinel
// and Cluster, so callers can hand in the client they already run.
// rueidis is faster (automatic pipelining, client-side caching), but its
// command-builder API is heavier and those strengths buy little here: each
// operation is one script call whose cost is the round trip and the
// script, not the client's encoding (a CPU profile of BenchmarkIssueRedeem,
// which runs beside a bare SET+GETDEL floor, shows the client busy less
// than a tenth of the wall time).
package redisledger

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/internal/redact"
)

// Options configures a [Store]. The zero value is ready to use.
type Options struct {
	// Namespace prefixes every key, so that servers of different audiences
	// sharing one Redis never see each other's confirmations, e.g.
	// "mcp-confirm:{files.example.com}:". Default [DefaultNamespace].
	Namespace string
	// Grace is how long a confirmation is remembered after its expiry, so
	// that a late replay reads as spent or expired rather than unknown.
	// Either way it is refused. Default [ledger.DefaultGrace].
	Grace time.Duration
	// MaxPending caps the unexpired pending confirmations of the namespace:
	// Add fails with [ledger.ErrFull] beyond it. Default [DefaultMaxPending].
	MaxPending int
}

// Defaults of [Options].
const (
	DefaultNamespace  = "mcp-confirm:{default}:"
	DefaultMaxPending = 100_000
)

// Store is a [ledger.Store] in Redis. It is safe for concurrent use, and
// any number of Stores (in any number of processes) with the same
// namespace on the same Redis share one ledger.
//
// Add and Spend each make one round trip (one script). An error that is not
// one of the ledger's sentinels — Redis unreachable, a deadline, a closed
// store — means the outcome is unknown, as [ledger.Store] requires.
type Store struct {
	client     redis.UniversalClient
	own        bool // Close closes client
	closed     atomic.Bool
	ns         string
	entries    string // key prefix of entries
	pendingKey string
	grace      time.Duration
	maxPending int
	maxArg     any // maxPending, boxed once rather than on every Add
}

var _ ledger.Store = (*Store)(nil)

// New returns a store over client, which stays the caller's: [Store.Close]
// does not close it. For context deadlines to bound each command, client
// should be made with ContextTimeoutEnabled (as [Open] does).
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisledger: nil client")
	}
	if opts.Grace < 0 {
		return nil, fmt.Errorf("redisledger: negative grace %v", opts.Grace)
	}
	if opts.MaxPending < 0 {
		return nil, fmt.Errorf("redisledger: negative MaxPending %d", opts.MaxPending)
	}
	s := &Store{client: client, ns: opts.Namespace, grace: opts.Grace, maxPending: opts.MaxPending}
	if s.ns == "" {
		s.ns = DefaultNamespace
	}
	if s.grace == 0 {
		s.grace = ledger.DefaultGrace
	}
	if s.maxPending == 0 {
		s.maxPending = DefaultMaxPending
	}
	s.entries, s.pendingKey = s.ns+"c2:", s.ns+"pending"
	s.maxArg = s.maxPending
	return s, nil
}

// Open connects to the Redis server at rawURL (redis://, rediss:// or
// unix://, as [redis.ParseURL] reads it), checks that it answers, and
// returns a store that owns the connection pool. Commands honour context
// deadlines. Errors name the server but never the URL's password.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	ropts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisledger: %s", parseError(rawURL, err))
	}
	ropts.ContextTimeoutEnabled = true
	client := redis.NewClient(ropts)
	s, err := New(client, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.own = true
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		// The error text of a failed AUTH or dial names the server, never
		// the password, but scrub it anyway: errors end up in logs.
		msg := redact.Scrub(err.Error(), ropts.Password)
		if msg != err.Error() {
			return nil, fmt.Errorf("redisledger: connect to %s: %s", ropts.Addr, msg)
		}
		return nil, fmt.Errorf("redisledger: connect to %s: %w", ropts.Addr, err)
	}
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("redisledger: connect to %s: INFO: %w", ropts.Addr, err)
	}
	if v, ok := supported(info); !ok {
		client.Close()
		return nil, fmt.Errorf("redisledger: %s runs Redis %q: this store needs 7.0 or later (SET NX GET, PEXPIREAT GT)", ropts.Addr, v)
	}
	return s, nil
}

// supported reads redis_version from the INFO server reply and reports
// whether it is 7.0 or later. Scripts refused by an older server would
// fail every Add with an error that does not say why.
func supported(info string) (version string, ok bool) {
	for line := range strings.Lines(info) {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); found {
			major, _, _ := strings.Cut(v, ".")
			n, err := strconv.Atoi(major)
			return v, err == nil && n >= 7
		}
	}
	return "", false
}

// parseError describes why rawURL did not parse without echoing it: a
// *url.Error quotes the whole URL, password included, and the reasons
// quote parts of it.
func parseError(rawURL string, err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return "invalid URL (not shown): " + redact.Scrub(err.Error(), redact.URLPasswords(rawURL)...)
}

// Close makes every later call fail, and closes the client if [Open] made
// it. Calls in flight are not waited for.
func (s *Store) Close() error {
	if s.closed.Swap(true) || !s.own {
		return nil
	}
	return s.client.Close()
}

var errClosed = errors.New("redisledger: store closed")

// An entry is one Redis string: a header of fixed width, which the scripts
// read and rewrite, then the confirmation, which only Go reads.
//
//	offset  size  what
//	0       1     state: 'p' pending, 'r' redeemed, 'c' cancelled
//	1       16    nonce of the Spend that spent it (zeros while pending)
//	17      16    nonce of the Add that made it
//	33      19    Expires in unix microseconds, rounded up, as zero-padded
//	              decimal digits: the scripts compare it with TIME and score
//	              the pending set with it
//	52      ...   Tool, ArgsDigest, Principal, Subject, each as a uvarint
//	              length and its bytes; then Expires exactly
//	              (time.MarshalBinary)
//
// The scripts spell these offsets out (Lua counts from 1): keep them in step.
const (
	nonceLen = 16
	offAdd   = 1 + nonceLen
	offExp   = offAdd + nonceLen
	headLen  = offExp + 19 // 19 digits hold every non-negative int64

	statePending   = 'p'
	stateRedeemed  = 'r'
	stateCancelled = 'c'
)

// addScript adds a pending entry if its key is free and the namespace has
// room. KEYS: entry, pending set. ARGV: the entry's value, the entry key's
// deadline (unix ms), the pending set's deadline for this member (unix ms),
// max pending. Returns 1 (added), 0 (exists) or -1 (full).
var addScript = redis.NewScript(`
local function exists(v)
  if string.sub(v, 18, 33) == string.sub(ARGV[1], 18, 33) then return 1 end -- a client retry of this very Add
  return 0
end
local n = redis.call('ZCARD', KEYS[2])
if n >= tonumber(ARGV[4]) then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end -- reported before full
  -- Expired pending confirmations can never be redeemed: they stop counting.
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  n = redis.call('ZCARD', KEYS[2])
  if n >= tonumber(ARGV[4]) then return -1 end
end
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PXAT', ARGV[2])
if v then return exists(v) end
redis.call('ZADD', KEYS[2], string.sub(ARGV[1], 34, 52), string.sub(KEYS[1], -32))
-- The set lives as long as its last-expiring member. GT never shortens its
-- expiry, but never sets one on a key without: a new set gets it plainly.
if n == 0 then
  redis.call('PEXPIREAT', KEYS[2], ARGV[3])
else
  redis.call('PEXPIREAT', KEYS[2], ARGV[3], 'GT')
end
return 1
`)

// spendScript is the compare-and-set. KEYS: entry, pending set. ARGV: the
// target state and the call's nonce, 17 bytes, which become the start of
// the entry. Returns the entry on success, else a code: 0 unknown,
// 1 expired, 2 redeemed, 3 cancelled. A script-free compare-and-set is
// possible on Redis 7.0 (MULTI/EXEC around LPUSHX and LMOVE of a pending
// token), but it takes eight commands and measured slower than this
// script (BenchmarkSpendDesigns).
var spendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end -- never added, or gone at Expires+Grace
local state, exp = string.sub(v, 1, 1), tonumber(string.sub(v, 34, 52))
if #v < 52 or not exp then return redis.error_reply('corrupt entry') end
if string.sub(v, 1, 17) == ARGV[1] then return v end -- a client retry of this very Spend
local t = redis.call('TIME')
if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= exp then return 1 end -- expired, whatever its state
if state == 'r' then return 2 end
if state == 'c' then return 3 end
if state ~= 'p' then return redis.error_reply('corrupt entry state') end
redis.call('SETRANGE', KEYS[1], 0, ARGV[1])
redis.call('ZREM', KEYS[2], string.sub(KEYS[1], -32))
return v
`)

// key is the entry's key. It ends with the id in hex, which the scripts
// cut off as the entry's member in the pending set.
func (s *Store) key(id ledger.ID) string {
	var h [2 * len(id)]byte
	hex.Encode(h[:], id[:])
	return s.entries + string(h[:])
}

// Add implements [ledger.Store].
func (s *Store) Add(ctx context.Context, c ledger.Confirmation) error {
	if s.closed.Load() {
		return errClosed
	}
	v, err := encode(c)
	if err != nil {
		return fmt.Errorf("redisledger: add %s: %w", c.ID, err)
	}
	return s.add(ctx, c, v)
}

// add stores v, the value encode made of c.
func (s *Store) add(ctx context.Context, c ledger.Confirmation, v []byte) error {
	res, err := addScript.Run(ctx, s.client, []string{s.key(c.ID), s.pendingKey},
		v, keyDeadline(c.Expires.Add(s.grace)), keyDeadline(c.Expires), s.maxArg).Int64()
	if err != nil {
		return s.callError("add", c.ID, err)
	}
	switch res {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%w: %s", ledger.ErrExists, c.ID)
	case -1:
		return fmt.Errorf("%w: %d pending in namespace %q", ledger.ErrFull, s.maxPending, s.ns)
	}
	return fmt.Errorf("redisledger: add %s: unexpected reply %d", c.ID, res)
}

// Spend implements [ledger.Store].
func (s *Store) Spend(ctx context.Context, id ledger.ID, to ledger.State) (ledger.Confirmation, error) {
	// Random, so that a replayed approval never passes for a retry of the
	// Spend that took it. rand.Read never fails: it crashes the program.
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	return s.spend(ctx, id, to, nonce)
}

func (s *Store) spend(ctx context.Context, id ledger.ID, to ledger.State, nonce [nonceLen]byte) (ledger.Confirmation, error) {
	var by [1 + nonceLen]byte
	switch to {
	case ledger.Redeemed:
		by[0] = stateRedeemed
	case ledger.Cancelled:
		by[0] = stateCancelled
	default:
		return ledger.Confirmation{}, fmt.Errorf("redisledger: cannot spend into state %v", to)
	}
	copy(by[1:], nonce[:])
	if s.closed.Load() {
		return ledger.Confirmation{}, errClosed
	}
	res, err := spendScript.Run(ctx, s.client, []string{s.key(id), s.pendingKey}, by[:]).Result()
	if err != nil {
		return ledger.Confirmation{}, s.callError("spend", id, err)
	}
	switch res := res.(type) {
	case int64:
		switch res {
		case 0:
			return ledger.Confirmation{}, ledger.ErrUnknown
		case 1:
			return ledger.Confirmation{}, ledger.ErrExpired
		case 2:
			return ledger.Confirmation{}, ledger.ErrSpent
		case 3:
			return ledger.Confirmation{}, ledger.ErrCancelled
		}
	case string:
		c, err := decode(id, res)
		if err != nil {
			return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
		return c, nil
	}
	return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: unexpected reply %v", id, res)
}

// callError describes a failed script call. A key of the wrong type means
// something other than this version of the store wrote into the namespace:
// say so, rather than leave only Redis's words.
func (s *Store) callError(op string, id ledger.ID, err error) error {
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("redisledger: %s %s: a key of namespace %q was not written by this store: %w", op, id, s.ns, err)
	}
	return fmt.Errorf("redisledger: %s %s: %w", op, id, err)
}

// encode returns the value of c's entry, pending, with a fresh add nonce.
func encode(c ledger.Confirmation) ([]byte, error) {
	fields := [...]string{c.Tool, c.ArgsDigest, c.Principal, c.Subject}
	size := headLen + 16 // 16: time.MarshalBinary's longest
	for _, f := range fields {
		size += binary.MaxVarintLen64 + len(f)
	}
	v := make([]byte, headLen, size)
	v[0] = statePending
	rand.Read(v[offAdd:offExp])        // never fails: it crashes the program instead
	us := max(ceilMicro(c.Expires), 0) // before 1970 is as expired as 1970
	for i := headLen - 1; i >= offExp; i-- {
		v[i] = '0' + byte(us%10)
		us /= 10
	}
	for _, f := range fields {
		v = binary.AppendUvarint(v, uint64(len(f)))
		v = append(v, f...)
	}
	v, err := c.Expires.AppendBinary(v)
	if err != nil {
		return nil, fmt.Errorf("expiry: %w", err)
	}
	return v, nil
}

var errCorrupt = errors.New("corrupt entry")

// decode rebuilds confirmation id from the value of its entry.
func decode(id ledger.ID, v string) (ledger.Confirmation, error) {
	if len(v) < headLen {
		return ledger.Confirmation{}, errCorrupt
	}
	c := ledger.Confirmation{ID: id}
	rest := v[headLen:]
	for _, f := range [...]*string{&c.Tool, &c.ArgsDigest, &c.Principal, &c.Subject} {
		var ok bool
		if *f, rest, ok = cut(rest); !ok {
			return ledger.Confirmation{}, errCorrupt
		}
	}
	if err := c.Expires.UnmarshalBinary([]byte(rest)); err != nil {
		return ledger.Confirmation{}, fmt.Errorf("%w: expiry: %w", errCorrupt, err)
	}
	return c, nil
}

// cut splits s into its first field, a uvarint length and that many bytes,
// and the rest.
func cut(s string) (field, rest string, ok bool) {
	var n uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		n |= uint64(s[i]&0x7f) << (7 * i)
		if s[i] < 0x80 {
			if s = s[i+1:]; n > uint64(len(s)) {
				return "", "", false
			}
			return s[:n], s[n:], true
		}
	}
	return "", "", false
}

// ceilMicro is t in unix microseconds, rounded up, so that for a server
// clock in whole microseconds, now >= ceilMicro(t) exactly when now is not
// before t.
func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

// keyDeadline is the PXAT or PEXPIREAT argument for t: unix milliseconds,
// rounded up, and at least 1 (a deadline in the past deletes the key at
// once).
func keyDeadline(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%1_000_000 != 0 {
		ms++
	}
	return max(ms, 1)
}
