package controlplanestore_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/postgres/pgstoretest"
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
	fleet *fleettest.Fleet
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
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	pool := pgstoretest.Pool(t, cfg)
	if _, err := migrate.Apply(context.Background(), pool, "controlplane", migrations.ControlPlane); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// storeOn is a control-plane store on pool.
func storeOn(t testing.TB, pool *pgxpool.Pool) *controlplanestore.Store {
	t.Helper()
	store, err := controlplanestore.New(controlplanestore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func newFixture(t testing.TB, configure ...func(*fleet.Config)) *fixture {
	t.Helper()
	pool := newPool(t)
	store := storeOn(t, pool)
	fl := fleettest.NewFleet(t, store, store, configure...)
	return &fixture{
		fleet: fl, ctx: fl.Ctx, pool: pool, store: store, svc: fl.Svc, clock: fl.Clock,
		prov: fl.Prov, pub: fl.Pub, term: fl.Term,
	}
}

// acmeFixture is a fixture with tenant "acme" created and given its NATS
// account, where most tests start.
func acmeFixture(t testing.TB) *fixture {
	t.Helper()
	f := newFixture(t)
	f.provisionedTenant(t, "acme")
	return f
}

// provisionedTenant creates tenant id and gives it its NATS account.
func (f *fixture) provisionedTenant(t testing.TB, id string) fleet.Tenant {
	return f.fleet.ProvisionedTenant(t, id)
}

// redeemed issues a claim code in tenantID and redeems it.
func (f *fixture) redeemed(t testing.TB, tenantID string) fleet.Redemption {
	return f.fleet.Redeemed(t, tenantID)
}

func (f *fixture) sensor(t testing.TB, id string) fleet.Sensor { return f.fleet.Sensor(t, id) }

// replicaStore is another control plane's store on the same database:
// its own connection pool, as a second replica has.
func replicaStore(t testing.TB, pool *pgxpool.Pool) *controlplanestore.Store {
	t.Helper()
	return storeOn(t, pgstoretest.Pool(t, pool.Config()))
}

func (f *fixture) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	return pgstoretest.Value[int](f.ctx, t, f.pool, query, args...)
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}
