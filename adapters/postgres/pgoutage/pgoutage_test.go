package pgoutage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/pgoutage"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// TestOutageIsToldApartFromRefusals stops a real PostgreSQL under an open
// pool: every failure while it is down is an outage, a refused query never
// is, before or after.
func TestOutageIsToldApartFromRefusals(t *testing.T) {
	c := pgtest.Own(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	refusals := func(phase string) {
		t.Helper()
		for name, sql := range map[string]string{
			"syntax error":     `SELEC 1`,
			"unknown table":    `SELECT * FROM nowhere`,
			"unique violation": `INSERT INTO t VALUES (1), (1)`,
		} {
			_, err := pool.Exec(ctx, sql)
			if err == nil || pgoutage.Is(err) {
				t.Errorf("%s, %s: Is(%v) = true or no error, want a refusal", phase, name, err)
			}
		}
	}
	refusals("before")
	if pgoutage.Is(nil) || pgoutage.Is(errors.New("something else")) || pgoutage.Is(context.Canceled) {
		t.Error("Is is true for an error that is no outage")
	}

	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	// Pooled connections die first (cut mid-session), then new ones are
	// refused: both are outages.
	for i := range 6 {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := pool.Exec(qctx, `SELECT 1`)
		qcancel()
		if err == nil {
			t.Fatalf("query %d while PostgreSQL is stopped succeeded", i)
		}
		if !pgoutage.Is(err) {
			t.Errorf("query %d while stopped: Is(%v) = false, want true", i, fmt.Sprintf("%T %v", err, err))
		}
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := pool.Exec(ctx, `SELECT 1`); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL back, queries still fail: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refusals("after")
}
