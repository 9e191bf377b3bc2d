package sensorclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"testing"
	"time"
)

// testCA signs sensor certificates the way the control plane's sensor CA
// does (CN = sensor id, URI SAN urn:rxc:sensor:<tenant>:<sensor>, client
// authentication only, random serial), with the standard library alone, so
// that this module's tests need none of the servers' packages. The real CA
// meets this package in the root module's tests (adapters/grpcmtls,
// apps/sensor-agent/app).
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

// signed is what a signing hands back, as the control plane answers it.
type signed struct {
	CertificatePEM []byte
	Serial         string
	NotAfter       time.Time
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test sensor CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) CACertificatePEM() []byte { return ca.pem }

// SignCSR checks the request's signature and issues a client certificate
// for its key, valid for ttl.
func (ca *testCA) SignCSR(csrPEM []byte, tenantID, sensorID string, ttl time.Duration) (signed, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return signed{}, errors.New("not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return signed{}, err
	}
	if err := csr.CheckSignature(); err != nil {
		return signed{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return signed{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: sensorID},
		URIs:      []*url.URL{{Scheme: "urn", Opaque: "rxc:sensor:" + tenantID + ":" + sensorID}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(ttl),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return signed{}, err
	}
	return signed{
		CertificatePEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Serial:         serial.Text(16), NotAfter: tmpl.NotAfter,
	}, nil
}
