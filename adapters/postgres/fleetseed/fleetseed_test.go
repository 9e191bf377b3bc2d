package fleetseed_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.ControlPlanePool(t)
	for _, id := range []string{"fleet", "other"} {
		if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, now())`, id); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM sensors WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSeedWritesTheFleetOnceAndRestoresStates(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	spec := fleetseed.Spec{TenantID: "fleet", Count: 1000}
	n, err := fleetseed.Seed(ctx, pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Fatalf("inserted %d, want 1000", n)
	}
	if got := count(t, pool, `tenant_id = 'fleet'`); got != 1000 {
		t.Fatalf("%d sensors in the tenant, want 1000", got)
	}
	for state, want := range map[string]int{"running": 600, "stopped": 150, "offline": 100, "online": 70, "error": 40, "revoked": 20, "pending": 20} {
		if got := count(t, pool, `tenant_id = 'fleet' AND state = $1`, state); got != want {
			t.Errorf("%s: %d sensors, want %d", state, got, want)
		}
	}
	if got := count(t, pool, `state <> 'pending' AND (agent_version = '' OR address = '')`); got != 0 {
		t.Errorf("%d enrolled sensors without agent version or address", got)
	}
	if got := count(t, pool, `id = 'seed-000258' AND address = '10.0.1.2' AND agent_version = '1.5.1'`); got != 1 {
		t.Error("sensor 258 is not at 10.0.1.2 with agent 1.5.1")
	}
	if got := count(t, pool, `hostname = '' OR name = ''`); got != 0 {
		t.Errorf("%d sensors without name or hostname", got)
	}
	if got := count(t, pool, `id = 'seed-000001' AND name = 'core-fra-00001'`); got != 1 {
		t.Errorf("sensor 1 is not named core-fra-00001")
	}

	// The control plane marks them offline; seeding again restores them
	// and adds the missing ones, leaving a revocation alone.
	if _, err := pool.Exec(ctx, `UPDATE sensors SET state = 'offline' WHERE state <> 'revoked'`); err != nil {
		t.Fatal(err)
	}
	spec.Count = 1200
	if _, err := fleetseed.Seed(ctx, pool, spec); err != nil {
		t.Fatal(err)
	}
	if got := count(t, pool, `tenant_id = 'fleet'`); got != 1200 {
		t.Fatalf("%d sensors after the second seeding, want 1200", got)
	}
	if got := count(t, pool, `state = 'running'`); got != 720 {
		t.Errorf("%d running after the second seeding, want 720", got)
	}

	// A sensor of another tenant with a seeded id is never touched.
	if _, err := pool.Exec(ctx, `UPDATE sensors SET tenant_id = 'other', state = 'offline' WHERE id = 'seed-000001'`); err != nil {
		t.Fatal(err)
	}
	if _, err := fleetseed.Seed(ctx, pool, spec); err != nil {
		t.Fatal(err)
	}
	if got := count(t, pool, `id = 'seed-000001' AND tenant_id = 'other' AND state = 'offline'`); got != 1 {
		t.Error("seeding changed another tenant's sensor")
	}
}

func TestKeepAliveRefreshesLiveSensorsOnly(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	spec := fleetseed.Spec{TenantID: "fleet", Count: 100}
	if _, err := fleetseed.Seed(ctx, pool, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE sensors SET last_seen_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	n, err := fleetseed.KeepAlive(ctx, pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	if n != 86 { // running 60, stopped 15, online 7, error 4
		t.Errorf("refreshed %d, want 86", n)
	}
	if got := count(t, pool, `last_seen_at > now() - interval '1 minute'`); got != 86 {
		t.Errorf("%d recently seen, want 86", got)
	}
	if got := count(t, pool, `state IN ('offline', 'revoked') AND last_seen_at > $1`, time.Now().Add(-time.Minute)); got != 0 {
		t.Errorf("%d offline or revoked sensors refreshed", got)
	}
}

func TestSpecIsChecked(t *testing.T) {
	for name, spec := range map[string]fleetseed.Spec{
		"no tenant":      {Count: 1},
		"negative":       {TenantID: "t", Count: -1},
		"too many":       {TenantID: "t", Count: fleetseed.MaxCount + 1},
		"prefix pattern": {TenantID: "t", Count: 1, Prefix: "a%"},
	} {
		if _, err := fleetseed.Seed(context.Background(), nil, spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
