package controlplanestore

import (
	"context"
	"time"

	"github.com/rxc-project/rxc/core/operators"
)

// CreateOperator implements operators.Store.
func (s *Store) CreateOperator(ctx context.Context, o operators.Operator, passwordHash string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO operators (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4)`,
		o.ID, o.Email, passwordHash, o.CreatedAt)
	return classify(err, operators.ErrNotFound, operators.ErrConflict)
}

// OperatorByEmail implements operators.Store.
func (s *Store) OperatorByEmail(ctx context.Context, email string) (operators.Operator, string, error) {
	var (
		o    operators.Operator
		hash string
	)
	err := s.pool.QueryRow(ctx, `SELECT id, email, created_at, password_hash FROM operators WHERE email = $1`, email).
		Scan(&o.ID, &o.Email, &o.CreatedAt, &hash)
	if err != nil {
		return operators.Operator{}, "", classify(err, operators.ErrNotFound, operators.ErrConflict)
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, hash, nil
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
	var o operators.Operator
	err := s.pool.QueryRow(ctx, `
		SELECT o.id, o.email, o.created_at
		FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
		WHERE s.token_hash = $1 AND s.expires_at > $2`, tokenHash, now).Scan(&o.ID, &o.Email, &o.CreatedAt)
	if err != nil {
		return operators.Operator{}, classify(err, operators.ErrNotFound, operators.ErrConflict)
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, nil
}

// DeleteSession implements operators.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM operator_sessions WHERE token_hash = $1`, tokenHash)
	return err
}

// DeleteExpiredSessions implements operators.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM operator_sessions WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
