package provisioning

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/topology"
)

// Config wires a Service.
type Config struct {
	Store  Store
	Signer Signer
	// Claims reads back what a stored user JWT grants (jwtauthority.Signer
	// implements it too).
	Claims    ClaimsReader
	Pusher    Pusher
	Consumers Consumers
	// Stream is the command stream's name.
	Stream string
	// EventStream is the alert event stream's name (default
	// topology.DefaultEventStream); backend users may read its writer
	// consumer.
	EventStream string
	// ResolverCacheTTL is how long an account JWT is served from memory
	// before the store is asked again; zero disables the cache.
	ResolverCacheTTL time.Duration
	// LastKnown, when set, keeps every account JWT seen; the resolver
	// answers from it while the store is unreachable.
	LastKnown LastKnown
	// SensorUserTTL is how long a sensor user JWT is valid from when it is
	// handed out; every EnsureSensorUser (enrolment, renewal) hands out
	// one valid that long, signed again for the same key. Zero signs
	// sensor users without expiry.
	SensorUserTTL time.Duration
	// AccountJWTMaxBytes bounds a tenant's account JWT: a revocation that
	// would sign a larger one re-issues the tenant instead (one AllUsers
	// entry; see Revoke). Zero means DefaultAccountJWTMaxBytes; negative
	// means no bound.
	AccountJWTMaxBytes int
	Clock              Clock
}

// Service implements the provisioner's use cases.
type Service struct {
	store     Store
	signer    Signer
	claims    ClaimsReader
	pusher    Pusher
	consumers Consumers
	stream    string
	events    string
	now       Clock
	cache     *jwtCache
	last      LastKnown
	userTTL   time.Duration
	maxJWT    int
	// undelivered holds the accounts whose current JWT NATS refused as
	// undeliverable (ErrUndeliverable), with the reason; retried by
	// PushPending.
	undeliveredMu sync.Mutex
	undelivered   map[string]string
	// cleanupDue is set when removing a revoked sensor's consumer failed:
	// RemoveRetiredConsumers then has work.
	cleanupDue atomic.Bool
	// repushAfter is how long after a revocation the account is pushed
	// again: a nats-server that loaded the account in between from another
	// replica's resolver cache (stale for up to its TTL) gets the
	// revocation too. Zero without a cache.
	repushAfter time.Duration
	// repushDue holds, per account with a re-push pending, when it is due
	// (see repushLater).
	repushMu  sync.Mutex
	repushDue map[string]time.Time
	// kinds holds the kind of every account Revoke has seen (AccountKind
	// by public key; see accountKind).
	kinds sync.Map
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Signer == nil || cfg.Claims == nil || cfg.Pusher == nil || cfg.Consumers == nil {
		return nil, errors.New("provisioning: store, signer, claims reader, pusher and consumers are required")
	}
	if err := ids.Validate(cfg.Stream); err != nil {
		return nil, fmt.Errorf("provisioning: stream name: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SensorUserTTL < 0 {
		return nil, errors.New("provisioning: negative sensor user lifetime")
	}
	cfg.EventStream = cmp.Or(cfg.EventStream, topology.DefaultEventStream)
	cfg.AccountJWTMaxBytes = cmp.Or(cfg.AccountJWTMaxBytes, DefaultAccountJWTMaxBytes)
	if err := ids.Validate(cfg.EventStream); err != nil {
		return nil, fmt.Errorf("provisioning: event stream name: %w", err)
	}
	return &Service{
		store: cfg.Store, signer: cfg.Signer, claims: cfg.Claims, pusher: cfg.Pusher, consumers: cfg.Consumers,
		stream: cfg.Stream, events: cfg.EventStream, now: cfg.Clock, cache: newJWTCache(cfg.ResolverCacheTTL, cfg.Clock),
		last: cfg.LastKnown, repushAfter: repushDelay(cfg.ResolverCacheTTL), userTTL: cfg.SensorUserTTL,
		maxJWT: cfg.AccountJWTMaxBytes, undelivered: map[string]string{}, repushDue: map[string]time.Time{},
	}, nil
}

// SystemAccountJWT is what the resolver answers on its base URL. While the
// store fails it answers from the last known copy, when there is one.
func (s *Service) SystemAccountJWT(ctx context.Context) (string, error) {
	tok, err := s.systemAccountJWT(ctx)
	if err != nil && s.last != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNoOperator) {
		if last, ok := s.last.System(); ok {
			return last, nil
		}
	}
	return tok, err
}

func (s *Service) systemAccountJWT(ctx context.Context) (string, error) {
	op, err := s.store.Operator(ctx)
	if err != nil {
		return "", err
	}
	a, err := s.store.Account(ctx, op.SystemAccount)
	if err != nil {
		return "", fmt.Errorf("system account: %w", err)
	}
	s.seen(a)
	return a.JWT, nil
}

// AccountJWT returns the current JWT of any account, for the URL resolver.
// While the store fails it answers from the last known copy, when there is
// one: nats-server keeps admitting the fleet through a database outage.
func (s *Service) AccountJWT(ctx context.Context, pubKey string) (string, error) {
	tok, entry, ok, refresh := s.cache.get(pubKey)
	if refresh {
		go s.refreshJWT(pubKey, entry)
	}
	if ok {
		return tok, nil
	}
	a, err := s.store.Account(ctx, pubKey)
	if err != nil {
		if s.last != nil && !errors.Is(err, ErrNotFound) {
			if last, ok := s.last.Get(pubKey); ok {
				return last, nil
			}
		}
		return "", err
	}
	s.seenIf(a, entry)
	return a.JWT, nil
}

// refreshJWT reads a cached account JWT again before its entry expires
// (jwtCache.get asked for it).
func (s *Service) refreshJWT(pubKey string, entry *cacheEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer s.cache.refreshed()
	if a, err := s.store.Account(ctx, pubKey); err == nil {
		s.seenIf(a, entry)
	}
}

// seenIf is seen for a read of the store that began when the cache held
// prev: a newer JWT this replica stored meanwhile stays in the cache.
func (s *Service) seenIf(a Account, prev *cacheEntry) {
	s.cache.putIf(a.PubKey, a.JWT, prev, true)
	if s.last != nil {
		s.last.Observe(a)
	}
}

// seen records an account read from or written to the store in the cache
// and the last known copy.
func (s *Service) seen(a Account) {
	s.cache.put(a.PubKey, a.JWT)
	if s.last != nil {
		s.last.Observe(a)
	}
}

// EnsureTenantAccount creates the tenant's account or returns the existing one.
func (s *Service) EnsureTenantAccount(ctx context.Context, tenantID, name string) (Account, bool, error) {
	if err := ids.Validate(tenantID); err != nil {
		return Account{}, false, fmt.Errorf("tenant id: %w", err)
	}
	if name == "" {
		name = tenantID
	}
	if err := validateName(name); err != nil {
		return Account{}, false, err
	}
	if a, err := s.store.TenantAccount(ctx, tenantID); err == nil {
		return a, false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Account{}, false, err
	}
	pub, seed, err := s.signer.NewAccountKey()
	if err != nil {
		return Account{}, false, err
	}
	// The JWT's name is the tenant id: it is what scoped templates and the
	// server's logs show, and it is guaranteed subject-safe.
	tok, err := s.signer.SignAccount(AccountSpec{PubKey: pub, Name: tenantID, Kind: KindTenant, TenantID: tenantID})
	if err != nil {
		return Account{}, false, err
	}
	now := s.now().UTC()
	a, created, err := s.store.CreateTenantAccount(ctx, Account{
		PubKey: pub, Kind: KindTenant, TenantID: tenantID, Name: name, Seed: seed, JWT: tok,
		CreatedAt: now, UpdatedAt: now,
	})
	if err == nil {
		s.seen(a)
	}
	return a, created, err
}

// SensorUser is a sensor's credential and the NATS names it uses.
type SensorUser struct {
	User   User
	Creds  []byte
	Sensor topology.Sensor
}

// sensor is the sensor tenantID/sensorID on the service's command stream
// (its consumer name and permissions).
func (s *Service) sensor(tenantID, sensorID string) topology.Sensor {
	return topology.Sensor{Stream: s.stream, TenantID: tenantID, SensorID: sensorID}
}

// EnsureSensorUser returns the sensor's active user, minting one if there is
// none (or only revoked ones), and makes sure its durable consumer exists.
// With a SensorUserTTL the JWT handed out expires that long from now: an
// existing user's JWT is signed again for the same key unless that
// happened within the last minute.
// When NATS cannot be reached the user is kept and ErrNATSUnavailable is
// returned; a retry finishes the work.
func (s *Service) EnsureSensorUser(ctx context.Context, tenantID, sensorID string) (SensorUser, bool, error) {
	if err := ids.ValidateSensor(tenantID, sensorID); err != nil {
		return SensorUser{}, false, err
	}
	sensor := s.sensor(tenantID, sensorID)
	// The consumer name is claimed before anything is minted: a pair that
	// spells another pair's name gets nothing, not even a user. One store
	// call reads the account, claims the name and reads the active user.
	claim, err := s.store.ClaimSensor(ctx, sensor.Consumer(), tenantID, sensorID)
	if errors.Is(err, ErrNotFound) {
		return SensorUser{}, false, fmt.Errorf("%w: %s", ErrNoAccount, tenantID)
	} else if err != nil {
		return SensorUser{}, false, err
	}
	acct := claim.Account
	var minted MintedUser
	u, created, err := s.ensureUser(ctx, sensor.Permissions(), func() (User, error) {
		if claim.User == nil {
			return User{}, fmt.Errorf("sensor user %s/%s: %w", tenantID, sensorID, ErrNotFound)
		}
		return *claim.User, nil
	}, func() (User, error) {
		// A tenant's account never changes its key, and its seed is
		// replaced only by reseal, which re-encrypts the same seed: the
		// account read above signs the user.
		u, m, err := s.mint(acct, User{Kind: UserSensor, TenantID: tenantID, SensorID: sensorID, Name: sensorID, Expiring: s.userTTL > 0}, s.sensorSpec(sensor))
		minted = m
		return u, err
	})
	if err != nil {
		return SensorUser{}, false, err
	}
	if !created && s.userTTL > 0 {
		if u, err = s.extend(ctx, u, sensor); err != nil {
			return SensorUser{}, false, err
		}
	}
	// The user this call minted comes with its creds; any other is
	// formatted (and its seed checked against its JWT) here.
	creds := minted.Creds
	if !created || u.PubKey != minted.PubKey || creds == nil {
		if creds, err = s.signer.Creds(u.JWT, u.Seed); err != nil {
			return SensorUser{}, false, err
		}
	}
	if err := s.consumers.EnsureConsumer(ctx, sensor); errors.Is(err, ErrConsumerNameTaken) {
		return SensorUser{}, false, err
	} else if errors.Is(err, ErrConsumerLimit) {
		return SensorUser{}, false, fmt.Errorf("consumer %s: %w", sensor.Consumer(), err)
	} else if err != nil {
		return SensorUser{}, false, fmt.Errorf("%w: consumer %s: %v", ErrNATSUnavailable, sensor.Consumer(), err)
	}
	return SensorUser{User: u, Creds: creds, Sensor: sensor}, created, nil
}

// sensorSpec is what a sensor's user JWT says; its expiry is SensorUserTTL
// from now.
func (s *Service) sensorSpec(sensor topology.Sensor) UserSpec {
	spec := UserSpec{
		Name: sensor.SensorID, Permissions: sensor.Permissions(),
		Tags: []string{"rxc-tenant:" + strings.ToLower(sensor.TenantID), "rxc-sensor:" + strings.ToLower(sensor.SensorID)},
	}
	if s.userTTL > 0 {
		spec.ExpiresAt = s.now().Add(s.userTTL)
	}
	return spec
}

// extend signs u's JWT again, expiring SensorUserTTL from now, unless it
// was signed so within the last minute (a tenth of the lifetime when that
// is shorter): a retried request gets the same credentials. A revoked user
// is never signed again (ReplaceUserJWT refuses it). A revocation rejects
// the key's JWTs issued at or before its time; a JWT signed again in the
// same moment on a replica whose clock runs ahead of the revoking one is
// covered because the signer puts every revocation jwtauthority.RevocationMargin
// (an hour) later into the account JWT.
func (s *Service) extend(ctx context.Context, u User, sensor topology.Sensor) (User, error) {
	exp, err := s.signer.UserExpiry(u.JWT)
	if err != nil {
		return User{}, fmt.Errorf("read user %s: %w", u.PubKey, err)
	}
	if !exp.IsZero() && exp.After(s.now().Add(s.userTTL-min(time.Minute, s.userTTL/10))) {
		return u, nil
	}
	acct, err := s.store.Account(ctx, u.AccountPubKey)
	if err != nil {
		return User{}, fmt.Errorf("account of user %s: %w", u.PubKey, err)
	}
	spec := s.sensorSpec(sensor)
	spec.AccountPubKey, spec.AccountSeed = acct.PubKey, acct.Seed
	tok, err := s.signer.ResignUser(spec, u.PubKey)
	if err != nil {
		return User{}, err
	}
	if err := s.store.ReplaceUserJWT(ctx, u.PubKey, tok); err != nil {
		return User{}, err
	}
	u.JWT = tok
	return u, nil
}

// BackendUser is a CONTROL-account user and its credential.
type BackendUser struct {
	User  User
	Creds []byte
}

// EnsureBackendUser returns the named backend user of the CONTROL account,
// minting it when there is none.
func (s *Service) EnsureBackendUser(ctx context.Context, name string) (BackendUser, bool, error) {
	if name == "" {
		name = "backend"
	}
	if err := ids.Validate(name); err != nil {
		return BackendUser{}, false, fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	backendPerms := topology.BackendPermissionsFor(s.events)
	u, created, err := s.ensureUser(ctx, backendPerms, func() (User, error) {
		return s.store.ActiveBackendUser(ctx, name)
	}, func() (User, error) {
		op, err := s.store.Operator(ctx)
		if err != nil {
			return User{}, err
		}
		acct, err := s.store.Account(ctx, op.ControlAccount)
		if err != nil {
			return User{}, fmt.Errorf("control account: %w", err)
		}
		u, _, err := s.mint(acct, User{Kind: UserBackend, Name: name}, UserSpec{Name: name, Permissions: backendPerms})
		return u, err
	})
	if err != nil {
		return BackendUser{}, false, err
	}
	creds, err := s.signer.Creds(u.JWT, u.Seed)
	if err != nil {
		return BackendUser{}, false, err
	}
	return BackendUser{User: u, Creds: creds}, created, nil
}

// ensureUser returns the active user find gives, or builds and stores a new
// one. An active user whose JWT carries other permissions than want (the
// topology changed with an upgrade) is revoked and replaced, so every
// credential handed out grants exactly what the current layout says.
func (s *Service) ensureUser(ctx context.Context, want topology.Permissions, find func() (User, error), build func() (User, error)) (User, bool, error) {
	u, err := find()
	if err == nil {
		same, err := s.claims.HasPermissions(u.JWT, want)
		if err != nil {
			return User{}, false, fmt.Errorf("read user %s: %w", u.PubKey, err)
		}
		if same {
			return u, false, nil
		}
		if _, _, err := s.revoke(ctx, s.revocationOf(u, s.revokeTime())); err != nil {
			return User{}, false, fmt.Errorf("replace user %s with outdated permissions: %w", u.PubKey, err)
		}
	} else if !errors.Is(err, ErrNotFound) {
		return User{}, false, err
	}
	u, err = build()
	if err != nil {
		return User{}, false, err
	}
	return s.store.CreateUser(ctx, u)
}

func (s *Service) mint(acct Account, u User, spec UserSpec) (User, MintedUser, error) {
	spec.AccountPubKey, spec.AccountSeed = acct.PubKey, acct.Seed
	m, err := s.signer.MintUser(spec)
	if err != nil {
		return User{}, MintedUser{}, err
	}
	u.PubKey, u.Seed, u.JWT = m.PubKey, m.Seed, m.JWT
	u.AccountPubKey = acct.PubKey
	u.CreatedAt = s.now().UTC()
	return u, m, nil
}

// Revoke revokes a user key in an account, re-signs the account JWT and
// pushes it to NATS so live connections of the user close at once. It is
// idempotent: a repeat keeps the first revocation time and pushes again.
//
// Only what may be revoked is: any key of a tenant account, and the stored
// backend users of the CONTROL account. A SYS-account key, or a CONTROL key
// that is not a stored backend user (the provisioner's system user, the
// control-admin user), gives ErrNotRevocable and changes nothing.
//
// Revoking a sensor's user that leaves the sensor without an active user
// retires the sensor: its pending commands and its durable consumer are
// removed (RemoveRetiredConsumers finishes that after a failure or a
// crash). A revocation that would make the tenant's account JWT larger
// than its bound re-issues the tenant (see reissue).
//
// When the push fails the revocation is stored and ErrNATSUnavailable (or
// ErrUndeliverable, when NATS refuses the JWT itself) is returned together
// with the stored result.
func (s *Service) Revoke(ctx context.Context, accountPubKey, userPubKey string) (Revocation, Account, error) {
	kind, err := s.accountKind(ctx, accountPubKey)
	if err != nil {
		return Revocation{}, Account{}, err
	}
	u, err := s.store.User(ctx, userPubKey)
	known := err == nil && u.AccountPubKey == accountPubKey
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Revocation{}, Account{}, err
	}
	switch kind {
	case KindSystem:
		return Revocation{}, Account{}, fmt.Errorf("%w: %s is a key of the system account", ErrNotRevocable, userPubKey)
	case KindControl:
		if !known || u.Kind != UserBackend {
			return Revocation{}, Account{}, fmt.Errorf("%w: %s is not a backend user of the control account", ErrNotRevocable, userPubKey)
		}
	case KindTenant:
	default:
		return Revocation{}, Account{}, fmt.Errorf("%w: account %s has kind %q", ErrNotRevocable, accountPubKey, kind)
	}
	r := Revocation{AccountPubKey: accountPubKey, UserPubKey: userPubKey, RevokedAt: s.revokeTime()}
	var sensor *topology.Sensor
	if known {
		r = s.revocationOf(u, r.RevokedAt)
		if u.Kind == UserSensor {
			r.RetireSensor = true
			sensor = new(s.sensor(u.TenantID, u.SensorID))
		}
	}
	rev, acct, err := s.revoke(ctx, r)
	if sensor != nil && (err == nil || errors.Is(err, ErrNATSUnavailable) || errors.Is(err, ErrUndeliverable)) {
		if cerr := s.retire(ctx, *sensor); cerr != nil && err == nil {
			err = cerr
		}
	}
	return rev, acct, err
}

// accountKind is the kind of the account with the key. An account never
// changes its kind: it is read from the store once (the whole account,
// with a JWT of up to the bound) and then held.
func (s *Service) accountKind(ctx context.Context, pubKey string) (AccountKind, error) {
	if k, ok := s.kinds.Load(pubKey); ok {
		return k.(AccountKind), nil
	}
	a, err := s.store.Account(ctx, pubKey)
	if err != nil {
		return "", err
	}
	s.kinds.Store(pubKey, a.Kind)
	return a.Kind, nil
}

// revokeTime is a revocation's time: now, in whole seconds (nats-server
// compares issue times in seconds).
func (s *Service) revokeTime() time.Time { return s.now().UTC().Truncate(time.Second) }

// revocationOf is the revocation of a known user at at. A sensor user's
// JWTs expire (SensorUserTTL): every JWT of its key that the revocation can
// match is issued by at plus RevocationMargin and expires SensorUserTTL
// later, or at the stored JWT's expiry when that is later; another margin
// covers the clocks of the servers that check it. After that the entry is
// dropped. A user one of whose JWTs never expires (minted without expiry,
// User.Expiring false) keeps its entry until an AllUsers entry covers it.
func (s *Service) revocationOf(u User, at time.Time) Revocation {
	r := Revocation{AccountPubKey: u.AccountPubKey, UserPubKey: u.PubKey, RevokedAt: at}
	if u.Kind != UserSensor || s.userTTL <= 0 || !u.Expiring {
		return r
	}
	exp, err := s.signer.UserExpiry(u.JWT)
	if err != nil || exp.IsZero() {
		return r
	}
	last := at.Add(RevocationMargin + s.userTTL)
	if exp.After(last) {
		last = exp
	}
	r.ExpiresAt = last.Add(RevocationMargin)
	return r
}

// revoke records r (re-issuing the tenant when its JWT would outgrow the
// bound) and pushes the account.
func (s *Service) revoke(ctx context.Context, r Revocation) (Revocation, Account, error) {
	stored, acct, err := s.record(ctx, r.AccountPubKey, []Revocation{r})
	if err != nil {
		return Revocation{}, Account{}, err
	}
	if err := s.push(ctx, acct); err != nil {
		return stored[0], acct, err
	}
	s.repushLater(acct.PubKey)
	return stored[0], acct, nil
}

// errOverBound: the account JWT would be larger than its bound.
var errOverBound = errors.New("account JWT over its size bound")

// record stores rs in one account and signs it once; when the JWT would
// outgrow its bound the tenant is re-issued instead.
func (s *Service) record(ctx context.Context, pk string, rs []Revocation) ([]Revocation, Account, error) {
	stored, acct, err := s.store.RevokeMany(ctx, pk, rs, s.resign)
	if errors.Is(err, errOverBound) {
		acct, _, err = s.reissue(ctx, pk, rs)
		stored = rs
	}
	if err != nil {
		return nil, Account{}, err
	}
	s.seen(acct)
	return stored, acct, nil
}

// Reissue revokes every user of a tenant with one AllUsers entry and
// returns how many active users it revoked; see reissue.
func (s *Service) Reissue(ctx context.Context, tenantID string) (Account, int, error) {
	a, err := s.store.TenantAccount(ctx, tenantID)
	if errors.Is(err, ErrNotFound) {
		return Account{}, 0, fmt.Errorf("%w: %s", ErrNoAccount, tenantID)
	} else if err != nil {
		return Account{}, 0, err
	}
	a, n, err := s.reissue(ctx, a.PubKey, nil)
	if err != nil {
		return Account{}, 0, err
	}
	s.seen(a)
	if err := s.push(ctx, a); err != nil {
		return a, n, err
	}
	s.repushLater(a.PubKey)
	return a, n, nil
}

// reissue is a tenant-wide re-issue: one AllUsers entry at T (the second
// before the current one) refuses every user JWT of the account issued at
// or before T,
// so every single-user entry revoked at or before T is dropped, from the
// JWT and from the store: the list starts again from nothing and no
// revocation's cost grows with the tenant's history. What a dropped entry
// no longer covers is its RevocationMargin: a JWT of a revoked key signed,
// in a race with the revocation, by a replica whose clock ran more than
// (T − the revocation's time) ahead. Clocks kept by NTP are far closer
// than the seconds at least between a revocation and a re-issue.
// Every active user created before the current second (its JWT issued at
// or before T) is marked revoked; one created in the current second keeps
// working, and is kept: its JWT is issued after T. When the entries of the
// current second alone pass the bound (a burst), the re-issue waits for
// the next second (at most one) and covers them too. Every active user of the account
// is marked revoked; a sensor's next POST /users (its agent renews when
// NATS refuses its credentials, see sensor-agent's probe) mints it a new
// user whose JWT, issued after T, works. rs are recorded with it.
func (s *Service) reissue(ctx context.Context, pk string, rs []Revocation) (Account, int, error) {
	for attempt := 0; ; attempt++ {
		now := s.now().UTC()
		at := now.Truncate(time.Second).Add(-time.Second)
		all := Revocation{AccountPubKey: pk, UserPubKey: AllUsers, RevokedAt: at}
		a, n, err := s.store.Reissue(ctx, all, rs, at, s.resign)
		if !errors.Is(err, errOverBound) || attempt > 0 {
			return a, n, err
		}
		// The entries of the current second alone pass the bound (a burst
		// of revocations): in the next second the entry covers them.
		wait := min(now.Truncate(time.Second).Add(time.Second).Sub(now), time.Second)
		select {
		case <-ctx.Done():
			return Account{}, 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// resign signs the account with the revocations in force; a tenant's JWT
// that would be larger than the bound gives errOverBound.
func (s *Service) resign(a Account, all []Revocation) (string, error) {
	_, tok, err := s.sign(a, all)
	return tok, err
}

// sign is resign that also returns the revocations it signed.
func (s *Service) sign(a Account, all []Revocation) ([]Revocation, string, error) {
	list := inForce(all, s.now())
	tok, err := s.signer.SignAccount(accountSpec(a, list))
	if err != nil || !s.bounded(a) || len(tok) <= s.maxJWT {
		return list, tok, err
	}
	return nil, "", fmt.Errorf("%w: %d bytes, bound %d", errOverBound, len(tok), s.maxJWT)
}

func (s *Service) bounded(a Account) bool { return a.Kind == KindTenant && s.maxJWT > 0 }

// inForce is the part of a stored revocation list the account JWT carries:
// without the entries that expired by now and the single-user entries an
// AllUsers entry covers (revoked at or before it; Reissue deletes those).
func inForce(all []Revocation, now time.Time) []Revocation {
	var star time.Time
	for _, r := range all {
		if r.UserPubKey == AllUsers {
			star = r.RevokedAt
		}
	}
	out := make([]Revocation, 0, len(all))
	for _, r := range all {
		if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now) {
			continue
		}
		if r.UserPubKey != AllUsers && !star.IsZero() && !r.RevokedAt.After(star) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// repushDelay is a resolver cache lifetime and a margin.
func repushDelay(cacheTTL time.Duration) time.Duration {
	if cacheTTL <= 0 {
		return 0
	}
	return cacheTTL + time.Second
}

// repushLater pushes the account's current JWT once more after
// repushAfter. Replicas cache JWTs for up to their TTL, and nats-server
// asks the resolver for an account only when it first loads it: a server
// that loaded the account from another replica's stale cache right after
// the first push would otherwise keep the revoked user's access. The
// current JWT is read again, so a newer change is never overwritten by an
// older one; a failure is left to the unpushed re-push after a reconnect.
//
// An account has at most one re-push pending: a revocation while one is
// pending moves it to repushAfter from now. What a revocation needs is a
// push of a JWT that carries it at least repushAfter after its own push;
// the one re-push, after the last revocation of a burst, is that for every
// revocation of the burst (each push in between sends the current JWT
// too). A burst of revocations of a tenant then costs one re-push, not one
// per revocation: each is the read and the decoding, by every nats-server,
// of a JWT of up to the bound.
func (s *Service) repushLater(pubKey string) {
	if s.repushAfter <= 0 {
		return
	}
	due := time.Now().Add(s.repushAfter)
	s.repushMu.Lock()
	defer s.repushMu.Unlock()
	_, pending := s.repushDue[pubKey]
	s.repushDue[pubKey] = due
	if !pending {
		time.AfterFunc(s.repushAfter, func() { s.repush(pubKey) })
	}
}

// repush is repushLater's timer: it waits on while a later revocation
// moved the account's re-push, then pushes the current JWT.
func (s *Service) repush(pubKey string) {
	s.repushMu.Lock()
	if wait := time.Until(s.repushDue[pubKey]); wait > 0 {
		s.repushMu.Unlock()
		time.AfterFunc(wait, func() { s.repush(pubKey) })
		return
	}
	delete(s.repushDue, pubKey)
	s.repushMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a, err := s.store.Account(ctx, pubKey); err == nil {
		_ = s.pusher.PushAccount(ctx, a.PubKey, a.JWT)
	}
}

// RevokeOutdatedUsers revokes every active user whose JWT grants other
// permissions than the current topology gives it (an upgrade changed them,
// as when the ack grants were narrowed to counted tokens), and every sensor
// user whose consumer name belongs to another (tenant, sensor) pair. It runs
// when serve starts, after RefreshAccounts: the first release's grants
// still reach other consumers through the new imports, so they must stop
// working at the upgrade, not at the sensor's next request. Each account is
// re-signed once for all its users; PushPending delivers the JWTs once NATS
// is reached, and a sensor gets a fresh user from its next POST /users (the
// control plane asks for one on renewal). It returns the revoked users.
func (s *Service) RevokeOutdatedUsers(ctx context.Context) ([]User, error) {
	users, err := s.store.ActiveUsers(ctx)
	if err != nil {
		return nil, err
	}
	claims, err := s.store.ConsumerClaims(ctx)
	if err != nil {
		return nil, err
	}
	owner := make(map[string]ConsumerClaim, len(claims))
	for _, c := range claims {
		owner[c.Consumer] = c
	}
	backend := topology.BackendPermissionsFor(s.events)
	byAccount := map[string][]Revocation{}
	var order []string
	var revoked []User
	now := s.now().UTC().Truncate(time.Second)
	for _, u := range users {
		if s.current(u, backend, owner) {
			continue
		}
		if _, ok := byAccount[u.AccountPubKey]; !ok {
			order = append(order, u.AccountPubKey)
		}
		byAccount[u.AccountPubKey] = append(byAccount[u.AccountPubKey], s.revocationOf(u, now))
		revoked = append(revoked, u)
	}
	for _, pk := range order {
		if _, _, err := s.record(ctx, pk, byAccount[pk]); err != nil {
			return nil, fmt.Errorf("revoke outdated users of %s: %w", pk, err)
		}
	}
	return revoked, nil
}

// current reports whether u grants exactly what the topology gives it now
// and, for a sensor, whether its consumer name is its own. A JWT that does
// not decode is not current.
func (s *Service) current(u User, backend topology.Permissions, owner map[string]ConsumerClaim) bool {
	want := backend
	if u.Kind == UserSensor {
		sensor := s.sensor(u.TenantID, u.SensorID)
		if c, ok := owner[sensor.Consumer()]; ok && (c.TenantID != u.TenantID || c.SensorID != u.SensorID) {
			return false
		}
		want = sensor.Permissions()
	}
	same, err := s.claims.HasPermissions(u.JWT, want)
	return err == nil && same
}

// RefreshAccounts re-signs every account whose JWT no longer carries what
// the current configuration and topology call for (the CONTROL account's
// JetStream limits changed, the command stream was renamed, an upgrade
// changed the exports or imports), keeping its revocations. It runs when
// serve starts, before NATS is reached; PushPending then delivers the new
// JWTs. It returns the public keys of the accounts it re-signed.
func (s *Service) RefreshAccounts(ctx context.Context) ([]string, error) {
	accts, err := s.store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	var resigned []string
	for _, a := range accts {
		// Revoke signs every revocation into the JWT in the transaction
		// that stores it, so a JWT that matches with its own revocations
		// is current: no lock, no further query (a restart with thousands
		// of tenants checks them in one read).
		if s.bounded(a) && len(a.JWT) > s.maxJWT {
			// A lowered bound: signed below, or re-issued.
		} else if revs, err := s.claims.AccountRevocations(a.JWT); err == nil {
			if ok, err := s.claims.AccountMatches(a.JWT, accountSpec(a, revs)); err == nil && ok {
				continue
			}
		}
		pk := a.PubKey
		a, changed, err := s.store.Resign(ctx, pk, func(a Account, all []Revocation) (string, error) {
			list, tok, err := s.sign(a, all)
			if err != nil {
				return "", err
			}
			if ok, err := s.claims.AccountMatches(a.JWT, accountSpec(a, list)); err != nil || ok {
				return "", err
			}
			return tok, nil
		})
		if errors.Is(err, errOverBound) {
			// A lowered bound: the tenant is re-issued.
			a, _, err = s.reissue(ctx, pk, nil)
			changed = err == nil
		}
		if err != nil {
			return resigned, fmt.Errorf("refresh account %s: %w", pk, err)
		}
		if changed {
			s.seen(a)
			resigned = append(resigned, a.PubKey)
		}
	}
	return resigned, nil
}

// PushPending pushes every account JWT that changed without reaching NATS.
// It runs after each (re)connection to NATS and in the background while
// accounts await their push. Every account is tried on its own: one that
// cannot be pushed never delays another. It returns how many were pushed
// and every failure joined.
func (s *Service) PushPending(ctx context.Context) (int, error) {
	accts, err := s.store.UnpushedAccounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, a := range accts {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if err := s.push(ctx, a); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Undelivered lists the accounts whose current JWT NATS refused as
// undeliverable, with the reason; PushPending retries them.
func (s *Service) Undelivered() map[string]string {
	s.undeliveredMu.Lock()
	defer s.undeliveredMu.Unlock()
	return maps.Clone(s.undelivered)
}

func (s *Service) push(ctx context.Context, a Account) error {
	if err := s.pusher.PushAccount(ctx, a.PubKey, a.JWT); err != nil {
		if errors.Is(err, ErrUndeliverable) {
			s.undeliveredMu.Lock()
			s.undelivered[a.PubKey] = err.Error()
			s.undeliveredMu.Unlock()
			return fmt.Errorf("push %s (%d bytes): %w", a.PubKey, len(a.JWT), err)
		}
		return fmt.Errorf("%w: push %s: %v", ErrNATSUnavailable, a.PubKey, err)
	}
	s.undeliveredMu.Lock()
	delete(s.undelivered, a.PubKey)
	s.undeliveredMu.Unlock()
	if err := s.store.MarkPushed(ctx, a.PubKey, a.JWT); err != nil {
		return fmt.Errorf("record push of %s: %w", a.PubKey, err)
	}
	return nil
}

// accountSpec is what a stored account's JWT is signed from.
func accountSpec(a Account, all []Revocation) AccountSpec {
	return AccountSpec{PubKey: a.PubKey, Name: jwtName(a), Kind: a.Kind, TenantID: a.TenantID, Revocations: all}
}

// jwtName is the name an account's JWT carries: the tenant id for tenants,
// the stored name for SYS and CONTROL.
func jwtName(a Account) string {
	if a.Kind == KindTenant {
		return a.TenantID
	}
	return a.Name
}

func validateName(name string) error {
	if len(name) > 256 || !utf8.ValidString(name) {
		return fmt.Errorf("%w: at most 256 bytes of UTF-8", ErrInvalidName)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: control characters are not allowed", ErrInvalidName)
		}
	}
	return nil
}

// retire removes a revoked sensor's pending commands and durable consumer
// when the store retired its claim (no active user left). A failure is
// left to RemoveRetiredConsumers and reported as ErrNATSUnavailable.
func (s *Service) retire(ctx context.Context, sensor topology.Sensor) error {
	remover, ok := s.consumers.(ConsumerRemover)
	if !ok {
		return nil
	}
	if _, err := s.store.ActiveSensorUser(ctx, sensor.TenantID, sensor.SensorID); err == nil {
		return nil // the sensor has another active user: it keeps its consumer
	} else if !errors.Is(err, ErrNotFound) {
		s.cleanupDue.Store(true)
		return err
	}
	if err := remover.RemoveConsumer(ctx, sensor); err != nil {
		s.cleanupDue.Store(true)
		return fmt.Errorf("%w: remove consumer %s: %v", ErrNATSUnavailable, sensor.Consumer(), err)
	}
	return nil
}

// CleanupDue reports whether removing a revoked sensor's consumer failed
// since the last RemoveRetiredConsumers that finished.
func (s *Service) CleanupDue() bool { return s.cleanupDue.Load() }

// RemoveRetiredConsumers is the repair pass of revocations: every sensor a
// revocation retired (its claim retired, no active user) whose consumer
// the stream still holds has its pending commands and consumer removed, as
// Revoke does. It finishes what a crash or a NATS failure between Revoke's
// steps left. It returns how many consumers it removed.
func (s *Service) RemoveRetiredConsumers(ctx context.Context) (int, error) {
	remover, ok := s.consumers.(ConsumerRemover)
	lister, ok2 := s.consumers.(ConsumerLister)
	if !ok || !ok2 {
		return 0, errors.New("provisioning: the consumers adapter cannot list and remove consumers")
	}
	retired, err := s.store.RetiredClaims(ctx)
	if err != nil {
		return 0, err
	}
	if len(retired) == 0 {
		s.cleanupDue.Store(false)
		return 0, nil
	}
	names, err := lister.ConsumerNames(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w: list consumers: %v", ErrNATSUnavailable, err)
	}
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	n := 0
	var errs []error
	for _, c := range retired {
		sensor := s.sensor(c.TenantID, c.SensorID)
		if c.Consumer != sensor.Consumer() || !have[c.Consumer] {
			continue
		}
		if err := remover.RemoveConsumer(ctx, sensor); err != nil {
			errs = append(errs, fmt.Errorf("%w: remove consumer %s: %v", ErrNATSUnavailable, c.Consumer, err))
			continue
		}
		n++
	}
	s.cleanupDue.Store(len(errs) > 0)
	return n, errors.Join(errs...)
}

// RecreateOfflineConsumers gives every active sensor whose consumer no
// live NATS node holds (ConsumerRecreator.OfflineConsumers) a new consumer
// on a live node. The new consumer delivers again what the stream keeps
// for the sensor, so no command is lost; agents do not apply a command
// twice (they keep the ids of the commands they applied). Consumers that
// are not an active sensor's are left alone. It returns how many it
// recreated; an adapter without the capability recreates none. It is the
// slower fallback of RecreateLostNodeConsumers (consumers whose node is
// not recorded, or recorded wrong): with a ConsumerLocator each consumer
// is asked first and one that answers is recorded, not recreated.
func (s *Service) RecreateOfflineConsumers(ctx context.Context, full bool, workers int) (int, error) {
	r, err := s.RecreateOfflineConsumersReporting(ctx, full, workers, nil)
	return r.Recreated, err
}

// RecreateOfflineConsumersReporting is RecreateOfflineConsumers calling
// progress (when set) with the pass so far: OnLost is the number of
// active sensors' consumers listed missing.
func (s *Service) RecreateOfflineConsumersReporting(ctx context.Context, full bool, workers int, progress func(NodeRecovery)) (NodeRecovery, error) {
	var r NodeRecovery
	rc, ok := s.consumers.(ConsumerRecreator)
	if !ok {
		return r, nil
	}
	loc, _ := s.consumers.(ConsumerLocator)
	ns, _ := s.store.(ConsumerNodeStore)
	var names []string
	var err error
	if full && loc != nil && ns != nil {
		// The full list names every consumer's node too: recorded, it
		// keeps the records true (leaders move, an earlier release
		// recorded none) at no extra request.
		_, names, err = s.RefreshConsumerNodes(ctx)
		if err != nil {
			return r, err
		}
	} else if names, err = rc.OfflineConsumers(ctx, full); err != nil {
		return r, fmt.Errorf("%w: offline consumers: %v", ErrNATSUnavailable, err)
	}
	if len(names) == 0 {
		return r, nil
	}
	offline := make(map[string]bool, len(names))
	for _, n := range names {
		offline[n] = true
	}
	users, err := s.store.ActiveUsers(ctx)
	if err != nil {
		return r, err
	}
	var todo []topology.Sensor
	for _, u := range users {
		if u.Kind != UserSensor {
			continue
		}
		sensor := s.sensor(u.TenantID, u.SensorID)
		if offline[sensor.Consumer()] {
			delete(offline, sensor.Consumer()) // a sensor with two active users: once
			todo = append(todo, sensor)
		}
	}
	err = s.recover(ctx, todo, nil, workers, loc, rc, ns, &r, progress)
	return r, err
}

// ConsumerRepair is what RepairConsumers found and did.
type ConsumerRepair struct {
	// Missing is the number of active sensor users without a consumer.
	Missing int
	// Repaired is how many of them got their consumer.
	Repaired int
	// Err is the first failure, if any consumer could not be created.
	Err error
}

// RepairConsumers creates the durable consumer of every active sensor user
// that lacks one: users created while NATS was unreachable, or consumers
// lost with a stream. It lists the stream's consumers once and compares them
// with the active sensor users; the serve wiring runs it after each (re)
// connect to NATS, next to PushPending.
func (s *Service) RepairConsumers(ctx context.Context, workers int) (ConsumerRepair, error) {
	return s.RepairConsumersReporting(ctx, workers, nil)
}

// RepairConsumersReporting is RepairConsumers that calls missing with the
// number of consumers still missing: once they are counted, then after each
// one repaired (a metric stays true while the pass runs).
func (s *Service) RepairConsumersReporting(ctx context.Context, workers int, missing func(n int)) (ConsumerRepair, error) {
	if missing == nil {
		missing = func(int) {}
	}
	lister, ok := s.consumers.(ConsumerLister)
	if !ok {
		return ConsumerRepair{}, errors.New("provisioning: the consumers adapter cannot list consumers")
	}
	names, err := lister.ConsumerNames(ctx)
	if err != nil {
		return ConsumerRepair{}, fmt.Errorf("%w: list consumers: %v", ErrNATSUnavailable, err)
	}
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	users, err := s.store.ActiveUsers(ctx)
	if err != nil {
		return ConsumerRepair{}, err
	}
	var lacking []topology.Sensor
	for _, u := range users {
		if u.Kind != UserSensor {
			continue
		}
		sensor := s.sensor(u.TenantID, u.SensorID)
		if !have[sensor.Consumer()] {
			lacking = append(lacking, sensor)
		}
	}
	r := ConsumerRepair{Missing: len(lacking)}
	missing(r.Missing)
	var mu sync.Mutex
	eachSensor(ctx, lacking, workers, func(sensor topology.Sensor) {
		err := s.consumers.EnsureConsumer(ctx, sensor)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			r.Repaired++
			missing(r.Missing - r.Repaired)
		} else if r.Err == nil {
			r.Err = fmt.Errorf("consumer %s: %w", sensor.Consumer(), err)
		}
	})
	return r, nil
}
