package x509ca_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"testing"
	"time"
)

// signFor signs message as an enrolling agent with key would: ECDSA and
// RSA over its SHA-256, Ed25519 as is.
func signFor(t *testing.T, key crypto.Signer, message []byte) []byte {
	t.Helper()
	if _, ok := key.(ed25519.PrivateKey); ok {
		return must(key.Sign(rand.Reader, message, crypto.Hash(0)))
	}
	digest := sha256.Sum256(message)
	return must(key.Sign(rand.Reader, digest[:], crypto.SHA256))
}

// TestVerifyCSRPossession: a signature by the CSR's key verifies, for each
// key type a sensor may use; another key's signature, another message, a
// tampered CSR or something that is not a CSR are refused.
func TestVerifyCSRPossession(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, time.Now)
	msg := []byte("rxc-enrol-v1\ns-1\nabc\n2026-11-27T00:00:00Z")
	for name, key := range map[string]crypto.Signer{"p256": p256(), "rsa2048": rsa2048(), "ed25519": ed()} {
		t.Run(name, func(t *testing.T) {
			csr := csrPEM(t, key, nil)
			if err := ca.VerifyCSRPossession(csr, msg, signFor(t, key, msg)); err != nil {
				t.Fatalf("the CSR key's own signature: %v", err)
			}
			if err := ca.VerifyCSRPossession(csr, append(msg, 'x'), signFor(t, key, msg)); err == nil {
				t.Error("a signature of another message verified")
			}
			other := p384()
			if err := ca.VerifyCSRPossession(csr, msg, signFor(t, other, msg)); err == nil {
				t.Error("another key's signature verified")
			}
		})
	}
	key := p256()
	csr := csrPEM(t, key, nil)
	sig := signFor(t, key, msg)
	block, _ := pem.Decode(csr)
	block.Bytes[len(block.Bytes)-5] ^= 1
	for name, bad := range map[string][]byte{
		"tampered CSR":    pem.EncodeToMemory(block),
		"a certificate":   []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
		"not PEM":         []byte("csr"),
		"an oversize CSR": append(make([]byte, 17<<10), csr...),
	} {
		if err := ca.VerifyCSRPossession(bad, msg, sig); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}
