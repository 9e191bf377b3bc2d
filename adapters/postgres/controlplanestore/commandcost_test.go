package controlplanestore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/pgstoretest"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

// statementCounter is a pgx tracer that records every statement sent while
// it is on.
type statementCounter struct {
	mu   sync.Mutex
	on   bool
	seen []string
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		c.seen = append(c.seen, strings.Join(strings.Fields(d.SQL), " "))
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) record(on bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = on
	out := c.seen
	if on {
		c.seen = nil
	}
	return out
}

// tracedStore is a store on pool's database, on its own pool, whose
// statements counter records once it is on (counter.record(true)).
func tracedStore(t testing.TB, pool *pgxpool.Pool) (*controlplanestore.Store, *statementCounter) {
	t.Helper()
	counter := &statementCounter{}
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = counter
	return storeOn(t, pgstoretest.Pool(t, cfg)), counter
}

// TestIssueCommandStatementCost is a cost guard on the fan-out's hot path
// that does not depend on the machine: one command to one sensor (the
// fleet service on this store, as POST /api/sensors/{id}/commands runs it)
// costs at most commandStatements PostgreSQL statements, each a round trip
// every command of a fan-out waits on. A timing on the shared machine
// cannot tell a statement more from the load (docs/benchmarks-history.md,
// "Control-plane fan-out, before and after this session (issue 21)").
func TestIssueCommandStatementCost(t *testing.T) {
	// The sensor read, the command's transaction (begin, insert, the
	// sensor's last command, commit) and its acceptance.
	const commandStatements = 6

	store, counter := tracedStore(t, newPool(t))
	fl := fleettest.NewFleet(t, store, store)
	fl.ProvisionedTenant(t, "acme")
	var sensors []string
	for range 3 {
		red, _ := fl.Enrolled(t, "acme")
		sensors = append(sensors, red.SensorID)
	}

	for i, id := range sensors {
		counter.record(true)
		c, created, err := fl.Svc.IssueCommand(fl.Ctx, id, fleet.ActionStart, "operator@example.com", "")
		seen := counter.record(false)
		if err != nil || !created || c.Status != fleet.CommandAccepted {
			t.Fatalf("command %d: status %q, created %v, err %v", i, c.Status, created, err)
		}
		// The positive control: the tracer sees the statements at all.
		if len(seen) == 0 {
			t.Fatal("no statement traced: the guard would pass whatever the cost")
		}
		if len(seen) > commandStatements {
			t.Errorf("command %d took %d statements, want at most %d:\n  %s", i, len(seen), commandStatements, strings.Join(seen, "\n  "))
		}
	}
	if got := len(fl.Pub.Messages()); got != len(sensors) {
		t.Fatalf("published %d commands, want %d", got, len(sensors))
	}
}
