package controlplanestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/fleet"
)

// CreateClaimCode implements fleet.ClaimStore.
func (s *Store) CreateClaimCode(ctx context.Context, c fleet.ClaimCode, codeHash []byte) error {
	// Only into a tenant not deleted: FOR SHARE waits for a DeleteTenant
	// in progress (it holds the row FOR UPDATE) and then sees its
	// deleted_at, so a code issued during a deletion is not left usable.
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO claim_codes (id, tenant_id, code_hash, sensor_name, created_at, created_by, expires_at)
		SELECT $1, t.id, $3, $4, $5, $6, $7 FROM tenants t WHERE t.id = $2 AND t.deleted_at IS NULL FOR SHARE`,
		c.ID, c.TenantID, codeHash, c.SensorName, c.CreatedAt, c.CreatedBy, c.ExpiresAt)
	if err != nil {
		return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	if tag.RowsAffected() == 0 {
		return fleet.ErrNotFound
	}
	return nil
}

// ClaimCodes implements fleet.ClaimStore.
func (s *Store) ClaimCodes(ctx context.Context, tenantID string) ([]fleet.ClaimCode, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+claimCodeCols+` FROM claim_codes WHERE tenant_id = $1 ORDER BY created_at DESC, id`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.ClaimCode, error) { return scanClaimCode(r) })
}

// ClaimCode implements fleet.ClaimStore.
func (s *Store) ClaimCode(ctx context.Context, id string) (fleet.ClaimCode, error) {
	c, err := scanClaimCode(s.pool.QueryRow(ctx, `SELECT `+claimCodeCols+` FROM claim_codes WHERE id = $1`, id))
	return c, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

const claimCodeCols = `id, tenant_id, sensor_name, expires_at, created_at, created_by, used_at, revoked_at, COALESCE(sensor_id, '')`

func scanClaimCode(r pgx.Row) (fleet.ClaimCode, error) {
	var c fleet.ClaimCode
	var used, revoked *time.Time
	if err := r.Scan(&c.ID, &c.TenantID, &c.SensorName, &c.ExpiresAt, &c.CreatedAt, &c.CreatedBy, &used, &revoked, &c.SensorID); err != nil {
		return fleet.ClaimCode{}, err
	}
	c.ExpiresAt, c.CreatedAt = c.ExpiresAt.UTC(), c.CreatedAt.UTC()
	c.UsedAt, c.RevokedAt = utc(used), utc(revoked)
	return c, nil
}

// RevokeClaimCode implements fleet.ClaimStore. A used code cannot be
// revoked (ErrConflict); revoking twice keeps the first time.
func (s *Store) RevokeClaimCode(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE claim_codes SET revoked_at = COALESCE(revoked_at, $2)
		WHERE id = $1 AND used_at IS NULL`, id, at)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM claim_codes WHERE id = $1)`, id).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return errors.Join(fleet.ErrConflict, errors.New("claim code already used"))
	}
	return fleet.ErrNotFound
}

// Redeem implements fleet.RedeemStore. The conditional UPDATE is the
// single-use guarantee: concurrent redeemers queue on the row lock and all
// but the first then see used_at set and match nothing.
func (s *Store) Redeem(ctx context.Context, r fleet.RedeemRecord) (fleet.Sensor, error) {
	// One statement, so one round trip and atomic without a transaction
	// block: the code is used, the sensor and its enrolment token created,
	// or nothing happens.
	var sensor fleet.Sensor
	err := s.pool.QueryRow(ctx, `
		WITH code AS (
			UPDATE claim_codes SET used_at = $2, sensor_id = $3
			WHERE code_hash = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2
			RETURNING tenant_id, sensor_name
		), sensor AS (
			INSERT INTO sensors (id, tenant_id, name, hostname, state, created_at)
			SELECT $3, code.tenant_id, COALESCE(NULLIF(code.sensor_name, ''), NULLIF($4, ''), $3), $4, 'pending', $2
			FROM code
			RETURNING id, tenant_id, name, hostname, state, created_at
		), token AS (
			INSERT INTO sensor_tokens (token_hash, sensor_id, kind, created_at, expires_at)
			SELECT $5, sensor.id, 'enrollment', $2, $6 FROM sensor
		)
		SELECT id, tenant_id, name, hostname, state, created_at FROM sensor`,
		r.CodeHash, r.At, r.SensorID, r.Hostname, r.TokenHash, r.TokenExpiresAt,
	).Scan(&sensor.ID, &sensor.TenantID, &sensor.Name, &sensor.Hostname, &sensor.State, &sensor.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return fleet.Sensor{}, fleet.ErrInvalidClaimCode
	}
	if err != nil {
		return fleet.Sensor{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	sensor.CreatedAt = sensor.CreatedAt.UTC()
	return sensor, nil
}
