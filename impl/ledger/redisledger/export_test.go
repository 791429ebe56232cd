package redisledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// AddTx is the common path of an Add without Lua, kept only so that
// BenchmarkSpendDesigns can weigh it against the Add script (BENCHMARKS.md,
// "An Add without Lua"). It writes what the script writes for a fresh id in
// a namespace with room, in one MULTI/EXEC of nine commands:
//
//   - SET NX GET PXAT: the entry, unless the id exists;
//   - RPUSH, PEXPIREAT, RENAMENX, DEL: the token, built under a staging key
//     and renamed onto the token's key only if no token is there (a
//     rename keeps the staging key's expiry);
//   - ZADD NX, ZCARD: the pending set, and its size for the cap;
//   - PEXPIREAT NX, PEXPIREAT GT: the set's deadline, set on a new set
//     and only ever lengthened on an old one.
//
// It is not the store's Add, and not an Add at all when the id exists or the
// namespace is full: nothing in a MULTI can depend on an earlier command's
// reply, so those paths would need a second round trip to undo what the
// transaction wrote. AddTx fails there instead, without undoing anything.
func (s *Store) AddTx(ctx context.Context, c ledger.Confirmation) error {
	v, err := encode(c)
	if err != nil {
		return err
	}
	entry, token, member := s.keys(c.ID)
	staging := s.ns + "s3:" + member
	var (
		set     *redis.Cmd
		renamed *redis.BoolCmd
		added   *redis.IntCmd
		n       *redis.IntCmd
	)
	_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.Do(ctx, "SET", entry, v, "NX", "GET", "PXAT", keyDeadline(c.Expires.Add(s.grace)))
		p.RPush(ctx, staging, "p")
		p.Do(ctx, "PEXPIREAT", staging, tokenDeadline(c.Expires))
		renamed = p.RenameNX(ctx, staging, token)
		p.Del(ctx, staging)
		added = p.ZAddNX(ctx, s.pendingKey, redis.Z{Score: float64(max(ceilMicro(c.Expires), 0)), Member: member})
		n = p.ZCard(ctx, s.pendingKey)
		p.Do(ctx, "PEXPIREAT", s.pendingKey, keyDeadline(c.Expires), "NX")
		p.Do(ctx, "PEXPIREAT", s.pendingKey, keyDeadline(c.Expires), "GT")
		return nil
	})
	// A fresh entry's SET NX GET replies nil, which go-redis reports as
	// the pipeline's error.
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redisledger: addtx %s: %w", c.ID, err)
	}
	if !errors.Is(set.Err(), redis.Nil) || !renamed.Val() || added.Val() != 1 || n.Val() > int64(s.maxPending) {
		return fmt.Errorf("redisledger: addtx %s: not a fresh id in a namespace with room (SET %v, RENAMENX %v, ZADD %d, ZCARD %d)",
			c.ID, set.Err(), renamed.Val(), added.Val(), n.Val())
	}
	return nil
}

// TokenKey is the key of confirmation id's token, for the benchmark's
// design that pushes onto it alone.
func (s *Store) TokenKey(id ledger.ID) string {
	_, token, _ := s.keys(id)
	return token
}
