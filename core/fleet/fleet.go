package fleet

import (
	"errors"
	"time"
)

// Errors of the control plane's use cases, beside the shared ones in
// contracts.go.
var (
	// ErrTenantNotProvisioned means the tenant has no NATS account yet; the
	// reconcile loop creates it, after which the call can be retried.
	ErrTenantNotProvisioned = errors.New("tenant has no nats account yet")
	// ErrStale marks a status report older than the last applied one.
	ErrStale = errors.New("stale status report")
	// ErrNotEnrolled means the sensor redeemed a claim code but never enrolled.
	ErrNotEnrolled = errors.New("sensor has not enrolled")
	// ErrNATSRevokePending means a sensor is revoked locally but revoking its
	// NATS user failed; a repeated RevokeSensor retries that part. Edges
	// must not report it as a failure of the whole revocation.
	ErrNATSRevokePending = errors.New("sensor revoked locally; nats user revocation pending")
)

// NATSStatus tells whether a tenant's NATS account exists.
type NATSStatus string

// NATS provisioning states of a tenant.
const (
	NATSPending     NATSStatus = "pending"
	NATSProvisioned NATSStatus = "provisioned"
)

// Tenant is a customer whose sensors share one NATS account.
type Tenant struct {
	ID                string
	Name              string
	NATSAccountPubKey string
	NATSStatus        NATSStatus
	CreatedAt         time.Time
}

// ClaimCode is a one-time code that lets a sensor join a tenant. The code
// itself is never stored: only the SHA-256 of its normalised form.
type ClaimCode struct {
	ID         string
	TenantID   string
	SensorName string
	ExpiresAt  time.Time
	CreatedAt  time.Time
	CreatedBy  string
	UsedAt     time.Time // zero while unused
	RevokedAt  time.Time // zero unless revoked
	SensorID   string    // the sensor created by the redemption
}

// State is a sensor's lifecycle state.
type State string

// Sensor states. Pending: redeemed a claim code, not enrolled. Offline:
// enrolled (or silent too long) with no fresh status. Online, running,
// stopped and error come from the sensor's status reports. Revoked is
// terminal.
const (
	StatePending State = "pending"
	StateOnline  State = "online"
	StateRunning State = "running"
	StateStopped State = "stopped"
	StateError   State = "error"
	StateOffline State = "offline"
	StateRevoked State = "revoked"
)

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateOnline, StateRunning, StateStopped, StateError, StateOffline, StateRevoked:
		return true
	}
	return false
}

// Certificate is a sensor's active client certificate.
type Certificate struct {
	Serial   string
	NotAfter time.Time
	IssuedAt time.Time
}

// Sensor is one enrolled (or enrolling) sensor of a tenant.
type Sensor struct {
	ID                string
	TenantID          string
	Name              string
	Hostname          string
	State             State
	LastSeenAt        time.Time // zero until the first sign of life
	Certificate       Certificate
	LastCommand       *Command
	NATSUserPubKey    string
	NATSAccountPubKey string
	CreatedAt         time.Time
	// AgentVersion is what the sensor's agent last reported (status or
	// health check); Address the network address its last health check
	// came from. "" until known.
	AgentVersion string
	Address      string
	// Labels group sensors (ValidateLabels); nil when there are none.
	Labels map[string]string
	// DecommissionedAt is set when the sensor was retired for good (it is
	// revoked too); zero otherwise.
	DecommissionedAt time.Time
	DecommissionedBy string
}

// Action is what a command asks a sensor to do.
type Action string

// Command actions.
const (
	ActionStart Action = "start"
	ActionStop  Action = "stop"
)

// Valid reports whether a is a known action.
func (a Action) Valid() bool { return a == ActionStart || a == ActionStop }

// CommandStatus says whether a command reached the command stream.
type CommandStatus string

// Command statuses. Pending: recorded, the stream's acknowledgement not
// (yet) received — the publish is in flight or timed out after it was
// sent, so the command may be stored; it is reconciled later. Accepted: the
// stream acknowledged it (or the sensor reported on it). Failed: provably
// never stored (not sent, or refused by the stream); it never reaches the
// sensor. Expired: not reported on by the sensor (and not failed) by its
// expiresAt plus the clock-skew allowance, after which agents refuse it; a
// report recorded later (an agent's outbox delivering it after an outage)
// still records the sensor's outcome and makes it accepted.
const (
	CommandPending  CommandStatus = "pending"
	CommandAccepted CommandStatus = "accepted"
	CommandFailed   CommandStatus = "failed"
	CommandExpired  CommandStatus = "expired"
)

// Outcome is what the sensor reported doing with a command.
type Outcome string

// Outcomes: applied, or refused (with a reason) and not applied.
const (
	OutcomeApplied Outcome = "applied"
	OutcomeRefused Outcome = "refused"
)

// Valid reports whether o is a known outcome.
func (o Outcome) Valid() bool { return o == OutcomeApplied || o == OutcomeRefused }

// Command is an operator's instruction to one sensor.
type Command struct {
	ID        string
	TenantID  string
	SensorID  string
	Action    Action
	IssuedAt  time.Time
	IssuedBy  string
	ExpiresAt time.Time
	// IdempotencyKey is the operator's key for the request that created
	// the command ("" when none was given): a repeat returns this command.
	IdempotencyKey string
	Status         CommandStatus
	// AcceptedAt and StreamSeq are set when the stream acknowledged it.
	AcceptedAt time.Time
	StreamSeq  uint64
	// FailedAt is set with status failed: the command provably never
	// reached the stream.
	FailedAt time.Time
	// AcknowledgedAt is when the sensor's report on the command was
	// recorded; Outcome, OutcomeReason and OutcomeDetail are what it said.
	AcknowledgedAt time.Time
	Outcome        Outcome
	OutcomeReason  string
	OutcomeDetail  string
	// BatchID names the batch the command belongs to ("" for a command to
	// one sensor). FirstSentAt is when its first publication was
	// attempted: zero for a batch's command still waiting to be sent.
	BatchID     string
	FirstSentAt time.Time
}

// SensorFilter narrows a sensor listing; empty fields match everything.
type SensorFilter struct {
	TenantID string
	State    State
}
