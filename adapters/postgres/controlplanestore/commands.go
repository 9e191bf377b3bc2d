package controlplanestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
)

const commandColumns = `m.id, m.tenant_id, m.sensor_id, m.action, m.issued_at, m.issued_by, m.expires_at,
	COALESCE(m.idempotency_key, ''), m.status, m.accepted_at, COALESCE(m.stream_seq, 0), m.failed_at,
	m.acknowledged_at, COALESCE(m.outcome, ''), m.outcome_reason, m.outcome_detail, COALESCE(m.batch_id, ''), m.first_sent_at`

func scanCommand(row pgx.Row) (fleet.Command, error) {
	var (
		c                       fleet.Command
		accepted, failed, acked *time.Time
		firstSent               *time.Time
		seq                     int64
	)
	err := row.Scan(&c.ID, &c.TenantID, &c.SensorID, &c.Action, &c.IssuedAt, &c.IssuedBy, &c.ExpiresAt,
		&c.IdempotencyKey, &c.Status, &accepted, &seq, &failed, &acked, &c.Outcome, &c.OutcomeReason, &c.OutcomeDetail,
		&c.BatchID, &firstSent)
	if err != nil {
		return fleet.Command{}, err
	}
	c.IssuedAt, c.ExpiresAt = c.IssuedAt.UTC(), c.ExpiresAt.UTC()
	c.AcceptedAt, c.FailedAt, c.AcknowledgedAt, c.StreamSeq = utc(accepted), utc(failed), utc(acked), uint64(seq)
	c.FirstSentAt = utc(firstSent)
	return c, nil
}

// CreateCommand implements fleet.CommandStore. The unique index on
// (sensor_id, idempotency_key) makes concurrent requests with one key leave
// one command.
func (s *Store) CreateCommand(ctx context.Context, c fleet.Command) (fleet.Command, bool, error) {
	var (
		out     fleet.Command
		created bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, idempotency_key, status, first_sent_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $5)
			ON CONFLICT (sensor_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`,
			c.ID, c.TenantID, c.SensorID, string(c.Action), c.IssuedAt, c.IssuedBy, c.ExpiresAt, nullable.String(c.IdempotencyKey))
		if err != nil {
			return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
		}
		if tag.RowsAffected() == 0 {
			out, err = scanCommand(tx.QueryRow(ctx, `SELECT `+commandColumns+` FROM commands m
				WHERE m.sensor_id = $1 AND m.idempotency_key = $2`, c.SensorID, c.IdempotencyKey))
			if err != nil {
				return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
			}
			if out.Action != c.Action {
				return errors.Join(fleet.ErrConflict, errors.New("the idempotency key was used for a command with another action"))
			}
			return nil
		}
		if err := changeOne(ctx, tx, fleet.ErrNotFound, `UPDATE sensors SET last_command_id = $2 WHERE id = $1`, c.SensorID, c.ID); err != nil {
			return err
		}
		out, created = c, true
		out.Status, out.FirstSentAt = fleet.CommandPending, c.IssuedAt
		return nil
	})
	return out, created, err
}

// AcceptCommand implements fleet.CommandStore.
func (s *Store) AcceptCommand(ctx context.Context, id string, seq uint64, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE commands SET status = 'accepted', stream_seq = COALESCE(stream_seq, $2), accepted_at = COALESCE(accepted_at, $3)
		WHERE id = $1 AND status IN ('pending', 'accepted')`, id, int64(seq), at)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return s.commandExists(ctx, id)
	}
	return nil
}

// FailCommand implements fleet.CommandStore.
func (s *Store) FailCommand(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE commands SET status = 'failed', failed_at = $2
		WHERE id = $1 AND status = 'pending' AND acknowledged_at IS NULL`, id, at)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return s.commandExists(ctx, id)
	}
	return nil
}

// commandExists is nil for a command that exists (its status made an
// update a no-op), else ErrNotFound.
func (s *Store) commandExists(ctx context.Context, id string) error {
	var one int
	return classify(s.pool.QueryRow(ctx, `SELECT 1 FROM commands WHERE id = $1`, id).Scan(&one), fleet.ErrNotFound, fleet.ErrConflict)
}

// PendingCommands implements fleet.CommandStore.
func (s *Store) PendingCommands(ctx context.Context, since time.Time, limit int) ([]fleet.Command, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+commandColumns+` FROM commands m
		WHERE m.status = 'pending' AND m.first_sent_at >= $1 ORDER BY m.first_sent_at, m.id LIMIT $2`, since, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Command, error) { return scanCommand(r) })
}

// ExpireCommands implements fleet.CommandStore.
func (s *Store) ExpireCommands(ctx context.Context, before time.Time) (int, error) {
	return rowsChanged(ctx, s.pool, `
		UPDATE commands SET status = 'expired'
		WHERE status IN ('pending', 'accepted') AND acknowledged_at IS NULL AND expires_at < $1`, before)
}

// SensorCommands implements fleet.CommandStore.
func (s *Store) SensorCommands(ctx context.Context, sensorID string, after fleet.CommandCursor, limit int) ([]fleet.Command, error) {
	var rows pgx.Rows
	var err error
	if after.ID == "" {
		rows, err = s.pool.Query(ctx, `SELECT `+commandColumns+` FROM commands m
			WHERE m.sensor_id = $1 ORDER BY m.issued_at DESC, m.id DESC LIMIT $2`, sensorID, limit)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+commandColumns+` FROM commands m
			WHERE m.sensor_id = $1 AND (m.issued_at, m.id) < ($2, $3)
			ORDER BY m.issued_at DESC, m.id DESC LIMIT $4`, sensorID, after.IssuedAt, after.ID, limit)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Command, error) { return scanCommand(r) })
}
