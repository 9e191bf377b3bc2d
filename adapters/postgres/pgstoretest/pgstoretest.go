// Package pgstoretest holds what the PostgreSQL adapters' tests share:
// connection pools on the test database (internal/pgtest) that close when
// the test ends.
package pgstoretest

import (
	"context"
	"testing"

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

// Open is Pool on the connection string dsn.
func Open(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	return Pool(t, cfg)
}
