package fleet_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// Attacks across tenants on the sensor side: a sensor of one tenant (or
// whoever holds its material) tries to use it for a sensor of another.
// Each refusal sits next to the control that the same material works for
// its own sensor.

func TestAttackEnrolWithAnotherTenantsToken(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "beta")
	victim := f.redeemed(t, "acme")
	mine := f.redeemed(t, "beta")
	_, err := f.svc.Enroll(f.ctx, victim.SensorID, mine.EnrollmentToken, []byte("csr"))
	wantErr(t, err, fleet.ErrInvalidToken)
	if s := f.sensor(t, victim.SensorID); s.State != fleet.StatePending || s.Certificate.Serial != "" {
		t.Errorf("victim after the attempt: %+v; want still pending without certificate", s)
	}
	// Controls: each token enrols its own sensor, once.
	for _, r := range []fleet.Redemption{victim, mine} {
		e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
		if err != nil || e.TenantID != r.TenantID {
			t.Fatalf("own enrolment of %s: %+v, %v", r.SensorID, e, err)
		}
	}
	// The NATS user handed out is always the sensor's own tenant's.
	for _, c := range f.prov.Calls() {
		if c == "EnsureSensorUser beta "+victim.SensorID || c == "EnsureSensorUser acme "+mine.SensorID {
			t.Errorf("provisioner asked for %q: a user across tenants", c)
		}
	}
}

func TestAttackRenewWithAnotherTenantsMaterial(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "beta")
	victim, ve := f.enrolled(t, "acme")
	_, me := f.enrolled(t, "beta")
	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	csr := []byte("csr")
	// A refused renewal leaves the victim's certificate.
	f.refusedRenewals(t, victim.SensorID, ve.Certificate.Serial, map[string]renewal{
		"my token, my proof":     {me.SensorToken, csr, f.proof(me.Certificate.CertificatePEM, victim.SensorID, csr), fleet.ErrInvalidToken},
		"my token, no proof":     {me.SensorToken, csr, nil, fleet.ErrInvalidToken},
		"stolen token, my proof": {ve.SensorToken, csr, f.proof(me.Certificate.CertificatePEM, victim.SensorID, csr), fleet.ErrInvalidProof},
	})
	// My certificate is no good for the victim at the gRPC edge either.
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", victim.SensorID, me.Certificate.Serial), fleet.ErrInvalidToken)
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "beta", victim.SensorID, ve.Certificate.Serial), fleet.ErrNotFound)
	// Control: the victim renews with its own material.
	if _, err := f.svc.Renew(f.ctx, victim.SensorID, ve.SensorToken, csr, f.proof(ve.Certificate.CertificatePEM, victim.SensorID, csr)); err != nil {
		t.Errorf("own renewal: %v", err)
	}
}

// A health check names its tenant, sensor and serial (from the client
// certificate at the gRPC edge); another tenant's name for the sensor is
// nobody, another sensor's certificate is no good, and none of them
// records anything.
func TestAttackCheckInForAnotherTenantsSensor(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "beta")
	victim, ve := f.enrolled(t, "acme")
	_, me := f.enrolled(t, "acme")
	serial := ve.Certificate.Serial
	for name, tc := range map[string]struct {
		tenant, serial string
		want           error
	}{
		"another tenant's name":        {"beta", serial, fleet.ErrNotFound},
		"a wildcard for the tenant":    {"acme.*", serial, fleet.ErrNotFound},
		"another sensor's certificate": {"acme", me.Certificate.Serial, fleet.ErrInvalidToken},
		"no certificate":               {"acme", "", fleet.ErrInvalidToken},
	} {
		t.Run(name, func(t *testing.T) {
			wantErr(t, f.svc.CheckIn(f.ctx, tc.tenant, victim.SensorID, tc.serial, fleet.Contact{AgentVersion: "evil"}), tc.want)
		})
	}
	if s := f.sensor(t, victim.SensorID); s.State != fleet.StateOffline || !s.LastSeenAt.IsZero() || s.AgentVersion != "" {
		t.Errorf("victim after foreign health checks: %+v", s)
	}
	f.clock.Advance(time.Second)
	// Control: its own certificate, the serial in any case.
	if err := f.svc.CheckIn(f.ctx, "acme", victim.SensorID, strings.ToUpper(serial), fleet.Contact{AgentVersion: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, victim.SensorID); s.State != fleet.StateOnline || s.AgentVersion != "1.2.3" {
		t.Errorf("own health check: %+v; want online, version recorded", s)
	}
}

// A listing scoped to one tenant never shows another's sensors, and a
// cursor from a wider scope is refused rather than widening a narrower one.
func TestListingStaysInScope(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "beta")
	for range 3 {
		f.enrolled(t, "acme")
		f.enrolled(t, "beta")
	}
	page, err := f.svc.ListSensors(f.ctx, fleet.SensorListing{SensorMatch: fleet.SensorMatch{Tenants: []string{"acme"}}, Limit: 10})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("acme's listing: %d sensors, %v; want 3", len(page.Items), err)
	}
	for _, s := range page.Items {
		if s.TenantID != "acme" {
			t.Errorf("acme's listing shows %s of %s", s.ID, s.TenantID)
		}
	}
	if page, err := f.svc.ListSensors(f.ctx, fleet.SensorListing{SensorMatch: fleet.SensorMatch{Tenants: []string{}}}); err != nil || len(page.Items) != 0 {
		t.Errorf("an empty scope lists %d sensors, %v", len(page.Items), err)
	}
	wide, err := f.svc.ListSensors(f.ctx, fleet.SensorListing{Limit: 2})
	if err != nil || wide.NextCursor == "" {
		t.Fatalf("unscoped first page: %v, cursor %q", err, wide.NextCursor)
	}
	_, err = f.svc.ListSensors(f.ctx, fleet.SensorListing{SensorMatch: fleet.SensorMatch{Tenants: []string{"acme"}}, Limit: 2, Cursor: wide.NextCursor})
	wantErr(t, err, fleet.ErrInvalidCursor)
	// Control: the cursor continues its own listing.
	next, err := f.svc.ListSensors(f.ctx, fleet.SensorListing{Limit: 2, Cursor: wide.NextCursor})
	if err != nil || len(next.Items) != 2 || slices.ContainsFunc(next.Items, func(s fleet.Sensor) bool { return s.ID == wide.Items[0].ID }) {
		t.Errorf("second page: %d items, %v", len(next.Items), err)
	}
	total, byState, err := f.svc.SensorSummary(f.ctx, []string{"beta"})
	if err != nil || total != 3 || byState[fleet.StateOffline] != 3 {
		t.Errorf("beta's summary = %d, %v, %v; want its 3 offline sensors", total, byState, err)
	}
}
