package fleet_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/fleetmem"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

// The use-case tests of this package run the Service on the in-memory
// store (adapters/memory/fleetmem), which passes the same contract suite
// (fleettest.Run) as the PostgreSQL store, and on the recording fakes of
// fleettest for the other ports.

type fixture struct {
	ctx    context.Context
	store  *fleetmem.Store
	svc    *fleet.Service
	clock  *fleettest.Clock
	prov   *fleettest.Provisioner
	ca     *fleettest.CA
	pub    *fleettest.Publisher
	term   *fleettest.Terminator
	locker *fleettest.CountingLocker
}

func newFixture(t testing.TB, configure ...func(*fleet.Config)) *fixture {
	t.Helper()
	store, err := fleetmem.New(fleetmem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clk := fleettest.NewClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	f := &fixture{
		ctx: context.Background(), store: store, clock: clk,
		prov: &fleettest.Provisioner{}, ca: fleettest.NewCA(clk.Now), pub: &fleettest.Publisher{}, term: &fleettest.Terminator{},
		locker: &fleettest.CountingLocker{Locker: store},
	}
	cfg := fleet.Config{
		Store: store, Provisioner: f.prov, ProvisioningEnabled: true, CA: f.ca, Publisher: f.pub,
		Terminator: f.term, Locker: f.locker, Clock: clk.Now,
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

// enrolled returns a freshly enrolled sensor of tenantID.
func (f *fixture) enrolled(t testing.TB, tenantID string) (fleet.Redemption, fleet.Enrollment) {
	t.Helper()
	r := f.redeemed(t, tenantID)
	e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	if err != nil {
		t.Fatal(err)
	}
	return r, e
}

func (f *fixture) sensor(t testing.TB, id string) fleet.Sensor {
	t.Helper()
	s, err := f.svc.Sensor(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// proof is a proof of possession of certPEM's key for renewing csr, signed now.
func (f *fixture) proof(certPEM []byte, sensorID string, csr []byte) *fleet.PossessionProof {
	return fleettest.Proof(certPEM, sensorID, csr, f.clock.Now())
}

// sensorCount is how many sensors the store holds, in every tenant and state.
func (f *fixture) sensorCount(t testing.TB) int {
	t.Helper()
	list, err := f.store.Sensors(f.ctx, fleet.SensorFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// liveTokenHash is the hash of the sensor's live token of kind, nil when
// it has none.
func (f *fixture) liveTokenHash(t testing.TB, sensorID string, kind fleet.TokenKind) []byte {
	t.Helper()
	tok, err := f.store.LiveToken(f.ctx, sensorID, kind)
	if errors.Is(err, fleet.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok.Hash
}

// issue is IssueCommand without an idempotency key.
func issue(f *fixture, sensorID string, a fleet.Action, by string) (fleet.Command, error) {
	c, _, err := f.svc.IssueCommand(f.ctx, sensorID, a, by, "")
	return c, err
}

func sha(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}
