// Package x509catest gives tests a sensor CA of their own (x509ca, on files
// in the test's temporary directory) and certificate requests to send it.
package x509catest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"path/filepath"
	"testing"

	"github.com/rxc-project/rxc/adapters/x509ca"
)

// New initialises a CA whose server certificate carries opts's names in a
// folder of its own under t's temporary directory and loads it with cfg,
// whose Dir it sets to that folder. It returns the CA and the folder.
func New(t testing.TB, opts x509ca.InitOptions, cfg x509ca.Config) (*x509ca.CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := x509ca.Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	cfg.Dir = dir
	ca, err := x509ca.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

// Localhost is a CA whose server certificate names localhost, loaded with
// the default configuration.
func Localhost(t testing.TB) *x509ca.CA {
	t.Helper()
	ca, _ := New(t, x509ca.InitOptions{DNSNames: []string{"localhost"}}, x509ca.Config{})
	return ca
}

// KeyCSR is a fresh P-256 key and a PEM certificate request signed with
// it. The request's subject is "ignored": the CA names the sensor itself.
func KeyCSR(t testing.TB) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "ignored"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
