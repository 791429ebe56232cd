// Package redisledger is a [ledger.Store] kept in Redis, shared by every
// server replica that opens the same namespace, so that a confirmation
// issued by one replica behind a load balancer is redeemed — once — by
// whichever replica the answer reaches, and survives a replica's restart.
//
// # What it guarantees
//
// A confirmation is two keys: its entry, written once by Add and never
// changed, and, once it is spent, its record: the state it is in (acting,
// done, failed, in doubt, cancelled), the end of its lease and, once
// recorded, the outcome. Spend and Complete are each one Lua script, which
// Redis runs atomically, deciding on the Redis server's clock (TIME, in
// microseconds, inside the script): Spend creates the record only if none
// exists and the entry has not reached its Expires, so of any number of
// concurrent Spend calls for one id, from any number of processes, at most
// one succeeds, and every later one is answered from the record (in
// progress, done with the recorded outcome, in doubt, or cancelled). It
// sets the lease's end to the server's clock plus the lease. Complete
// writes the outcome only if the record is acting and the server's clock
// is before the lease's end — a compare-and-set: a late writer finds the
// confirmation in doubt and changes nothing. A script that finds a lease
// ended without an outcome writes "in doubt" into the record, for good.
//
// Add is a Lua script too: it refuses an id that exists
// ([ledger.ErrExists], even when full) and, when the namespace already
// holds [Options.MaxPending] unexpired pending confirmations or the
// confirmation's principal (compared byte for byte) holds
// [Options.MaxPendingPerPrincipal], refuses with [ledger.ErrFull], so that
// one caller cannot starve the others. Redis runs a script atomically, so
// Adds racing from any number of replicas never admit one past a cap.
// Every field round-trips byte for byte, and Expires to the nanosecond
// with its zone offset: the store encodes them, length-prefixed, into one
// binary-safe Redis string that the scripts never parse beyond its header.
// A winning Spend drops the id from the set that counts pending
// confirmations, in the same step.
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
// TTL by the skew. Expiry is decided to the microsecond: a confirmation is
// redeemable while Redis's clock is before its Expires.
//
// The keys expire at Expires, or the lease's end if that is later, plus
// [Options.Grace]: until then every retry is answered from the record (or
// refused as expired, for one never spent); afterwards the keys are gone
// and the answer is unknown. Nothing needs sweeping and the store starts
// no goroutines.
//
// Out-of-band approval: a confirmation that needs it has a third key, its
// decisions. Spend will not move it to acting until the decisions hold
// the approvals it needs (the same script checks). Decide reads the entry
// and checks the approver against its Approval in Go (the entry never
// changes), then runs one script that checks the entry is the one read
// and, atomically on Redis's clock, records the decision only if the
// confirmation is pending and unexpired, this approver has not decided
// and the outcome is not decided (all approvals in, or a decline); a
// decline writes the record, cancelled, and drops the id from the pending
// set in the same step. A replica of a version before out-of-band
// approval finds no expiry in such an entry's header and refuses it as
// corrupt, rather than redeem it unapproved.
//
// A command that go-redis retries after a lost reply (a dropped connection)
// is recognised: each call carries a random nonce, kept in the entry (Add),
// the record (Spend, Complete) or the decision (Decide), and a retry of the
// call that already added, spent, completed or decided gets that success
// back instead of [ledger.ErrExists], an answer from the record,
// [ledger.ErrDone] or [ledger.ErrDecided].
//
// # Replicas and failover
//
// Redis replication is asynchronous: a primary acknowledges a write before
// any replica has it, and a failover to a replica that had not received a
// Spend makes the confirmation pending there, redeemable a second time.
// With [Options.Replicas] = N (replicas=N in the URL), every call that
// writes — Add, Spend, Complete, Decide — is followed, in the same round
// trip on the same connection, by WAIT N: the call answers only once N
// replicas acknowledged everything the primary had applied when its
// script ran (on Redis 7.0, what it read as well as what it wrote: a
// retry answered from a record another server replica wrote gets its
// answer only once that record is on N replicas). A Spend is
// acted on only after N replicas hold it, and a retry is told an outcome
// only after N replicas hold it. If fewer acknowledge within
// [Options.ReplicaTimeout], the call fails with [ErrNotReplicated]: its
// outcome is unknown, the caller does not act, and the confirmation is
// in doubt — a retry is answered from the record (in progress, then in
// doubt once its lease ends), or, if a failover lost the unacknowledged
// Spend, finds it pending and may redeem it, once: the first Spend was
// never acted on. A redis-sentinel:// URL ([Open]) follows failovers
// with go-redis's failover client. TestRedisFailover (linearizability)
// kills the primary of a primary, a replica and three Sentinels while
// approvals are redeemed and acted on, and retries every approval
// through the promoted replica: none acts twice, and porcupine finds the
// history linearizable across the failover; its control, without WAIT,
// acts twice.
//
// What WAIT does not give: WAIT is not consensus. It counts replicas that
// received a write; Sentinel promotes the replica with the most data it
// can reach, but if every replica that acknowledged is down too, it may
// promote one that did not. Wait for every replica (CheckDurability
// refuses fewer): then whichever is promoted holds every acknowledged
// write. A primary cut off from its replicas and clients that still reach
// it (a partition) applies writes no replica acknowledges: those calls
// fail, closed, and are lost when it rejoins as a replica. Lookup does not
// WAIT: an approval page may show a decision a failover then loses.
// Redis Cluster is not supported with Replicas (WAIT would reach another
// node than the script).
//
// # What it does not guarantee
//
// At-most-once holds only while Redis keeps every acknowledged write:
// without Replicas, a failover to a replica loses the writes it had not
// received (above). Restoring an RDB snapshot or an AOF older than the
// last Spend does the same. Run a single primary, or persistence with
// appendfsync always, or no persistence at all (a restarted Redis forgets
// every confirmation, and forgotten confirmations are refused as unknown:
// safe, only the pending approvals and the recorded outcomes are lost).
// Losing keys to eviction (maxmemory) is safe in the same way. The
// scripts read Redis's wall clock: set back by more than a lease, it would
// see a lease not yet ended that it had seen ended — except that the
// first script to see it ended writes so. After a failover they read the
// promoted replica's clock: a skew between the two machines moves expiry
// and leases by the skew.
//
// Memory: every Add costs one string that lives until Expires+Grace (MEMORY
// USAGE reports 264 bytes for the default namespace and short fields, on
// Redis 7.0; long fields add their length), and every Spend one string,
// its record, that lives as long (or to the lease's end plus Grace, if
// later): about 120 bytes, plus the outcome recorded, which the ledger
// bounds ([ledger.Options.MaxResult], 64 KiB by default). Until it is
// spent the confirmation is also a sorted-set member (about 130 bytes). A
// member that expires unspent is dropped only when the namespace reaches
// MaxPending, or with the whole set when its last member expires. Each
// principal with a confirmation in the last TTL has a sorted set of at
// most MaxPendingPerPrincipal ids, which expires with its last-expiring
// member (MEMORY USAGE: 200 bytes with one id, 5,256 with 100, on Redis
// 7.0). MaxPending bounds the pending confirmations of a namespace, and
// MaxPendingPerPrincipal those of a principal; they do not bound spent
// ones, which are at most the spend rate times (TTL + Grace) (or the
// lease plus Grace, if longer), nor the number of principals (authenticate
// callers, so that each principal costs an attacker an identity). A
// confirmation that needs out-of-band approval also keeps its Approval in
// its entry (its question up to [ledger.MaxQuestion] bytes) and a hash of
// at most [ledger.MaxRequired]+1 decisions, as long as the entry. Set
// maxmemory with headroom.
//
// Keys are Namespace+"c4:"+hex(id) for entries, Namespace+"r4:"+hex(id)
// for records, Namespace+"d4:"+hex(id) for decisions, Namespace+"pending"
// for the set of pending ids, scored by expiry, and
// Namespace+"u:"+hex(SHA-256(principal)) for each principal's set of ids,
// scored alike; with [Options.Audit], Namespace+"a1:log",
// Namespace+"a1:head" and Namespace+"a1:cp" for the audit trail (below).
// Add touches four, Spend and Decide four (each two more with the trail),
// so on Redis Cluster the namespace must contain a hash tag ("{...}", as
// the default does) to put them in one slot. The store needs Redis 7.0 or
// later (PEXPIREAT GT): [Open] checks; with [New], the caller
// must.
//
// Versions before this layout kept each entry as a hash under
// Namespace+"c:", as one string, state included, under Namespace+"c2:",
// or as a string under "c3:" beside a token list under "t3:" (no outcome
// recorded). Those entries are never read: a confirmation issued before an
// upgrade is refused as unknown (safe: the person is asked again), and its
// keys expire at its own Expires+Grace. All layouts share the pending set,
// so during a rolling upgrade old and new replicas count against one
// MaxPending. A key in the namespace of a type this store does not write
// (WRONGTYPE), a mangled entry or record, or a record whose entry is gone
// fails the call with an error that is no ledger answer, and Add never
// overwrites it.
//
// # Audit trail
//
// With [Options.Audit], the store keeps the namespace's audit trail
// (package audit) and is its [audit.Trail]: every Add that adds, every
// Spend, Decide and Complete, and each of their refusals the trail records
// ([audit.Recorded]: not a refused Add, nor a poll awaiting approval), appends
// one record — in the same Lua script that decides and makes the
// transition, so that there is no transition without its record and no
// record without its transition, and WAIT ([Options.Replicas]) covers
// both. A Decide refused in Go (unknown, not an approver, self-approval)
// appends its record with a script of its own. A client retry of a call
// that already succeeded (the nonces above) adds no second record.
//
// Each record is the caller's prefix ([ledger.AuditSpend]...) and the
// suffix the script decides ([audit.Seal]: seq, Redis's TIME in unix
// microseconds, the result, the previous record's SHA-256). Redis's Lua
// has no SHA-256: Go hashes the prefix's whole 64-byte blocks
// ([luasha256.Midstate]) and the script finishes the hash in Lua
// (internal/luasha256) over the rest — three or four blocks, whatever the
// question's length. That is most of what a record costs: about 105 µs
// of Redis's time per record (the server runs nothing else meanwhile), so
// an audited Spend took 4.2 × a plain one on loopback, where a plain
// Spend is a 37 µs round trip (BenchmarkAuditedSpend). The alternative,
// sealing in Go and appending only if the head is still the one Go read
// (a compare-and-set), costs Redis almost nothing but makes every
// concurrent writer of the namespace retry round trips on one head, and
// the record's time the replica's clock: the cost of Lua is bounded, and
// the same under contention.
//
// Redis does not roll back a script that fails half-way. Each script
// therefore makes every check first — the trail's included: a corrupt
// head, or a log that is not a list, fails the call before anything is
// written — then its writes, the record's last; the writes that follow
// cannot fail. (Add may trim expired and spent ids from the sets that
// count pending confirmations before it checks the trail: what the next
// Add would do, no transition.) A lease that ended without an outcome is
// written as in doubt by the next script that finds it, without a record
// of its own: the trail holds the redemption with no outcome, and the
// refusal ("in_doubt") of the call that found it.
//
// The trail's keys never expire, so it grows by each record's length
// (a few hundred bytes, plus the question on an Add) until an operator
// exports and removes it; removing records from its front breaks the
// chain there, as audit.Verify reports. Eviction that may pick any key
// (maxmemory-policy allkeys-*) can delete the trail: run noeviction or a
// volatile-* policy (the trail has no TTL, so those never pick it).
// Restoring an older snapshot truncates the trail with the ledger:
// verify against the signed checkpoints kept elsewhere to see it.
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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
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
	// Replicas, if positive, is how many replicas must acknowledge every
	// write (Redis's WAIT) before Add, Spend, Complete or Decide answers:
	// a Spend is acted on, and a retry told an outcome, only once that
	// many replicas hold it, so that a failover to one of them cannot
	// make a spent confirmation pending again. A write they do not
	// acknowledge within ReplicaTimeout fails with [ErrNotReplicated]:
	// its outcome is unknown, and nothing is acted on. Zero (the
	// default): no WAIT, for a server without replicas. It needs a
	// *redis.Client (one server, or Sentinel's failover client): a Redis
	// Cluster client is refused. See the package doc.
	Replicas int
	// ReplicaTimeout is how long each write waits for Replicas
	// acknowledgements. Default [DefaultReplicaTimeout].
	ReplicaTimeout time.Duration
	// Audit keeps the namespace's audit trail (package audit): every
	// Add, Spend, Decide and Complete appends its record, in the same
	// script as its transition, to a list in the namespace that never
	// expires, and the Store is the trail's [audit.Trail]. A call whose
	// record cannot be written (a corrupt trail) fails, changing
	// nothing. Each record costs about 100 µs of Redis's time, with
	// everything else waiting (the script hashes it). See the package
	// doc.
	Audit bool
	// Observe, if set, is called after every Add (as Issue), Spend (as
	// Redeem or Cancel), Complete and Decide with its event, for trace
	// validation (spec/trace): made from what the call's script replied,
	// timed by the Redis clock the script decided on, and numbered
	// ([ledger.Event.Seq]) by a counter the same script increments, the
	// key Namespace+"trace" (which does not expire) -- so the events,
	// which arrive in the order the calls return, can be put in the
	// order Redis ran them. A Decide refused before its script runs
	// (unknown, in band, the requester, not an approver) is timed and
	// numbered by the script that read the entry it was refused on. It
	// costs one INCR per call. ctx is the call's; Observe must be safe
	// for concurrent use and fast.
	Observe func(ctx context.Context, e ledger.Event)
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
	records    string // key prefix of records
	pendingKey string
	principals string // key prefix of the principals' sets
	decisions  string // key prefix of the decisions on confirmations
	grace      time.Duration
	graceArg   any // grace in milliseconds, rounded up, boxed once
	maxPending int
	maxArg     any // maxPending, boxed once rather than on every Add
	maxPer     int
	maxPerArg  any // maxPer, boxed once
	// replicas and replicaTimeout are Options.Replicas and
	// Options.ReplicaTimeout (see run).
	replicas       int
	replicaTimeout time.Duration
	// audit is Options.Audit; auditHead, auditLog and auditCheckpoints
	// the trail's keys; auditFault, if set, fails every audited script
	// after its record is sealed, before any write, while it returns an
	// error (tests: export_test.go).
	audit                                 bool
	auditHead, auditLog, auditCheckpoints string
	auditFault                            func() error
	// observe and traceKey are Options.Observe and the key of its counter.
	observe  func(context.Context, ledger.Event)
	traceKey string
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
	if err := checkReplicas(client, opts); err != nil {
		return nil, err
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
	s.entries, s.records, s.pendingKey, s.principals = s.ns+"c4:", s.ns+"r4:", s.ns+"pending", s.ns+"u:"
	s.decisions = s.ns + "d4:"
	s.observe, s.traceKey = opts.Observe, s.ns+"trace"
	s.audit, s.auditHead, s.auditLog, s.auditCheckpoints = opts.Audit, s.ns+"a1:head", s.ns+"a1:log", s.ns+"a1:cp"
	s.replicas, s.replicaTimeout = opts.Replicas, opts.ReplicaTimeout
	if s.replicas > 0 && s.replicaTimeout == 0 {
		s.replicaTimeout = DefaultReplicaTimeout
	}
	s.maxArg, s.maxPerArg, s.graceArg = s.maxPending, s.maxPer, ceilDuration(s.grace, time.Millisecond)
	return s, nil
}

// Open connects to the Redis server rawURL names, checks that it answers,
// and returns a store that owns the connection pool. Commands honour
// context deadlines. Errors name the server but never the URL's password.
//
// rawURL is redis://, rediss:// or unix://, as [redis.ParseURL] reads it,
// or redis-sentinel:// for a primary that Sentinel fails over:
//
//	redis-sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/PRIMARY[/DB][?...]
//
// names the Sentinels (their addresses, comma-separated) and the name
// they monitor the primary under; USER and PASSWORD are the Redis
// servers' (the Sentinels' own, if any, are the sentinel_username and
// sentinel_password parameters). The store then follows failovers with
// go-redis's failover client ([redis.NewFailoverClient]): it asks the
// Sentinels where the primary is, and moves to the replica they
// promote. Its other parameters are go-redis's ([redis.ParseFailoverURL]:
// dial_timeout, read_timeout, ...); TLS to Sentinels is not supported.
//
// In every scheme, two parameters are the store's own: replicas=N sets
// [Options.Replicas] (every write waits for N replicas' acknowledgement,
// Redis's WAIT) and wait=DURATION [Options.ReplicaTimeout] (e.g. 500ms).
// A value set both in the URL and in opts must agree.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	tg, opts, err := parseURL(rawURL, opts)
	if err != nil {
		return nil, err
	}
	client := tg.client
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
		msg := redact.Scrub(err.Error(), tg.secrets...)
		if msg != err.Error() {
			return nil, fmt.Errorf("redisledger: connect to %s: %s", tg.server, msg)
		}
		return nil, fmt.Errorf("redisledger: connect to %s: %w", tg.server, err)
	}
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("redisledger: connect to %s: INFO: %w", tg.server, err)
	}
	if v, ok := supported(info); !ok {
		client.Close()
		return nil, fmt.Errorf("redisledger: %s runs Redis %q: this store needs 7.0 or later (PEXPIREAT GT)", tg.server, v)
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
// once by Add and never changed: a header of fixed width, which the
// scripts read, then the fields, which only Go reads.
//
//	offset  size  what
//	0       16    nonce of the Add that made it
//	16      19    Expires in unix microseconds, rounded up, as zero-padded
//	              decimal digits: the scripts decide expiry with it, and
//	              the Add script scores the pending set with it. For a
//	              confirmation that needs out-of-band approval, 'A', the
//	              approvals it needs in 2 digits, then Expires in 16: a
//	              script of an earlier version, which knows nothing of
//	              approvals, finds no number there and refuses it as a
//	              corrupt entry rather than redeem it unapproved
//	35      ...   Tool, ArgsDigest, Principal, Subject, each as a uvarint
//	              length and its bytes; for one that needs out-of-band
//	              approval, then its Requester, Question and the number of
//	              its Approvers and each of them, alike; then Expires
//	              exactly (time.MarshalBinary)
//
// Its record, written by the Spend that won and rewritten by the Complete
// that won:
//
//	offset  size  what
//	0       1     state: 'a' acting, 'd' done, 'f' failed, 'u' in doubt,
//	              'c' cancelled
//	1       16    nonce of the Spend that won
//	17      19    end of the lease in unix microseconds, zero-padded
//	              decimal digits (zero for a cancel)
//	36      16    nonce of the Complete that won (zero bytes until then)
//	52      ...   the outcome recorded, in its binary form
//	              ([ledger.Outcome.MarshalBinary]); none while acting, nor
//	              for a lease that ended without one
//
// A confirmation that needs out-of-band approval has a third key, its
// decisions: a hash with a field "a:"+ID per approver who decided, whose
// value is '+' (approved) or '-' (declined), the decision's number (2
// digits, from 01), the store's clock when it was recorded (19 digits of
// unix microseconds) and the nonce of the Decide that recorded it; "n",
// the number of decisions, and "y", of approvals. A decline also writes
// the record, cancelled, as a Cancel would. The hash lives as long as the
// entry.
//
// The scripts spell these offsets out (Lua counts from 1): keep them in step.
const (
	nonceLen = 16
	offExp   = nonceLen
	headLen  = offExp + 19 // 19 digits hold every non-negative int64

	recLease    = 1 + nonceLen
	recComplete = recLease + 19
	recHead     = recComplete + nonceLen

	// The header of an entry that needs out-of-band approval.
	approvalMark  = 'A'
	approvalExpAt = offExp + 3 // 'A', 2 digits
	maxApprovalUS = 9_999_999_999_999_999

	stateActing    = 'a'
	stateDone      = 'd'
	stateFailed    = 'f'
	stateInDoubt   = 'u'
	stateCancelled = 'c'
)

// expiryLua is the scripts' reading of an entry's header: its expiry in
// unix microseconds (a string of digits, exact; tonumber it to compare)
// and the approvals it needs (0: none, in band).
const expiryLua = `
local function expiry(v)
  if string.sub(v, 17, 17) == 'A' then
    return string.sub(v, 20, 35), tonumber(string.sub(v, 18, 19))
  end
  return string.sub(v, 17, 35), 0
end
`

// addScript adds a pending confirmation if its keys are free and both the
// namespace and the principal have room. KEYS: entry, pending set, record,
// the principal's set, the audit trail's head and log. ARGV: the entry's
// value, the entry key's deadline (unix ms), the pending set's deadline
// for this member (unix ms), max pending, max pending per principal, the
// audit arguments (seal's). Returns 1 (added), 0 (exists), -1 (namespace
// full) or -2 (principal full); only an added one is recorded. Before
// seal it may trim the sets of expired and spent ids: what the next Add
// would do, no transition.
var addScript = stamped(6, `
local function exists(v)
  if string.sub(v, 1, 16) == string.sub(ARGV[1], 1, 16) then return 1 end -- a client retry of this very Add
  return 0
end
-- A record outlives its entry only if something else deleted the entry:
-- refuse rather than make a spent id pending again, or overwrite a
-- foreign key.
if redis.call('EXISTS', KEYS[3]) == 1 then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end
  return redis.error_reply('record without its entry')
end
local n = redis.call('ZCARD', KEYS[2])
if n >= tonumber(ARGV[4]) then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end -- reported before full
  -- Expired pending confirmations can never be redeemed: they stop counting.
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  n = redis.call('ZCARD', KEYS[2])
  if n >= tonumber(ARGV[4]) then return -1 end
end
-- The principal's set holds every id it was given that may still be
-- pending; Spend does not touch it. Only when it reaches the cap is it
-- trimmed to the exact count, which leaves that many Adds before the
-- next trim: amortized, each Add costs O(1) unless the principal keeps
-- its cap full, and then the trim (O(cap)) is that principal's.
local m = redis.call('ZCARD', KEYS[4])
if m >= tonumber(ARGV[5]) then
  local v = redis.call('GET', KEYS[1])
  if v then return exists(v) end -- reported before full
  -- What is no longer pending stops counting: an expired id, and one a
  -- Spend (or a full namespace's trim) has dropped from the pending set.
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    if not redis.call('ZSCORE', KEYS[2], id) then redis.call('ZREM', KEYS[4], id) end
  end
  m = redis.call('ZCARD', KEYS[4])
  if m >= tonumber(ARGV[5]) then return -2 end
end
local v = redis.call('GET', KEYS[1])
if v then return exists(v) end
local rec = seal(5, 6, 'ok') -- every check is done: what follows writes
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
local score, member = expiry(ARGV[1]), string.sub(KEYS[1], -32)
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
write(5, rec)
return 1
`)

// spendScript is the compare-and-set of a Spend. KEYS: entry, record,
// pending set, decisions, the audit trail's head and log. ARGV: the
// record's first bytes (target state, the call's nonce), the lease in
// microseconds, the grace in milliseconds, the audit arguments (seal's).
// Returns {code, entry, record, decisions}: 0 unknown, 1 expired, 2 spent
// by this call (no record: it is as asked) or its retry (with the
// record), 3 spent before (answered from the record), 4 awaiting
// approval; decisions (HGETALL) only for a confirmation that needs
// out-of-band approval. Every answer but a retry's and awaiting approval
// is recorded.
var spendScript = stamped(6, `
local v = redis.call('GET', KEYS[1])
local r = redis.call('GET', KEYS[2])
local need, decs = 0, {}
if v then
  local _, n = expiry(v)
  need = n
  if need > 0 then decs = redis.call('HGETALL', KEYS[4]) end
end
if r then
  if string.sub(r, 2, 17) == string.sub(ARGV[1], 2, 17) and (string.sub(r, 1, 1) == 'c') == (string.sub(ARGV[1], 1, 1) == 'c') then
    return {2, v, r, decs} -- a client retry of this very Spend: recorded once, by the Spend
  end
  local lease = tonumber(string.sub(r, 18, 36))
  local ended = string.sub(r, 1, 1) == 'a' and lease and now >= lease
  if ended then r = 'u' .. string.sub(r, 2) end
  local rec = nil
  -- (A record without its entry is an error, which is not recorded.)
  if v and ARGV[5] ~= '' then rec = seal(5, 4, refusal(string.sub(r, 1, 1), KEYS[4])) end
  -- The lease ended with no outcome recorded: in doubt, for good.
  if ended then redis.call('SETRANGE', KEYS[2], 0, 'u') end
  write(5, rec)
  return {3, v, r, decs}
end
if not v then
  write(5, seal(5, 4, 'unknown'))
  return {0}
end
local exp = tonumber((expiry(v)))
if not exp then return redis.error_reply('corrupt entry') end
if now >= exp then
  write(5, seal(5, 4, 'expired'))
  return {1, v}
end
-- Out-of-band approval: no redemption before the approvals are in,
-- whatever the client says.
if need > 0 and string.sub(ARGV[1], 1, 1) == 'a' and tonumber(redis.call('HGET', KEYS[4], 'y') or '0') < need then
  return {4, v, false, decs}
end
local lease, keep = 0, exp
if string.sub(ARGV[1], 1, 1) == 'a' then
  lease = now + tonumber(ARGV[2])
  keep = math.max(exp, lease)
end
r = ARGV[1] .. string.format('%019d', lease) .. string.rep('\0', 16)
local rec = seal(5, 4, 'ok') -- every check is done: what follows writes
-- ZREM first: the one write that fails on a key of another type.
redis.call('ZREM', KEYS[3], string.sub(KEYS[1], -32))
-- Every key lives to the later of Expires and the lease's end, plus
-- grace: the entry's key already does, unless the lease ends after Expires.
local deadline = math.ceil(keep / 1000) + tonumber(ARGV[3])
redis.call('SET', KEYS[2], r, 'PXAT', deadline)
if keep > exp then
  redis.call('PEXPIREAT', KEYS[1], deadline, 'GT')
  if need > 0 then redis.call('PEXPIREAT', KEYS[4], deadline, 'GT') end
end
write(5, rec)
return {2, v, false, decs} -- the record is what the caller asked for
`)

// completeScript is the compare-and-set of a Complete. KEYS: entry,
// record, decisions, the audit trail's head and log. ARGV: the outcome's
// state ('d', 'f' or 'u'), the call's nonce, the outcome's binary form,
// the audit arguments (seal's). Returns {code, state}: 0 unknown, 1
// expired, 2 recorded by this call (or its retry), 3 pending (not
// redeemed), 4 refused in the record's state ('D' for one cancelled by an
// approver's decline). Every answer but a retry's is recorded.
var completeScript = stamped(5, `
local r = redis.call('GET', KEYS[2])
if not r then
  local v = redis.call('GET', KEYS[1])
  if not v then
    write(4, seal(4, 4, 'unknown'))
    return {0}
  end
  local exp = tonumber((expiry(v)))
  if not exp then return redis.error_reply('corrupt entry') end
  if now >= exp then
    write(4, seal(4, 4, 'expired'))
    return {1}
  end
  write(4, seal(4, 4, 'not_acting'))
  return {3}
end
if string.sub(r, 37, 52) == ARGV[2] then return {2} end -- a client retry of this very Complete
local st, lease = string.sub(r, 1, 1), tonumber(string.sub(r, 18, 36))
if st == 'c' and tonumber(redis.call('HGET', KEYS[3], 'n') or '0') > tonumber(redis.call('HGET', KEYS[3], 'y') or '0') then
  write(4, seal(4, 4, 'declined'))
  return {4, 'D'}
end
if st ~= 'a' then
  if ARGV[5] ~= '' then write(4, seal(4, 4, refusal(st, KEYS[3]))) end
  return {4, st}
end
if not lease then return redis.error_reply('corrupt record') end
if now >= lease then
  local rec = seal(4, 4, 'in_doubt')
  redis.call('SETRANGE', KEYS[2], 0, 'u') -- too late: in doubt, for good
  write(4, rec)
  return {4, 'u'}
end
local rec = seal(4, 4, 'ok') -- every check is done: what follows writes
redis.call('SET', KEYS[2], ARGV[1] .. string.sub(r, 2, 36) .. ARGV[2] .. ARGV[3], 'KEEPTTL')
write(4, rec)
return {2}
`)

// keys returns the confirmation's entry key and record key, and its member
// in the pending set: the id in hex, which the scripts cut off the entry
// key.
func (s *Store) keys(id ledger.ID) (entry, record, member string) {
	var h [2 * len(id)]byte
	hex.Encode(h[:], id[:])
	member = string(h[:])
	return s.entries + member, s.records + member, member
}

// decisionsKey returns the key of the decisions on confirmation id.
func (s *Store) decisionsKey(id ledger.ID) string {
	return s.decisions + hex.EncodeToString(id[:])
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
func (s *Store) add(ctx context.Context, c ledger.Confirmation, v []byte) (err error) {
	var st stamp
	if s.observe != nil {
		defer func() { s.observe(ctx, st.event(ledger.IssueEvent(st.at, c, err))) }()
	}
	aud, err := s.auditArgs(func() audit.Record { return ledger.AuditIssue(ctx, c) })
	if err != nil {
		return fmt.Errorf("redisledger: add %s: audit: %w", c.ID, err)
	}
	entry, record, _ := s.keys(c.ID)
	res, err := s.call(ctx, &st, addScript, []string{entry, s.pendingKey, record, s.principalKey(c.Principal), s.auditHead, s.auditLog},
		append([]any{v, keyDeadline(c.Expires.Add(s.grace)), keyDeadline(c.Expires), s.maxArg, s.maxPerArg}, aud...)...).Int64()
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
func (s *Store) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	// Random, so that a replayed approval never passes for a retry of the
	// Spend that took it. rand.Read never fails: it crashes the program.
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	return s.spend(ctx, id, to, lease, nonce)
}

// spend is the compare-and-set: one round trip, one script.
func (s *Store) spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration, nonce [nonceLen]byte) (rec ledger.Record, err error) {
	var marker [1 + nonceLen]byte
	switch {
	case to == ledger.Acting && lease > 0 && lease.Microseconds() < maxLeaseMicros:
		marker[0] = stateActing
	case to == ledger.Cancelled:
		marker[0] = stateCancelled
	default:
		return ledger.Record{}, fmt.Errorf("redisledger: cannot spend into state %v with lease %v", to, lease)
	}
	copy(marker[1:], nonce[:])
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	var st stamp
	if s.observe != nil {
		defer func() { s.observe(ctx, st.event(ledger.SpendEvent(st.at, to, id, rec, err))) }()
	}
	aud, err := s.auditArgs(func() audit.Record { return ledger.AuditSpend(ctx, id, to) })
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: spend %s: audit: %w", id, err)
	}
	entry, record, _ := s.keys(id)
	// A lease under a microsecond is one: the script's clock is in them.
	reply, err := s.call(ctx, &st, spendScript, []string{entry, record, s.pendingKey, s.decisionsKey(id), s.auditHead, s.auditLog},
		append([]any{marker[:], max(ceilDuration(lease, time.Microsecond), 1), s.graceArg}, aud...)...).Slice()
	if err != nil {
		return ledger.Record{}, s.callError("spend", id, err)
	}
	code, v, r, err := scriptReply(reply)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
	}
	var decisions []ledger.Decision
	if len(reply) > 3 {
		if decisions, err = readDecisions(reply[3]); err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
	}
	switch code {
	case 0:
		return ledger.Record{}, ledger.ErrUnknown // never added, or gone at Expires+Grace
	case 1:
		if _, err := decode(id, v); err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
		return ledger.Record{}, ledger.ErrExpired
	case 4:
		c, err := decode(id, v)
		if err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
		return ledger.Record{Confirmation: c, State: ledger.Pending, Decisions: decisions}, ledger.ErrAwaitingApproval
	case 2, 3:
	default:
		return ledger.Record{}, fmt.Errorf("redisledger: spend %s: unexpected reply %d", id, code)
	}
	if v == "" {
		// The record is there: the confirmation was spent, and the caller
		// must not act.
		return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w: record without its entry", id, errCorrupt)
	}
	if code == 2 && r == "" { // spent by this call: the record is as asked
		c, err := decode(id, v)
		if err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
		}
		return ledger.Record{Confirmation: c, State: to, Decisions: decisions}, nil
	}
	rec, answer, err := readRecord(id, v, r)
	rec.Decisions = decisions
	switch {
	case err != nil:
		return ledger.Record{}, fmt.Errorf("redisledger: spend %s: %w", id, err)
	case code == 2:
		return rec, nil
	case rec.State == ledger.Cancelled:
		if _, declined := rec.Declined(); declined {
			return rec, ledger.ErrDeclined
		}
		return ledger.Record{}, answer
	}
	return rec, answer
}

// maxLeaseMicros bounds a lease so that the lease's end stays within the
// 19 digits the record has for it, and exact in Lua's numbers.
const maxLeaseMicros = 1 << 50

// Complete implements [ledger.Store].
func (s *Store) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	return s.complete(ctx, id, o, nonce)
}

// complete is the compare-and-set from acting: one round trip, one script.
func (s *Store) complete(ctx context.Context, id ledger.ID, o ledger.Outcome, nonce [nonceLen]byte) (err error) {
	b, err := o.MarshalBinary()
	if err != nil {
		return fmt.Errorf("redisledger: complete %s: %w", id, err)
	}
	if s.closed.Load() {
		return errClosed
	}
	var stp stamp
	if s.observe != nil {
		defer func() { s.observe(ctx, stp.event(ledger.CompleteEvent(stp.at, id, o.Kind, err))) }()
	}
	aud, err := s.auditArgs(func() audit.Record { return ledger.AuditComplete(ctx, id, o.Kind) })
	if err != nil {
		return fmt.Errorf("redisledger: complete %s: audit: %w", id, err)
	}
	entry, record, _ := s.keys(id)
	state := [...]byte{ledger.OutcomeDone: stateDone, ledger.OutcomeFailed: stateFailed, ledger.OutcomeUnknown: stateInDoubt}[o.Kind]
	reply, err := s.call(ctx, &stp, completeScript, []string{entry, record, s.decisionsKey(id), s.auditHead, s.auditLog},
		append([]any{[]byte{state}, nonce[:], b}, aud...)...).Slice()
	if err != nil {
		return s.callError("complete", id, err)
	}
	code, st, _, err := scriptReply(reply)
	if err != nil {
		return fmt.Errorf("redisledger: complete %s: %w", id, err)
	}
	switch code {
	case 0:
		return ledger.ErrUnknown
	case 1:
		return ledger.ErrExpired
	case 2:
		return nil
	case 3:
		return ledger.ErrNotActing
	case 4:
		if st == "D" {
			return ledger.ErrDeclined
		}
		if st != "" {
			if _, err := answerOf(st[0]); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("redisledger: complete %s: %w: reply %d %q", id, errCorrupt, code, st)
}

// decideScript records an approver's decision. KEYS: entry, record,
// decisions, pending set, the audit trail's head and log. ARGV: the
// entry's add nonce (the Go side checked the approver against that entry,
// which never changes), the approver's field ("a:"+ID), '+' or '-', the
// call's nonce, the deadline of the decisions' key and of a decline's
// record (unix ms: the entry's), the record a decline writes ('c' and a
// nonce), the audit arguments (seal's). Returns {code, record,
// decisions}: 0 unknown, 1 expired, 2 recorded by this call (or its
// retry), 3 decided already (by this approver, or the outcome), 4
// cancelled by the client, 5 in band. Every answer but a retry's is
// recorded.
var decideScript = stamped(6, `
local v = redis.call('GET', KEYS[1])
if not v then
  write(5, seal(5, 7, 'unknown'))
  return {0}
end
if string.sub(v, 1, 16) ~= ARGV[1] then return redis.error_reply('entry changed') end
local exp, need = expiry(v)
if need == 0 then
  write(5, seal(5, 7, 'in_band'))
  return {5}
end
exp = tonumber(exp)
if not exp then return redis.error_reply('corrupt entry') end
local r = redis.call('GET', KEYS[2])
-- settle writes what the script found: a lease ended without an
-- outcome is in doubt, for good. After seal, with the other writes.
local ended = r and string.sub(r, 1, 1) == 'a' and now >= tonumber(string.sub(r, 18, 36))
if ended then r = 'u' .. string.sub(r, 2) end
local function settle()
  if ended then redis.call('SETRANGE', KEYS[2], 0, 'u') end
end
local mine = redis.call('HGET', KEYS[3], ARGV[2])
if mine and string.sub(mine, 23, 38) == ARGV[4] then
  settle()
  return {2, r or false, redis.call('HGETALL', KEYS[3])} -- a client retry of this very Decide
end
local n = tonumber(redis.call('HGET', KEYS[3], 'n') or '0')
local y = tonumber(redis.call('HGET', KEYS[3], 'y') or '0')
-- Recorded once: not this approver's second decision, none after the
-- outcome (all approvals in, or a decline).
local refused, code = nil, 0
if mine or n > y or y >= need then
  refused, code = 'decided', 3
elseif r then
  refused, code = 'cancelled', 4
elseif now >= exp then
  refused, code = 'expired', 1
end
if refused then
  local rec = seal(5, 7, refused)
  settle()
  write(5, rec)
  return {code, r or false, redis.call('HGETALL', KEYS[3])}
end
local rec = seal(5, 7, 'ok') -- every check is done: what follows writes
-- Declined: cancelled for good, and no longer pending (ZREM first: the
-- one write that fails on a key of another type).
if ARGV[3] ~= '+' then redis.call('ZREM', KEYS[4], string.sub(KEYS[1], -32)) end
n = n + 1
redis.call('HSET', KEYS[3], 'n', n, ARGV[2], ARGV[3] .. string.format('%02d%019d', n, now) .. ARGV[4])
if ARGV[3] == '+' then
  redis.call('HINCRBY', KEYS[3], 'y', 1)
else
  r = ARGV[6] .. string.format('%019d', 0) .. string.rep('\0', 16)
  redis.call('SET', KEYS[2], r, 'PXAT', ARGV[5])
end
if n == 1 then redis.call('PEXPIREAT', KEYS[3], ARGV[5]) end
write(5, rec)
return {2, r or false, redis.call('HGETALL', KEYS[3])}
`)

// Decide implements [ledger.Store]: it reads the entry, checks p against
// its Approval, then records the decision with one script, which checks
// that the entry is the one read and decides the rest atomically on
// Redis's clock. Two round trips.
func (s *Store) Decide(ctx context.Context, id ledger.ID, p ledger.Approver, approve bool) (ledger.Record, error) {
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	entry, record, _ := s.keys(id)
	var st stamp
	v, err := s.read(ctx, &st, entry).Text()
	rec := func() audit.Record { return ledger.AuditDecide(ctx, id, p, approve) }
	var c ledger.Confirmation
	switch {
	case errors.Is(err, redis.Nil):
		err = s.refuse(ctx, rec, ledger.ErrUnknown)
	case err != nil:
		err = s.callError("decide", id, err)
	default:
		if c, err = decode(id, v); err != nil {
			err = fmt.Errorf("redisledger: decide %s: %w", id, err)
		} else if err = c.Approval.Eligible(p); err != nil {
			err = s.refuse(ctx, rec, err)
		}
	}
	if err != nil {
		if s.observe != nil {
			s.observe(ctx, st.event(ledger.DecideEvent(st.at, id, p.ID, approve, err)))
		}
		return ledger.Record{}, err
	}
	sign := "-"
	if approve {
		sign = "+"
	}
	// Random, so that another Decide never passes for a retry of this one.
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	return s.decide(ctx, id, c, v[:nonceLen], "a:"+p.ID, sign, nonce, entry, record)
}

// decide runs decideScript for the entry v (its nonce) of confirmation c:
// the decision sign ('+' or '-') of the approver of field ("a:"+ID).
func (s *Store) decide(ctx context.Context, id ledger.ID, c ledger.Confirmation, addNonce, field, sign string, nonce [nonceLen]byte, entry, record string) (rec ledger.Record, err error) {
	var st stamp
	if s.observe != nil {
		approver, _ := strings.CutPrefix(field, "a:")
		defer func() { s.observe(ctx, st.event(ledger.DecideEvent(st.at, id, approver, sign == "+", err))) }()
	}
	var decline [1 + nonceLen]byte
	decline[0] = stateCancelled
	rand.Read(decline[1:])
	aud, err := s.auditArgs(func() audit.Record {
		return ledger.AuditDecide(ctx, id, ledger.Approver{ID: strings.TrimPrefix(field, "a:")}, sign == "+")
	})
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: decide %s: audit: %w", id, err)
	}
	reply, err := s.call(ctx, &st, decideScript, []string{entry, record, s.decisionsKey(id), s.pendingKey, s.auditHead, s.auditLog},
		append([]any{addNonce, field, sign, nonce[:], keyDeadline(c.Expires.Add(s.grace)), decline[:]}, aud...)...).Slice()
	if err != nil {
		return ledger.Record{}, s.callError("decide", id, err)
	}
	code, r, _, err := scriptReply(reply[:min(len(reply), 2)]) // then the decisions
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: decide %s: %w", id, err)
	}
	rec = ledger.Record{Confirmation: c, State: ledger.Pending}
	if len(reply) > 2 {
		if rec.Decisions, err = readDecisions(reply[2]); err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: decide %s: %w", id, err)
		}
	}
	if r != "" {
		if len(r) < recHead {
			return ledger.Record{}, fmt.Errorf("redisledger: decide %s: %w: record of %d bytes", id, errCorrupt, len(r))
		}
		if rec.State, err = answerOf(r[0]); rec.State == 0 {
			return ledger.Record{}, fmt.Errorf("redisledger: decide %s: %w", id, err)
		}
		if len(r) > recHead {
			if err := rec.Outcome.UnmarshalBinary([]byte(r[recHead:])); err != nil {
				return ledger.Record{}, fmt.Errorf("redisledger: decide %s: %w: %w", id, errCorrupt, err)
			}
		}
	}
	switch code {
	case 0:
		return ledger.Record{}, ledger.ErrUnknown // gone since it was read
	case 1:
		return rec, ledger.ErrExpired
	case 2:
		return rec, nil
	case 3:
		return rec, ledger.ErrDecided
	case 4:
		return rec, ledger.ErrCancelled
	case 5:
		return ledger.Record{}, ledger.ErrInBand
	}
	return ledger.Record{}, fmt.Errorf("redisledger: decide %s: unexpected reply %d", id, code)
}

// readDecisions reads the decisions hash as HGETALL returns it.
func readDecisions(reply any) ([]ledger.Decision, error) {
	kv, ok := reply.([]any)
	if !ok || len(kv)%2 != 0 {
		return nil, fmt.Errorf("%w: decisions %v", errCorrupt, reply)
	}
	var ds []ledger.Decision
	var seqs []int
	for i := 0; i < len(kv); i += 2 {
		k, ok1 := kv[i].(string)
		val, ok2 := kv[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: decisions %v", errCorrupt, reply)
		}
		id, ok := strings.CutPrefix(k, "a:")
		if !ok {
			continue // a count
		}
		seq, err1 := strconv.Atoi(val[1:min(len(val), 3)])
		us, err2 := strconv.ParseInt(val[min(len(val), 3):min(len(val), 22)], 10, 64)
		if len(val) != 22+nonceLen || val[0] != '+' && val[0] != '-' || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: decision %q", errCorrupt, val)
		}
		ds = append(ds, ledger.Decision{Approver: id, Approve: val[0] == '+', At: time.UnixMicro(us)})
		seqs = append(seqs, seq)
	}
	// In the order they were recorded.
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return seqs[a] - seqs[b] })
	sorted := make([]ledger.Decision, len(ds))
	for i, j := range order {
		sorted[i] = ds[j]
	}
	return sorted, nil
}

// lookupScript reads a confirmation's keys and the server's clock in one
// atomic step. KEYS: entry, record, decisions. Returns {entry or false,
// record or false, seconds, microseconds, decisions}.
var lookupScript = redis.NewScript(`
local t = redis.call('TIME')
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), t[1], t[2], redis.call('HGETALL', KEYS[3])}
`)

// Lookup implements [ledger.Store]: one script, which changes nothing.
func (s *Store) Lookup(ctx context.Context, id ledger.ID) (ledger.Record, error) {
	if s.closed.Load() {
		return ledger.Record{}, errClosed
	}
	entry, record, _ := s.keys(id)
	reply, err := lookupScript.Run(ctx, s.client, []string{entry, record, s.decisionsKey(id)}).Slice()
	if err != nil {
		return ledger.Record{}, s.callError("lookup", id, err)
	}
	v, r, now, err := lookupReply(reply)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: lookup %s: %w", id, err)
	}
	decisions, err := readDecisions(reply[4])
	switch {
	case err != nil:
		return ledger.Record{}, fmt.Errorf("redisledger: lookup %s: %w", id, err)
	case v == "" && r == "":
		return ledger.Record{}, ledger.ErrUnknown
	case v == "":
		return ledger.Record{}, fmt.Errorf("redisledger: lookup %s: %w: record without its entry", id, errCorrupt)
	case r == "":
		c, err := decode(id, v)
		if err != nil {
			return ledger.Record{}, fmt.Errorf("redisledger: lookup %s: %w", id, err)
		}
		return ledger.Record{Confirmation: c, State: ledger.Pending, Decisions: decisions}, nil
	}
	rec, _, err := readRecord(id, v, r)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("redisledger: lookup %s: %w", id, err)
	}
	rec.Decisions = decisions
	if lease, err := strconv.ParseInt(r[recLease:recComplete], 10, 64); rec.State == ledger.Acting && err == nil && now >= lease {
		rec.State = ledger.InDoubt // the lease ended with no outcome, as the next Spend will record
	}
	return rec, nil
}

// lookupReply reads lookupScript's reply: the entry and the record ("" if
// absent), and the server's clock in unix microseconds.
func lookupReply(reply []any) (v, r string, now int64, err error) {
	if len(reply) != 5 {
		return "", "", 0, fmt.Errorf("%w: reply %v", errCorrupt, reply)
	}
	for i, dst := range []*string{&v, &r} {
		switch x := reply[i].(type) {
		case string:
			*dst = x
		case nil:
		default:
			return "", "", 0, fmt.Errorf("%w: reply %v", errCorrupt, reply)
		}
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(reply[2]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(reply[3]), 10, 64)
	if err1 != nil || err2 != nil {
		return "", "", 0, fmt.Errorf("%w: clock %v %v", errCorrupt, reply[2], reply[3])
	}
	return v, r, sec*1_000_000 + usec, nil
}

// scriptReply reads a script's reply: a code, then up to two strings (a
// missing one is empty).
func scriptReply(reply []any) (code int64, a, b string, err error) {
	if len(reply) == 0 {
		return 0, "", "", fmt.Errorf("%w: empty reply", errCorrupt)
	}
	code, ok := reply[0].(int64)
	if !ok {
		return 0, "", "", fmt.Errorf("%w: reply %v", errCorrupt, reply)
	}
	strs := [2]string{}
	for i, x := range reply[1:min(len(reply), 3)] {
		switch x := x.(type) {
		case string:
			strs[i] = x
		case nil:
		default:
			return 0, "", "", fmt.Errorf("%w: reply %v", errCorrupt, reply)
		}
	}
	return code, strs[0], strs[1], nil
}

// answerOf is the error that answers a Spend or Complete of a
// confirmation whose record is in state st.
func answerOf(st byte) (ledger.State, error) {
	switch st {
	case stateActing:
		return ledger.Acting, ledger.ErrInProgress
	case stateDone:
		return ledger.Done, ledger.ErrDone
	case stateFailed:
		return ledger.Failed, ledger.ErrDone
	case stateInDoubt:
		return ledger.InDoubt, ledger.ErrInDoubt
	case stateCancelled:
		return ledger.Cancelled, ledger.ErrCancelled
	}
	return 0, fmt.Errorf("%w: record state %q", errCorrupt, st)
}

// readRecord rebuilds the record of confirmation id from the value of its
// entry v and of its record r, and the answer it gives a later Spend; err
// says that they are not a store's.
func readRecord(id ledger.ID, v, r string) (rec ledger.Record, answer, err error) {
	c, err := decode(id, v)
	if err != nil {
		return ledger.Record{}, nil, err
	}
	if len(r) < recHead {
		return ledger.Record{}, nil, fmt.Errorf("%w: record of %d bytes", errCorrupt, len(r))
	}
	st, answer := answerOf(r[0])
	if st == 0 {
		return ledger.Record{}, nil, answer
	}
	rec = ledger.Record{Confirmation: c, State: st}
	if len(r) > recHead {
		if err := rec.Outcome.UnmarshalBinary([]byte(r[recHead:])); err != nil {
			return ledger.Record{}, nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
	}
	return rec, answer, nil
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
	fields := []string{c.Tool, c.ArgsDigest, c.Principal, c.Subject}
	if a := c.Approval; a != nil {
		if err := a.Check(); err != nil {
			return nil, err
		}
		fields = append(fields, a.Requester, a.Question)
	}
	size := headLen + 16 // 16: time.MarshalBinary's longest
	for _, f := range fields {
		size += binary.MaxVarintLen64 + len(f)
	}
	v := make([]byte, headLen, size)
	rand.Read(v[:offExp])              // never fails: it crashes the program instead
	us := max(ceilMicro(c.Expires), 0) // before 1970 is as expired as 1970
	from := offExp
	if a := c.Approval; a != nil {
		if us > maxApprovalUS {
			return nil, fmt.Errorf("expiry %v: too far for a confirmation that needs approval", c.Expires)
		}
		v[offExp], v[offExp+1], v[offExp+2] = approvalMark, '0'+byte(a.Required/10), '0'+byte(a.Required%10)
		from = approvalExpAt
	}
	for i := headLen - 1; i >= from; i-- {
		v[i] = '0' + byte(us%10)
		us /= 10
	}
	for _, f := range fields {
		v = binary.AppendUvarint(v, uint64(len(f)))
		v = append(v, f...)
	}
	if a := c.Approval; a != nil {
		v = binary.AppendUvarint(v, uint64(len(a.Approvers)))
		for _, n := range a.Approvers {
			v = binary.AppendUvarint(v, uint64(len(n)))
			v = append(v, n...)
		}
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
	fields := []*string{&c.Tool, &c.ArgsDigest, &c.Principal, &c.Subject}
	if v[offExp] == approvalMark {
		c.Approval = &ledger.Approval{Required: int(v[offExp+1]-'0')*10 + int(v[offExp+2]-'0')}
		fields = append(fields, &c.Approval.Requester, &c.Approval.Question)
	}
	for _, f := range fields {
		var ok bool
		if *f, rest, ok = cut(rest); !ok {
			return ledger.Confirmation{}, errCorrupt
		}
	}
	if a := c.Approval; a != nil {
		n, k := binary.Uvarint([]byte(rest[:min(len(rest), binary.MaxVarintLen64)]))
		if k <= 0 || n > ledger.MaxApprovers {
			return ledger.Confirmation{}, errCorrupt
		}
		rest = rest[k:]
		a.Approvers = make([]string, n)
		for i := range a.Approvers {
			var ok bool
			if a.Approvers[i], rest, ok = cut(rest); !ok {
				return ledger.Confirmation{}, errCorrupt
			}
		}
		if a.Check() != nil {
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

// ceilDuration is d in units of unit, rounded up.
func ceilDuration(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
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
