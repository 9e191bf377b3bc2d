package x509ca_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/rxc-project/rxc/core/fleet"
)

// FuzzSignCSR feeds arbitrary bytes to SignCSR. It must never panic, every
// refusal must wrap fleet.ErrInvalidCSR, and anything it accepts must, by an
// independent check, be one well-formed, correctly signed CSR with an allowed
// key whose public key ends up in the certificate.
func FuzzSignCSR(f *testing.F) {
	ca, _ := newCA(f, nil)
	for _, key := range []crypto.Signer{p256(), p384(), ed(), rsa2048(), rsa1024(), p224()} {
		good := csrPEM(f, key, nil)
		f.Add(good)
		f.Add(append(bytes.Clone(good), good...))
		block, _ := pem.Decode(good)
		f.Add(block.Bytes)
		flipped := bytes.Clone(good)
		flipped[len(flipped)/2] ^= 0x01
		f.Add(flipped)
	}
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, input []byte) {
		issued, err := ca.SignCSR(fleet.CertRequest{CSRPEM: input, TenantID: "acme", SensorID: "s1"})
		if err != nil {
			if !errors.Is(err, fleet.ErrInvalidCSR) {
				t.Fatalf("refusal %v does not wrap ErrInvalidCSR", err)
			}
			return
		}
		block, rest := pem.Decode(bytes.TrimSpace(input))
		if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) != 0 {
			t.Fatalf("accepted input that is not exactly one CSR block: %q", input)
		}
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			t.Fatalf("accepted an unparsable CSR: %v", err)
		}
		if err := csr.CheckSignature(); err != nil {
			t.Fatalf("accepted a CSR with a bad signature: %v", err)
		}
		switch k := csr.PublicKey.(type) {
		case *ecdsa.PublicKey:
			if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
				t.Fatalf("accepted curve %s", k.Curve.Params().Name)
			}
		case ed25519.PublicKey:
		case *rsa.PublicKey:
			if k.N.BitLen() < 2048 {
				t.Fatalf("accepted RSA-%d", k.N.BitLen())
			}
		default:
			t.Fatalf("accepted key type %T", k)
		}
		cert := parseCert(t, issued.CertificatePEM)
		if !csr.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(cert.PublicKey) {
			t.Fatalf("certificate key differs from the CSR key")
		}
		if cert.Subject.CommonName != "s1" || len(cert.URIs) != 1 || cert.URIs[0].String() != "urn:rxc:sensor:acme:s1" {
			t.Fatalf("certificate identity %q %v taken from the CSR", cert.Subject.CommonName, cert.URIs)
		}
	})
}
