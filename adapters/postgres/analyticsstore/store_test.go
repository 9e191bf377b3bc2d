package analyticsstore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) (*analyticsstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	s, err := analyticsstore.New(analyticsstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

var base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// The store's queries are held by the contract suite (contract_test.go,
// core/analytics/analyticstest), which the in-memory store passes too; the
// overview use case is tested in core/analytics.

// TestWithoutEventsTable: a database without the table (ingestion's
// migration not applied) reports it rather than failing obscurely.
func TestWithoutEventsTable(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := context.Background()
	if ok, err := store.EventsStored(ctx); err != nil || ok {
		t.Fatalf("EventsStored on an empty database: %v, %v; want false", ok, err)
	}
	_, err := store.Overview(ctx, analytics.Query{TenantID: "acme", From: base, To: base.Add(time.Hour), Limit: 10}, time.Minute)
	if !errors.Is(err, analytics.ErrEventsUnavailable) {
		t.Fatalf("overview without a table: %v; want ErrEventsUnavailable", err)
	}
}
