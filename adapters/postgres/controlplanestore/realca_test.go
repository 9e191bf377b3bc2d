package controlplanestore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/fleet"
)

func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "ignored"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
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
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := x509ca.Init(dir, x509ca.InitOptions{DNSNames: []string{"localhost"}}); err != nil {
		t.Fatal(err)
	}
	ca, err := x509ca.Load(x509ca.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *fleet.Config) { c.CA = ca; c.Clock = time.Now; c.SensorCertTTL = 48 * time.Hour })
	f.provisionedTenant(t, "acme")
	r := f.redeemed(t, "acme")

	_, err = f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	wantErr(t, err, fleet.ErrInvalidCSR)

	e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, newCSR(t))
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

	rn, err := f.svc.Renew(f.ctx, r.SensorID, e.SensorToken, newCSR(t))
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
