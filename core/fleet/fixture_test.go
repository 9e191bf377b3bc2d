package fleet_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/fleetmem"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

// The use-case tests of this package run the Service on the in-memory
// store (adapters/memory/fleetmem), which passes the same contract suite
// (fleettest.Run) as the PostgreSQL store, and on the recording fakes of
// fleettest for the other ports.

type fixture struct {
	fleet  *fleettest.Fleet
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
	locker := &fleettest.CountingLocker{Locker: store}
	fl := fleettest.NewFleet(t, store, locker, configure...)
	return &fixture{
		fleet: fl, ctx: fl.Ctx, store: store, svc: fl.Svc, clock: fl.Clock,
		prov: fl.Prov, ca: fl.CA, pub: fl.Pub, term: fl.Term, locker: locker,
	}
}

// acmeFixture is a fixture with tenant "acme" created and given its NATS
// account, where most tests start, and then each of the tenants others
// (another tenant's sensors and names, for the attacks across tenants).
func acmeFixture(t testing.TB, others ...string) *fixture {
	t.Helper()
	f := newFixture(t)
	for _, id := range append([]string{"acme"}, others...) {
		f.provisionedTenant(t, id)
	}
	return f
}

// provisionedTenant creates tenant id and gives it its NATS account.
func (f *fixture) provisionedTenant(t testing.TB, id string) fleet.Tenant {
	return f.fleet.ProvisionedTenant(t, id)
}

// issuedCode issues a claim code in tenantID: its record and the code.
func (f *fixture) issuedCode(t testing.TB, tenantID string) (fleet.ClaimCode, string) {
	return f.fleet.IssuedCode(t, tenantID)
}

// redeemed issues a claim code in tenantID and redeems it.
func (f *fixture) redeemed(t testing.TB, tenantID string) fleet.Redemption {
	return f.fleet.Redeemed(t, tenantID)
}

// enrolled returns a freshly enrolled sensor of tenantID.
func (f *fixture) enrolled(t testing.TB, tenantID string) (fleet.Redemption, fleet.Enrollment) {
	return f.fleet.Enrolled(t, tenantID)
}

func (f *fixture) sensor(t testing.TB, id string) fleet.Sensor { return f.fleet.Sensor(t, id) }

// proof is a proof of possession of certPEM's key for renewing csr, signed now.
func (f *fixture) proof(certPEM []byte, sensorID string, csr []byte) *fleet.PossessionProof {
	return fleettest.Proof(certPEM, sensorID, csr, f.clock.Now())
}

// renewal is a Renew request of a refusal table and the error it must get.
type renewal struct {
	token string
	csr   []byte
	proof *fleet.PossessionProof
	want  error
}

// refusedRenewals sends each renewal for sensorID, a subtest each: each is
// refused with its error and leaves the active certificate serial.
func (f *fixture) refusedRenewals(t *testing.T, sensorID, serial string, cases map[string]renewal) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.svc.Renew(f.ctx, sensorID, tc.token, tc.csr, tc.proof)
			wantErr(t, err, tc.want)
			f.keptCertificate(t, sensorID, serial, "the refused request")
		})
	}
}

// keptCertificate checks that sensorID's active certificate is serial
// after what.
func (f *fixture) keptCertificate(t testing.TB, sensorID, serial, what string) {
	t.Helper()
	if got := f.sensor(t, sensorID).Certificate.Serial; got != serial {
		t.Errorf("after %s the active certificate is %s, want %s", what, got, serial)
	}
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

// issued is issue by "ops" that must succeed.
func (f *fixture) issued(t testing.TB, sensorID string, a fleet.Action) fleet.Command {
	t.Helper()
	c, err := issue(f, sensorID, a, "ops")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// commanded is a freshly enrolled sensor of acme with a command (action a,
// issued by "ops") to it.
func (f *fixture) commanded(t testing.TB, a fleet.Action) (fleet.Redemption, fleet.Command) {
	t.Helper()
	r, _ := f.enrolled(t, "acme")
	return r, f.issued(t, r.SensorID, a)
}

// revoke revokes the sensor as "ops", which must succeed.
func (f *fixture) revoke(t testing.TB, sensorID string) {
	t.Helper()
	if err := f.svc.RevokeSensor(f.ctx, sensorID, "ops"); err != nil {
		t.Fatal(err)
	}
}

// race runs attempt n times at once. It counts the attempts that won and
// keeps every error except loser, the answer a losing attempt may give
// (with loser nil, every error is kept).
func race(n int, loser error, attempt func() (won bool, err error)) (wins int, unexpected []error) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			won, err := attempt()
			mu.Lock()
			defer mu.Unlock()
			if won {
				wins++
			}
			if err != nil && !errors.Is(err, loser) {
				unexpected = append(unexpected, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return wins, unexpected
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
