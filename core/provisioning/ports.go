package provisioning

import (
	"context"
	"time"

	"github.com/rxc-project/rxc/core/topology"
)

// Signer holds the operator key and mints NATS identities.
type Signer interface {
	// NewAccountKey creates a fresh account key pair.
	NewAccountKey() (pubKey string, seed []byte, err error)
	// SignAccount signs an account JWT with the operator key.
	SignAccount(spec AccountSpec) (jwt string, err error)
	// MintUser creates a user key and signs its JWT with the account key.
	MintUser(spec UserSpec) (MintedUser, error)
	// ResignUser signs a new JWT for an existing user key (a later expiry).
	ResignUser(spec UserSpec, userPubKey string) (jwt string, err error)
	// UserExpiry reads a user JWT's expiry; zero when it has none.
	UserExpiry(userJWT string) (time.Time, error)
	// Creds formats a .creds file (JWT and seed with the usual banners).
	Creds(userJWT string, userSeed []byte) ([]byte, error)
}

// ClaimsReader checks what a user JWT grants.
type ClaimsReader interface {
	// HasPermissions reports whether userJWT allows exactly p (order and
	// duplicates aside).
	HasPermissions(userJWT string, p topology.Permissions) (bool, error)
	// AccountMatches reports whether accountJWT carries exactly the claims
	// SignAccount would sign for spec now (issue time and JWT id aside); a
	// JWT that does not decode matches nothing.
	AccountMatches(accountJWT string, spec AccountSpec) (bool, error)
	// AccountRevocations returns the revocations signed into accountJWT.
	AccountRevocations(accountJWT string) ([]Revocation, error)
}

// Store persists the operator record, accounts, users and revocations.
// Create methods are create-or-return: they insert unless a record with the
// same identity exists, and report whether they inserted.
type Store interface {
	Operator(ctx context.Context) (Operator, error)
	Account(ctx context.Context, pubKey string) (Account, error)
	TenantAccount(ctx context.Context, tenantID string) (Account, error)
	CreateTenantAccount(ctx context.Context, a Account) (stored Account, created bool, err error)
	// ClaimSensor does at once what handing out a sensor's user needs
	// before anything is minted: it reads the tenant's account (ErrNotFound
	// when there is none, and then claims nothing), claims the consumer
	// name for (tenantID, sensorID) as ClaimConsumer does
	// (ErrConsumerNameTaken when another pair owns it) and reads the
	// sensor's active user as ActiveSensorUser does.
	ClaimSensor(ctx context.Context, consumer, tenantID, sensorID string) (SensorClaim, error)
	UserStore
	ConsumerNames
	PushTracker
	Refresher
}

// Refresher lets serve bring account JWTs signed under an earlier
// configuration up to date.
type Refresher interface {
	// ListAccounts returns every account (any kind).
	ListAccounts(ctx context.Context) ([]Account, error)
	// Resign hands the account and its full revocation list to resign under
	// the lock Revoke takes. When resign returns a JWT it replaces the
	// account's (which then awaits its push) and changed is true; "" keeps
	// the account as it is.
	Resign(ctx context.Context, pubKey string, resign func(a Account, all []Revocation) (string, error)) (a Account, changed bool, err error)
}

// PushTracker remembers which account JWTs have reached NATS, so a change
// made while NATS was unreachable is pushed once it is back.
type PushTracker interface {
	// UnpushedAccounts lists accounts whose current JWT has not been pushed.
	UnpushedAccounts(ctx context.Context) ([]Account, error)
	// MarkPushed records a successful push of jwt, unless the account's JWT
	// has changed since.
	MarkPushed(ctx context.Context, pubKey, jwt string) error
}

// UserStore persists users and revocations.
type UserStore interface {
	// ActiveSensorUser returns the sensor's unrevoked user, or ErrNotFound.
	ActiveSensorUser(ctx context.Context, tenantID, sensorID string) (User, error)
	// ReplaceUserJWT replaces the JWT of an unrevoked user (the same key
	// signed again, with a later expiry); ErrNotFound when there is none.
	ReplaceUserJWT(ctx context.Context, userPubKey, jwt string) error
	// ActiveBackendUser returns the named unrevoked backend user, or ErrNotFound.
	ActiveBackendUser(ctx context.Context, name string) (User, error)
	// CreateUser inserts u unless an active user with the same identity
	// (account and sensor, or backend name) exists.
	CreateUser(ctx context.Context, u User) (stored User, created bool, err error)
	// ActiveUsers lists every unrevoked user (sensor and backend) without
	// its seed, for the start-up check of their permissions.
	ActiveUsers(ctx context.Context) ([]User, error)
	// ActiveUserCounts counts the unrevoked users of each kind (for the
	// metrics; no user is read).
	ActiveUserCounts(ctx context.Context) (map[UserKind]int, error)
	// Revoke records the revocation (keeping the earliest time when repeated),
	// marks the user revoked if known, and replaces the account's JWT with the
	// one resign returns for the full revocation list, all atomically.
	Revoke(ctx context.Context, r Revocation, resign func(a Account, all []Revocation) (string, error)) (Revocation, Account, error)
	// RevokeMany is Revoke for several users of one account, signed once.
	// Revoke and RevokeMany also delete the account's entries whose
	// ExpiresAt is at or before the latest RevokedAt they are given: those
	// match no JWT that has not expired.
	RevokeMany(ctx context.Context, accountPubKey string, rs []Revocation, resign func(a Account, all []Revocation) (string, error)) ([]Revocation, Account, error)
	// User returns the user with the public key, revoked or not, without
	// its seed; ErrNotFound when no user has it.
	User(ctx context.Context, pubKey string) (User, error)
	// Reissue revokes every user of the account at once, atomically: it
	// records rs as RevokeMany does, sets the account's AllUsers entry to
	// all.RevokedAt (a later time replaces an earlier one), deletes every
	// other entry revoked at or before dropThrough, marks every active user
	// of the account created before all.RevokedAt plus one second (its JWT
	// was issued at or before all.RevokedAt: nats-server counts seconds)
	// revoked at all.RevokedAt (each sensor gets a new user with its next
	// request) and stores the JWT resign returns for the remaining list. It returns the account and how many active users it
	// revoked.
	Reissue(ctx context.Context, all Revocation, rs []Revocation, dropThrough time.Time, resign func(a Account, all []Revocation) (string, error)) (Account, int, error)
}

// SensorClaim is what Store.ClaimSensor reads: the tenant's account and
// the sensor's active user, nil when it has none.
type SensorClaim struct {
	Account Account
	User    *User
}

// ConsumerClaim says which (tenant, sensor) pair owns a durable consumer name.
type ConsumerClaim struct {
	Consumer, TenantID, SensorID string
}

// ConsumerNames keeps durable consumer names unambiguous across tenants.
type ConsumerNames interface {
	// ClaimConsumer records that the durable consumer name belongs to
	// (tenantID, sensorID), unless it already does. A name claimed by
	// another pair gives ErrConsumerNameTaken; claims are never released,
	// so a name can never move to another pair.
	ClaimConsumer(ctx context.Context, consumer, tenantID, sensorID string) error
	// ConsumerClaims lists every claim.
	ConsumerClaims(ctx context.Context) ([]ConsumerClaim, error)
	// RetiredClaims lists the claims a revocation with RetireSensor
	// retired whose pair has no active user: their consumer and pending
	// commands are to be removed. A claim stays with its pair for good
	// (retired or not, no other pair can take the name); claiming it again
	// (ClaimConsumer, ClaimSensor) by its own pair ends its retirement.
	RetiredClaims(ctx context.Context) ([]ConsumerClaim, error)
}

// Pusher delivers a changed account JWT to the running nats-servers.
type Pusher interface {
	PushAccount(ctx context.Context, pubKey, jwt string) error
}

// Consumers creates the per-sensor durable pull consumers.
type Consumers interface {
	EnsureConsumer(ctx context.Context, s topology.Sensor) error
}

// ConsumerRemover removes what a revoked sensor leaves in JetStream: its
// pending commands (the stream purged by the sensor's command subject) and
// then its durable consumer. Removing what is already gone succeeds. A
// Consumers adapter that implements it lets a revocation clean up.
type ConsumerRemover interface {
	RemoveConsumer(ctx context.Context, s topology.Sensor) error
}

// ConsumerLister lists the durable consumers the command stream holds. A
// Consumers adapter that implements it lets RepairConsumers find sensors
// whose consumer is missing.
type ConsumerLister interface {
	ConsumerNames(ctx context.Context) ([]string, error)
}

// ConsumerRecreator finds and replaces consumers that no live NATS node
// holds: with consumers of fewer replicas than the command stream, a lost
// node takes the consumers it held with it while the stream (and the
// commands in it) lives on. OfflineConsumers names them (when full is false
// it may answer none at the cost of one request while the cluster looks
// whole); RecreateConsumer deletes one and creates it again on a live node,
// leaving a consumer that answers alone, and names that node ("" when the
// answer did not say). A Consumers adapter that
// implements it lets RecreateOfflineConsumers repair a node loss.
type ConsumerRecreator interface {
	OfflineConsumers(ctx context.Context, full bool) ([]string, error)
	RecreateConsumer(ctx context.Context, s topology.Sensor) (node string, err error)
}

// LastKnown keeps the last known JWT of every account, for the resolver to
// answer from while the store is unreachable (adapters/lastknown). Observe
// must never let an older JWT replace a newer one.
type LastKnown interface {
	Observe(a Account)
	Get(pubKey string) (jwt string, ok bool)
	System() (jwt string, ok bool)
}

// Clock lets tests control time.
type Clock func() time.Time
