package x509ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
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

// maxCSRPEM bounds the CSR an enrolment's proof is checked against.
const maxCSRPEM = 16 << 10

// VerifyCSRPossession checks that csrPEM is a CSR signed by its own key and
// that signature is that key's signature of message (the algorithms of
// VerifyPossession): an enrolling agent holds the key it asks a
// certificate for.
func (ca *CA) VerifyCSRPossession(csrPEM, message, signature []byte) error {
	if len(csrPEM) > maxCSRPEM {
		return fmt.Errorf("CSR of %d bytes exceeds %d", len(csrPEM), maxCSRPEM)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("csr: no CERTIFICATE REQUEST PEM block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return fmt.Errorf("csr: %w", err)
	}
	return checkSignature(csr.PublicKey, message, signature)
}

// checkSignature checks signature of message by pub: ECDSA with SHA-256
// (ASN.1), SHA-256 PKCS #1 v1.5 for RSA, Ed25519 as is.
func checkSignature(pub any, message, signature []byte) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		digest := sha256.Sum256(message)
		if !ecdsa.VerifyASN1(k, digest[:], signature) {
			return errors.New("signature: ECDSA verification failure")
		}
	case *rsa.PublicKey:
		digest := sha256.Sum256(message)
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], signature); err != nil {
			return fmt.Errorf("signature: %w", err)
		}
	case ed25519.PublicKey:
		if !ed25519.Verify(k, message, signature) {
			return errors.New("signature: Ed25519 verification failure")
		}
	default:
		return fmt.Errorf("key of type %T", pub)
	}
	return nil
}
