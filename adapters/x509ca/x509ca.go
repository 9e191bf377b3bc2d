// Package x509ca is the sensor certificate authority: it creates the CA and
// the control plane's gRPC server certificate on disk, signs sensor CSRs into
// short-lived client certificates that carry the sensor's identity in a URI
// SAN, and builds the mutual-TLS configurations both ends of the sensor gRPC
// channel use. Keys are ECDSA P-256 in PKCS#8 PEM files readable only by
// their owner; an existing CA key is never replaced.
package x509ca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
)

// Defaults applied when a duration is zero.
const (
	DefaultCAValidity     = 10 * 365 * 24 * time.Hour
	DefaultServerValidity = 365 * 24 * time.Hour
	DefaultSensorCertTTL  = 168 * time.Hour
)

// MaxCSRSize bounds the PEM input SignCSR accepts. A CSR for the largest
// allowed RSA key is well under 4 KiB.
const MaxCSRSize = 16 << 10

// backdate tolerates sensors whose clocks run a little behind.
const backdate = time.Minute

// File names inside a CA directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
	// PreviousCACertFile and PreviousCAKeyFile hold the CA being retired
	// during a rotation (Rotate, FinishRotation).
	PreviousCACertFile = "previous-ca.crt"
	PreviousCAKeyFile  = "previous-ca.key"
)

const (
	sensorURIPrefix = "rxc:sensor:"
	pemCertificate  = "CERTIFICATE"
	pemCSR          = "CERTIFICATE REQUEST"
	pemPrivateKey   = "PRIVATE KEY"
	maxRSABits      = 8192
)

// CA signs sensor certificates and serves the control plane's TLS identity.
// It follows its files: when one of them changes (a new server certificate,
// a CA rotation) the next use reads them again, so a running control plane
// takes the change without a restart; files that do not load together keep
// the last good state in use. It is safe for concurrent use.
type CA struct {
	cfg Config
	st  atomic.Pointer[caState]

	mu     sync.Mutex
	failed stamp // the files' stamp that last failed to load
}

// caState is one consistent reading of the CA's files.
type caState struct {
	stamp stamp
	// cert and key issue sensor certificates; previous is the CA being
	// retired (nil outside a rotation), still trusted for client
	// certificates and proofs.
	cert     *x509.Certificate
	key      crypto.Signer
	previous *x509.Certificate
	// bundle is the PEM of cert then previous: what sensors trust.
	bundle []byte
	server tls.Certificate
	pool   *x509.CertPool
	tls    *tls.Config
}

// SignCSR issues a sensor client certificate for the key in req.CSRPEM. The
// CSR only proves possession of the key: its subject, SANs and extensions are
// ignored and the certificate says what the control plane decided.
// Failures caused by the CSR wrap fleet.ErrInvalidCSR; bad ids or TTL wrap
// fleet.ErrInvalidInput.
func (ca *CA) SignCSR(req fleet.CertRequest) (fleet.IssuedCertificate, error) {
	if err := ids.ValidateSensor(req.TenantID, req.SensorID); err != nil {
		return fleet.IssuedCertificate{}, fmt.Errorf("%w: %w", fleet.ErrInvalidInput, err)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = DefaultSensorCertTTL
	}
	if ttl < 0 {
		return fleet.IssuedCertificate{}, fmt.Errorf("%w: negative certificate lifetime %s", fleet.ErrInvalidInput, ttl)
	}
	csr, err := ParseCSR(req.CSRPEM)
	if err != nil {
		return fleet.IssuedCertificate{}, err
	}
	st := ca.current()
	now := ca.cfg.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(st.cert.NotAfter) {
		return fleet.IssuedCertificate{}, fmt.Errorf("%w: certificate would outlive the CA (CA expires %s)", fleet.ErrInvalidInput, st.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := randomSerial()
	if err != nil {
		return fleet.IssuedCertificate{}, err
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := csr.PublicKey.(*rsa.PublicKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.SensorID},
		URIs:                  []*url.URL{SensorURI(req.TenantID, req.SensorID)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              usage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		AuthorityKeyId:        st.cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, st.cert, csr.PublicKey, st.key)
	if err != nil {
		return fleet.IssuedCertificate{}, fmt.Errorf("x509ca: sign sensor certificate: %w", err)
	}
	issued, err := x509.ParseCertificate(der)
	if err != nil {
		return fleet.IssuedCertificate{}, fmt.Errorf("x509ca: parse issued certificate: %w", err)
	}
	return fleet.IssuedCertificate{
		CertificatePEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		Serial:         SerialHex(issued.SerialNumber),
		NotBefore:      issued.NotBefore,
		NotAfter:       issued.NotAfter,
	}, nil
}

// ParseCSR decodes untrusted PEM input into a certificate request whose
// signature is valid and whose key is allowed: ECDSA P-256 or P-384, Ed25519,
// or RSA of 2048 to 8192 bits. The input must be exactly one CERTIFICATE
// REQUEST block, optionally surrounded by white space. Every failure wraps
// fleet.ErrInvalidCSR.
func ParseCSR(input []byte) (*x509.CertificateRequest, error) {
	if len(input) > MaxCSRSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", fleet.ErrInvalidCSR, MaxCSRSize)
	}
	trimmed := bytes.TrimSpace(input)
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN "+pemCSR+"-----")) {
		return nil, fmt.Errorf("%w: expected a PEM %q block and nothing else", fleet.ErrInvalidCSR, pemCSR)
	}
	block, rest := pem.Decode(trimmed)
	if block == nil || block.Type != pemCSR {
		return nil, fmt.Errorf("%w: malformed PEM %q block", fleet.ErrInvalidCSR, pemCSR)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("%w: PEM headers are not allowed", fleet.ErrInvalidCSR)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: data after the %q block", fleet.ErrInvalidCSR, pemCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", fleet.ErrInvalidCSR, err)
	}
	// The key is checked before the signature so that an oversized RSA key
	// costs nothing to refuse.
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", fleet.ErrInvalidCSR, err)
	}
	return csr, nil
}

func checkPublicKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("%w: ECDSA curve %s not allowed (P-256 or P-384)", fleet.ErrInvalidCSR, k.Curve.Params().Name)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 || bits > maxRSABits {
			return fmt.Errorf("%w: RSA key of %d bits not allowed (2048 to %d)", fleet.ErrInvalidCSR, bits, maxRSABits)
		}
		return nil
	default:
		return fmt.Errorf("%w: key type %T not allowed", fleet.ErrInvalidCSR, pub)
	}
}

// SensorURI is the URI SAN naming a sensor: urn:rxc:sensor:<tenant>:<sensor>.
func SensorURI(tenantID, sensorID string) *url.URL {
	return &url.URL{Scheme: "urn", Opaque: sensorURIPrefix + tenantID + ":" + sensorID}
}

// ErrNoSensorIdentity is wrapped when a certificate does not name exactly one
// valid sensor.
var ErrNoSensorIdentity = errors.New("certificate does not identify a sensor")

// SensorIdentity reads the tenant and sensor a client certificate was issued
// to. It is strict: the certificate must carry exactly one URI SAN, of the
// form urn:rxc:sensor:<tenant>:<sensor> with both ids valid, and its common
// name must equal the sensor id. It does not verify the chain; the TLS
// handshake does.
func SensorIdentity(cert *x509.Certificate) (tenantID, sensorID string, err error) {
	if cert == nil {
		return "", "", fmt.Errorf("%w: no certificate", ErrNoSensorIdentity)
	}
	if len(cert.URIs) != 1 {
		return "", "", fmt.Errorf("%w: %d URI SANs, want exactly 1", ErrNoSensorIdentity, len(cert.URIs))
	}
	u := cert.URIs[0]
	rest, ok := strings.CutPrefix(u.Opaque, sensorURIPrefix)
	if u.Scheme != "urn" || !ok {
		return "", "", fmt.Errorf("%w: URI SAN %q is not urn:%s…", ErrNoSensorIdentity, u.String(), sensorURIPrefix)
	}
	tenantID, sensorID, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", fmt.Errorf("%w: URI SAN %q lacks a sensor id", ErrNoSensorIdentity, u.String())
	}
	if err := ids.ValidateSensor(tenantID, sensorID); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoSensorIdentity, err)
	}
	// Re-rendering catches anything url.Parse tolerated but we never issue:
	// queries, fragments, escapes, a user part.
	if u.String() != SensorURI(tenantID, sensorID).String() {
		return "", "", fmt.Errorf("%w: URI SAN %q is not in canonical form", ErrNoSensorIdentity, u.String())
	}
	if cert.Subject.CommonName != sensorID {
		return "", "", fmt.Errorf("%w: common name %q differs from sensor id %q", ErrNoSensorIdentity, cert.Subject.CommonName, sensorID)
	}
	return tenantID, sensorID, nil
}

// SerialHex formats a certificate serial the way RXC stores and compares it:
// lower-case hex without separators or leading zeros.
func SerialHex(serial *big.Int) string {
	return serial.Text(16)
}

// CACertificatePEM returns the CA certificates sensors must trust: the
// issuing CA, and during a rotation the previous one after it.
func (ca *CA) CACertificatePEM() []byte {
	return bytes.Clone(ca.current().bundle)
}

// Certificate returns a copy of the parsed issuing CA certificate.
func (ca *CA) Certificate() *x509.Certificate {
	c := *ca.current().cert
	return &c
}

// ServerTLSConfig is the gRPC server's side of mutual TLS: TLS 1.3 only, a
// client certificate from this CA (or, during a rotation, the previous one)
// required. Each handshake uses the CA's files as they are then.
// Revocation is deliberately not checked here: VerifyPeerCertificate is
// skipped on resumed sessions, so the server's request interceptor checks
// the serial on every call instead.
func (ca *CA) ServerTLSConfig() *tls.Config {
	c := ca.current().tls.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return ca.current().tls, nil
	}
	return c
}

// ClientTLSConfig is a sensor's side of mutual TLS: it presents cert and
// trusts only this CA (and a previous one during a rotation) for
// serverName.
func (ca *CA) ClientTLSConfig(cert tls.Certificate, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.current().pool,
		ServerName:   serverName,
	}
}

// randomSerial returns a positive 128-bit serial. The top bit is set so that
// every serial has the same length in hex; 127 bits remain random.
func randomSerial() (*big.Int, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("x509ca: serial: %w", err)
	}
	b[0] |= 0x80
	return new(big.Int).SetBytes(b[:]), nil
}
