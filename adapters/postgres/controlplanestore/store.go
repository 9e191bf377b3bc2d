// Package controlplanestore is the control plane's PostgreSQL store. It
// implements the fleet and operators store ports and a Locker built on
// session-level advisory locks. Use cases that must be atomic (redeeming a
// claim code, consuming an enrolment token, replacing a certificate serial,
// applying a status report, revoking a sensor) each run in one transaction.
// Missing rows become fleet.ErrNotFound (operators.ErrNotFound for operator
// methods) and unique violations ErrConflict.
package controlplanestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
)

// Config wires a Store.
type Config struct {
	Pool *pgxpool.Pool
}

// Store is the PostgreSQL implementation of the control plane's ports.
type Store struct {
	pool      *pgxpool.Pool
	batchWalk batchWalk // PruneBatches' place within a pass
}

// New returns a Store on cfg.Pool. The schema (migrations.ControlPlane)
// must have been applied.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("controlplanestore: pool is required")
	}
	return &Store{pool: cfg.Pool}, nil
}

const uniqueViolation = "23505"

// classify maps "no rows" to notFound and unique violations to conflict.
func classify(err, notFound, conflict error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		return errors.Join(conflict, err)
	}
	return err
}

// execer runs a statement: the pool, or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// rowsChanged runs sql on db and answers how many rows it changed.
func rowsChanged(ctx context.Context, db execer, sql string, args ...any) (int, error) {
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// changeOne runs sql on db and answers none when it changed no row: the
// row it names is missing (or not in the state the statement requires).
func changeOne(ctx context.Context, db execer, none error, sql string, args ...any) error {
	n, err := rowsChanged(ctx, db, sql, args...)
	if err == nil && n == 0 {
		return none
	}
	return err
}

// utc turns a nullable timestamp into a UTC time, zero for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

var (
	_ fleet.Store     = (*Store)(nil)
	_ fleet.Locker    = (*Store)(nil)
	_ operators.Store = (*Store)(nil)
)
