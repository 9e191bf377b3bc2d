package controlplanestore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

// Attacks on health-check authorisation as the control plane wires it: the
// gRPC edge calls fleet.CheckInBatcher, which hands the checks that arrive
// together to Service.CheckIns, whose one statement on PostgreSQL both
// authorises and records them. Bad check-ins are mixed into one batch
// with good ones of other sensors; each caller must get its own answer and
// the bad ones must record nothing.

// batcher is the wiring of the control plane's serve, with a wait long
// enough for every check of a round to land in one batch, and the size of
// each batch kept.
type batcher struct {
	*fleet.CheckInBatcher
	mu    sync.Mutex
	sizes []int
}

func newBatcher(svc *fleet.Service) *batcher {
	b := &batcher{}
	b.CheckInBatcher = fleet.NewCheckInBatcher(fleet.CheckInBatcherConfig{MaxBatch: 100, MaxWait: 200 * time.Millisecond,
		Apply: func(ctx context.Context, in []fleet.CheckIn) []error {
			b.mu.Lock()
			b.sizes = append(b.sizes, len(in))
			b.mu.Unlock()
			return svc.CheckIns(ctx, in)
		}})
	return b
}

// check is one caller's health check and the answer it must get.
type check struct {
	name                   string
	tenant, sensor, serial string
	contact                fleet.Contact
	want                   error // nil: authorised
}

// round sends every check at once and requires one batch and each
// caller's own answer.
func (b *batcher) round(t *testing.T, checks []check) {
	t.Helper()
	b.mu.Lock()
	b.sizes = nil
	b.mu.Unlock()
	got := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			got[i] = b.CheckIn(context.Background(), c.tenant, c.sensor, c.serial, c.contact)
		})
	}
	wg.Wait()
	b.mu.Lock()
	if len(b.sizes) != 1 {
		t.Errorf("the checks went in batches %v, want one batch: the test must mix them", b.sizes)
	}
	b.mu.Unlock()
	for i, c := range checks {
		switch {
		case c.want == nil && got[i] != nil:
			t.Errorf("%s: %v, want authorised", c.name, got[i])
		case c.want != nil && !errors.Is(got[i], c.want):
			t.Errorf("%s: BROKEN: %v, want %v", c.name, got[i], c.want)
		}
	}
}

// Attack: a revoked sensor, a certificate superseded by a renewal (also in
// upper case), another sensor's serial (of the tenant, of another tenant),
// a sensor named under another tenant with its valid serial, and another
// tenant's sensor named under the attacker's tenant, all in one batch with
// good checks of other sensors. Each bad one is refused with
// AuthorizeSensor's reason and records nothing; each good one is
// authorised and recorded, including a version of 64 two-byte characters
// (PostgreSQL's length limit is in characters, as core's is: a check at
// the limit must not fail the statement and with it the whole batch).
// Then, within CheckInRefresh of those checks, when a check changing
// nothing is not written: a revocation and a renewal each refuse the very
// next check, while the other sensors' checks in the same batch pass.
func TestAttackCheckInBatchMixedWithForbiddenChecks(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	f.provisionedTenant(t, "globex")
	_, good1 := f.fleet.Enrolled(t, "acme")
	_, good2 := f.fleet.Enrolled(t, "acme")
	_, revoked := f.fleet.Enrolled(t, "acme")
	_, renewed := f.fleet.Enrolled(t, "acme")
	_, foreign := f.fleet.Enrolled(t, "globex")
	f.clock.Advance(fleet.DefaultMinRenewInterval + time.Second)
	csr := []byte("csr")
	rn, err := f.svc.Renew(f.ctx, renewed.SensorID, renewed.SensorToken, csr,
		fleettest.Proof(renewed.Certificate.CertificatePEM, renewed.SensorID, csr, f.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeSensor(f.ctx, revoked.SensorID, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	serial := func(e fleet.Enrollment) string { return e.Certificate.Serial }
	longVersion := strings.Repeat("é", 64)
	b := newBatcher(f.svc)
	b.round(t, []check{
		{"good check at the version limit", "acme", good1.SensorID, serial(good1), fleet.Contact{AgentVersion: longVersion, Address: "192.0.2.1"}, nil},
		{"good check of another sensor", "acme", good2.SensorID, serial(good2), fleet.Contact{AgentVersion: "1.0.0", Address: "192.0.2.2"}, nil},
		{"revoked sensor, its last serial", "acme", revoked.SensorID, serial(revoked), fleet.Contact{AgentVersion: "evil", Address: "192.0.2.66"}, fleet.ErrRevoked},
		{"superseded serial", "acme", renewed.SensorID, serial(renewed), fleet.Contact{AgentVersion: "evil", Address: "192.0.2.66"}, fleet.ErrInvalidToken},
		{"superseded serial in upper case", "acme", renewed.SensorID, strings.ToUpper(serial(renewed)), fleet.Contact{AgentVersion: "evil"}, fleet.ErrInvalidToken},
		{"another sensor's serial", "acme", good2.SensorID, serial(good1), fleet.Contact{AgentVersion: "evil", Address: "192.0.2.66"}, fleet.ErrInvalidToken},
		{"another tenant's sensor's serial under the caller's own name", "acme", good2.SensorID, serial(foreign), fleet.Contact{AgentVersion: "evil", Address: "192.0.2.66"}, fleet.ErrInvalidToken},
		{"a sensor named under another tenant, its valid serial", "globex", good1.SensorID, serial(good1), fleet.Contact{AgentVersion: "evil"}, fleet.ErrNotFound},
		{"another tenant's sensor under the caller's tenant", "acme", foreign.SensorID, serial(foreign), fleet.Contact{AgentVersion: "evil"}, fleet.ErrNotFound},
		{"the renewed sensor's new serial", "acme", renewed.SensorID, serial(fleet.Enrollment{Certificate: rn.Certificate}), fleet.Contact{Address: "192.0.2.3"}, nil},
	})
	now := f.clock.Now()
	for _, c := range []struct {
		id            string
		state         fleet.State
		seen          time.Time
		version, addr string
	}{
		{good1.SensorID, fleet.StateOnline, now, longVersion, "192.0.2.1"},
		{good2.SensorID, fleet.StateOnline, now, "1.0.0", "192.0.2.2"},
		{revoked.SensorID, fleet.StateRevoked, time.Time{}, "", ""},
		{renewed.SensorID, fleet.StateOnline, now, "", "192.0.2.3"},
		{foreign.SensorID, fleet.StateOffline, time.Time{}, "", ""},
	} {
		s := f.sensor(t, c.id)
		if s.State != c.state || !s.LastSeenAt.Equal(c.seen) || s.AgentVersion != c.version || s.Address != c.addr {
			t.Errorf("sensor %s after the batch: %s seen %s version %q from %q; want %s seen %s version %q from %q",
				c.id, s.State, s.LastSeenAt, s.AgentVersion, s.Address, c.state, c.seen, c.version, c.addr)
		}
	}

	// Within CheckInRefresh: a check changing nothing would not be
	// written, but is still authorised from the database.
	f.clock.Advance(fleet.CheckInRefresh / 5)
	if err := f.svc.RevokeSensor(f.ctx, good1.SensorID, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	b.round(t, []check{
		{"revoked a second after its last check", "acme", good1.SensorID, serial(good1), fleet.Contact{AgentVersion: longVersion, Address: "192.0.2.1"}, fleet.ErrRevoked},
		{"control: another sensor's unchanged check", "acme", good2.SensorID, serial(good2), fleet.Contact{AgentVersion: "1.0.0", Address: "192.0.2.2"}, nil},
	})
	f.clock.Advance(fleet.DefaultMinRenewInterval)
	b.round(t, []check{
		{"control: a check before the renewal", "acme", good2.SensorID, serial(good2), fleet.Contact{AgentVersion: "1.0.0"}, nil},
		{"control: the renewed sensor", "acme", renewed.SensorID, rn.Certificate.Serial, fleet.Contact{}, nil},
	})
	rn2, err := f.svc.Renew(f.ctx, good2.SensorID, good2.SensorToken, csr,
		fleettest.Proof(good2.Certificate.CertificatePEM, good2.SensorID, csr, f.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	b.round(t, []check{
		{"the serial a renewal just replaced", "acme", good2.SensorID, serial(good2), fleet.Contact{AgentVersion: "1.0.0"}, fleet.ErrInvalidToken},
		{"the serial that replaced it", "acme", good2.SensorID, rn2.Certificate.Serial, fleet.Contact{AgentVersion: "1.0.0"}, nil},
		{"control: another sensor", "acme", renewed.SensorID, rn.Certificate.Serial, fleet.Contact{}, nil},
	})
}
