package controlplanestore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The adapter's own tests: the fleet store's contract suite, migrations,
// what PostgreSQL holds of secrets, and the renewal attacks with the real
// CA across replicas on one database. The fleet use cases themselves are
// tested in core/fleet on the in-memory store; the fakes of the other ports
// are the same ones (core/fleet/fleettest).

type fixture struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	store *controlplanestore.Store
	svc   *fleet.Service
	clock *fleettest.Clock
	prov  *fleettest.Provisioner
	pub   *fleettest.Publisher
	term  *fleettest.Terminator
}

// newPool gives a migrated, empty control-plane database.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrate.Apply(ctx, pool, "controlplane", migrations.ControlPlane); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

func newFixture(t testing.TB, configure ...func(*fleet.Config)) *fixture {
	t.Helper()
	pool := newPool(t)
	store, err := controlplanestore.New(controlplanestore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	clk := fleettest.NewClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	f := &fixture{
		ctx: context.Background(), pool: pool, store: store, clock: clk,
		prov: &fleettest.Provisioner{}, pub: &fleettest.Publisher{}, term: &fleettest.Terminator{},
	}
	cfg := fleet.Config{
		Store: store, Provisioner: f.prov, ProvisioningEnabled: true, CA: fleettest.NewCA(clk.Now), Publisher: f.pub,
		Terminator: f.term, Locker: store, Clock: clk.Now,
	}
	for _, c := range configure {
		c(&cfg)
	}
	f.svc, err = fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// provisionedTenant creates tenant id and gives it its NATS account.
func (f *fixture) provisionedTenant(t testing.TB, id string) fleet.Tenant {
	t.Helper()
	if _, _, err := f.svc.CreateTenant(f.ctx, id, "Tenant "+id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ReconcileTenants(f.ctx); err != nil {
		t.Fatal(err)
	}
	tenant, err := f.svc.Tenant(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

// redeemed issues a claim code in tenantID and redeems it.
func (f *fixture) redeemed(t testing.TB, tenantID string) fleet.Redemption {
	t.Helper()
	_, code, err := f.svc.IssueClaimCode(f.ctx, tenantID, 0, "", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.RedeemClaimCode(f.ctx, code, "sensor-host")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) sensor(t testing.TB, id string) fleet.Sensor {
	t.Helper()
	s, err := f.svc.Sensor(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(f.ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}
