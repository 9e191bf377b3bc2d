// Package pgstoretest holds what the PostgreSQL adapters' tests share
// beside internal/pgtest (which opens a pool on a connection string): a
// pool from a parsed configuration that closes when the test ends, and
// reading what a query returns straight from the database, to check what
// a store wrote.
package pgstoretest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool opens a connection pool with cfg, failing t when it cannot; the pool
// is closed when t ends.
func Pool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Column runs sql on pool and returns its rows' one column, failing t on
// any error.
func Column[T any](ctx context.Context, t testing.TB, pool *pgxpool.Pool, sql string, args ...any) []T {
	t.Helper()
	rows, _ := pool.Query(ctx, sql, args...) // its error comes back from CollectRows
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// Value runs sql on pool and returns its one row's one column, failing t
// on any error (no row included).
func Value[T any](ctx context.Context, t testing.TB, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}
