package pgledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// audited is what an audited Spend or Complete records: rec's prefix,
// sealed with "ok" in the change's statement, or with the result of
// refusal(row) when the change does not apply.
type audited struct {
	rec     audit.Record
	refusal func(row) error
}

// refusal reads the row under its lock in a transaction and, if the
// change still does not apply, writes the record of the refusal in the
// same transaction: so its place in the trail is where it was decided.
// done is false when the row has moved to where the change applies (the
// caller tries the change again).
func (s *Store) refusal(ctx context.Context, id ledger.ID, applies func(row) bool, a *audited, r *row) (done bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	*r = row{}
	var b pgx.Batch
	b.Queue(s.rowLockSQL, s.rowLockKey+id.String())
	b.Queue(s.readSQL, s.ns, id[:], s.traceSeq).QueryRow(func(src pgx.Row) error { return r.scan(id, src) })
	s.queueWait(&b) // refusedIn commits it
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return false, err
	}
	if applies(*r) {
		return false, nil
	}
	if err := s.refusedIn(ctx, tx, a.rec.Op, a.rec.Prefix(), a.refusal(*r)); err != nil && ledger.ResultOf(err) == ledger.ResultError {
		return false, err
	}
	return true, nil
}

// refusedIn writes, in tx, the record (prefix) of op refused with
// refusal, and commits tx; it returns refusal, or the error that kept the
// record from being written. A nil prefix: no trail, nothing written
// (but tx is committed when answers wait for a standby: see waitSQL).
func (s *Store) refusedIn(ctx context.Context, tx pgx.Tx, op audit.Op, prefix []byte, refusal error) error {
	if prefix == nil {
		if s.readsWait.Load() {
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		}
		return refusal
	}
	result := string(ledger.ResultOf(refusal))
	if audit.Recorded(op, result) {
		if _, err := tx.Exec(ctx, s.appendSQL, s.ns, prefix, result); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return refusal
}

// errNoTrail: an audit.Trail method of a Store opened without
// Options.Audit.
var errNoTrail = errors.New("pgledger: the store keeps no audit trail (Options.Audit)")

// errNoHead: a transition failed, twice, because the namespace's audit
// head row was missing; it was not made.
var errNoHead = errors.New("pgledger: the audit head row is missing")

// sealing runs op, an audited transition, once the namespace's head row
// exists: the store makes it (headRowSQL) before its first transition,
// and again when a transition fails because the row has gone (deleted
// since; the transition's statement failed whole, so it was not made),
// and then runs op once more. A store that keeps no trail just runs op.
func (s *Store) sealing(ctx context.Context, op func() error) error {
	if !s.audit {
		return op()
	}
	for retried := false; ; retried = true {
		if !s.headMade.Load() {
			if _, err := s.pool.Exec(ctx, s.headRowSQL, s.ns); err != nil {
				return fmt.Errorf("audit head: %w", err)
			}
			s.headMade.Store(true)
		}
		err := op()
		if !s.noHead(err) {
			return err
		}
		s.headMade.Store(false)
		if retried {
			return fmt.Errorf("%w: %w", errNoHead, err)
		}
	}
}

// noHead tells whether err is the failure of a statement that found no
// head row (see seal in auditSQL): the record's insert of a NULL line.
func (s *Store) noHead(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23502" && pe.TableName == s.records && pe.ColumnName == "line"
}

var _ audit.Trail = (*Store)(nil)

// Head implements [audit.Trail].
func (s *Store) Head(ctx context.Context) (uint64, audit.Hash, error) {
	var h audit.Hash
	if !s.audit {
		return 0, h, errNoTrail
	}
	var seq int64
	var head []byte
	err := s.pool.QueryRow(ctx, s.headSQL, s.ns).Scan(&seq, &head)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && seq == 0: // made, no record yet
		return 0, h, nil
	case err != nil:
		return 0, h, fmt.Errorf("pgledger: audit head: %w", err)
	case len(head) != len(h):
		return 0, h, fmt.Errorf("pgledger: audit head: %w", errCorrupt)
	}
	copy(h[:], head)
	return uint64(seq), h, nil
}

// Records implements [audit.Trail].
func (s *Store) Records(ctx context.Context, from uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if !s.audit {
			yield(nil, errNoTrail)
			return
		}
		rows, err := s.pool.Query(ctx, s.recordsSQL, s.ns, int64(from))
		if err != nil {
			yield(nil, fmt.Errorf("pgledger: audit records: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var line []byte
			if err := rows.Scan(&line); err != nil {
				yield(nil, fmt.Errorf("pgledger: audit records: %w", err))
				return
			}
			if !yield(line, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, fmt.Errorf("pgledger: audit records: %w", err))
		}
	}
}

// AddCheckpoint implements [audit.Trail].
func (s *Store) AddCheckpoint(ctx context.Context, c audit.Checkpoint) error {
	if !s.audit {
		return errNoTrail
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.addCheckpointSQL, s.ns, int64(c.Seq), string(b)); err != nil {
		return fmt.Errorf("pgledger: audit checkpoint: %w", err)
	}
	return nil
}

// Checkpoints implements [audit.Trail].
func (s *Store) Checkpoints(ctx context.Context) ([]audit.Checkpoint, error) {
	if !s.audit {
		return nil, errNoTrail
	}
	rows, err := s.pool.Query(ctx, s.checkpointsSQL, s.ns)
	if err != nil {
		return nil, fmt.Errorf("pgledger: audit checkpoints: %w", err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgledger: audit checkpoints: %w", err)
	}
	cps := make([]audit.Checkpoint, len(texts))
	for i, t := range texts {
		if err := json.Unmarshal([]byte(t), &cps[i]); err != nil {
			return nil, fmt.Errorf("pgledger: audit checkpoint: %w", err)
		}
	}
	return cps, nil
}

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// Trail returns s, which keeps its audit trail, or nil if it keeps none
// (Options.Audit).
func (s *Store) Trail() audit.Trail {
	if !s.audit {
		return nil
	}
	return s
}
