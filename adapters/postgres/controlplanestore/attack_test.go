package controlplanestore_test

import (
	"bytes"
	"crypto/ecdsa"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	"github.com/rxc-project/rxc/core/fleet"
)

// Attacks on the renewal "lost answer" path (fleet.Service.Renew resuming
// a committed renewal), with the project's x509 CA, real ECDSA keys and
// PostgreSQL. Each attack asserts the refusal, that nothing changed (the
// active certificate, no NATS user handed out) and sits next to a positive
// control that the same test setup does succeed with.

// realFleet is a fixture whose service signs with the real CA and whose
// clock runs with the wall clock (plus ahead) so certificates verify.
type realFleet struct {
	*fixture
	ahead atomic.Int64
	caDir string
}

func (r *realFleet) now() time.Time { return time.Now().Add(time.Duration(r.ahead.Load())) }

// advance moves the service clock forward (certificates stay valid: they
// are issued for 48 h).
func (r *realFleet) advance(d time.Duration) { r.ahead.Add(int64(d)) }

// dueForRenewal is an acmeRealFleet with a sensor of acme enrolled whose
// certificate is due for renewal, and a new key's CSR to renew it with.
func dueForRenewal(t *testing.T) (*realFleet, held, []byte) {
	t.Helper()
	r := acmeRealFleet(t)
	s := r.enrolReal(t, "acme")
	r.advance(2 * time.Minute)
	_, csr := newKeyCSR(t)
	return r, s, csr
}

// acmeRealFleet is a realFleet with tenant "acme" provisioned.
func acmeRealFleet(t *testing.T) *realFleet {
	t.Helper()
	r := newRealFleet(t)
	r.provisionedTenant(t, "acme")
	return r
}

func newRealFleet(t *testing.T) *realFleet {
	t.Helper()
	r := &realFleet{}
	ca, dir := x509catest.New(t, x509ca.InitOptions{DNSNames: []string{"localhost"}}, x509ca.Config{})
	r.caDir = dir
	r.fixture = newFixture(t, func(c *fleet.Config) { c.CA = ca; c.Clock = r.now; c.SensorCertTTL = 48 * time.Hour })
	return r
}

// replica is a second control plane on the same database: its own pool,
// store, service and CA (loaded from the same files).
func (r *realFleet) replica(t *testing.T) *fleet.Service {
	t.Helper()
	store := replicaStore(t, r.pool)
	ca, err := x509ca.Load(x509ca.Config{Dir: r.caDir})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := fleet.New(fleet.Config{
		Store: store, Provisioner: r.prov, ProvisioningEnabled: true, CA: ca, Publisher: r.pub,
		Terminator: r.term, Locker: store, Clock: r.now, SensorCertTTL: 48 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// held is what a sensor holds: its key, certificate and token.
type held struct {
	id, tenant string
	key        *ecdsa.PrivateKey
	cert       []byte
	token      string
}

func (r *realFleet) enrolReal(t *testing.T, tenant string) held {
	t.Helper()
	red := r.redeemed(t, tenant)
	key, csr := newKeyCSR(t)
	e, err := r.svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr)
	if err != nil {
		t.Fatal(err)
	}
	return held{id: red.SensorID, tenant: tenant, key: key, cert: e.Certificate.CertificatePEM, token: e.SensorToken}
}

// proof is h's fresh proof for renewing csr of sensor id.
func (r *realFleet) proof(t *testing.T, h held, id string, csr []byte) *fleet.PossessionProof {
	t.Helper()
	return proveWith(t, h.key, h.cert, id, csr, r.now())
}

// renewTo renews h with a new key through svc and returns what the sensor
// holds afterwards, with the CSR it sent.
func (r *realFleet) renewTo(t *testing.T, svc *fleet.Service, h held) (held, []byte) {
	t.Helper()
	key, csr := newKeyCSR(t)
	rn, err := svc.Renew(r.ctx, h.id, h.token, csr, r.proof(t, h, h.id, csr))
	if err != nil {
		t.Fatal(err)
	}
	return held{id: h.id, tenant: h.tenant, key: key, cert: rn.Certificate.CertificatePEM, token: rn.SensorToken}, csr
}

func (r *realFleet) natsHandOuts() int {
	n := 0
	for _, c := range r.prov.Calls() {
		if strings.HasPrefix(c, "EnsureSensorUser ") {
			n++
		}
	}
	return n
}

func (r *realFleet) activeSerial(t *testing.T, id string) string {
	t.Helper()
	return r.sensor(t, id).Certificate.Serial
}

// Attack: a renewal request captured on its way (a proxy's request log,
// a debugging dump) is replayed as it was, after the control plane
// answered it. It carries the sensor's token, CSR and a valid proof, but
// the attacker holds no key. The resume path must not take it for the
// agent asking again: that would hand the attacker the sensor's NATS
// credentials (JWT and seed) and a sensor token, and supersede the
// certificate the sensor actually received. Positive control: the agent
// itself, asking again with a fresh proof, is answered.
func TestAttackRenewalReplayOfACapturedRequest(t *testing.T) {
	t.Parallel()
	r, s, csr := dueForRenewal(t)
	captured := r.proof(t, s, s.id, csr)
	answered, err := r.svc.Renew(r.ctx, s.id, s.token, csr, captured)
	if err != nil {
		t.Fatal(err)
	}
	handOuts := r.natsHandOuts()

	r.advance(30 * time.Second)
	_, err = r.svc.Renew(r.ctx, s.id, s.token, csr, captured)
	if err == nil {
		t.Fatal("BROKEN: a captured renewal request replayed after it was answered got a new certificate, a sensor token and the sensor's NATS credentials")
	}
	wantErr(t, err, fleet.ErrConflict)
	if got := r.activeSerial(t, s.id); got != answered.Certificate.Serial {
		t.Fatalf("the replay superseded the answered certificate (active %s)", got)
	}
	if r.natsHandOuts() != handOuts {
		t.Fatal("the replay had NATS credentials handed out")
	}

	// Positive control: the agent, whose answer was lost, asks again with a
	// fresh proof; a replay of that request is refused in turn.
	again := r.proof(t, s, s.id, csr)
	resumed, err := r.svc.Renew(r.ctx, s.id, s.token, csr, again)
	if err != nil {
		t.Fatalf("positive control: the agent asking again: %v", err)
	}
	r.advance(time.Second)
	for name, p := range map[string]*fleet.PossessionProof{"the first request": captured, "the request sent again": again} {
		if _, err := r.svc.Renew(r.ctx, s.id, s.token, csr, p); err == nil {
			t.Fatalf("BROKEN: replaying %s was answered", name)
		}
	}
	if got := r.activeSerial(t, s.id); got != resumed.Certificate.Serial {
		t.Fatalf("a refused replay changed the active certificate to %s", got)
	}
}

// Attack: asking again for a lost answer with material that is not the
// original request's: another sensor's token, certificate, key or CSR (of
// the same tenant and of another one), a proof over another CSR, a CSR of
// another key, the same CSR with bytes added, the enrolment certificate of
// the sensor itself without its token. Every attempt is refused, changes
// nothing and hands out no NATS credentials. Positive control at the end:
// the genuine request sent again is answered.
func TestAttackRenewalResumeWithForeignMaterial(t *testing.T) {
	t.Parallel()
	r := acmeRealFleet(t)
	r.provisionedTenant(t, "other")
	s := r.enrolReal(t, "acme")
	sib := r.enrolReal(t, "acme")
	foreign := r.enrolReal(t, "other")
	r.advance(2 * time.Minute)

	// The sensor's renewal, whose answer is lost; its sibling renews too.
	newKey, csr := newKeyCSR(t)
	lost, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr))
	if err != nil {
		t.Fatal(err)
	}
	_, sibCSR := r.renewTo(t, r.svc, sib)
	_, foreignCSR := r.renewTo(t, r.svc, foreign)
	handOuts := r.natsHandOuts()
	active := r.activeSerial(t, s.id)

	otherKey, otherCSR := newKeyCSR(t)
	_ = otherKey
	undelivered := held{id: s.id, key: newKey, cert: lost.Certificate.CertificatePEM, token: lost.SensorToken}
	// The same CSR with a trailing line break parses to the same key.
	paddedCSR := append(bytes.Clone(csr), '\n')

	for name, tc := range map[string]struct {
		token string
		csr   []byte
		proof *fleet.PossessionProof
	}{
		"sibling's old token":                      {sib.token, csr, r.proof(t, s, s.id, csr)},
		"sibling's key and certificate":            {s.token, csr, r.proof(t, sib, s.id, csr)},
		"sibling's CSR with own proof":             {s.token, sibCSR, r.proof(t, s, s.id, sibCSR)},
		"sibling's whole request, aimed at s":      {sib.token, sibCSR, r.proof(t, sib, s.id, sibCSR)},
		"other tenant's token":                     {foreign.token, csr, r.proof(t, s, s.id, csr)},
		"other tenant's key and certificate":       {s.token, csr, r.proof(t, foreign, s.id, csr)},
		"other tenant's whole request, aimed at s": {foreign.token, foreignCSR, r.proof(t, foreign, s.id, foreignCSR)},
		"proof signed over another CSR":            {s.token, csr, r.proof(t, s, s.id, otherCSR)},
		"CSR of another key":                       {s.token, otherCSR, r.proof(t, s, s.id, otherCSR)},
		"same CSR plus a line break":               {s.token, paddedCSR, r.proof(t, s, s.id, paddedCSR)},
		"no proof":                                 {s.token, csr, nil},
		"proof naming another sensor":              {s.token, csr, r.proof(t, s, sib.id, csr)},
		"undelivered certificate, old token":       {s.token, csr, r.proof(t, undelivered, s.id, csr)},
		"no token at all":                          {"", csr, r.proof(t, s, s.id, csr)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := r.svc.Renew(r.ctx, s.id, tc.token, tc.csr, tc.proof); err == nil {
				t.Fatal("BROKEN: answered")
			}
			if got := r.activeSerial(t, s.id); got != active {
				t.Fatalf("a refused request changed the active certificate to %s", got)
			}
			if r.natsHandOuts() != handOuts {
				t.Fatal("a refused request had NATS credentials handed out")
			}
		})
	}
	// Nor can the sibling resume with the sensor's material aimed at itself.
	if _, err := r.svc.Renew(r.ctx, sib.id, s.token, csr, r.proof(t, s, sib.id, csr)); err == nil {
		t.Fatal("BROKEN: the sensor's lost request was answered for its sibling")
	}

	// Positive control.
	resumed, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr))
	if err != nil {
		t.Fatalf("positive control: the genuine request sent again: %v", err)
	}
	if r.natsHandOuts() != handOuts+1 || resumed.NATS == nil {
		t.Fatal("positive control: the genuine request sent again got no NATS credentials")
	}
	if r.activeSerial(t, s.id) != resumed.Certificate.Serial {
		t.Fatal("positive control: the answer sent again is not the active certificate")
	}
}

// Attack: the chain moved on twice (A0 → A1 → A2, each answer received);
// the first renewal's request is sent again with a fresh proof by A0's key.
// It must be refused: only the renewal of the active certificate can be
// asked again. Positive control: the second renewal's request, sent
// again, is answered.
func TestAttackRenewalResumeOfASupersededChain(t *testing.T) {
	t.Parallel()
	r := acmeRealFleet(t)
	a0 := r.enrolReal(t, "acme")
	r.advance(2 * time.Minute)
	a1, csr1 := r.renewTo(t, r.svc, a0)
	r.advance(2 * time.Minute)
	a2, csr2 := r.renewTo(t, r.svc, a1)
	handOuts := r.natsHandOuts()

	if _, err := r.svc.Renew(r.ctx, a0.id, a0.token, csr1, r.proof(t, a0, a0.id, csr1)); err == nil {
		t.Fatal("BROKEN: the renewal before last was answered again after the chain moved on")
	} else {
		wantErr(t, err, fleet.ErrInvalidToken)
	}
	// A0's key with A1's token and the second CSR mixes two links.
	if _, err := r.svc.Renew(r.ctx, a0.id, a1.token, csr2, r.proof(t, a0, a0.id, csr2)); err == nil {
		t.Fatal("BROKEN: a request mixing two links of the chain was answered")
	}
	if r.activeSerial(t, a0.id) != x509ca.SerialHex(parseCert(t, a2.cert).SerialNumber) || r.natsHandOuts() != handOuts {
		t.Fatal("a refused request changed the active certificate or handed out NATS credentials")
	}
	if _, err := r.svc.Renew(r.ctx, a1.id, a1.token, csr2, r.proof(t, a1, a1.id, csr2)); err != nil {
		t.Fatalf("positive control: the latest renewal sent again: %v", err)
	}
}

// Attack: the sensor is revoked after a renewal whose answer was lost; the
// lost request is sent again. It must be refused as revoked and must not
// reach the provisioner (no NATS user handed out or minted). Positive
// control: before the revocation the same request was answered.
func TestAttackRenewalResumeAfterRevocation(t *testing.T) {
	t.Parallel()
	r, s, csr := dueForRenewal(t)
	if _, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr)); err != nil {
		t.Fatal(err)
	}
	r.advance(time.Second)
	if _, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr)); err != nil {
		t.Fatalf("positive control: asked again before the revocation: %v", err)
	}
	if err := r.svc.RevokeSensor(r.ctx, s.id, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	handOuts := r.natsHandOuts()
	r.advance(time.Second)
	_, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr))
	if err == nil {
		t.Fatal("BROKEN: a revoked sensor's lost renewal was answered")
	}
	wantErr(t, err, fleet.ErrRevoked)
	if r.natsHandOuts() != handOuts {
		t.Fatal("BROKEN: a revoked sensor's lost renewal reached the provisioner")
	}
	if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor' AND revoked_at IS NULL`, s.id); n != 0 {
		t.Fatalf("a revoked sensor holds %d live sensor tokens", n)
	}
}

// Attack: two control-plane replicas on one database each receive the lost
// request sent again while the sensor (or whoever holds the undelivered
// certificate's key and token) renews normally on the first replica. Every
// round must end with exactly one active certificate and one live sensor
// token, the active certificate must be one that was answered, and only
// it may pass AuthorizeSensor. Two certificates answered at the same time
// from the same active one must never both stay usable.
func TestAttackRenewalResumeRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	other := r.replica(t)
	r.provisionedTenant(t, "acme")
	s := r.enrolReal(t, "acme")

	for round := range 6 {
		r.advance(2 * time.Minute)
		newKey, csr := newKeyCSR(t)
		lost, err := r.svc.Renew(r.ctx, s.id, s.token, csr, r.proof(t, s, s.id, csr))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		undelivered := held{id: s.id, tenant: s.tenant, key: newKey, cert: lost.Certificate.CertificatePEM, token: lost.SensorToken}
		r.advance(2 * time.Minute) // the normal renewal is due

		type result struct {
			who string
			rn  fleet.Renewal
			key *ecdsa.PrivateKey
			err error
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			results []result
		)
		try := func(who string, svc *fleet.Service, token string, csr []byte, p *fleet.PossessionProof, key *ecdsa.PrivateKey) {
			defer wg.Done()
			rn, err := svc.Renew(r.ctx, s.id, token, csr, p)
			mu.Lock()
			results = append(results, result{who, rn, key, err})
			mu.Unlock()
		}
		nextKey, nextCSR := newKeyCSR(t)
		p1, p2 := r.proof(t, s, s.id, csr), r.proof(t, s, s.id, csr)
		pn := r.proof(t, undelivered, s.id, nextCSR)
		wg.Add(3)
		go try("resume on replica 1", r.svc, s.token, csr, p1, newKey)
		go try("resume on replica 2", other, s.token, csr, p2, newKey)
		go try("normal renewal", r.svc, undelivered.token, nextCSR, pn, nextKey)
		wg.Wait()

		activeSerial := r.activeSerial(t, s.id)
		if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1 AND active`, s.id); n != 1 {
			t.Fatalf("round %d: BROKEN: %d active certificates", round, n)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor' AND revoked_at IS NULL`, s.id); n != 1 {
			t.Fatalf("round %d: BROKEN: %d live sensor tokens", round, n)
		}
		var winner *result
		won := 0
		for i, res := range results {
			if res.err != nil {
				continue
			}
			won++
			authErr := r.svc.AuthorizeSensor(r.ctx, s.tenant, s.id, res.rn.Certificate.Serial)
			if res.rn.Certificate.Serial == activeSerial {
				winner = &results[i]
				if authErr != nil {
					t.Fatalf("round %d: the active certificate does not authorise: %v", round, authErr)
				}
			} else if authErr == nil {
				t.Fatalf("round %d: BROKEN: %s's certificate authorises though another is active", round, res.who)
			}
		}
		if won == 0 || winner == nil {
			t.Fatalf("round %d: nobody won (%d answered) or the active certificate %s was never answered: %+v", round, won, activeSerial, results)
		}
		// Continue the chain from the winner: its token must be the live one.
		s = held{id: s.id, tenant: s.tenant, key: winner.key, cert: winner.rn.Certificate.CertificatePEM, token: winner.rn.SensorToken}
		for _, res := range results {
			if res.err == nil && res.rn.SensorToken != winner.rn.SensorToken {
				if _, err := r.svc.Renew(r.ctx, s.id, res.rn.SensorToken, nextCSR, r.proof(t, s, s.id, nextCSR)); err == nil {
					t.Fatalf("round %d: BROKEN: the token of a losing answer (%s) renews", round, res.who)
				}
			}
		}
	}
}
