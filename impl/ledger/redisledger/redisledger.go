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
// ([ledger.ErrExists]) and, when the namespace already holds
// [Options.MaxPending] unexpired pending confirmations, refuses with
// [ledger.ErrFull]. Every field round-trips byte for byte (Redis strings and
// Lua strings are binary-safe).
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
// is recognised by the script: each call carries a random nonce, and a
// retry of the call that already spent the entry gets that success back
// instead of [ledger.ErrSpent].
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
// Memory: every Add costs one hash that lives until Expires+Grace, whatever
// its state (MEMORY USAGE reports about 420 bytes for short fields; long
// fields add their length), plus one sorted-set member while it is
// pending.
// MaxPending bounds the pending confirmations of a namespace; it does not
// bound spent ones, which are at most the spend rate times (TTL + Grace).
// There is no per-principal cap (the in-memory store has one): callers who
// need it must rate-limit principals before Issue. Set maxmemory with
// headroom.
//
// Keys are Namespace+"c:"+hex(id) for entries and Namespace+"pending" for
// the set of pending ids. Add and Spend touch both keys in one script, so
// on Redis Cluster the namespace must contain a hash tag ("{...}", as the
// default does) to put them in one slot.
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
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
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
	pendingKey string
	grace      time.Duration
	maxPending int
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
	s.pendingKey = s.ns + "pending"
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
		msg := scrub(err.Error(), ropts.Password)
		if msg != err.Error() {
			return nil, fmt.Errorf("redisledger: connect to %s: %s", ropts.Addr, msg)
		}
		return nil, fmt.Errorf("redisledger: connect to %s: %w", ropts.Addr, err)
	}
	return s, nil
}

// parseError describes why rawURL did not parse without echoing it: a
// *url.Error quotes the whole URL, password included, and the reasons
// quote parts of it.
func parseError(rawURL string, err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	msg := err.Error()
	for _, pw := range passwords(rawURL) {
		msg = scrub(msg, pw)
	}
	return "invalid URL (not shown): " + msg
}

// passwords returns what may be the password in rawURL: the parsed one, or
// for a URL that does not parse, the text between the first ':' of the
// user info and the first or the last '@'.
func passwords(rawURL string) []string {
	if u, err := url.Parse(rawURL); err == nil {
		if pw, ok := u.User.Password(); ok {
			return []string{pw}
		}
		return nil
	}
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil
	}
	var pws []string
	for _, at := range []int{strings.Index(rest, "@"), strings.LastIndex(rest, "@")} {
		if at < 0 {
			continue
		}
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			pws = append(pws, pw)
		}
	}
	return pws
}

// scrub replaces every occurrence of secret in msg.
func scrub(msg, secret string) string {
	if secret == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "xxxxx")
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

// Fields of an entry's hash.
const (
	fState     = "state"     // pending, redeemed or cancelled
	fExp       = "exp"       // Expires in unix microseconds, rounded up: the script compares it with TIME
	fAdd       = "add"       // nonce of the Add that made the entry
	fBy        = "by"        // nonce of the Spend that spent it
	fExpires   = "expires"   // Expires exactly (time.MarshalBinary)
	fTool      = "tool"      // the Confirmation's fields, verbatim
	fArgs      = "args"      //
	fPrincipal = "principal" //
	fSubject   = "subject"   //
)

// addScript adds a pending entry if its key is free and the namespace has
// room. KEYS: entry, pending set. ARGV: nonce, exp (µs), key deadline (ms),
// max pending, member, expires, tool, args, principal, subject.
// Returns 1 (added), 0 (exists) or -1 (full).
var addScript = redis.NewScript(`
local by = redis.call('HGET', KEYS[1], 'add')
if by then
  if by == ARGV[1] then return 1 end -- a client retry of this very Add
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Expired pending confirmations can never be redeemed: they stop counting.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
redis.call('HSET', KEYS[1], 'state', 'pending', 'exp', ARGV[2], 'add', ARGV[1],
  'expires', ARGV[6], 'tool', ARGV[7], 'args', ARGV[8], 'principal', ARGV[9],
  'subject', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
if tonumber(ARGV[2]) > now then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
  -- The set lives as long as its last-expiring member.
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[2], math.floor(tonumber(last[2]) / 1000) + 1)
end
return 1
`)

// spendScript is the compare-and-set. KEYS: entry, pending set. ARGV:
// target state, nonce, member. Returns the entry's fields (expires, tool,
// args, principal, subject) on success, else a code: 0 unknown,
// 1 expired, 2 redeemed, 3 cancelled.
var spendScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'state', 'exp', 'by')
local state = v[1]
if not state then return 0 end -- never added, or gone at Expires+Grace
local function fields()
  return redis.call('HMGET', KEYS[1], 'expires', 'tool', 'args', 'principal', 'subject')
end
if state == ARGV[1] and v[3] == ARGV[2] then return fields() end -- a client retry of this very Spend
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now >= tonumber(v[2]) then return 1 end -- expired, whatever its state
if state == 'redeemed' then return 2 end
if state == 'cancelled' then return 3 end
if state ~= 'pending' then return redis.error_reply('redisledger: corrupt entry state') end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'by', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return fields()
`)

func (s *Store) key(id ledger.ID) string { return s.ns + "c:" + id.String() }

// Add implements [ledger.Store].
func (s *Store) Add(ctx context.Context, c ledger.Confirmation) error {
	if s.closed.Load() {
		return errClosed
	}
	expires, err := c.Expires.MarshalBinary()
	if err != nil {
		return fmt.Errorf("redisledger: add %s: expiry: %w", c.ID, err)
	}
	nonce, err := newNonce()
	if err != nil {
		return fmt.Errorf("redisledger: add %s: %w", c.ID, err)
	}
	res, err := addScript.Run(ctx, s.client, []string{s.key(c.ID), s.pendingKey},
		nonce, ceilMicro(c.Expires), keyDeadline(c.Expires.Add(s.grace)), s.maxPending, c.ID.String(),
		expires, c.Tool, c.ArgsDigest, c.Principal, c.Subject).Int64()
	if err != nil {
		return fmt.Errorf("redisledger: add %s: %w", c.ID, err)
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
	nonce, err := newNonce()
	if err != nil {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
	}
	return s.spend(ctx, id, to, nonce)
}

func (s *Store) spend(ctx context.Context, id ledger.ID, to ledger.State, nonce string) (ledger.Confirmation, error) {
	if to != ledger.Redeemed && to != ledger.Cancelled {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: cannot spend into state %v", to)
	}
	if s.closed.Load() {
		return ledger.Confirmation{}, errClosed
	}
	res, err := spendScript.Run(ctx, s.client, []string{s.key(id), s.pendingKey},
		to.String(), nonce, id.String()).Result()
	if err != nil {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
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
	case []any:
		return decode(id, res)
	}
	return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: unexpected reply %v", id, res)
}

// decode rebuilds a confirmation from the spend script's reply.
func decode(id ledger.ID, vals []any) (ledger.Confirmation, error) {
	if len(vals) != 5 {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: reply has %d fields, want 5", id, len(vals))
	}
	var f [5]string
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: field %d missing", id, i)
		}
		f[i] = s
	}
	c := ledger.Confirmation{ID: id, Tool: f[1], ArgsDigest: f[2], Principal: f[3], Subject: f[4]}
	if err := c.Expires.UnmarshalBinary([]byte(f[0])); err != nil {
		return ledger.Confirmation{}, fmt.Errorf("redisledger: spend %s: expiry: %w", id, err)
	}
	return c, nil
}

// newNonce returns 16 random bytes that tell one call's retries apart from
// every other call.
func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
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

// keyDeadline is the PEXPIREAT argument for t: unix milliseconds, rounded
// up, and at least 1 (a deadline in the past deletes the key at once).
func keyDeadline(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%1_000_000 != 0 {
		ms++
	}
	return max(ms, 1)
}
