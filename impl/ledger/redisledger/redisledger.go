// Package redisledger is a [ledger.Store] kept in Redis, shared by every
// server replica that opens the same namespace, so that a confirmation
// issued by one replica behind a load balancer is redeemed — once — by
// whichever replica the answer reaches, and survives a replica's restart.
//
// # What it guarantees
//
// A confirmation is two keys: its entry, written once by Add and never
// changed, and its token, a list that exists while the confirmation is
// pending or spent and whose key expires at Expires on the Redis server's
// clock. Spend pushes its marker onto the token with LPUSHX, one command,
// which Redis runs atomically: it finds no token once Expires has passed,
// and only the first push onto a pending token makes a list of two. Of any
// number of concurrent Spend calls for one id, from any number of
// processes, at most one succeeds. A later one reads the winner's marker to
// answer spent or cancelled. Add is a Lua script: it refuses an id that
// exists ([ledger.ErrExists], even when full) and, when the namespace
// already holds [Options.MaxPending] unexpired pending confirmations or
// the confirmation's principal (compared byte for byte) holds
// [Options.MaxPendingPerPrincipal], refuses with [ledger.ErrFull], so that
// one caller cannot starve the others. Redis runs a script atomically, so
// Adds racing from any number of replicas never admit one past a cap. Every field round-trips
// byte for byte, and Expires to the nanosecond with its zone offset: the
// store encodes them, length-prefixed, into one binary-safe Redis string
// that the script never parses.
//
// Spend is one round trip of three plain commands, not a script: LPUSHX
// decides; GET reads the entry, which never changes; ZREM drops the id
// from the set that counts pending confirmations, and every contender may.
// An Add that runs between a winning LPUSHX and its ZREM still counts the
// confirmation as pending: it may refuse with ErrFull an instant early,
// never admit one past a cap. A Spend cut off between the two (a
// dropped connection) leaves the id counted until its Expires.
//
// Spend does not touch the principal's set of ids: the set may hold ids
// already spent. Add trusts its size while it is under the cap; at the cap
// it trims it to the ids still in the pending set and unexpired, then
// decides. So a principal who asks and answers in turn trims once per
// MaxPendingPerPrincipal questions, and only one who keeps its cap full
// pays a trim (O(cap) commands inside the script) on every Add.
//
// Expires itself is set by the issuing replica's clock ([ledger.Ledger]'s
// Now): a skew between that clock and Redis's lengthens or shortens the
// TTL by the skew. Redis expires keys by the millisecond, so a
// confirmation stops being redeemable when Redis's clock reaches its
// Expires rounded down to the millisecond: up to 1 ms early, never late.
// One added in the millisecond before that is expired at once: up to 2 ms
// early (see tokenDeadline).
//
// The entry's key expires at Expires plus [Options.Grace]: until then a
// replayed or late answer is refused as spent, cancelled or expired;
// afterwards the keys are gone and the answer is refused as unknown.
// Nothing needs sweeping and the store starts no goroutines.
//
// A command that go-redis retries after a lost reply (a dropped connection)
// is recognised: each call carries a random nonce, kept in the entry (Add)
// or in its marker (Spend), and a retry of the call that already added or
// spent the entry gets that success back instead of [ledger.ErrExists] or
// [ledger.ErrSpent].
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
// whatever its state, and one list until Expires (MEMORY USAGE reports 264
// and 200 bytes for the default namespace and short fields, on Redis 7.0;
// long fields add their length to the string), plus one sorted-set member
// (about 130 bytes) until it is spent. A member that expires unspent is
// dropped only when the namespace reaches MaxPending, or with the whole set
// when its last member expires. Each principal with a confirmation in the
// last TTL has a sorted set of at most MaxPendingPerPrincipal ids, which
// expires with its last-expiring member (MEMORY USAGE: 200 bytes with one
// id, 5,256 with 100, on Redis 7.0). MaxPending bounds the pending
// confirmations of a namespace, and MaxPendingPerPrincipal those of a
// principal; they do not bound spent ones, which are at most the spend
// rate times (TTL + Grace), nor the number of principals (authenticate
// callers, so that each principal costs an attacker an identity). Set
// maxmemory with headroom.
//
// Keys are Namespace+"c3:"+hex(id) for entries, Namespace+"t3:"+hex(id)
// for tokens, Namespace+"pending" for the set of pending ids, scored by
// expiry, and Namespace+"u:"+hex(SHA-256(principal)) for each principal's
// set of ids, scored alike. Add touches all four and Spend three, so on
// Redis Cluster the namespace must contain a hash tag ("{...}", as the
// default does) to put them in one slot. The store needs Redis 7.0 or later (SET NX GET, PEXPIREAT GT):
// [Open] checks; with [New], the caller must.
//
// Versions before this layout kept each entry as a hash under
// Namespace+"c:", or as one string, state included, under Namespace+"c2:".
// Those entries are never read: a confirmation issued before an upgrade is
// refused as unknown (safe: the person is asked again), and its key
// expires at its own Expires+Grace. All layouts share the pending set, so
// during a rolling upgrade old and new replicas count against one
// MaxPending. A key in the namespace of a type this store does not write
// (WRONGTYPE), a mangled entry, or a token whose entry is gone fails the
// call with an error that is no ledger answer, and Add never overwrites
// it.
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
// operation is one round trip whose cost is the round trip and the
// server's work, not the client's encoding (a CPU profile of
// BenchmarkIssueRedeem, which runs beside a bare SET+GETDEL floor, shows
// the client busy less than a tenth of the wall time).
package redisledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
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
	// MaxPendingPerPrincipal caps the unexpired pending confirmations of
	// any one principal in the namespace, so that one caller cannot
	// starve the others: Add fails with [ledger.ErrFull] beyond it.
	// Default [ledger.DefaultMaxPendingPerPrincipal].
	MaxPendingPerPrincipal int
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
// Add and Spend each make one round trip (a script; three commands in a
// pipeline), and a Spend that loses to another makes a second to read the
// winner's marker. An error that is not one of the ledger's sentinels —
// Redis unreachable, a deadline, a closed store — means the outcome is
// unknown, as [ledger.Store] requires.
type Store struct {
	client     redis.UniversalClient
	own        bool // Close closes client
	closed     atomic.Bool
	ns         string
	entries    string // key prefix of entries
	tokens     string // key prefix of tokens
	pendingKey string
	principals string // key prefix of the principals' sets
	grace      time.Duration
	maxPending int
	maxArg     any // maxPending, boxed once rather than on every Add
	maxPer     int
	maxPerArg  any // maxPer, boxed once
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
	if opts.MaxPendingPerPrincipal < 0 {
		return nil, fmt.Errorf("redisledger: negative MaxPendingPerPrincipal %d", opts.MaxPendingPerPrincipal)
	}
	s := &Store{client: client, ns: opts.Namespace, grace: opts.Grace, maxPending: opts.MaxPending, maxPer: opts.MaxPendingPerPrincipal}
	if s.ns == "" {
		s.ns = DefaultNamespace
	}
	if s.grace == 0 {
		s.grace = ledger.DefaultGrace
	}
	if s.maxPending == 0 {
		s.maxPending = DefaultMaxPending
	}
	if s.maxPer == 0 {
		s.maxPer = ledger.DefaultMaxPendingPerPrincipal
	}
	s.entries, s.tokens, s.pendingKey, s.principals = s.ns+"c3:", s.ns+"t3:", s.ns+"pending", s.ns+"u:"
	s.maxArg, s.maxPerArg = s.maxPending, s.maxPer
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

// A confirmation is two keys. Its entry holds the confirmation, written
// once by Add and never changed: a header of fixed width, which the Add
// script reads, then the fields, which only Go reads.
//
//	offset  size  what
//	0       16    nonce of the Add that made it
//	16      19    Expires in unix microseconds, rounded up, as zero-padded
//	              decimal digits: the Add script scores the pending set
//	              with it
//	35      ...   Tool, ArgsDigest, Principal, Subject, each as a uvarint
//	              length and its bytes; then Expires exactly
//	              (time.MarshalBinary)
//
// The token key is a list, ["p"] while the confirmation is pending; its key
// expiry is Expires (see tokenDeadline). Spend pushes a marker — the target
// state and the call's nonce — onto its head with LPUSHX, so the list's
// second element from the tail is the marker of the Spend that won.
//
// The Add script spells the header's offsets out (Lua counts from 1): keep
// them in step.
const (
	nonceLen = 16
	offExp   = nonceLen
	headLen  = offExp + 19 // 19 digits hold every non-negative int64

	stateRedeemed  = 'r'
	stateCancelled = 'c'
)

// addScript adds a pending confirmation if its keys are free and both the
// namespace and the principal have room. KEYS: entry, pending set, token,
// the principal's set. ARGV: the entry's value, the entry key's deadline
// (unix ms), the pending set's deadline for this member (unix ms), max
// pending, the token's deadline (unix ms), max pending per principal.
// Returns 1 (added), 0 (exists), -1 (namespace full) or -2 (principal
// full).
var addScript = redis.NewScript(`
local function exists(v)
  if string.sub(v, 1, 16) == string.sub(ARGV[1], 1, 16) then return 1 end -- a client retry of this very Add
  return 0
end
-- A token outlives its entry only if something else deleted the entry:
-- refuse rather than count a stale marker, or overwrite a foreign key.
if redis.call('EXISTS', KEYS[3]) == 1 then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end
  return redis.error_reply('token without its entry')
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
-- The principal's set holds every id it was given that may still be
-- pending; Spend does not touch it. Only when it reaches the cap is it
-- trimmed to the exact count, which leaves that many Adds before the
-- next trim: amortized, each Add costs O(1) unless the principal keeps
-- its cap full, and then the trim (O(cap)) is that principal's.
local m = redis.call('ZCARD', KEYS[4])
if m >= tonumber(ARGV[6]) then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end -- reported before full
  -- What is no longer pending stops counting: an expired id, and one a
  -- Spend (or a full namespace's trim) has dropped from the pending set.
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    if not redis.call('ZSCORE', KEYS[2], id) then redis.call('ZREM', KEYS[4], id) end
  end
  m = redis.call('ZCARD', KEYS[4])
  if m >= tonumber(ARGV[6]) then return -2 end
end
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PXAT', ARGV[2])
if v then return exists(v) end
redis.call('RPUSH', KEYS[3], 'p')
redis.call('PEXPIREAT', KEYS[3], ARGV[5]) -- a deadline already past deletes it: expired at once
local score, member = string.sub(ARGV[1], 17, 35), string.sub(KEYS[1], -32)
redis.call('ZADD', KEYS[2], score, member)
redis.call('ZADD', KEYS[4], score, member)
-- A set lives as long as its last-expiring member. GT never shortens its
-- expiry, but never sets one on a key without: a new set gets it plainly.
if n == 0 then
  redis.call('PEXPIREAT', KEYS[2], ARGV[3])
else
  redis.call('PEXPIREAT', KEYS[2], ARGV[3], 'GT')
end
if m == 0 then
  redis.call('PEXPIREAT', KEYS[4], ARGV[3])
else
  redis.call('PEXPIREAT', KEYS[4], ARGV[3], 'GT')
end
return 1
`)

// keys returns the confirmation's entry key and token key, and its member
// in the pending set: the id in hex, which the Add script cuts off the
// entry key.
func (s *Store) keys(id ledger.ID) (entry, token, member string) {
	var h [2 * len(id)]byte
	hex.Encode(h[:], id[:])
	member = string(h[:])
	return s.entries + member, s.tokens + member, member
}

// principalKey returns the key of the set of principal's confirmations:
// its SHA-256, so that any name, however long, makes a short key, and
// different names different keys.
func (s *Store) principalKey(principal string) string {
	h := sha256.Sum256([]byte(principal))
	return s.principals + hex.EncodeToString(h[:])
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
	entry, token, _ := s.keys(c.ID)
	res, err := addScript.Run(ctx, s.client, []string{entry, s.pendingKey, token, s.principalKey(c.Principal)},
		v, keyDeadline(c.Expires.Add(s.grace)), keyDeadline(c.Expires), s.maxArg, tokenDeadline(c.Expires), s.maxPerArg).Int64()
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
	case -2:
		return fmt.Errorf("%w: %d pending for this principal in namespace %q", ledger.ErrFull, s.maxPer, s.ns)
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

// spend is the compare-and-set: one round trip of three plain commands.
// LPUSHX of the call's marker onto the token decides, atomically on the
// server: it finds the token only while it exists (pending or spent, and
// not past Expires on Redis's clock), and only the first push makes a list
// of two. GET reads the entry, which never changes; ZREM drops the id from
// the pending set, which every contender may do. A contender that pushed
// later reads the winner's marker in a second round trip.
func (s *Store) spend(ctx context.Context, id ledger.ID, to ledger.State, nonce [nonceLen]byte) (ledger.Confirmation, error) {
	var marker [1 + nonceLen]byte
	switch to {
	case ledger.Redeemed:
		marker[0] = stateRedeemed
	case ledger.Cancelled:
		marker[0] = stateCancelled
	default:
		return ledger.Confirmation{}, fmt.Errorf("redisledger: cannot spend into state %v", to)
	}
	copy(marker[1:], nonce[:])
	if s.closed.Load() {
		return ledger.Confirmation{}, errClosed
	}
	entryKey, token, member := s.keys(id)
	var (
		pushed  *redis.IntCmd
		entry   *redis.StringCmd
		removed *redis.IntCmd
	)
	// Errors are read per command below: Pipelined's own is the first
	// command's that failed, and a missing entry (redis.Nil) is an answer.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		pushed = p.LPushX(ctx, token, marker[:])
		entry = p.Get(ctx, entryKey)
		removed = p.ZRem(ctx, s.pendingKey, member)
		return nil
	})
	n, err := pushed.Result()
	if err != nil {
		return ledger.Confirmation{}, s.callError("spend", id, err)
	}
	v, err := entry.Result()
	found := err == nil
	if err != nil && !errors.Is(err, redis.Nil) {
		return ledger.Confirmation{}, s.callError("spend", id, err)
	}
	if err := removed.Err(); err != nil {
		return ledger.Confirmation{}, s.callError("spend", id, err)
	}
	switch {
	case n == 0 && !found:
		return ledger.Confirmation{}, ledger.ErrUnknown // never added, or gone at Expires+Grace
	case n == 0:
		// The token is gone at Expires: expired, whatever its state.
		if _, err := decode(id, v); err != nil {
			return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
		return ledger.Confirmation{}, ledger.ErrExpired
	case n == 2:
		return s.won(id, v, found)
	case n < 2:
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w: token of %d", id, errCorrupt, n)
	}
	return s.lost(ctx, id, token, marker, v, found)
}

// won returns the confirmation that a Spend took. A missing or mangled
// entry is an error: the token is spent, and the caller must not act.
func (s *Store) won(id ledger.ID, v string, found bool) (ledger.Confirmation, error) {
	if !found {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w: token without its entry", id, errCorrupt)
	}
	c, err := decode(id, v)
	if err != nil {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
	}
	return c, nil
}

// lost answers a Spend whose marker was not the first pushed: it reads the
// winner's marker and trims the list back to it, so that replays cannot
// grow it. The winner's marker is the Spend's own when go-redis resent the
// call after losing the reply: then it gets its success back.
func (s *Store) lost(ctx context.Context, id ledger.ID, token string, marker [1 + nonceLen]byte, v string, found bool) (ledger.Confirmation, error) {
	var winner *redis.StringCmd
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		winner = p.LIndex(ctx, token, -2)
		p.LTrim(ctx, token, -2, -1)
		return nil
	})
	w, err := winner.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return ledger.Confirmation{}, ledger.ErrExpired // gone at Expires since the push
	case err != nil:
		return ledger.Confirmation{}, s.callError("spend", id, err)
	case w == string(marker[:]):
		return s.won(id, v, found)
	case len(w) == len(marker) && w[0] == stateRedeemed:
		return ledger.Confirmation{}, ledger.ErrSpent
	case len(w) == len(marker) && w[0] == stateCancelled:
		return ledger.Confirmation{}, ledger.ErrCancelled
	}
	return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w: token marker %q", id, errCorrupt, w)
}

// callError describes a failed call. A key of the wrong type means
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
	rand.Read(v[:offExp])              // never fails: it crashes the program instead
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

// tokenDeadline is the token's PXAT argument for Expires t: Redis keeps a
// key through the millisecond of its deadline and drops it when its clock
// passes it, so the token is pending exactly while Redis's clock, in whole
// milliseconds, is before t rounded down to the millisecond: never past t,
// up to 1 ms before it. Redis deletes at once a key given a deadline that
// is not after its clock's millisecond, so an Add in the deadline's own
// millisecond finds the token expired: up to 2 ms before t, and still never
// past it. At least 1, as keyDeadline.
func tokenDeadline(t time.Time) int64 {
	return max(t.UnixMilli()-1, 1)
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
