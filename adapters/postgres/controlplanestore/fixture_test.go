package controlplanestore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// clock is a controllable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The fakes below stand in for other components' adapters (provisioner
// client, CA, NATS publisher, gRPC session registry); they record calls.

type fakeProvisioner struct {
	mu          sync.Mutex
	calls       []string
	accountErr  error
	userErr     error
	revokeErr   error
	revocations [][2]string
	// userGen is appended to minted user keys: bump it to make the next
	// EnsureSensorUser hand out a new user (as after an upgrade revoked
	// the old one).
	userGen string
}

func (p *fakeProvisioner) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
}

func (p *fakeProvisioner) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *fakeProvisioner) EnsureAccount(_ context.Context, tenantID, name string) (string, error) {
	p.record("EnsureAccount " + tenantID)
	if p.accountErr != nil {
		return "", p.accountErr
	}
	return "A-" + tenantID, nil
}

func (p *fakeProvisioner) EnsureSensorUser(_ context.Context, tenantID, sensorID string) (fleet.NATSCredentials, error) {
	p.record("EnsureSensorUser " + tenantID + " " + sensorID)
	if p.userErr != nil {
		return fleet.NATSCredentials{}, p.userErr
	}
	p.mu.Lock()
	gen := p.userGen
	p.mu.Unlock()
	return fleet.NATSCredentials{AccountPubKey: "A-" + tenantID, UserPubKey: "U-" + sensorID + gen, Creds: "creds" + gen, Consumer: "cmd-" + tenantID + "-" + sensorID}, nil
}

func (p *fakeProvisioner) RevokeUser(_ context.Context, accountPubKey, userPubKey string) error {
	p.record("RevokeUser " + accountPubKey + " " + userPubKey)
	if p.revokeErr != nil {
		return p.revokeErr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revocations = append(p.revocations, [2]string{accountPubKey, userPubKey})
	return nil
}

type fakeCA struct {
	mu       sync.Mutex
	clock    *clock
	serial   int
	requests []fleet.CertRequest
	// onSign, when set, runs inside SignCSR: a hook to interleave events.
	onSign func(fleet.CertRequest)
}

func (c *fakeCA) SignCSR(req fleet.CertRequest) (fleet.IssuedCertificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if string(req.CSRPEM) == "bad csr" {
		return fleet.IssuedCertificate{}, fmt.Errorf("parse: %w", fleet.ErrInvalidCSR)
	}
	if c.onSign != nil {
		c.onSign(req)
	}
	c.requests = append(c.requests, req)
	c.serial++
	now := c.clock.Now()
	return fleet.IssuedCertificate{
		CertificatePEM: []byte(req.TenantID + " " + req.SensorID + " " + strings.ToLower(fmt.Sprintf("%032X", c.serial))),
		Serial:         fmt.Sprintf("%032X", c.serial),
		NotBefore:      now.Add(-time.Minute), NotAfter: now.Add(req.TTL),
	}, nil
}

func (c *fakeCA) CACertificatePEM() []byte { return []byte("ca pem") }

// VerifyPossession accepts a "certificate" the fake issued ("<tenant>
// <sensor> <serial>") and the signature fakeSign makes.
func (c *fakeCA) VerifyPossession(certPEM, message, signature []byte, _ time.Time) (fleet.CertIdentity, error) {
	parts := strings.Fields(string(certPEM))
	if len(parts) != 3 {
		return fleet.CertIdentity{}, errors.New("not a certificate of this CA")
	}
	if string(signature) != fakeSign(parts[2], message) {
		return fleet.CertIdentity{}, errors.New("bad signature")
	}
	return fleet.CertIdentity{TenantID: parts[0], SensorID: parts[1], Serial: parts[2]}, nil
}

// fakeSign is the fake CA's "signature" by the key of serial.
func fakeSign(serial string, message []byte) string {
	h := sha256.Sum256(append([]byte(serial+"|"), message...))
	return hex.EncodeToString(h[:])
}

// proof is a fake proof of possession of certPEM's key for renewing csr.
func (f *fixture) proof(certPEM []byte, sensorID string, csr []byte) *fleet.PossessionProof {
	at := f.clock.Now()
	serial := strings.Fields(string(certPEM))[2]
	return &fleet.PossessionProof{CertificatePEM: certPEM, SignedAt: at, Signature: []byte(fakeSign(serial, fleet.RenewalMessage(sensorID, csr, at)))}
}

type published struct {
	Subject, MsgID string
	Payload        []byte
}

type fakePublisher struct {
	mu   sync.Mutex
	err  error
	msgs []published
}

func (p *fakePublisher) PublishCommand(_ context.Context, subject, msgID string, payload []byte) (fleet.PublishAck, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fleet.PublishAck{}, p.err
	}
	p.msgs = append(p.msgs, published{subject, msgID, payload})
	return fleet.PublishAck{Sequence: uint64(len(p.msgs))}, nil
}

// issue is IssueCommand without an idempotency key.
func issue(f *fixture, sensorID string, a fleet.Action, by string) (fleet.Command, error) {
	c, _, err := f.svc.IssueCommand(f.ctx, sensorID, a, by, "")
	return c, err
}

type fakeTerminator struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeTerminator) Terminate(tenantID, sensorID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, tenantID+"/"+sensorID)
}

// countingLocker wraps a Locker and counts TryLock calls.
type countingLocker struct {
	fleet.Locker
	mu sync.Mutex
	n  int
}

func (l *countingLocker) TryLock(ctx context.Context, name string) (func(), bool, error) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return l.Locker.TryLock(ctx, name)
}

type fixture struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *controlplanestore.Store
	svc    *fleet.Service
	clock  *clock
	prov   *fakeProvisioner
	ca     *fakeCA
	pub    *fakePublisher
	term   *fakeTerminator
	locker *countingLocker
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
	clk := &clock{t: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)}
	f := &fixture{
		ctx: context.Background(), pool: pool, store: store, clock: clk,
		prov: &fakeProvisioner{}, ca: &fakeCA{clock: clk}, pub: &fakePublisher{}, term: &fakeTerminator{},
		locker: &countingLocker{Locker: store},
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
