// Package appenv holds what RXC's binaries share when they start: reading
// configuration from the environment (envconfig) with messages that name the
// variable, the JSON logger, a PostgreSQL pool that waits for the database
// so a service can start together with it, and the `migrate` subcommand.
package appenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kelseyhightower/envconfig"
)

// Load fills cfg (a pointer to a struct with envconfig tags) from the
// environment.
func Load(cfg any) error {
	if err := envconfig.Process("", cfg); err != nil {
		return fmt.Errorf("configuration: %s", strings.TrimPrefix(err.Error(), "envconfig."))
	}
	return nil
}

// Logger returns a JSON logger at level (debug, info, warn or error).
func Logger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("configuration: LOG_LEVEL %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Connect opens a pool on dsn and waits up to wait for PostgreSQL to answer.
func Connect(ctx context.Context, dsn string, wait time.Duration) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parser's message may quote the DSN, password included.
		return nil, errors.New("configuration: PG_DSN is not a valid PostgreSQL connection string")
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = pool.Ping(pctx)
		cancel()
		if err == nil {
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres did not answer within %s: %w", wait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Migrate is the `migrate` subcommand: it connects to PG_DSN, runs apply
// and prints what it applied.
func Migrate(ctx context.Context, stdout io.Writer, apply func(context.Context, *pgxpool.Pool) ([]string, error)) error {
	var cfg struct {
		PGDSN string `envconfig:"PG_DSN" required:"true"`
	}
	if err := Load(&cfg); err != nil {
		return err
	}
	pool, err := Connect(ctx, cfg.PGDSN, 30*time.Second)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := apply(ctx, pool)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema is up to date")
	}
	for _, v := range applied {
		fmt.Fprintln(stdout, "applied", v)
	}
	return nil
}
