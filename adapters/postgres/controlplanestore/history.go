package controlplanestore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/fleet"
)

// History retention (fleet.HistoryStore, audit.Pruner): each call is one
// short statement (a batch: one short transaction) over at most limit rows,
// found through migration 026's indexes. The SQL conditions are the rules
// of core/fleet/history.go; the contract suites hold them equal to the
// in-memory store's.

var (
	_ fleet.HistoryStore = (*Store)(nil)
	_ audit.Pruner       = (*Store)(nil)
)

// commandPrunableSQL is fleet.CommandPrunable plus the store's part: not
// its sensor's last command, neither the one recorded last (a later one
// exists) nor the one the sensor row names. $1 is the cut-off; c the
// command.
const commandPrunableSQL = `
	c.issued_at < $1 AND c.expires_at < $1
	AND (c.status IN ('failed', 'expired') OR (c.status = 'accepted' AND c.acknowledged_at IS NOT NULL))
	AND EXISTS (SELECT 1 FROM commands n WHERE n.sensor_id = c.sensor_id AND n.seq > c.seq)
	AND NOT EXISTS (SELECT 1 FROM sensors s WHERE s.last_command_id = c.id)`

// PruneCommands implements fleet.HistoryStore: finished old commands
// outside any batch, oldest first.
func (s *Store) PruneCommands(ctx context.Context, before time.Time, limit int) (int, error) {
	return rowsChanged(ctx, s.pool, `
		DELETE FROM commands WHERE id IN (
			SELECT c.id FROM commands c
			WHERE c.batch_id IS NULL AND`+commandPrunableSQL+`
			ORDER BY c.issued_at LIMIT $2
			FOR UPDATE SKIP LOCKED)`, before, limit)
}

// PruneBatches implements fleet.HistoryStore. It walks the batches created
// before the cut-off oldest first (keyset pages of batchPage, no check in
// the page query: checking every old batch in one statement read all their
// commands on every call), and gives each its own transaction that locks
// it (FOR UPDATE SKIP LOCKED: a concurrent pass takes another), checks it
// and deletes its commands and then itself. One check suffices: a finished
// command stays finished (a late report makes an expired one accepted),
// and a command becomes no sensor's last one again once a later one exists
// (only the pass deletes commands, and never the last).
func (s *Store) PruneBatches(ctx context.Context, before time.Time, limit int) (batches, commands int, err error) {
	// A call with the cut-off of the call before it (the same pass) goes
	// on after the last batch that call checked: the batches before it
	// were deleted or found to stay, and re-checking those that stay (an
	// old batch holding a sensor's last command stays for as long as the
	// sensor gets no other) on every call cost a walk over all of them per
	// limit batches deleted.
	afterAt, afterID := s.batchWalk.resume(before)
	defer func() { s.batchWalk.save(before, afterAt, afterID, err) }()
	for batches < limit {
		rows, err := s.pool.Query(ctx, `
			SELECT id, created_at FROM command_batches
			WHERE created_at < $1 AND (created_at, id) > ($2, $3)
			ORDER BY created_at, id LIMIT $4`, before, afterAt, afterID, batchPage)
		if err != nil {
			return batches, commands, err
		}
		type key struct {
			ID string
			At time.Time
		}
		page, err := pgx.CollectRows(rows, pgx.RowToStructByPos[key])
		if err != nil {
			return batches, commands, err
		}
		if len(page) == 0 {
			afterAt, afterID = time.Time{}, "" // walked to the end: the next call starts again
			return batches, commands, nil
		}
		for _, k := range page {
			n, ok, err := s.pruneBatch(ctx, k.ID, before)
			if err != nil {
				return batches, commands, err
			}
			afterAt, afterID = k.At, k.ID
			if ok {
				batches, commands = batches+1, commands+n
				if batches == limit {
					break
				}
			}
		}
	}
	return batches, commands, nil
}

// batchWalk is where PruneBatches stopped, for the next call of the same
// pass (the same cut-off).
type batchWalk struct {
	mu     sync.Mutex
	before time.Time
	at     time.Time
	id     string
}

func (w *batchWalk) resume(before time.Time) (time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.before.Equal(before) {
		return time.Time{}, ""
	}
	return w.at, w.id
}

func (w *batchWalk) save(before, at time.Time, id string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		at, id = time.Time{}, ""
	}
	w.before, w.at, w.id = before, at, id
}

// batchPage is how many old batches PruneBatches reads at a time.
const batchPage = 100

// pruneBatch deletes batch id and its commands if it is removable once
// locked; ok false when it is not, or another pass holds it.
func (s *Store) pruneBatch(ctx context.Context, id string, before time.Time) (n int, ok bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var removable bool
		err := tx.QueryRow(ctx, `
			SELECT NOT EXISTS (SELECT 1 FROM commands c WHERE c.batch_id = b.id AND NOT (`+commandPrunableSQL+`))
			FROM command_batches b WHERE b.id = $2 AND b.created_at < $1
			FOR UPDATE SKIP LOCKED`, before, id).Scan(&removable)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !removable {
			return nil
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM commands WHERE batch_id = $1`, id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM command_batches WHERE id = $1`, id); err != nil {
			return err
		}
		n, ok = int(tag.RowsAffected()), true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return n, ok, nil
}

// PruneTokens implements fleet.HistoryStore (sensor_tokens_ended_idx).
func (s *Store) PruneTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	return rowsChanged(ctx, s.pool, endedSensorTokens.sql, before, limit)
}

// PruneClaimCodes implements fleet.HistoryStore (claim_codes_ended_idx).
func (s *Store) PruneClaimCodes(ctx context.Context, before time.Time, limit int) (int, error) {
	return rowsChanged(ctx, s.pool, endedClaimCodes.sql, before, limit)
}

// PruneAudit implements audit.Pruner (audit_log_at_idx).
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	return rowsChanged(ctx, s.pool, endedAudit.sql, before, limit)
}

// PruneAPITokens implements operators.APITokenPruner (api_tokens_ended_idx).
func (s *Store) PruneAPITokens(ctx context.Context, before time.Time, limit int) (int, error) {
	return rowsChanged(ctx, s.pool, endedAPITokens.sql, before, limit)
}

// The tables whose rows are pruned once they have ended, each with its key
// and the SQL expression of a row's end, written as the table's index on it
// is so that the index serves the search.
var (
	endedSensorTokens = endedRows("sensor_tokens", "token_hash", "LEAST(used_at, revoked_at, expires_at)")
	endedClaimCodes   = endedRows("claim_codes", "id", "LEAST(used_at, revoked_at, expires_at)")
	endedAudit        = endedRows("audit_log", "id", "at")
	endedAPITokens    = endedRows("api_tokens", "id", "LEAST(revoked_at, expires_at)")
)

// pruneStatement is the statement that deletes at most $2 rows of one
// table whose end is before $1, the earliest ended first, passing over
// rows another transaction holds. Only endedRows makes one, from the
// package's own table names, so no input reaches its text.
type pruneStatement struct{ sql string }

func endedRows(table, key, end string) pruneStatement {
	return pruneStatement{sql: `
		DELETE FROM ` + table + ` WHERE ` + key + ` IN (
			SELECT ` + key + ` FROM ` + table + ` WHERE ` + end + ` < $1
			ORDER BY ` + end + ` LIMIT $2
			FOR UPDATE SKIP LOCKED)`}
}
