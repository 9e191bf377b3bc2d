// Package agentwire declares, once, the JSON bodies of the control plane's
// sensor routes (redeem, enrol, renew): the server (controlapi) writes them
// and the sensor side (sensorclient) reads them, so the two cannot drift.
// The routes themselves are described in controlapi's openapi.yaml.
package agentwire

import "time"

// RedeemRequest is POST /api/sensors/claim/redeem.
type RedeemRequest struct {
	ClaimCode string `json:"claimCode"`
	Hostname  string `json:"hostname,omitempty"`
}

// RedeemResponse is a redeemed claim code: the sensor's id and its
// single-use enrolment token.
type RedeemResponse struct {
	SensorID        string    `json:"sensorId"`
	TenantID        string    `json:"tenantId"`
	EnrollmentToken string    `json:"enrollmentToken"`
	ExpiresAt       time.Time `json:"expiresAt"`
}

// EnrollRequest is POST /api/sensors/{id}/agent/enroll (bearer: the
// enrolment token).
type EnrollRequest struct {
	CSR string `json:"csr"`
	// Labels the agent declares for its sensor (optional): at most 16,
	// keys 1-63 of a-z 0-9 . _ - starting with a letter or digit, values
	// 0-63 of A-Z a-z 0-9 . _ -.
	Labels map[string]string `json:"labels,omitempty"`
	// Proof is the agent's proof that it holds the CSR's key (optional;
	// agents that send it can ask again for an answer they lost).
	Proof *EnrolProof `json:"proof,omitempty"`
}

// EnrolProof is an enrolment's proof of possession: the signature by the
// CSR's key (base64) over fleet.EnrolmentMessage(sensorId, csr, signedAt).
type EnrolProof struct {
	SignedAt  time.Time `json:"signedAt"`
	Signature string    `json:"signature"`
}

// RenewRequest is POST /api/sensors/{id}/agent/renew (bearer: the sensor
// token): the new CSR and the proof that the caller holds the key of the
// sensor's current certificate.
type RenewRequest struct {
	CSR   string `json:"csr"`
	Proof *Proof `json:"proof,omitempty"`
}

// Proof is a proof of possession: the current certificate and the
// signature by its key (base64) over fleet.RenewalMessage(sensorId, csr,
// signedAt).
type Proof struct {
	Certificate string    `json:"certificate"`
	SignedAt    time.Time `json:"signedAt"`
	Signature   string    `json:"signature"`
}

// NATSAddress is where a sensor finds NATS and its subjects. Sensors keep
// it in their state file; the credentials live in a file of their own.
type NATSAddress struct {
	URL            string `json:"url"`
	Stream         string `json:"stream"`
	Consumer       string `json:"consumer"`
	JSAPIPrefix    string `json:"jsApiPrefix"`
	InboxPrefix    string `json:"inboxPrefix"`
	CommandSubject string `json:"commandSubject"`
	StatusSubject  string `json:"statusSubject"`
}

// NATS is the nats block of enrolment and renewal answers: the address and
// the .creds content.
type NATS struct {
	NATSAddress
	Creds string `json:"creds"`
}

// GRPC is where a sensor sends health checks and events.
type GRPC struct {
	Address string `json:"address"`
}

// EnrollResponse answers an enrolment.
type EnrollResponse struct {
	SensorID      string    `json:"sensorId"`
	TenantID      string    `json:"tenantId"`
	Certificate   string    `json:"certificate"`
	CACertificate string    `json:"caCertificate"`
	Serial        string    `json:"serial"`
	NotAfter      time.Time `json:"notAfter"`
	SensorToken   string    `json:"sensorToken"`
	NATS          *NATS     `json:"nats"`
	GRPC          GRPC      `json:"grpc"`
}

// RenewResponse answers a renewal; NATS is absent when the control plane
// does not provision NATS.
type RenewResponse struct {
	SensorID      string    `json:"sensorId"`
	SensorToken   string    `json:"sensorToken"`
	Certificate   string    `json:"certificate"`
	CACertificate string    `json:"caCertificate"`
	Serial        string    `json:"serial"`
	NotAfter      time.Time `json:"notAfter"`
	NATS          *NATS     `json:"nats,omitempty"`
}
