package fleet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

// enrolProof is a proof of possession of csr's key for sensorID's
// enrolment, signed now.
func (f *fixture) enrolProof(sensorID string, csr []byte) *fleet.EnrolmentProof {
	return fleettest.EnrolProof(sensorID, csr, f.clock.Now())
}

// enrolProven enrols a redeemed sensor with a proof by csr's key.
func (f *fixture) enrolProven(t *testing.T, r fleet.Redemption, csr []byte) fleet.Enrollment {
	t.Helper()
	e, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// provenSensor is a sensor of acme enrolled with a proof by csr's key:
// its redemption (whose token a re-ask sends again) and its enrolment.
func (f *fixture) provenSensor(t *testing.T, csr []byte) (fleet.Redemption, fleet.Enrollment) {
	t.Helper()
	r := f.redeemed(t, "acme")
	return r, f.enrolProven(t, r, csr)
}

// An enrolment whose answer never reached the agent (the control plane
// committed it, the connection dropped) leaves the agent with a used token.
// The agent sends the same request again (it keeps its key and CSR) with a
// fresh proof and gets a certificate for that key; anything that is not
// exactly that request stays refused and changes nothing.
func TestEnrolmentWhoseAnswerWasLostIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	oldAgent, oldEnrolment := f.enrolled(t, "acme") // no proof: an old agent
	otherRed := f.redeemed(t, "acme")
	csr := []byte("csr-e")
	f.enrolProven(t, otherRed, []byte("csr-other"))
	answered := f.enrolProof(r.SensorID, csr)
	lost, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, answered)
	if err != nil {
		t.Fatal(err)
	}

	// A copy of the answered request (a proxy's log): refused, no answer.
	f.clock.Advance(time.Second)
	_, err = f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, answered)
	wantErr(t, err, fleet.ErrConflict)
	if got := f.sensor(t, r.SensorID).Certificate.Serial; got != lost.Certificate.Serial {
		t.Fatalf("a copy of the answered request changed the certificate to %s", got)
	}

	// Positive control: the same request with a later proof is answered.
	again, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
	if err != nil {
		t.Fatalf("enrolment sent again after a lost answer: %v", err)
	}
	if again.Certificate.Serial == lost.Certificate.Serial || again.SensorToken == lost.SensorToken || again.SensorID != r.SensorID {
		t.Fatalf("answer sent again reuses serial %s or the token", again.Certificate.Serial)
	}
	if again.NATS == nil || lost.NATS == nil || again.NATS.UserPubKey != lost.NATS.UserPubKey {
		t.Errorf("answer sent again carries NATS %+v, want the sensor's user %+v", again.NATS, lost.NATS)
	}
	if reqs := f.ca.Requests(); string(reqs[len(reqs)-1].CSRPEM) != string(csr) {
		t.Errorf("answer sent again signed %q, want the enrolment's CSR", reqs[len(reqs)-1].CSRPEM)
	}
	if err := f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, again.Certificate.Serial); err != nil {
		t.Errorf("certificate of the answer sent again: %v", err)
	}
	// What the lost answer carried is dead.
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, lost.Certificate.Serial), fleet.ErrInvalidToken)
	_, err = f.svc.Renew(f.ctx, r.SensorID, lost.SensorToken, []byte("csr-x"), f.proof(lost.Certificate.CertificatePEM, r.SensorID, []byte("csr-x")))
	wantErr(t, err, fleet.ErrInvalidToken)
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 1 {
		t.Errorf("%d active certificates, want 1", n)
	}

	// Lost twice: the same request still works.
	f.clock.Advance(time.Second)
	again, err = f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
	if err != nil {
		t.Fatalf("enrolment sent a third time: %v", err)
	}

	f.clock.Advance(time.Second)
	otherCSR := []byte("csr-b")
	badSig := f.enrolProof(r.SensorID, csr)
	badSig.Signature[0] ^= 1
	for name, tc := range map[string]struct {
		sensor, token string
		csr           []byte
		proof         *fleet.EnrolmentProof
		want          error
	}{
		"another CSR":                         {r.SensorID, r.EnrollmentToken, otherCSR, f.enrolProof(r.SensorID, otherCSR), fleet.ErrInvalidToken},
		"proof for another CSR":               {r.SensorID, r.EnrollmentToken, csr, f.enrolProof(r.SensorID, otherCSR), fleet.ErrInvalidProof},
		"proof for another sensor":            {r.SensorID, r.EnrollmentToken, csr, f.enrolProof(otherRed.SensorID, csr), fleet.ErrInvalidProof},
		"a bad signature":                     {r.SensorID, r.EnrollmentToken, csr, badSig, fleet.ErrInvalidProof},
		"no proof (an old agent's retry)":     {r.SensorID, r.EnrollmentToken, csr, nil, fleet.ErrInvalidToken},
		"another sensor's used token":         {r.SensorID, otherRed.EnrollmentToken, csr, f.enrolProof(r.SensorID, csr), fleet.ErrInvalidToken},
		"the token on another sensor":         {otherRed.SensorID, r.EnrollmentToken, csr, f.enrolProof(otherRed.SensorID, csr), fleet.ErrInvalidToken},
		"a wrong token":                       {r.SensorID, wrongToken(r.EnrollmentToken), csr, f.enrolProof(r.SensorID, csr), fleet.ErrInvalidToken},
		"the sensor token":                    {r.SensorID, again.SensorToken, csr, f.enrolProof(r.SensorID, csr), fleet.ErrInvalidToken},
		"a proof signed too early":            {r.SensorID, r.EnrollmentToken, csr, fleettest.EnrolProof(r.SensorID, csr, f.clock.Now().Add(-10*time.Minute)), fleet.ErrInvalidProof},
		"an old agent's sensor, with a proof": {oldAgent.SensorID, oldAgent.EnrollmentToken, []byte("csr"), f.enrolProof(oldAgent.SensorID, []byte("csr")), fleet.ErrInvalidToken},
		"an unknown sensor":                   {"s-ghost", r.EnrollmentToken, csr, f.enrolProof("s-ghost", csr), fleet.ErrInvalidToken},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.svc.EnrollProven(f.ctx, tc.sensor, tc.token, tc.csr, nil, tc.proof)
			wantErr(t, err, tc.want)
			f.keptCertificate(t, r.SensorID, again.Certificate.Serial, "the refused request")
		})
	}
	f.keptCertificate(t, oldAgent.SensorID, oldEnrolment.Certificate.Serial, "the refused requests, the old agent's sensor")

	// Once the agent renews with what it received, the enrolment is over.
	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	next := []byte("csr-c")
	if _, err := f.svc.Renew(f.ctx, r.SensorID, again.SensorToken, next, f.proof(again.Certificate.CertificatePEM, r.SensorID, next)); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
	wantErr(t, err, fleet.ErrInvalidToken)
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 1 {
		t.Errorf("%d active certificates, want 1", n)
	}
}

// The re-ask is bound to the token's original expiry and refused once the
// sensor is revoked.
func TestEnrolmentAnsweredAgainOnlyWhileTheTokenAndSensorLive(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	csr := []byte("csr-e")
	r, _ := f.provenSensor(t, csr)
	// Before the token's expiry: answered (the control).
	f.clock.Advance(fleet.DefaultEnrollmentTokenTTL - time.Minute)
	if _, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr)); err != nil {
		t.Fatalf("re-ask before the token's expiry: %v", err)
	}
	f.clock.Advance(time.Minute)
	_, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
	wantErr(t, err, fleet.ErrInvalidToken)

	rv, e := f.provenSensor(t, csr)
	f.clock.Advance(time.Second)
	f.revoke(t, rv.SensorID)
	_, err = f.svc.EnrollProven(f.ctx, rv.SensorID, rv.EnrollmentToken, csr, nil, f.enrolProof(rv.SensorID, csr))
	wantErr(t, err, fleet.ErrRevoked)
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", rv.SensorID, e.Certificate.Serial), fleet.ErrRevoked)
}

// A first enrolment with a proof that does not verify is refused and
// leaves the token usable; one with a good proof succeeds (the control),
// also from a sensor whose clock is off (as without a proof); its re-ask
// with that clock is refused.
func TestEnrolmentProofIsChecked(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	csr := []byte("csr-e")
	_, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, []byte("csr-other")))
	wantErr(t, err, fleet.ErrInvalidProof)
	skewed := func() *fleet.EnrolmentProof {
		return fleettest.EnrolProof(r.SensorID, csr, f.clock.Now().Add(time.Hour))
	}
	if _, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, skewed()); err != nil {
		t.Fatalf("first enrolment from a sensor whose clock is an hour ahead: %v", err)
	}
	f.clock.Advance(time.Second)
	_, err = f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, skewed())
	wantErr(t, err, fleet.ErrInvalidProof)
}

// Re-asks at once leave one active certificate: one is answered, the
// others refused.
func TestEnrolmentReAsksRacing(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	csr := []byte("csr-e")
	r, _ := f.provenSensor(t, csr)
	f.clock.Advance(time.Second)
	wins, unexpected := race(8, fleet.ErrInvalidToken, func() (bool, error) {
		_, err := f.svc.EnrollProven(f.ctx, r.SensorID, r.EnrollmentToken, csr, nil, f.enrolProof(r.SensorID, csr))
		if errors.Is(err, fleet.ErrConflict) {
			return false, nil // read the winner's record: its proof is not older
		}
		return err == nil, err
	})
	if len(unexpected) > 0 {
		t.Fatalf("unexpected errors: %v", unexpected)
	}
	if wins != 1 {
		t.Fatalf("%d re-asks answered (all signed at one time), want 1", wins)
	}
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 1 {
		t.Errorf("%d active certificates, want 1", n)
	}
}
