package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotDurable reports a PostgreSQL configuration that can lose an
// acknowledged commit, and so make a spent confirmation pending again:
// [Store.CheckDurability] refuses it.
var ErrNotDurable = errors.New("pgledger: the database can lose a committed Spend")

// CheckDurability reads the settings in force for the store's connections
// and the standbys of the server, and returns an error wrapping
// [ErrNotDurable] that names every one that can lose a committed Spend
// (after which the confirmation is pending, and redeemable, again).
//
// What each setting means for at-most-once:
//
//   - fsync = off: a crash of the machine can lose or corrupt committed
//     transactions. Refused.
//   - full_page_writes = off: a crash can leave torn pages that recovery
//     cannot repair. Refused.
//   - synchronous_commit = off: a commit is acknowledged before its WAL is
//     flushed; a crash loses the last ones (up to three times
//     wal_writer_delay). Refused. It can be set per role, per database or
//     in the connection string: the value checked is the one the store's
//     own connections run with.
//   - standbys: a failover to a standby that had not received a Spend
//     loses it. Every standby in pg_stat_replication must be synchronous
//     (sync_state "sync"), and synchronous_commit on or remote_apply, so
//     that a commit waits for them to flush it; an asynchronous,
//     potential or quorum standby, or one whose state this role may not
//     read (grant it pg_read_all_stats), is refused.
//
// What it cannot see: cascaded standbys, logical replicas, which standby a
// failover tool will promote, and backups. Restoring a backup (or a
// point-in-time recovery) to before a Spend brings the confirmation back:
// after restoring one younger than the TTL, replace the key file, so that
// every requestState sealed before is refused.
func (s *Store) CheckDurability(ctx context.Context) error {
	var c pgConfig
	err := s.pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('full_page_writes'), current_setting('synchronous_commit')`).
		Scan(&c.fsync, &c.fullPageWrites, &c.synchronousCommit)
	if err != nil {
		return fmt.Errorf("%w: cannot read its settings: %v", ErrNotDurable, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT coalesce(application_name, ''), coalesce(sync_state, '') FROM pg_stat_replication`)
	if err != nil {
		return fmt.Errorf("%w: cannot read pg_stat_replication: %v", ErrNotDurable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var sb standby
		if err := rows.Scan(&sb.name, &sb.state); err != nil {
			return fmt.Errorf("%w: cannot read pg_stat_replication: %v", ErrNotDurable, err)
		}
		c.standbys = append(c.standbys, sb)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: cannot read pg_stat_replication: %v", ErrNotDurable, err)
	}
	if err := s.detectStandby(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrNotDurable, err)
	}
	if risks := c.risks(); len(risks) > 0 {
		return fmt.Errorf("%w: %s", ErrNotDurable, strings.Join(risks, "; "))
	}
	return nil
}

// pgConfig is what CheckDurability reads.
type pgConfig struct {
	fsync, fullPageWrites, synchronousCommit string
	standbys                                 []standby
}

type standby struct {
	name  string
	state string // sync_state; "" when this role may not read it
}

// risks names every setting of c that can lose a committed Spend.
func (c pgConfig) risks() []string {
	var r []string
	if c.fsync != "on" {
		r = append(r, fmt.Sprintf("fsync = %s: a crash of the machine can lose committed Spends", c.fsync))
	}
	if c.fullPageWrites != "on" {
		r = append(r, fmt.Sprintf("full_page_writes = %s: a crash can leave torn pages and lose committed Spends", c.fullPageWrites))
	}
	if c.synchronousCommit == "off" {
		r = append(r, "synchronous_commit = off: a crash loses the last acknowledged commits, and the confirmations they spent are pending again")
	}
	if len(c.standbys) == 0 {
		return r
	}
	if c.synchronousCommit != "on" && c.synchronousCommit != "remote_apply" {
		r = append(r, fmt.Sprintf("synchronous_commit = %s with %d standby(s): a commit does not wait for a standby to flush it, so a failover can lose it", c.synchronousCommit, len(c.standbys)))
	}
	for _, sb := range c.standbys {
		switch sb.state {
		case "sync":
		case "":
			r = append(r, fmt.Sprintf("standby %q: this role cannot read whether it is synchronous (grant pg_read_all_stats)", sb.name))
		default:
			r = append(r, fmt.Sprintf("standby %q is %s, not sync: a failover to it loses the Spends it had not received", sb.name, sb.state))
		}
	}
	return r
}
