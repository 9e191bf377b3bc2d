package controlplanestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/operators"
)

// SetPendingTOTP implements operators.SecondFactorStore.
func (s *Store) SetPendingTOTP(ctx context.Context, operatorID string, sealed []byte) error {
	return changeOne(ctx, s.pool, operators.ErrNotFound, `UPDATE operators SET totp_pending = $2 WHERE id = $1`, operatorID, sealed)
}

// TOTP implements operators.SecondFactorStore.
func (s *Store) TOTP(ctx context.Context, operatorID string) (operators.TOTPRecord, error) {
	var r operators.TOTPRecord
	err := s.pool.QueryRow(ctx, `SELECT totp_pending, totp_secret, totp_last_step FROM operators WHERE id = $1`, operatorID).
		Scan(&r.Pending, &r.Active, &r.LastStep)
	if errors.Is(err, pgx.ErrNoRows) {
		return operators.TOTPRecord{}, operators.ErrNotFound
	}
	return r, err
}

// EnableTOTP implements operators.SecondFactorStore: the pending secret
// becomes the active one only if it is still the one confirmed, and the
// recovery codes are replaced in the same transaction.
func (s *Store) EnableTOTP(ctx context.Context, operatorID string, pending []byte, step int64, recoveryHashes [][]byte) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := changeOne(ctx, tx, operators.ErrConflict, `
			UPDATE operators SET totp_secret = totp_pending, totp_pending = NULL, totp_enabled_at = now(), totp_last_step = $3
			WHERE id = $1 AND totp_pending = $2`, operatorID, pending, step); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM operator_recovery_codes WHERE operator_id = $1`, operatorID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO operator_recovery_codes (operator_id, code_hash) SELECT $1, unnest($2::bytea[])`, operatorID, recoveryHashes)
		return err
	})
}

// UseTOTPStep implements operators.SecondFactorStore: one conditional
// update, so two replicas accepting the same code at once cannot both win.
func (s *Store) UseTOTPStep(ctx context.Context, operatorID string, step int64) error {
	return changeOne(ctx, s.pool, operators.ErrReplayed, `UPDATE operators SET totp_last_step = $2 WHERE id = $1 AND totp_last_step < $2`, operatorID, step)
}

// UseRecoveryCode implements operators.SecondFactorStore.
func (s *Store) UseRecoveryCode(ctx context.Context, operatorID string, hash []byte, at time.Time) error {
	return changeOne(ctx, s.pool, operators.ErrNotFound, `
		UPDATE operator_recovery_codes SET used_at = $3
		WHERE operator_id = $1 AND code_hash = $2 AND used_at IS NULL`, operatorID, hash, at)
}

// DisableTOTP implements operators.SecondFactorStore.
func (s *Store) DisableTOTP(ctx context.Context, operatorID string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := changeOne(ctx, tx, operators.ErrNotFound, `
			UPDATE operators SET totp_secret = NULL, totp_pending = NULL, totp_enabled_at = NULL WHERE id = $1`, operatorID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM operator_recovery_codes WHERE operator_id = $1`, operatorID)
		return err
	})
}

// AuthSettings implements operators.SecondFactorStore.
func (s *Store) AuthSettings(ctx context.Context) (operators.AuthSettings, error) {
	var set operators.AuthSettings
	err := s.pool.QueryRow(ctx, `SELECT require_admin_second_factor, sso_only, break_glass_email FROM auth_settings`).
		Scan(&set.RequireAdminSecondFactor, &set.SSOOnly, &set.BreakGlassEmail)
	if errors.Is(err, pgx.ErrNoRows) {
		return operators.AuthSettings{}, nil
	}
	return set, err
}

// SetAuthSettings implements operators.SecondFactorStore.
func (s *Store) SetAuthSettings(ctx context.Context, set operators.AuthSettings) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO auth_settings (id, require_admin_second_factor, sso_only, break_glass_email) VALUES (true, $1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET require_admin_second_factor = EXCLUDED.require_admin_second_factor,
			sso_only = EXCLUDED.sso_only, break_glass_email = EXCLUDED.break_glass_email`, set.RequireAdminSecondFactor, set.SSOOnly, set.BreakGlassEmail)
	return err
}
