package fleet_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

func TestEnroll(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	if err != nil {
		t.Fatal(err)
	}
	if e.SensorID != r.SensorID || e.TenantID != "acme" || string(e.CACertificatePEM) != "ca pem" || len(e.SensorToken) < 43 {
		t.Errorf("enrollment %+v", e)
	}
	if e.Certificate.Serial != strings.ToLower(e.Certificate.Serial) {
		t.Errorf("serial %q not lower-case", e.Certificate.Serial)
	}
	if e.NATS == nil || e.NATS.UserPubKey != "U-"+r.SensorID {
		t.Errorf("NATS credentials %+v", e.NATS)
	}
	if diff := cmp.Diff([]fleet.CertRequest{{CSRPEM: []byte("csr"), TenantID: "acme", SensorID: r.SensorID, TTL: 168 * time.Hour}}, f.ca.Requests()); diff != "" {
		t.Errorf("CA requests (-want +got):\n%s", diff)
	}
	got := f.sensor(t, r.SensorID)
	want := fleet.Sensor{
		ID: r.SensorID, TenantID: "acme", Name: "sensor-host", Hostname: "sensor-host", State: fleet.StateOffline,
		Certificate:    fleet.Certificate{Serial: e.Certificate.Serial, NotAfter: e.Certificate.NotAfter, IssuedAt: f.clock.Now()},
		NATSUserPubKey: "U-" + r.SensorID, NATSAccountPubKey: "A-acme", CreatedAt: f.clock.Now(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sensor after enrolment (-want +got):\n%s", diff)
	}
	if got := f.liveTokenHash(t, r.SensorID, fleet.TokenSensor); !bytes.Equal(got, sha(e.SensorToken)) {
		t.Errorf("live sensor token hash %x, want the SHA-256 of the token handed out", got)
	}
	if got := f.liveTokenHash(t, r.SensorID, fleet.TokenEnrollment); got != nil {
		t.Errorf("enrolment token still live after enrolment")
	}

	// The enrolment token is single use.
	_, err = f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	wantErr(t, err, fleet.ErrInvalidToken)
}

func TestEnrollRefusals(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	if _, _, err := f.svc.CreateTenant(f.ctx, "late", "late"); err != nil {
		t.Fatal(err)
	}
	// "late" is created after the reconcile cycle, so it has no NATS account.
	late := f.redeemed(t, "late")
	ok := f.redeemed(t, "acme")
	expiring := f.redeemed(t, "acme")
	otherSensor := f.redeemed(t, "acme")

	tests := []struct {
		name     string
		sensorID string
		token    string
		csr      string
		advance  time.Duration
		wantErr  error
	}{
		{name: "malformed sensor id", sensorID: "s\x00", token: ok.EnrollmentToken, csr: "csr", wantErr: fleet.ErrInvalidToken},
		{name: "unknown sensor", sensorID: "s-0000000000000000", token: ok.EnrollmentToken, csr: "csr", wantErr: fleet.ErrInvalidToken},
		{name: "wrong token", sensorID: ok.SensorID, token: otherSensor.EnrollmentToken, csr: "csr", wantErr: fleet.ErrInvalidToken},
		{name: "empty token", sensorID: ok.SensorID, token: "", csr: "csr", wantErr: fleet.ErrInvalidToken},
		{name: "bad CSR", sensorID: ok.SensorID, token: ok.EnrollmentToken, csr: "bad csr", wantErr: fleet.ErrInvalidCSR},
		{name: "empty CSR", sensorID: ok.SensorID, token: ok.EnrollmentToken, csr: "", wantErr: fleet.ErrInvalidCSR},
		{name: "tenant not provisioned", sensorID: late.SensorID, token: late.EnrollmentToken, csr: "csr", wantErr: fleet.ErrTenantNotProvisioned},
		{name: "token usable after those failures", sensorID: ok.SensorID, token: ok.EnrollmentToken, csr: "csr"},
		{name: "expired token", sensorID: expiring.SensorID, token: expiring.EnrollmentToken, csr: "csr", advance: 15 * time.Minute, wantErr: fleet.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.Advance(tt.advance)
			_, err := f.svc.Enroll(f.ctx, tt.sensorID, tt.token, []byte(tt.csr))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Enroll: %v", err)
				}
				return
			}
			wantErr(t, err, tt.wantErr)
		})
	}
	n := 0
	for _, id := range []string{ok.SensorID, expiring.SensorID, otherSensor.SensorID, late.SensorID} {
		n += f.store.CertificateCount(f.ctx, id)
	}
	if n != 1 {
		t.Errorf("%d certificates stored, want only the successful one", n)
	}
}

func TestEnrollConcurrentlyWithOneTokenStoresOnce(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	wins, bad := race(10, fleet.ErrInvalidToken, func() (bool, error) {
		_, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
		return err == nil, err
	})
	if wins != 1 || len(bad) != 0 {
		t.Fatalf("%d enrolments succeeded, unexpected errors %v; want exactly one", wins, bad)
	}
	if got := f.store.ActiveCertificateCount(r.SensorID); got != 1 {
		t.Errorf("%d active certificates, want 1", got)
	}
}

func TestEnrollWithoutProvisioningGivesNoNATSCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *fleet.Config) { c.ProvisioningEnabled = false; c.Provisioner = nil })
	if _, _, err := f.svc.CreateTenant(f.ctx, "acme", "acme"); err != nil {
		t.Fatal(err)
	}
	_, e := f.enrolled(t, "acme")
	if e.NATS != nil {
		t.Errorf("NATS credentials %+v with provisioning disabled", e.NATS)
	}
	if err := f.svc.RevokeSensor(f.ctx, e.SensorID, "ops"); err != nil {
		t.Errorf("RevokeSensor of a sensor without NATS user: %v", err)
	}
}

func TestRenewReplacesSerial(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, e := f.enrolled(t, "acme")
	old := e.Certificate.Serial
	f.clock.Advance(24 * time.Hour)
	rn, err := f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, []byte("csr"), f.proof(e.Certificate.CertificatePEM, r.SensorID, []byte("csr")))
	if err != nil {
		t.Fatal(err)
	}
	cert := rn.Certificate
	if rn.NATS == nil || rn.NATS.UserPubKey != e.NATS.UserPubKey || rn.NATS.Creds != e.NATS.Creds {
		t.Errorf("renewal NATS credentials = %+v, want the enrolment's user %s again", rn.NATS, e.NATS.UserPubKey)
	}
	if cert.Serial == old {
		t.Fatalf("renewal kept serial %s", old)
	}
	if got := f.sensor(t, r.SensorID).Certificate; got.Serial != cert.Serial || !got.NotAfter.Equal(cert.NotAfter) {
		t.Errorf("sensor certificate %+v, want %s", got, cert.Serial)
	}
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, old), fleet.ErrInvalidToken)
	if err := f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, cert.Serial); err != nil {
		t.Errorf("AuthorizeSensor(new serial): %v", err)
	}
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 1 {
		t.Errorf("%d active certificates, want 1", n)
	}
	if rn.SensorToken == "" || rn.SensorToken == e.SensorToken {
		t.Fatal("renewal did not rotate the sensor token")
	}

	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	current := cert.CertificatePEM
	_, other := f.enrolled(t, "acme")
	csr, badCSR := []byte("csr"), []byte("bad csr")
	f.refusedRenewals(t, r.SensorID, cert.Serial, map[string]renewal{
		"old token after rotation":            {token: e.SensorToken, csr: csr, proof: f.proof(current, r.SensorID, csr), want: fleet.ErrInvalidToken},
		"wrong token":                         {token: wrongToken(rn.SensorToken), csr: csr, proof: f.proof(current, r.SensorID, csr), want: fleet.ErrInvalidToken},
		"enrolment token is no good":          {token: r.EnrollmentToken, csr: csr, proof: f.proof(current, r.SensorID, csr), want: fleet.ErrInvalidToken},
		"no proof: an old agent":              {token: rn.SensorToken, csr: csr, want: fleet.ErrAgentUpgradeRequired},
		"proof by the superseded certificate": {token: rn.SensorToken, csr: csr, proof: f.proof(e.Certificate.CertificatePEM, r.SensorID, csr), want: fleet.ErrInvalidProof},
		"proof for another CSR":               {token: rn.SensorToken, csr: csr, proof: f.proof(current, r.SensorID, []byte("other csr")), want: fleet.ErrInvalidProof},
		"proof by another sensor's key":       {token: rn.SensorToken, csr: csr, proof: f.proof(other.Certificate.CertificatePEM, r.SensorID, csr), want: fleet.ErrInvalidProof},
		"bad CSR":                             {token: rn.SensorToken, csr: badCSR, proof: f.proof(current, r.SensorID, badCSR), want: fleet.ErrInvalidCSR},
	})
	stale := f.proof(current, r.SensorID, []byte("csr"))
	f.clock.Advance(10 * time.Minute)
	_, err = f.svc.Renew(f.ctx, r.SensorID, rn.SensorToken, []byte("csr"), stale)
	wantErr(t, err, fleet.ErrInvalidProof)

	// At most one renewal a minute per sensor.
	again, err := f.svc.Renew(f.ctx, r.SensorID, rn.SensorToken, []byte("csr"), f.proof(current, r.SensorID, []byte("csr")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Renew(f.ctx, r.SensorID, again.SensorToken, []byte("csr"), f.proof(again.Certificate.CertificatePEM, r.SensorID, []byte("csr")))
	var limited *fleet.RateLimitError
	if !errors.As(err, &limited) || limited.RetryAfter <= 0 || limited.RetryAfter > fleet.DefaultMinRenewInterval {
		t.Errorf("second renewal within a minute: %v, want a rate limit", err)
	}

	f.revoke(t, r.SensorID)
	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	_, err = f.svc.Renew(f.ctx, r.SensorID, again.SensorToken, []byte("csr"), f.proof(again.Certificate.CertificatePEM, r.SensorID, []byte("csr")))
	wantErr(t, err, fleet.ErrRevoked)
}

func TestAuthorizeSensor(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "other")
	r, e := f.enrolled(t, "acme")
	pending := f.redeemed(t, "acme")
	serial := e.Certificate.Serial
	tests := []struct {
		name             string
		tenant, sensor   string
		serial           string
		want             error
		revokeFirst      bool
		advanceBeforeRun time.Duration
	}{
		{name: "active serial", tenant: "acme", sensor: r.SensorID, serial: serial},
		{name: "upper-case serial", tenant: "acme", sensor: r.SensorID, serial: strings.ToUpper(serial)},
		{name: "wrong tenant", tenant: "other", sensor: r.SensorID, serial: serial, want: fleet.ErrNotFound},
		{name: "unknown sensor", tenant: "acme", sensor: "s-ffffffffffffffff", serial: serial, want: fleet.ErrNotFound},
		{name: "wrong serial", tenant: "acme", sensor: r.SensorID, serial: "abcdef", want: fleet.ErrInvalidToken},
		{name: "empty serial", tenant: "acme", sensor: r.SensorID, serial: "", want: fleet.ErrInvalidToken},
		{name: "pending sensor has no certificate", tenant: "acme", sensor: pending.SensorID, serial: "", want: fleet.ErrInvalidToken},
		{name: "expired certificate", tenant: "acme", sensor: r.SensorID, serial: serial, advanceBeforeRun: 169 * time.Hour, want: fleet.ErrInvalidToken},
		{name: "revoked", tenant: "acme", sensor: r.SensorID, serial: serial, revokeFirst: true, want: fleet.ErrRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.Advance(tt.advanceBeforeRun)
			defer f.clock.Advance(-tt.advanceBeforeRun)
			if tt.revokeFirst {
				f.revoke(t, r.SensorID)
			}
			err := f.svc.AuthorizeSensor(f.ctx, tt.tenant, tt.sensor, tt.serial)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("AuthorizeSensor: %v", err)
				}
				return
			}
			wantErr(t, err, tt.want)
		})
	}
}

func TestEnrollRacingRevocationRevokesTheNewNATSUser(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	f.ca.OnSign = func(req fleet.CertRequest) {
		if _, err := f.store.RevokeSensor(f.ctx, req.SensorID, "ops", f.clock.Now()); err != nil {
			t.Error(err)
		}
	}
	_, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	wantErr(t, err, fleet.ErrRevoked)
	if diff := cmp.Diff([][2]string{{"A-acme", "U-" + r.SensorID}}, f.prov.Revocations()); diff != "" {
		t.Errorf("NATS revocations (-want +got):\n%s", diff)
	}
	if s := f.sensor(t, r.SensorID); s.State != fleet.StateRevoked || s.Certificate.Serial != "" {
		t.Errorf("sensor %+v, want revoked without certificate", s)
	}
}

// After an upgrade revoked a sensor's NATS user, renewal hands out the new
// user the provisioner mints and records it, so revoking the sensor later
// revokes that user, not only the old one.
func TestRenewRecordsNewNATSUser(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, e := f.enrolled(t, "acme")
	f.prov.UserGen = "-v2"
	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	rn, err := f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, []byte("csr"), f.proof(e.Certificate.CertificatePEM, r.SensorID, []byte("csr")))
	if err != nil {
		t.Fatal(err)
	}
	if rn.NATS == nil || rn.NATS.UserPubKey != e.NATS.UserPubKey+"-v2" || rn.NATS.Creds != "creds of "+r.SensorID+"-v2" {
		t.Fatalf("renewal NATS = %+v, want the new user", rn.NATS)
	}
	if got := f.sensor(t, r.SensorID).NATSUserPubKey; got != e.NATS.UserPubKey+"-v2" {
		t.Fatalf("recorded NATS user %q, want the new one", got)
	}
	f.revoke(t, r.SensorID)
	if revs := f.prov.Revocations(); len(revs) != 1 || revs[0][1] != e.NATS.UserPubKey+"-v2" {
		t.Fatalf("revocations %v, want the new user revoked", revs)
	}
}

// A renewal whose answer never reached the agent (the control plane
// committed it, the connection dropped) leaves the agent with the replaced
// token and certificate. The agent sends the same request again (its
// journal keeps the CSR) and gets a certificate for that key; anything that
// is not exactly that request stays refused.
func TestRenewalWhoseAnswerWasLostIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, e := f.enrolled(t, "acme")
	_, other := f.enrolled(t, "acme")
	f.clock.Advance(24 * time.Hour)
	cert0, token0 := e.Certificate.CertificatePEM, e.SensorToken
	csr := []byte("csr-a")
	lost, err := f.svc.Renew(f.ctx, r.SensorID, token0, csr, f.proof(cert0, r.SensorID, csr))
	if err != nil {
		t.Fatal(err)
	}

	// Sent again at once: inside the rate limit, still answered.
	f.clock.Advance(time.Second)
	again, err := f.svc.Renew(f.ctx, r.SensorID, token0, csr, f.proof(cert0, r.SensorID, csr))
	if err != nil {
		t.Fatalf("renewal sent again after a lost answer: %v", err)
	}
	if again.Certificate.Serial == lost.Certificate.Serial || again.SensorToken == lost.SensorToken || again.SensorToken == token0 {
		t.Fatalf("answer sent again reuses serial %s or a token", again.Certificate.Serial)
	}
	if again.NATS == nil || again.NATS.UserPubKey != e.NATS.UserPubKey {
		t.Errorf("answer sent again carries NATS %+v, want the sensor's user", again.NATS)
	}
	if err := f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, again.Certificate.Serial); err != nil {
		t.Errorf("certificate of the answer sent again: %v", err)
	}
	// What the lost answer carried is dead: nobody holds it but an eavesdropper.
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, lost.Certificate.Serial), fleet.ErrInvalidToken)
	f.clock.Advance(2 * fleet.DefaultMinRenewInterval)
	_, err = f.svc.Renew(f.ctx, r.SensorID, lost.SensorToken, []byte("csr-x"), f.proof(lost.Certificate.CertificatePEM, r.SensorID, []byte("csr-x")))
	wantErr(t, err, fleet.ErrInvalidToken)

	// Lost twice: the same request still works.
	again, err = f.svc.Renew(f.ctx, r.SensorID, token0, csr, f.proof(cert0, r.SensorID, csr))
	if err != nil {
		t.Fatalf("renewal sent a third time: %v", err)
	}

	// Anything but that exact request is refused and changes nothing.
	otherCSR := []byte("csr-b")
	f.refusedRenewals(t, r.SensorID, again.Certificate.Serial, map[string]renewal{
		"another CSR":                     {token0, otherCSR, f.proof(cert0, r.SensorID, otherCSR), fleet.ErrInvalidToken},
		"proof by the new certificate":    {token0, csr, f.proof(again.Certificate.CertificatePEM, r.SensorID, csr), fleet.ErrInvalidToken},
		"proof by another sensor's key":   {token0, csr, f.proof(other.Certificate.CertificatePEM, r.SensorID, csr), fleet.ErrInvalidProof},
		"another sensor's token":          {other.SensorToken, csr, f.proof(cert0, r.SensorID, csr), fleet.ErrInvalidToken},
		"the enrolment token":             {r.EnrollmentToken, csr, f.proof(cert0, r.SensorID, csr), fleet.ErrInvalidToken},
		"no proof":                        {token0, csr, nil, fleet.ErrAgentUpgradeRequired},
		"proof for another CSR":           {token0, csr, f.proof(cert0, r.SensorID, otherCSR), fleet.ErrInvalidProof},
		"a token from before the renewal": {wrongToken(token0), csr, f.proof(cert0, r.SensorID, csr), fleet.ErrInvalidToken},
	})
	stale := f.proof(cert0, r.SensorID, csr)
	f.clock.Advance(10 * time.Minute)
	_, err = f.svc.Renew(f.ctx, r.SensorID, token0, csr, stale)
	wantErr(t, err, fleet.ErrInvalidProof)

	// Once the agent renews with what it received, the old chain is over.
	next := []byte("csr-c")
	moved, err := f.svc.Renew(f.ctx, r.SensorID, again.SensorToken, next, f.proof(again.Certificate.CertificatePEM, r.SensorID, next))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Renew(f.ctx, r.SensorID, token0, csr, f.proof(cert0, r.SensorID, csr))
	wantErr(t, err, fleet.ErrInvalidToken)
	f.keptCertificate(t, r.SensorID, moved.Certificate.Serial, "the request sent again once the chain moved on")
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 1 {
		t.Errorf("%d active certificates, want 1", n)
	}
	f.revoke(t, r.SensorID)
	_, err = f.svc.Renew(f.ctx, r.SensorID, again.SensorToken, next, f.proof(again.Certificate.CertificatePEM, r.SensorID, next))
	wantErr(t, err, fleet.ErrRevoked)
}

// wrongToken is tok with its first character changed (to another one: a
// token may start with "x").
func wrongToken(tok string) string {
	if tok[0] == 'x' {
		return "y" + tok[1:]
	}
	return "x" + tok[1:]
}
