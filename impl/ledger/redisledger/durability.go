package redisledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotDurable reports a Redis server whose configuration can make a
// spent confirmation pending again: [Store.CheckDurability] refuses it.
var ErrNotDurable = errors.New("redisledger: the Redis server can bring a spent confirmation back")

// CheckDurability asks the server how it persists and replicates data, and
// returns an error wrapping [ErrNotDurable] that names every setting that
// can undo a Spend, or that the settings cannot be read (CONFIG disabled).
//
// What each setting means for at-most-once:
//
//   - No persistence (save "" and appendonly no): a restarted Redis has
//     forgotten every confirmation, and a forgotten one is refused as
//     unknown. Safe: the person is asked again.
//   - RDB snapshots (save "<seconds> <changes> ...") without the
//     append-only file: a restart loads the last snapshot, taken before the
//     Spends that followed it, and those confirmations are pending — and
//     redeemable — again. Refused.
//   - appendonly yes with appendfsync always: Redis writes and fsyncs each
//     command before it replies, so an acknowledged Spend survives a crash.
//     Safe, with or without snapshots (a restart loads the append-only
//     file).
//   - appendonly yes with appendfsync everysec (the default) or no: a crash
//     of the machine loses up to a second (everysec) or what the kernel had
//     not written (no) of acknowledged Spends. Refused.
//   - connected replicas: replication is asynchronous, so a failover to a
//     replica that had not yet received a Spend makes it pending there.
//     Refused, unless the store waits for every connected replica
//     ([Options.Replicas] at least as many as are connected): then each
//     replica holds every write before it is acted on or answered. A
//     store that waits for more replicas than are connected would fail
//     every write: that is an error too (not ErrNotDurable: no setting
//     accepts it).
//   - this server is itself a replica: its data is a late copy. Refused.
//
// What it cannot see: an RDB file left in the data directory by an earlier
// configuration or a manual SAVE (loaded at a restart without the
// append-only file), a backup restored by hand, Sentinel or Cluster
// failovers to servers it is not connected to, and configuration changed
// after start-up. After restoring any backup younger than the TTL, replace
// the key file: every requestState sealed before is then refused.
func (s *Store) CheckDurability(ctx context.Context) error {
	var c redisConfig
	for _, p := range []struct {
		name string
		v    *string
	}{{"save", &c.save}, {"appendonly", &c.appendonly}, {"appendfsync", &c.appendfsync}} {
		m, err := s.client.ConfigGet(ctx, p.name).Result()
		if err != nil {
			return fmt.Errorf("%w: cannot read its persistence settings (CONFIG GET %s: %v)", ErrNotDurable, p.name, err)
		}
		v, ok := m[p.name]
		if !ok {
			return fmt.Errorf("%w: cannot read its persistence settings (CONFIG GET %s: no value)", ErrNotDurable, p.name)
		}
		*p.v = v
	}
	info, err := s.client.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%w: cannot read its replication state (INFO replication: %v)", ErrNotDurable, err)
	}
	c.role, c.replicas = replication(info)
	c.waitFor = s.replicas
	if c.role == "master" && c.waitFor > c.replicas {
		return fmt.Errorf("redisledger: the store waits for %d replica(s) (Replicas), but %d are connected: every write would fail", c.waitFor, c.replicas)
	}
	if risks := c.risks(); len(risks) > 0 {
		return fmt.Errorf("%w: %s", ErrNotDurable, strings.Join(risks, "; "))
	}
	return nil
}

// redisConfig is what CheckDurability reads.
type redisConfig struct {
	save, appendonly, appendfsync string
	role                          string // "master" or "slave"
	replicas                      int
	waitFor                       int // Options.Replicas: the replicas each write waits for
}

// risks names every setting of c that can undo a Spend.
func (c redisConfig) risks() []string {
	var r []string
	aof := c.appendonly == "yes"
	if c.save != "" && !aof {
		r = append(r, fmt.Sprintf("save %q takes RDB snapshots and appendonly is %s: a restart loads the last snapshot, and the confirmations spent after it are pending again (set appendonly yes and appendfsync always, or save \"\" for no persistence)", c.save, c.appendonly))
	}
	if aof && c.appendfsync != "always" {
		r = append(r, fmt.Sprintf("appendfsync %s: a crash of the machine loses acknowledged Spends (up to a second with everysec), and they are pending again (set appendfsync always)", c.appendfsync))
	}
	switch {
	case c.role != "master":
		r = append(r, fmt.Sprintf("the server is a replica (role:%s): its data is an asynchronous copy (point the ledger at the primary)", c.role))
	case c.replicas > 0 && c.waitFor == 0:
		r = append(r, fmt.Sprintf("%d connected replica(s): replication is asynchronous and this store does not WAIT, so a failover to a replica that had not received a Spend makes it pending again (set replicas=%d in the URL)", c.replicas, c.replicas))
	case c.replicas > c.waitFor:
		r = append(r, fmt.Sprintf("%d connected replica(s), and each write waits for %d: a failover to one that had not received a Spend makes it pending again (set replicas=%d in the URL)", c.replicas, c.waitFor, c.replicas))
	}
	return r
}

// replication reads role and connected_slaves from INFO replication.
func replication(info string) (role string, replicas int) {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			role = v
		case "connected_slaves":
			replicas, _ = strconv.Atoi(v)
		}
	}
	return role, replicas
}
