package controlplanestore_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/core/fleet"
)

// Attacks on enrolment (CompleteEnrollment is one statement): one
// enrolment token used at once through two replicas, a token used for
// another tenant's sensor, a replay after success, and enrolment racing
// the sensor's revocation. Each asserts what every caller was told and
// what the database holds, next to a positive control.

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Attack: a stolen enrolment token sent many times at once, half through
// each of two replicas, each with its own key. Exactly one caller gets a
// certificate; it is the sensor's only certificate, its sensor token the
// only live one, and every other caller is told invalid_token. A replay
// of the token afterwards changes nothing.
func TestAttackEnrolmentRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	other := r.replica(t)
	r.provisionedTenant(t, "acme")
	for round := range 4 {
		red := r.redeemed(t, "acme")
		const n = 8
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []fleet.Enrollment
			errs []error
		)
		for i := range n {
			svc := r.svc
			if i%2 == 1 {
				svc = other
			}
			_, csr := newKeyCSR(t)
			wg.Go(func() {
				e, err := svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins = append(wins, e)
				} else {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: BROKEN: %d enrolments succeeded with one token, want 1 (errors %v)", round, len(wins), errs)
		}
		for _, err := range errs {
			if !errors.Is(err, fleet.ErrInvalidToken) {
				t.Errorf("round %d: a losing caller was told %v, want invalid token", round, err)
			}
		}
		win := wins[0]
		if got := r.activeSerial(t, red.SensorID); got != win.Certificate.Serial {
			t.Fatalf("round %d: active certificate %s, the winner was given %s", round, got, win.Certificate.Serial)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 1 {
			t.Fatalf("round %d: BROKEN: %d certificates stored", round, n)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor' AND revoked_at IS NULL AND token_hash = $2`,
			red.SensorID, tokenHash(win.SensorToken)); n != 1 {
			t.Fatalf("round %d: the winner's sensor token is not the live one", round)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor'`, red.SensorID); n != 1 {
			t.Fatalf("round %d: BROKEN: %d sensor tokens stored", round, n)
		}
		if err := r.svc.AuthorizeSensor(r.ctx, "acme", red.SensorID, win.Certificate.Serial); err != nil {
			t.Fatalf("round %d: the winner's certificate does not authorise: %v", round, err)
		}

		_, csr := newKeyCSR(t)
		_, err := other.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr)
		wantErr(t, err, fleet.ErrInvalidToken)
		if got := r.activeSerial(t, red.SensorID); got != win.Certificate.Serial {
			t.Fatalf("round %d: a replay replaced the certificate: %s", round, got)
		}
	}
}

// Attack: a sensor's enrolment token presented for another sensor, of the
// same tenant and of another tenant, in both directions. Each is refused
// as invalid_token and writes nothing (the token stays usable, the target
// stays pending); positive control: each token enrols its own sensor.
func TestAttackEnrolmentWithAnotherSensorsToken(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	r.provisionedTenant(t, "acme")
	r.provisionedTenant(t, "globex")
	a, a2, g := r.redeemed(t, "acme"), r.redeemed(t, "acme"), r.redeemed(t, "globex")
	for _, c := range []struct {
		name          string
		sensor, token string
	}{
		{"acme's token for globex's sensor", g.SensorID, a.EnrollmentToken},
		{"globex's token for acme's sensor", a.SensorID, g.EnrollmentToken},
		{"a token for another sensor of the tenant", a2.SensorID, a.EnrollmentToken},
	} {
		_, csr := newKeyCSR(t)
		_, err := r.svc.Enroll(r.ctx, c.sensor, c.token, csr)
		if !errors.Is(err, fleet.ErrInvalidToken) {
			t.Errorf("%s: %v, want invalid token", c.name, err)
		}
	}
	if n := r.count(t, `SELECT count(*) FROM sensor_certificates`); n != 0 {
		t.Fatalf("BROKEN: %d certificates stored by refused enrolments", n)
	}
	if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE kind = 'enrollment' AND used_at IS NULL`); n != 3 {
		t.Fatalf("%d unused enrolment tokens, want 3: a refusal consumed one", n)
	}
	for _, red := range []fleet.Redemption{a, a2, g} {
		if st := r.sensor(t, red.SensorID).State; st != fleet.StatePending {
			t.Errorf("sensor %s is %s after refusals, want pending", red.SensorID, st)
		}
		_, csr := newKeyCSR(t)
		if _, err := r.svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr); err != nil {
			t.Errorf("positive control: sensor %s with its own token: %v", red.SensorID, err)
		}
	}
}

// Enrolment racing the sensor's revocation on another replica: whichever
// wins, the sensor ends revoked with no active certificate and no live
// token; an enrolment that lost is told it is revoked and stored nothing.
func TestEnrolmentRacingRevocation(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	other := r.replica(t)
	r.provisionedTenant(t, "acme")
	enrolledFirst, revokedFirst := 0, 0
	for round := range 12 {
		red := r.redeemed(t, "acme")
		_, csr := newKeyCSR(t)
		var (
			wg        sync.WaitGroup
			enrolErr  error
			revokeErr error
		)
		wg.Go(func() { _, enrolErr = r.svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr) })
		wg.Go(func() { revokeErr = other.RevokeSensor(r.ctx, red.SensorID, "ops@example.com") })
		wg.Wait()
		if revokeErr != nil {
			t.Fatalf("round %d: revoke: %v", round, revokeErr)
		}
		switch {
		case enrolErr == nil:
			enrolledFirst++
			if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 1 {
				t.Fatalf("round %d: %d certificates of an enrolment that won", round, n)
			}
		case errors.Is(enrolErr, fleet.ErrRevoked):
			revokedFirst++
			if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 0 {
				t.Fatalf("round %d: BROKEN: an enrolment refused as revoked stored %d certificates", round, n)
			}
			if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor'`, red.SensorID); n != 0 {
				t.Fatalf("round %d: BROKEN: an enrolment refused as revoked stored %d sensor tokens", round, n)
			}
		default:
			t.Fatalf("round %d: enrol: %v, want success or revoked", round, enrolErr)
		}
		if st := r.sensor(t, red.SensorID).State; st != fleet.StateRevoked {
			t.Fatalf("round %d: sensor is %s after its revocation", round, st)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1 AND active`, red.SensorID); n != 0 {
			t.Fatalf("round %d: BROKEN: a revoked sensor keeps an active certificate", round)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, red.SensorID); n != 0 {
			t.Fatalf("round %d: BROKEN: a revoked sensor keeps %d live tokens", round, n)
		}
	}
	t.Logf("enrolment first %d times, revocation first %d times", enrolledFirst, revokedFirst)
}

// The enrolment statement finds every row it reads or changes through an
// index: with sequential scans disabled, PostgreSQL still plans one only
// where no index serves (as the revocation of the old sensor token once
// did, reading the whole sensor_tokens table on every enrolment).
func TestEnrolmentStatementUsesIndexes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.provisionedTenant(t, "acme")
	red := f.redeemed(t, "acme")
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var plan string
	if err := tx.QueryRow(f.ctx, `EXPLAIN (FORMAT JSON) `+controlplanestore.CompleteEnrollmentSQL,
		red.SensorID, tokenHash(red.EnrollmentToken), now, "ab01", now.Add(time.Hour), tokenHash("sensor"), now.Add(time.Hour),
		"offline", "U1", "A1", "rxc_sensor_credentials").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, `"Index Scan"`) {
		t.Fatalf("no index scan in the plan, is it the statement's? %s", plan)
	}
	if strings.Contains(plan, `"Seq Scan"`) {
		t.Errorf("the enrolment statement reads a table sequentially:\n%s", plan)
	}
}
