package redisledger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/luasha256"
)

// The audit trail (package audit), with [Options.Audit]: three keys of
// the namespace, in its hash slot, which never expire.
//
//	Namespace+"a1:log"   a list: the records' canonical bytes, in seq order
//	Namespace+"a1:head"  the last record's SHA-256 (64 hex digits), ':'
//	                     and its seq (decimal); absent before the first
//	Namespace+"a1:cp"    a list: the checkpoints, as JSON
//
// A script calls seal after its every check and before its first write,
// and write after its last: see the package doc's "Audit trail".

// auditLua defines seal and write for the scripts. The keys of the trail
// are KEYS[k] (head) and KEYS[k+1] (log); the caller's part, ARGV[a]
// (the record's prefix), ARGV[a+1] (the SHA-256 state after its first n
// bytes; "" when the store keeps no trail), ARGV[a+2] (n) and ARGV[a+3]
// ("1": fail after sealing, before any write; tests).
var auditLua = luasha256.Source() + `
-- seal returns the record of this call, answered result: {its canonical
-- bytes, the trail's new head}; nil without a trail. It writes nothing.
local function seal(k, a, result)
  local state = ARGV[a + 1]
  if state == '' then return nil end
  local seq, prev = 0, string.rep('0', 64)
  local h = redis.call('GET', KEYS[k])
  if h then
    prev = string.sub(h, 1, 64)
    seq = tonumber(string.sub(h, 66))
    if string.sub(h, 65, 65) ~= ':' or string.find(prev, '[^0-9a-f]') or not string.find(h, '^%d+$', 66) or not seq then
      error('corrupt audit head')
    end
  end
  local lt = redis.call('TYPE', KEYS[k + 1])['ok']
  if lt ~= 'list' and lt ~= 'none' then error('the audit log is a ' .. lt .. ', not a list') end
  local t = redis.call('TIME')
  seq = string.format('%d', seq + 1)
  local suffix = '"seq":' .. seq .. ',"time":' .. t[1] .. string.format('%06d', tonumber(t[2])) ..
    ',"result":"' .. result .. '","prev":"' .. prev .. '"}'
  local prefix, n = ARGV[a], tonumber(ARGV[a + 2])
  local sum = sha256resume(state, n, string.sub(prefix, n + 1) .. suffix)
  if ARGV[a + 3] == '1' then error('injected fault: after the record was sealed, before any write') end
  return {prefix .. suffix, sum .. ':' .. seq}
end
-- write appends rec, seal's, to the trail (none: nothing).
local function write(k, rec)
  if rec then
    redis.call('RPUSH', KEYS[k + 1], rec[1])
    redis.call('SET', KEYS[k], rec[2])
  end
end
-- refusal is the result word of a call answered from a record in state
-- st, as ledger.ResultOf names its error; dk, the decisions' key.
local function refusal(st, dk)
  if st == 'a' then return 'in_progress' end
  if st == 'd' or st == 'f' then return 'done' end
  if st == 'u' then return 'in_doubt' end
  if st == 'c' then
    if tonumber(redis.call('HGET', dk, 'n') or '0') > tonumber(redis.call('HGET', dk, 'y') or '0') then
      return 'declined'
    end
    return 'cancelled'
  end
  error('corrupt record')
end
`

// refuseScript records a refusal decided in Go (Decide's: unknown, not an
// approver...). KEYS: the trail's head and log. ARGV: the audit arguments,
// then the result.
var refuseScript = redis.NewScript(auditLua + `
write(1, seal(1, 1, ARGV[5]))
return 1
`)

// auditArgs returns the ARGV of seal for the record r returns, built only
// when the store keeps a trail; without one, the arguments that say so.
func (s *Store) auditArgs(r func() audit.Record) ([]any, error) {
	if !s.audit {
		return noAudit, nil
	}
	rec := r()
	p := rec.Prefix()
	state, n, _, err := luasha256.Midstate(p)
	if err != nil {
		return nil, err
	}
	fault := ""
	if s.auditFault != nil && s.auditFault() != nil {
		fault = "1"
	}
	return []any{p, state, n, fault}, nil
}

// noAudit are the audit arguments of a store that keeps no trail.
var noAudit = []any{"", "", 0, ""}

// refuse records, on the trail, that the call r describes was answered
// err without a script (an error that is none of the ledger's answers is
// not recorded), and returns err, or the trail's error.
func (s *Store) refuse(ctx context.Context, r func() audit.Record, err error) error {
	res := ledger.ResultOf(err)
	if !s.audit || !audit.Recorded(r().Op, string(res)) {
		return err
	}
	args, aerr := s.auditArgs(r)
	if aerr == nil {
		aerr = s.run(ctx, refuseScript, s.trailKeys(), append(args, string(res))...).Err()
	}
	if aerr != nil {
		return fmt.Errorf("redisledger: audit: %w", aerr)
	}
	return err
}

// trailKeys returns the keys of the trail, as the scripts take them:
// head, log.
func (s *Store) trailKeys() []string { return []string{s.auditHead, s.auditLog} }

var _ audit.Trail = (*Store)(nil)

// Trail returns s, which keeps its audit trail, or nil if it keeps none
// ([Options.Audit]).
func (s *Store) Trail() audit.Trail {
	if !s.audit {
		return nil
	}
	return s
}

// Head implements [audit.Trail].
func (s *Store) Head(ctx context.Context) (uint64, audit.Hash, error) {
	if s.closed.Load() {
		return 0, audit.Hash{}, errClosed
	}
	v, err := s.client.Get(ctx, s.auditHead).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, audit.Hash{}, nil
	case err != nil:
		return 0, audit.Hash{}, fmt.Errorf("redisledger: audit head: %w", err)
	}
	return parseHead(v)
}

// parseHead reads the head key's value.
func parseHead(v string) (uint64, audit.Hash, error) {
	var h audit.Hash
	sum, seq, ok := strings.Cut(v, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || len(sum) != 2*len(h) || strings.ToLower(sum) != sum {
		return 0, h, fmt.Errorf("redisledger: %w: audit head %q", errCorrupt, v)
	}
	if _, err := hex.Decode(h[:], []byte(sum)); err != nil {
		return 0, h, fmt.Errorf("redisledger: %w: audit head %q", errCorrupt, v)
	}
	return n, h, nil
}

// recordsPage is how many records Records reads per round trip.
const recordsPage = 512

// Records implements [audit.Trail]: the records from seq from on, as the
// log holds them (the n-th element of the list is read as record n,
// whatever it says).
func (s *Store) Records(ctx context.Context, from uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if s.closed.Load() {
			yield(nil, errClosed)
			return
		}
		for i := int64(max(from, 1) - 1); ; i += recordsPage {
			page, err := s.client.LRange(ctx, s.auditLog, i, i+recordsPage-1).Result()
			if err != nil {
				yield(nil, fmt.Errorf("redisledger: audit records: %w", err))
				return
			}
			for _, line := range page {
				if !yield([]byte(line), nil) {
					return
				}
			}
			if len(page) < recordsPage {
				return
			}
		}
	}
}

// AddCheckpoint implements [audit.Trail].
func (s *Store) AddCheckpoint(ctx context.Context, c audit.Checkpoint) error {
	if s.closed.Load() {
		return errClosed
	}
	b, err := c.MarshalJSON()
	if err != nil {
		return fmt.Errorf("redisledger: audit checkpoint: %w", err)
	}
	if err := s.client.RPush(ctx, s.auditCheckpoints, b).Err(); err != nil {
		return fmt.Errorf("redisledger: audit checkpoint: %w", err)
	}
	return nil
}

// Checkpoints implements [audit.Trail].
func (s *Store) Checkpoints(ctx context.Context) ([]audit.Checkpoint, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	lines, err := s.client.LRange(ctx, s.auditCheckpoints, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisledger: audit checkpoints: %w", err)
	}
	cps := make([]audit.Checkpoint, len(lines))
	for i, l := range lines {
		if err := cps[i].UnmarshalJSON([]byte(l)); err != nil {
			return nil, fmt.Errorf("redisledger: audit checkpoint %d: %w", i+1, err)
		}
	}
	return cps, nil
}
