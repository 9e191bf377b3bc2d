// Package fleet is the control plane's domain: tenants and their NATS
// provisioning, one-time claim codes, sensor enrolment and renewal, commands,
// and the sensor state machine driven by status reports. It defines the ports
// its use cases need (certificate authority, provisioner, command publisher,
// store, session terminator) and never touches SQL, NATS, HTTP or gRPC.
package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors shared by the domain and the adapters that implement its
// ports. Edges map them to HTTP problem codes and gRPC statuses.
var (
	ErrNotFound               = errors.New("not found")
	ErrConflict               = errors.New("already exists")
	ErrInvalidInput           = errors.New("invalid input")
	ErrInvalidClaimCode       = errors.New("invalid claim code")
	ErrInvalidToken           = errors.New("invalid or expired token")
	ErrInvalidCSR             = errors.New("invalid certificate signing request")
	ErrRevoked                = errors.New("sensor revoked")
	ErrProvisionerDisabled    = errors.New("nats provisioning is disabled")
	ErrProvisionerUnavailable = errors.New("nats provisioner unavailable")
	ErrMessagingDisabled      = errors.New("nats messaging is disabled")
	ErrMessagingUnavailable   = errors.New("nats messaging unavailable")
	// ErrInvalidProof: a renewal's proof of possession of the current
	// certificate's key does not hold.
	ErrInvalidProof = errors.New("invalid proof of possession")
	// ErrAgentUpgradeRequired: the sensor's agent renews the way releases
	// before proof of possession did; it must be upgraded.
	ErrAgentUpgradeRequired = errors.New("sensor agent upgrade required")
)

// RateLimitError refuses a call made too soon after the last one.
type RateLimitError struct {
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited: retry in %s", e.RetryAfter.Round(time.Second))
}

// CertRequest is what the CA needs to issue a sensor's client certificate.
// The CSR proves possession of the key; its subject is ignored.
type CertRequest struct {
	CSRPEM   []byte
	TenantID string
	SensorID string
	TTL      time.Duration
}

// IssuedCertificate is a signed sensor certificate.
type IssuedCertificate struct {
	CertificatePEM []byte
	// Serial is the certificate serial number in lower-case hex, no separators.
	Serial    string
	NotBefore time.Time
	NotAfter  time.Time
}

// NATSCredentials is what the provisioner returns for a sensor user.
type NATSCredentials struct {
	AccountPubKey  string
	UserPubKey     string
	Creds          string
	Stream         string
	Consumer       string
	JSAPIPrefix    string
	InboxPrefix    string
	CommandSubject string
	StatusSubject  string
}
