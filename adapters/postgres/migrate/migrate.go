// Package migrate applies a component's SQL schema files (NNN_name.sql) to
// PostgreSQL in version order, each in its own transaction, and records them
// in schema_migrations. A PostgreSQL advisory lock taken inside every
// transaction serialises concurrent runners (two replicas starting at once),
// so each file is applied exactly once; running it again applies nothing.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockKey identifies the migration lock among the database's advisory locks.
// One key for every component: they share schema_migrations.
const lockKey int64 = 0x7278632d6d696772 // "rxc-migr"

const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    component  text        NOT NULL,
    version    bigint      NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)`

// File is one migration found in a file system.
type File struct {
	Version int64
	Name    string // file name, e.g. 001_init.sql
}

// Apply applies the *.sql files at the root of files that are not yet
// recorded for component, in version order, and returns the names of those it
// applied. On error it returns the names applied before the failing file;
// the failing file's transaction is rolled back.
func Apply(ctx context.Context, pool *pgxpool.Pool, component string, files fs.FS) (applied []string, err error) {
	if component == "" {
		return nil, errors.New("migrate: component is required")
	}
	list, err := List(files)
	if err != nil {
		return nil, err
	}
	if err := locked(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, createTable)
		return err
	}); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, f := range list {
		did, err := applyOne(ctx, pool, component, files, f)
		if err != nil {
			return applied, fmt.Errorf("migrate: %s %s: %w", component, f.Name, err)
		}
		if did {
			applied = append(applied, f.Name)
		}
	}
	return applied, nil
}

func applyOne(ctx context.Context, pool *pgxpool.Pool, component string, files fs.FS, f File) (bool, error) {
	body, err := fs.ReadFile(files, f.Name)
	if err != nil {
		return false, err
	}
	did := false
	err = locked(ctx, pool, func(tx pgx.Tx) error {
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE component = $1 AND version = $2)`,
			component, f.Version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		// No arguments: pgx sends the file with the simple protocol, which
		// accepts several statements.
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (component, version, name) VALUES ($1, $2, $3)`,
			component, f.Version, f.Name); err != nil {
			return err
		}
		did = true
		return nil
	})
	return did, err
}

// locked runs fn in a transaction holding the migration lock. The lock is
// transaction-scoped, so it is released on commit or rollback and can never
// stay behind on a pooled connection.
func locked(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
		return fn(tx)
	})
}

// List returns the migrations at the root of files in version order. Names
// must be NNN_name.sql; other .sql names and repeated versions are errors,
// so a misnamed file is never skipped silently. Other files are ignored.
func List(files fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("migrate: read migrations: %w", err)
	}
	var list []File
	seen := map[int64]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := parseVersion(e.Name())
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrate: %s and %s have the same version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		list = append(list, File{Version: v, Name: e.Name()})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Version < list[j].Version })
	return list, nil
}

func parseVersion(name string) (int64, error) {
	digits, rest, ok := strings.Cut(name, "_")
	if !ok || digits == "" || rest == ".sql" {
		return 0, fmt.Errorf("migrate: %q is not named NNN_name.sql", name)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("migrate: %q is not named NNN_name.sql", name)
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("migrate: %q: version must be a positive number", name)
	}
	return v, nil
}
