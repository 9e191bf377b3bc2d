package controlplanestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/operators"
)

// operatorCols reads an operator with its tenants (aggregated, sorted).
const operatorCols = `o.id, o.email, o.role, o.disabled_at, o.created_at,
	COALESCE((SELECT array_agg(t.tenant_id ORDER BY t.tenant_id COLLATE "C") FROM operator_tenants t WHERE t.operator_id = o.id), '{}'),
	o.totp_enabled_at IS NOT NULL, o.password_hash = '` + operators.ExternalPasswordHash + `'`

func scanOperator(row pgx.Row, extra ...any) (operators.Operator, error) {
	var (
		o        operators.Operator
		role     string
		disabled *time.Time
	)
	dest := append([]any{&o.ID, &o.Email, &role, &disabled, &o.CreatedAt, &o.Tenants, &o.SecondFactor, &o.External}, extra...)
	if err := row.Scan(dest...); err != nil {
		return operators.Operator{}, err
	}
	o.Role, o.DisabledAt, o.CreatedAt = operators.Role(role), utc(disabled), o.CreatedAt.UTC()
	if len(o.Tenants) == 0 {
		o.Tenants = nil
	}
	return o, nil
}

// CreateOperator implements operators.Store.
func (s *Store) CreateOperator(ctx context.Context, o operators.Operator, passwordHash string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO operators (id, email, password_hash, role, disabled_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			o.ID, o.Email, passwordHash, string(o.Role), nullable.Time(o.DisabledAt), o.CreatedAt); err != nil {
			return err
		}
		return setTenants(ctx, tx, o.ID, o.Tenants)
	})
	return classify(err, operators.ErrNotFound, operators.ErrConflict)
}

func setTenants(ctx context.Context, tx pgx.Tx, id string, tenants []string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM operator_tenants WHERE operator_id = $1`, id); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO operator_tenants (operator_id, tenant_id) SELECT $1, unnest($2::text[])`, id, tenants)
	return err
}

// OperatorByEmail implements operators.Store.
func (s *Store) OperatorByEmail(ctx context.Context, email string) (operators.Operator, string, error) {
	var hash string
	o, err := scanOperator(s.pool.QueryRow(ctx, `SELECT `+operatorCols+`, o.password_hash FROM operators o WHERE o.email = $1`, email), &hash)
	if err != nil {
		return operators.Operator{}, "", classify(err, operators.ErrNotFound, operators.ErrConflict)
	}
	return o, hash, nil
}

// OperatorByID implements operators.Store.
func (s *Store) OperatorByID(ctx context.Context, id string) (operators.Operator, error) {
	o, err := scanOperator(s.pool.QueryRow(ctx, `SELECT `+operatorCols+` FROM operators o WHERE o.id = $1`, id))
	return o, classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// ListOperators implements operators.Store.
func (s *Store) ListOperators(ctx context.Context) ([]operators.Operator, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+operatorCols+` FROM operators o ORDER BY o.email`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (operators.Operator, error) { return scanOperator(row) })
}

// UpdateOperator implements operators.Store. The operators table is locked
// against concurrent changes for the transaction, so two admins demoting
// each other at once cannot both succeed.
func (s *Store) UpdateOperator(ctx context.Context, id string, change func(*operators.Operator) error) (operators.Operator, error) {
	var out operators.Operator
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE operators IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		o, err := scanOperator(tx.QueryRow(ctx, `SELECT `+operatorCols+` FROM operators o WHERE o.id = $1`, id))
		if err != nil {
			return classify(err, operators.ErrNotFound, operators.ErrConflict)
		}
		if err := change(&o); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE operators SET role = $2, disabled_at = $3 WHERE id = $1`, id, string(o.Role), nullable.Time(o.DisabledAt)); err != nil {
			return err
		}
		if err := setTenants(ctx, tx, id, o.Tenants); err != nil {
			return err
		}
		var admins int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM operators WHERE role = 'admin' AND disabled_at IS NULL`).Scan(&admins); err != nil {
			return err
		}
		if admins == 0 {
			return operators.ErrLastAdmin
		}
		out = o
		return nil
	})
	if err != nil {
		return operators.Operator{}, err
	}
	return out, nil
}

// SetPassword implements operators.Store.
func (s *Store) SetPassword(ctx context.Context, id, passwordHash string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := changeOne(ctx, tx, operators.ErrNotFound, `UPDATE operators SET password_hash = $2 WHERE id = $1`, id, passwordHash); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM operator_sessions WHERE operator_id = $1`, id)
		return err
	})
}

// CreateSession implements operators.SessionStore.
func (s *Store) CreateSession(ctx context.Context, sess operators.Session) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO operator_sessions (token_hash, operator_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		sess.TokenHash, sess.OperatorID, sess.CreatedAt, sess.ExpiresAt)
	return classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// SessionOperator implements operators.SessionStore.
func (s *Store) SessionOperator(ctx context.Context, tokenHash []byte, now time.Time) (operators.Operator, error) {
	o, err := scanOperator(s.pool.QueryRow(ctx, `
		SELECT `+operatorCols+`
		FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND o.disabled_at IS NULL`, tokenHash, now))
	return o, classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// DeleteSession implements operators.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM operator_sessions WHERE token_hash = $1`, tokenHash)
	return err
}

// DeleteOperatorSessions implements operators.SessionStore.
func (s *Store) DeleteOperatorSessions(ctx context.Context, operatorID string) (int, error) {
	return rowsChanged(ctx, s.pool, `DELETE FROM operator_sessions WHERE operator_id = $1`, operatorID)
}

// DeleteExpiredSessions implements operators.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	return rowsChanged(ctx, s.pool, `DELETE FROM operator_sessions WHERE expires_at <= $1`, now)
}

const tokenCols = `k.id, k.operator_id, k.name, k.role, k.tenants, k.created_by, k.created_at, k.expires_at, k.revoked_at`

func scanToken(row pgx.Row, extra ...any) (operators.APIToken, error) {
	var (
		t       operators.APIToken
		role    string
		revoked *time.Time
	)
	dest := append([]any{&t.ID, &t.OperatorID, &t.Name, &role, &t.Tenants, &t.CreatedBy, &t.CreatedAt, &t.ExpiresAt, &revoked}, extra...)
	if err := row.Scan(dest...); err != nil {
		return operators.APIToken{}, err
	}
	t.Role, t.RevokedAt = operators.Role(role), utc(revoked)
	t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
	if len(t.Tenants) == 0 {
		t.Tenants = nil
	}
	return t, nil
}

// CreateAPIToken implements operators.TokenStore.
func (s *Store) CreateAPIToken(ctx context.Context, t operators.APIToken, hash []byte) error {
	tenants := t.Tenants
	if tenants == nil {
		tenants = []string{}
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO api_tokens (id, operator_id, token_hash, name, role, tenants, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		t.ID, t.OperatorID, hash, t.Name, string(t.Role), tenants, t.CreatedBy, t.CreatedAt, t.ExpiresAt)
	if fk := foreignKeyViolation(err); fk {
		return operators.ErrNotFound
	}
	return classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// APITokenByHash implements operators.TokenStore.
func (s *Store) APITokenByHash(ctx context.Context, hash []byte) (operators.APIToken, operators.Operator, error) {
	var (
		o        operators.Operator
		role     string
		disabled *time.Time
	)
	t, err := scanToken(s.pool.QueryRow(ctx, `
		SELECT `+tokenCols+`, `+operatorCols+`
		FROM api_tokens k JOIN operators o ON o.id = k.operator_id WHERE k.token_hash = $1`, hash),
		&o.ID, &o.Email, &role, &disabled, &o.CreatedAt, &o.Tenants, &o.SecondFactor, &o.External)
	if err != nil {
		return operators.APIToken{}, operators.Operator{}, classify(err, operators.ErrNotFound, operators.ErrConflict)
	}
	o.Role, o.DisabledAt, o.CreatedAt = operators.Role(role), utc(disabled), o.CreatedAt.UTC()
	if len(o.Tenants) == 0 {
		o.Tenants = nil
	}
	return t, o, nil
}

// APITokenByID implements operators.TokenStore.
func (s *Store) APITokenByID(ctx context.Context, id string) (operators.APIToken, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM api_tokens k WHERE k.id = $1`, id))
	return t, classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// ListAPITokens implements operators.TokenStore.
func (s *Store) ListAPITokens(ctx context.Context, operatorID string) ([]operators.APIToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM api_tokens k WHERE $1 = '' OR k.operator_id = $1 ORDER BY k.created_at DESC, k.id`, operatorID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (operators.APIToken, error) { return scanToken(row) })
}

// RevokeAPIToken implements operators.TokenStore.
func (s *Store) RevokeAPIToken(ctx context.Context, id string, at time.Time) (operators.APIToken, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `
		UPDATE api_tokens k SET revoked_at = COALESCE(k.revoked_at, $2) WHERE k.id = $1 RETURNING `+tokenCols, id, at))
	return t, classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// LoginLockedUntil implements operators.ThrottleStore.
func (s *Store) LoginLockedUntil(ctx context.Context, keys []string) (time.Time, error) {
	var until *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(locked_until) FROM login_failures WHERE key = ANY($1)`, keys).Scan(&until); err != nil {
		return time.Time{}, err
	}
	return utc(until), nil
}

// RecordLoginFailure implements operators.ThrottleStore: one upsert counts
// the failure (restarting a stale count), one update sets the hold.
func (s *Store) RecordLoginFailure(ctx context.Context, key string, now time.Time, window time.Duration, hold func(int) time.Duration) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO login_failures (key, failures, last_failure, locked_until) VALUES ($1, 1, $2, $2)
			ON CONFLICT (key) DO UPDATE SET
				failures = CASE WHEN login_failures.last_failure < $2 - $3::interval THEN 1 ELSE login_failures.failures + 1 END,
				last_failure = $2
			RETURNING failures`, key, now, window).Scan(&n); err != nil {
			return err
		}
		if d := hold(n); d > 0 {
			_, err := tx.Exec(ctx, `UPDATE login_failures SET locked_until = GREATEST(locked_until, $2) WHERE key = $1`, key, now.Add(d))
			return err
		}
		return nil
	})
	return n, err
}

// ResetLoginFailures implements operators.ThrottleStore.
func (s *Store) ResetLoginFailures(ctx context.Context, key string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM login_failures WHERE key = $1`, key)
	return err
}

// PurgeLoginFailures implements operators.ThrottleStore.
func (s *Store) PurgeLoginFailures(ctx context.Context, before time.Time) (int, error) {
	return rowsChanged(ctx, s.pool, `DELETE FROM login_failures WHERE last_failure < $1 AND locked_until < $1`, before)
}

// AppendAudit implements audit.Store.
func (s *Store) AppendAudit(ctx context.Context, e audit.Entry) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO audit_log (at, actor_id, actor, actor_role, token_id, source, action, tenant_id, target, outcome, status, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		e.At, e.ActorID, e.Actor, e.ActorRole, e.TokenID, e.Source, e.Action, e.TenantID, e.Target, e.Outcome, e.Status, e.Detail)
	return err
}

// ListAudit implements audit.Store: newest first, keyset-paged on id.
func (s *Store) ListAudit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, at, actor_id, actor, actor_role, token_id, source, action, tenant_id, target, outcome, status, detail
		FROM audit_log
		WHERE ($1::text[] IS NULL OR tenant_id = ANY($1))
		  AND ($2 = '' OR tenant_id = $2) AND ($3 = '' OR actor = $3) AND ($4 = '' OR action = $4)
		  AND ($5 = 0 OR id < $5)
		ORDER BY id DESC LIMIT $6`, f.Tenants, f.TenantID, f.Actor, f.Action, f.Before, f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Entry, error) {
		var e audit.Entry
		err := row.Scan(&e.ID, &e.At, &e.ActorID, &e.Actor, &e.ActorRole, &e.TokenID, &e.Source, &e.Action, &e.TenantID, &e.Target, &e.Outcome, &e.Status, &e.Detail)
		e.At = e.At.UTC()
		return e, err
	})
}

// foreignKeyViolation reports whether err is PostgreSQL's 23503.
func foreignKeyViolation(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "23503"
}
