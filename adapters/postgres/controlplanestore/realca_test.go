package controlplanestore_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	"github.com/rxc-project/rxc/core/fleet"
)

func newCSR(t *testing.T) []byte {
	t.Helper()
	_, csr := x509catest.KeyCSR(t)
	return csr
}

var newKeyCSR = x509catest.KeyCSR

// proveWith signs the renewal of csr with key, the key of certPEM.
func proveWith(t *testing.T, key *ecdsa.PrivateKey, certPEM []byte, sensorID string, csr []byte, at time.Time) *fleet.PossessionProof {
	t.Helper()
	digest := sha256.Sum256(fleet.RenewalMessage(sensorID, csr, at))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return &fleet.PossessionProof{CertificatePEM: certPEM, SignedAt: at, Signature: sig}
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(p)
	if block == nil {
		t.Fatalf("no PEM in %q", p)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnrollAndRenewWithRealCA runs enrolment and renewal through the
// project's x509 CA: the serial the store keeps is the certificate's.
func TestEnrollAndRenewWithRealCA(t *testing.T) {
	t.Parallel()
	ca := x509catest.Localhost(t)
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	f := newFixture(t, func(c *fleet.Config) { c.CA = ca; c.Clock = now; c.SensorCertTTL = 48 * time.Hour })
	f.provisionedTenant(t, "acme")
	r := f.redeemed(t, "acme")

	_, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	wantErr(t, err, fleet.ErrInvalidCSR)

	key, csr := newKeyCSR(t)
	e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, csr)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, e.Certificate.CertificatePEM)
	tenantID, sensorID, err := x509ca.SensorIdentity(cert)
	if err != nil || tenantID != "acme" || sensorID != r.SensorID {
		t.Errorf("certificate identity %s/%s, %v; want acme/%s", tenantID, sensorID, err, r.SensorID)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got < 48*time.Hour || got > 48*time.Hour+2*time.Minute {
		t.Errorf("certificate lifetime %s, want the configured 48h (plus backdating)", got)
	}
	serial := x509ca.SerialHex(cert.SerialNumber)
	if f.sensor(t, r.SensorID).Certificate.Serial != serial {
		t.Errorf("stored serial %q, certificate serial %q", f.sensor(t, r.SensorID).Certificate.Serial, serial)
	}
	if err := f.svc.AuthorizeSensor(f.ctx, tenantID, sensorID, serial); err != nil {
		t.Errorf("AuthorizeSensor: %v", err)
	}

	// A renewal proves the enrolled key: a signature by another key, or a
	// proof for another CSR, renews nothing.
	ahead.Store(int64(2 * time.Minute))
	csr2 := newCSR(t)
	other, _ := newKeyCSR(t)
	_, err = f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, csr2, proveWith(t, other, e.Certificate.CertificatePEM, r.SensorID, csr2, now()))
	wantErr(t, err, fleet.ErrInvalidProof)
	_, err = f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, csr2, proveWith(t, key, e.Certificate.CertificatePEM, r.SensorID, newCSR(t), now()))
	wantErr(t, err, fleet.ErrInvalidProof)
	rn, err := f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, csr2, proveWith(t, key, e.Certificate.CertificatePEM, r.SensorID, csr2, now()))
	if err != nil {
		t.Fatal(err)
	}
	renewed := rn.Certificate
	newSerial := x509ca.SerialHex(parseCert(t, renewed.CertificatePEM).SerialNumber)
	if newSerial == serial || renewed.Serial != newSerial {
		t.Errorf("renewed serial %q (reported %q), old %q", newSerial, renewed.Serial, serial)
	}
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, tenantID, sensorID, serial), fleet.ErrInvalidToken)
	if err := f.svc.AuthorizeSensor(f.ctx, tenantID, sensorID, newSerial); err != nil {
		t.Errorf("AuthorizeSensor(renewed): %v", err)
	}
}
