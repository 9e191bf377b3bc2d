package x509ca

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// maxCertPEM bounds the certificate a proof of possession carries.
const maxCertPEM = 16 << 10

// VerifyPossession checks that certPEM is a sensor client certificate this
// CA (or the previous one during a rotation) issued, valid at now, and that
// signature is its key's signature of message (ECDSA with SHA-256 for EC keys, SHA-256 PKCS #1 v1.5 for RSA,
// Ed25519 as is). It returns the identity the certificate names. It does
// not know which serial is active: the caller compares.
func (ca *CA) VerifyPossession(certPEM, message, signature []byte, now time.Time) (fleet.CertIdentity, error) {
	if len(certPEM) > maxCertPEM {
		return fleet.CertIdentity{}, fmt.Errorf("certificate of %d bytes exceeds %d", len(certPEM), maxCertPEM)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return fleet.CertIdentity{}, errors.New("certificate: no CERTIFICATE PEM block")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fleet.CertIdentity{}, fmt.Errorf("certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.current().pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fleet.CertIdentity{}, fmt.Errorf("certificate: %w", err)
	}
	tenantID, sensorID, err := SensorIdentity(leaf)
	if err != nil {
		return fleet.CertIdentity{}, err
	}
	var alg x509.SignatureAlgorithm
	switch leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		alg = x509.ECDSAWithSHA256
	case *rsa.PublicKey:
		alg = x509.SHA256WithRSA
	case ed25519.PublicKey:
		alg = x509.PureEd25519
	default:
		return fleet.CertIdentity{}, fmt.Errorf("certificate key of type %T", leaf.PublicKey)
	}
	if err := leaf.CheckSignature(alg, message, signature); err != nil {
		return fleet.CertIdentity{}, fmt.Errorf("signature: %w", err)
	}
	return fleet.CertIdentity{TenantID: tenantID, SensorID: sensorID, Serial: SerialHex(leaf.SerialNumber)}, nil
}
