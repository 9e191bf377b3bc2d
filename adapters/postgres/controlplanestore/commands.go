package controlplanestore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/fleet"
)

// CreateCommand implements fleet.CommandStore.
func (s *Store) CreateCommand(ctx context.Context, c fleet.Command) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.ID, c.TenantID, c.SensorID, string(c.Action), c.IssuedAt, c.IssuedBy, c.ExpiresAt); err != nil {
			return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
		}
		tag, err := tx.Exec(ctx, `UPDATE sensors SET last_command_id = $2 WHERE id = $1`, c.SensorID, c.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fleet.ErrNotFound
		}
		return nil
	})
}

// FailCommand implements fleet.CommandStore.
func (s *Store) FailCommand(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE commands SET failed_at = $2 WHERE id = $1`, id, at)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fleet.ErrNotFound
	}
	return nil
}
