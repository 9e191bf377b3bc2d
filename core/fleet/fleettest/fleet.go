package fleettest

import (
	"context"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// Fleet is a fleet.Service on a store under test, wired to this package's
// fakes for the other ports and to a clock the test moves. The use-case
// tests (on the in-memory store) and the PostgreSQL adapter's own tests
// both build on it.
type Fleet struct {
	Ctx   context.Context
	Svc   *fleet.Service
	Clock *Clock
	Prov  *Provisioner
	CA    *CA
	Pub   *Publisher
	Term  *Terminator
}

// Start is the clock's start: 2026-05-04 10:00 UTC.
var Start = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

// NewFleet builds the service on store and locker with provisioning on;
// configure may change the configuration first.
func NewFleet(t testing.TB, store fleet.Store, locker fleet.Locker, configure ...func(*fleet.Config)) *Fleet {
	t.Helper()
	clk := NewClock(Start)
	f := &Fleet{
		Ctx: context.Background(), Clock: clk,
		Prov: &Provisioner{}, CA: NewCA(clk.Now), Pub: &Publisher{}, Term: &Terminator{},
	}
	cfg := fleet.Config{
		Store: store, Provisioner: f.Prov, ProvisioningEnabled: true, CA: f.CA, Publisher: f.Pub,
		Terminator: f.Term, Locker: locker, Clock: clk.Now,
	}
	for _, c := range configure {
		c(&cfg)
	}
	var err error
	if f.Svc, err = fleet.New(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// ProvisionedTenant creates tenant id and gives it its NATS account.
func (f *Fleet) ProvisionedTenant(t testing.TB, id string) fleet.Tenant {
	t.Helper()
	if _, _, err := f.Svc.CreateTenant(f.Ctx, id, "Tenant "+id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Svc.ReconcileTenants(f.Ctx); err != nil {
		t.Fatal(err)
	}
	tenant, err := f.Svc.Tenant(f.Ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

// IssuedCode issues a claim code of the default lifetime, for no sensor
// name, in tenantID: its record and the code.
func (f *Fleet) IssuedCode(t testing.TB, tenantID string) (fleet.ClaimCode, string) {
	t.Helper()
	c, code, err := f.Svc.IssueClaimCode(f.Ctx, tenantID, 0, "", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return c, code
}

// Redeemed issues a claim code in tenantID and redeems it.
func (f *Fleet) Redeemed(t testing.TB, tenantID string) fleet.Redemption {
	t.Helper()
	_, code := f.IssuedCode(t, tenantID)
	r, err := f.Svc.RedeemClaimCode(f.Ctx, code, "sensor-host")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Enrolled returns a freshly enrolled sensor of tenantID.
func (f *Fleet) Enrolled(t testing.TB, tenantID string) (fleet.Redemption, fleet.Enrollment) {
	t.Helper()
	r := f.Redeemed(t, tenantID)
	e, err := f.Svc.Enroll(f.Ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	if err != nil {
		t.Fatal(err)
	}
	return r, e
}

// Sensor reads a sensor that must exist.
func (f *Fleet) Sensor(t testing.TB, id string) fleet.Sensor {
	t.Helper()
	s, err := f.Svc.Sensor(f.Ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
