package redisledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated reports a write (an Add, Spend, Complete or Decide,
// or a write that answered one) that fewer than [Options.Replicas]
// replicas acknowledged within [Options.ReplicaTimeout]. Its outcome is
// unknown, as any error but the ledger's sentinels: the write may be on
// the primary only, and a failover to a replica would lose it. The caller
// must treat the confirmation as spent and not act; a retry is answered
// from the record, or, if a failover lost the Spend, may redeem it, once.
var ErrNotReplicated = errors.New("redisledger: the replicas did not acknowledge the write in time")

// DefaultReplicaTimeout is [Options.ReplicaTimeout]'s default.
const DefaultReplicaTimeout = time.Second

// run runs script on keys with args: with [Options.Replicas] zero, as
// [redis.Script.Run] does; otherwise followed by WAIT, in one round trip
// on one connection (a pipeline), and the script's reply carries
// [ErrNotReplicated] unless enough replicas acknowledged. WAIT counts the
// replicas that received everything the primary had applied when this
// connection's last command ran — a read included, on Redis 7.0 (measured
// on 7.0.15: TestReplicasAcknowledge answers a retry through a store
// whose own writes were all acknowledged, and a stalled replica fails
// it) — so a record written by another client, which this call answers
// from, is on the replicas before the answer is given. Attack stopped:
// acting on a Spend (or telling a retry an outcome) that a failover then
// loses, which would let the same approval act twice.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.replicas == 0 {
		return script.Run(ctx, s.client, keys, args...)
	}
	cmd := s.runReplicated(ctx, script.EvalSha, keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		// The server's script cache was flushed (or this is a new
		// primary): the script did not run; send its source.
		cmd = s.runReplicated(ctx, script.Eval, keys, args)
	}
	return cmd
}

// runReplicated is run's pipeline: eval (EVALSHA or EVAL), then WAIT.
func (s *Store) runReplicated(ctx context.Context, eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd, keys []string, args []any) *redis.Cmd {
	pipe := s.client.Pipeline()
	cmd := eval(ctx, pipe, keys, args...)
	acks := pipe.Do(ctx, "wait", s.replicas, s.replicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx) // each command carries its own error
	switch {
	case cmd.Err() != nil:
		return cmd
	}
	switch n, err := acks.Int64(); {
	case err != nil:
		cmd.SetErr(fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err))
	case n < int64(s.replicas):
		cmd.SetErr(fmt.Errorf("%w: %d of %d replica(s) acknowledged within %v", ErrNotReplicated, n, s.replicas, s.replicaTimeout))
	}
	return cmd
}

// checkReplicas refuses Options.Replicas and Options.ReplicaTimeout that
// cannot work: negative ones, and WAIT through a client that may send it
// to another server than the script's (a cluster client routes a keyless
// command anywhere).
func checkReplicas(client redis.UniversalClient, opts Options) error {
	switch {
	case opts.Replicas < 0:
		return fmt.Errorf("redisledger: negative Replicas %d", opts.Replicas)
	case opts.ReplicaTimeout < 0:
		return fmt.Errorf("redisledger: negative ReplicaTimeout %v", opts.ReplicaTimeout)
	case opts.Replicas == 0 && opts.ReplicaTimeout != 0:
		return fmt.Errorf("redisledger: ReplicaTimeout %v without Replicas", opts.ReplicaTimeout)
	case opts.ReplicaTimeout > 0 && opts.ReplicaTimeout < time.Millisecond:
		return fmt.Errorf("redisledger: ReplicaTimeout %v: WAIT counts in milliseconds (and 0 would wait forever)", opts.ReplicaTimeout)
	}
	if _, ok := client.(*redis.Client); opts.Replicas > 0 && !ok {
		return fmt.Errorf("redisledger: Replicas needs a *redis.Client (one server, or Sentinel's failover client), not %T", client)
	}
	return nil
}
