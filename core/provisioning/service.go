package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	Clock         Clock
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
	// repushAfter is how long after a revocation the account is pushed
	// again: a nats-server that loaded the account in between from another
	// replica's resolver cache (stale for up to its TTL) gets the
	// revocation too. Zero without a cache.
	repushAfter time.Duration
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
	if cfg.EventStream == "" {
		cfg.EventStream = topology.DefaultEventStream
	}
	if err := ids.Validate(cfg.EventStream); err != nil {
		return nil, fmt.Errorf("provisioning: event stream name: %w", err)
	}
	return &Service{
		store: cfg.Store, signer: cfg.Signer, claims: cfg.Claims, pusher: cfg.Pusher, consumers: cfg.Consumers,
		stream: cfg.Stream, events: cfg.EventStream, now: cfg.Clock, cache: newJWTCache(cfg.ResolverCacheTTL, cfg.Clock),
		last: cfg.LastKnown, repushAfter: repushDelay(cfg.ResolverCacheTTL), userTTL: cfg.SensorUserTTL,
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

// EnsureSensorUser returns the sensor's active user, minting one if there is
// none (or only revoked ones), and makes sure its durable consumer exists.
// With a SensorUserTTL the JWT handed out expires that long from now: an
// existing user's JWT is signed again for the same key unless that
// happened within the last minute.
// When NATS cannot be reached the user is kept and ErrNATSUnavailable is
// returned; a retry finishes the work.
func (s *Service) EnsureSensorUser(ctx context.Context, tenantID, sensorID string) (SensorUser, bool, error) {
	if err := ids.Validate(tenantID); err != nil {
		return SensorUser{}, false, fmt.Errorf("tenant id: %w", err)
	}
	if err := ids.Validate(sensorID); err != nil {
		return SensorUser{}, false, fmt.Errorf("sensor id: %w", err)
	}
	sensor := topology.Sensor{Stream: s.stream, TenantID: tenantID, SensorID: sensorID}
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
		u, m, err := s.mint(acct, User{Kind: UserSensor, TenantID: tenantID, SensorID: sensorID, Name: sensorID}, s.sensorSpec(sensor))
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
		if _, _, err := s.Revoke(ctx, u.AccountPubKey, u.PubKey); err != nil {
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
// When the push fails the revocation is stored and ErrNATSUnavailable is
// returned together with the stored result.
func (s *Service) Revoke(ctx context.Context, accountPubKey, userPubKey string) (Revocation, Account, error) {
	r := Revocation{AccountPubKey: accountPubKey, UserPubKey: userPubKey, RevokedAt: s.now().UTC().Truncate(time.Second)}
	rev, acct, err := s.store.Revoke(ctx, r, func(a Account, all []Revocation) (string, error) {
		return s.signer.SignAccount(accountSpec(a, all))
	})
	if err != nil {
		return Revocation{}, Account{}, err
	}
	s.seen(acct)
	if err := s.push(ctx, acct); err != nil {
		return rev, acct, err
	}
	s.repushLater(acct.PubKey)
	return rev, acct, nil
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
func (s *Service) repushLater(pubKey string) {
	if s.repushAfter <= 0 {
		return
	}
	time.AfterFunc(s.repushAfter, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if a, err := s.store.Account(ctx, pubKey); err == nil {
			_ = s.pusher.PushAccount(ctx, a.PubKey, a.JWT)
		}
	})
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
		byAccount[u.AccountPubKey] = append(byAccount[u.AccountPubKey], Revocation{AccountPubKey: u.AccountPubKey, UserPubKey: u.PubKey, RevokedAt: now})
		revoked = append(revoked, u)
	}
	for _, pk := range order {
		_, acct, err := s.store.RevokeMany(ctx, pk, byAccount[pk], func(a Account, all []Revocation) (string, error) {
			return s.signer.SignAccount(accountSpec(a, all))
		})
		if err != nil {
			return nil, fmt.Errorf("revoke outdated users of %s: %w", pk, err)
		}
		s.seen(acct)
	}
	return revoked, nil
}

// current reports whether u grants exactly what the topology gives it now
// and, for a sensor, whether its consumer name is its own. A JWT that does
// not decode is not current.
func (s *Service) current(u User, backend topology.Permissions, owner map[string]ConsumerClaim) bool {
	want := backend
	if u.Kind == UserSensor {
		sensor := topology.Sensor{Stream: s.stream, TenantID: u.TenantID, SensorID: u.SensorID}
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
		if revs, err := s.claims.AccountRevocations(a.JWT); err == nil {
			if ok, err := s.claims.AccountMatches(a.JWT, accountSpec(a, revs)); err == nil && ok {
				continue
			}
		}
		pk := a.PubKey
		a, changed, err := s.store.Resign(ctx, pk, func(a Account, all []Revocation) (string, error) {
			spec := accountSpec(a, all)
			ok, err := s.claims.AccountMatches(a.JWT, spec)
			if err != nil || ok {
				return "", err
			}
			return s.signer.SignAccount(spec)
		})
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
// It runs after each (re)connection to NATS.
func (s *Service) PushPending(ctx context.Context) (int, error) {
	accts, err := s.store.UnpushedAccounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range accts {
		if err := s.push(ctx, a); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Service) push(ctx context.Context, a Account) error {
	if err := s.pusher.PushAccount(ctx, a.PubKey, a.JWT); err != nil {
		return fmt.Errorf("%w: push %s: %v", ErrNATSUnavailable, a.PubKey, err)
	}
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
	var missing []topology.Sensor
	for _, u := range users {
		if u.Kind != UserSensor {
			continue
		}
		sensor := topology.Sensor{Stream: s.stream, TenantID: u.TenantID, SensorID: u.SensorID}
		if !have[sensor.Consumer()] {
			missing = append(missing, sensor)
		}
	}
	r := ConsumerRepair{Missing: len(missing)}
	if workers < 1 {
		workers = 1
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan topology.Sensor)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sensor := range work {
				err := s.consumers.EnsureConsumer(ctx, sensor)
				mu.Lock()
				if err == nil {
					r.Repaired++
				} else if r.Err == nil {
					r.Err = fmt.Errorf("consumer %s: %w", sensor.Consumer(), err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, sensor := range missing {
		if ctx.Err() != nil {
			break
		}
		work <- sensor
	}
	close(work)
	wg.Wait()
	return r, nil
}
