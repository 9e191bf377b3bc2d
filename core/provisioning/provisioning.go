// Package provisioning holds the NATS credential authority's use cases: tenant
// accounts, sensor and backend users, revocations and the account resolver.
// It decides what exists and who may do what (through package topology); the
// ports below sign claims, persist records, push updates to nats-server and
// create JetStream consumers. It never sees a key file, a SQL row or a socket.
package provisioning

import (
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/core/topology"
)

// Sentinel errors. Edges map them to protocol statuses in one place.
var (
	ErrNotFound        = errors.New("not found")
	ErrNoAccount       = errors.New("tenant has no account")
	ErrNATSUnavailable = errors.New("nats unavailable")
	// ErrConsumerLimit: the command stream holds its maximum of consumers;
	// retrying does not help until an operator raises the limit.
	ErrConsumerLimit    = errors.New("command stream consumer limit reached")
	ErrNoOperator       = errors.New("store has no operator")
	ErrOperatorExists   = errors.New("store already has an operator")
	ErrInvalidName      = errors.New("invalid name")
	ErrInvalidPublicKey = errors.New("invalid public key")
	ErrInvalidOperator  = errors.New("invalid operator record")
	// ErrConsumerNameTaken: the durable consumer name cmd-<tenant>-<sensor>
	// of the request already belongs to another (tenant, sensor) pair —
	// "cmd-acme-eu-s1" is both acme/eu-s1 and acme-eu/s1. The first pair
	// keeps it; the second is refused and nothing is re-pointed.
	ErrConsumerNameTaken = errors.New("consumer name taken by another tenant and sensor")
	// ErrNotRevocable: the user belongs to the SYS account, or is a
	// CONTROL-account user that is not a stored backend user (the
	// provisioner's own system user, the control-admin user). Revoking
	// those would silently stop every later revocation or enrolment.
	ErrNotRevocable = errors.New("user may not be revoked")
	// ErrUndeliverable: NATS refuses the account JWT itself (larger than
	// the server's maximum payload); retrying the same JWT cannot succeed.
	// The change is stored and retried in the background.
	ErrUndeliverable = errors.New("account JWT undeliverable to NATS")
)

// AllUsers is the revocation entry's user key that revokes every user JWT
// of the account issued at or before its time (nats-server's "*").
const AllUsers = "*"

// RevocationMargin is added to every single-user revocation time signed
// into an account JWT (see jwtauthority): a JWT of the key signed in the
// moment of the revocation by a replica whose clock runs ahead is refused
// too. An AllUsers entry carries no margin: it would refuse every new user
// of the tenant for that long.
const RevocationMargin = time.Hour

// DefaultAccountJWTMaxBytes is the default bound on a tenant's account JWT
// (ACCOUNT_JWT_MAX_BYTES): 64 KiB, about 700 entries. Every revocation
// signs, stores and pushes the whole JWT, and every nats-server decodes
// it, so a revocation costs in proportion to the JWT: at 256 KiB (the
// bound before) one took 2–6 times as long as one on a short list
// (docs/benchmarks.md); at 64 KiB every revocation stays within about
// 1.5 times of it, at the price of a re-issue after about 700 revocations
// that have not expired, not 2,800.
const DefaultAccountJWTMaxBytes = 64 << 10

// AccountKind tells the three sorts of account apart.
type AccountKind string

// Account kinds.
const (
	KindSystem  AccountKind = "system"
	KindControl AccountKind = "control"
	KindTenant  AccountKind = "tenant"
)

// Operator is the trust root's public record. Its seed lives only in the
// operator seed file.
type Operator struct {
	PubKey         string
	Name           string
	JWT            string
	SystemAccount  string
	ControlAccount string
	CreatedAt      time.Time
}

// Account is a NATS account. Seed is held in clear only in memory; stores
// encrypt it.
type Account struct {
	PubKey    string
	Kind      AccountKind
	TenantID  string // tenant accounts only
	Name      string
	Seed      []byte
	JWT       string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// UserKind tells sensor users from backend users.
type UserKind string

// User kinds.
const (
	UserSensor  UserKind = "sensor"
	UserBackend UserKind = "backend"
)

// User is a NATS user with the JWT it was minted with.
type User struct {
	PubKey        string
	AccountPubKey string
	Kind          UserKind
	TenantID      string // sensor users only
	SensorID      string // sensor users only
	Name          string
	Seed          []byte
	JWT           string
	CreatedAt     time.Time
	RevokedAt     time.Time // zero while active
	// Expiring: the user was minted with an expiring JWT, so every JWT of
	// its key expires (a key first handed out without expiry keeps a JWT
	// that never does, whatever it was signed with later).
	Expiring bool
}

// Revocation of one user key in one account (or of every user JWT issued
// up to RevokedAt when UserPubKey is AllUsers).
type Revocation struct {
	AccountPubKey string
	UserPubKey    string
	RevokedAt     time.Time
	// ExpiresAt, when set, is when every JWT the entry can match has
	// expired: the entry is dropped from the account JWT after it. Zero
	// keeps it until an AllUsers entry covers it.
	ExpiresAt time.Time
	// RetireSensor, on a revocation being stored, marks the consumer-name
	// claim of the user's sensor retired when the sensor is left without an
	// active user (its consumer and pending commands are then removed).
	// Stores do not read it back.
	RetireSensor bool
}

// AccountSpec is everything needed to sign an account JWT. The signer derives
// exports, imports and limits from Kind (via package topology).
type AccountSpec struct {
	PubKey      string
	Name        string
	Kind        AccountKind
	TenantID    string
	Revocations []Revocation
}

// UserSpec is everything needed to mint a user.
type UserSpec struct {
	AccountPubKey string
	AccountSeed   []byte
	Name          string
	Permissions   topology.Permissions
	// InboxPrefix is unused by NATS itself but documents the sensor's
	// private inbox in the credential's tags.
	Tags []string
	// ExpiresAt is the JWT's expiry; zero signs one that never expires.
	ExpiresAt time.Time
}

// MintedUser is a freshly created user key and its signed JWT.
type MintedUser struct {
	PubKey string
	Seed   []byte
	JWT    string
	// Creds is the new user's .creds file, byte for byte what Signer.Creds
	// gives for JWT and Seed (made without decoding the JWT again).
	Creds []byte
}

// CheckOperator makes sure sys and control are the accounts op names and
// returns them with their kinds filled in; a store calls it before it
// records an operator. Errors wrap ErrInvalidOperator.
func CheckOperator(op Operator, sys, control Account) (Account, Account, error) {
	if op.PubKey == "" || sys.PubKey == "" || control.PubKey == "" {
		return sys, control, fmt.Errorf("%w: operator, system and control public keys are required", ErrInvalidOperator)
	}
	if op.SystemAccount != sys.PubKey || op.ControlAccount != control.PubKey {
		return sys, control, fmt.Errorf("%w: the operator's system and control accounts differ from the accounts given", ErrInvalidOperator)
	}
	var err error
	if sys, err = withKind(sys, KindSystem); err != nil {
		return sys, control, err
	}
	control, err = withKind(control, KindControl)
	return sys, control, err
}

// CheckUser makes sure u is complete enough to store: a public key and an
// account, and by its kind a tenant and sensor id or a name. A store calls
// it before it records a user and prefixes the error with its own name.
func CheckUser(u User) error {
	switch {
	case u.PubKey == "" || u.AccountPubKey == "":
		return errors.New("a user needs a public key and an account")
	case u.Kind == UserSensor && (u.TenantID == "" || u.SensorID == ""):
		return errors.New("a sensor user needs a tenant id and a sensor id")
	case u.Kind == UserBackend && u.Name == "":
		return errors.New("a backend user needs a name")
	case u.Kind != UserSensor && u.Kind != UserBackend:
		return fmt.Errorf("unknown user kind %q", u.Kind)
	}
	return nil
}

func withKind(a Account, k AccountKind) (Account, error) {
	if a.Kind != "" && a.Kind != k {
		return a, fmt.Errorf("%w: account %s has kind %q, want %q", ErrInvalidOperator, a.PubKey, a.Kind, k)
	}
	a.Kind = k
	return a, nil
}
