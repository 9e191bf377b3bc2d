// Package provisionmem is an in-memory provisioner store: the same contract
// as the PostgreSQL store (core/provisioning/storetest runs against both),
// held in maps behind one mutex. It is for tests, demos and fakes; nothing
// survives the process, and seeds are kept in clear in memory.
package provisionmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/provisioning"
)

// Config configures a Store. It is empty today; it exists so the constructor
// has the same shape as every other component's.
type Config struct{}

// Store is an in-memory provisioning.Store. It is safe for concurrent use.
// Revoke calls its resign callback with the store locked, so resign must not
// call back into the store.
type Store struct {
	mu          sync.Mutex
	operator    *provisioning.Operator
	accounts    map[string]*account // by public key
	tenants     map[string]string   // tenant id → account public key
	users       map[string]provisioning.User
	revocations map[string]map[string]revEntry // account → user → entry
	consumers   map[string]provisioning.ConsumerClaim
	retired     map[string]bool // consumer names whose claim a revocation retired
	// active indexes the active sensor users by (tenant, sensor): fleets of
	// tens of thousands of users are tested on this store.
	active map[[2]string]string
	// claimed indexes the consumer-name claims by (tenant, sensor).
	claimed map[[2]string]string
	// nodes is the node each consumer was last seen on (nodes.go).
	nodes map[string]string
}

// revEntry is one stored revocation: its time and the entry's expiry.
type revEntry struct{ at, expires time.Time }

type account struct {
	provisioning.Account
	pushed bool
}

// New returns an empty Store.
func New(Config) (*Store, error) {
	return &Store{
		accounts:    map[string]*account{},
		tenants:     map[string]string{},
		users:       map[string]provisioning.User{},
		revocations: map[string]map[string]revEntry{},
		consumers:   map[string]provisioning.ConsumerClaim{},
		retired:     map[string]bool{},
		active:      map[[2]string]string{},
		claimed:     map[[2]string]string{},
	}, nil
}

// Ping always succeeds.
func (s *Store) Ping(context.Context) error { return nil }

// Operator returns the operator record.
func (s *Store) Operator(context.Context) (provisioning.Operator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.operator == nil {
		return provisioning.Operator{}, fmt.Errorf("%w: %w", provisioning.ErrNoOperator, provisioning.ErrNotFound)
	}
	return *s.operator, nil
}

// InitOperator stores the operator with its SYS and CONTROL accounts, or
// returns provisioning.ErrOperatorExists and changes nothing.
func (s *Store) InitOperator(_ context.Context, op provisioning.Operator, sys, control provisioning.Account) error {
	sys, control, err := provisioning.CheckOperator(op, sys, control)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.operator != nil {
		return provisioning.ErrOperatorExists
	}
	for _, a := range []provisioning.Account{sys, control} {
		if _, ok := s.accounts[a.PubKey]; ok {
			return fmt.Errorf("provisionmem: account %s already exists", a.PubKey)
		}
	}
	now := time.Now()
	op.CreatedAt = stamp(op.CreatedAt, now)
	s.operator = &op
	for _, a := range []provisioning.Account{sys, control} {
		s.putAccount(a, now)
	}
	return nil
}

// ReplaceOperatorJWT replaces the operator's JWT when the stored one is
// still oldJWT, or returns provisioning.ErrOperatorChanged.
func (s *Store) ReplaceOperatorJWT(_ context.Context, pubKey, oldJWT, newJWT string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.operator == nil || s.operator.PubKey != pubKey || s.operator.JWT != oldJWT {
		return provisioning.ErrOperatorChanged
	}
	s.operator.JWT = newJWT
	return nil
}

// putAccount stores a copy of a; the caller holds mu.
func (s *Store) putAccount(a provisioning.Account, now time.Time) provisioning.Account {
	a.Seed = bytes.Clone(a.Seed)
	a.CreatedAt = stamp(a.CreatedAt, now)
	a.UpdatedAt = stamp(a.UpdatedAt, a.CreatedAt)
	s.accounts[a.PubKey] = &account{Account: a}
	if a.Kind == provisioning.KindTenant {
		s.tenants[a.TenantID] = a.PubKey
	}
	return copyAccount(a)
}

// Account returns the account with the public key, of any kind.
func (s *Store) Account(_ context.Context, pubKey string) (provisioning.Account, error) {
	return locked.Get(&s.mu, s.accounts, pubKey, errNoAccount(pubKey), func(a *account) provisioning.Account { return copyAccount(a.Account) })
}

// errNoAccount is the error for an account that is not stored.
func errNoAccount(pubKey string) error {
	return fmt.Errorf("account %s: %w", pubKey, provisioning.ErrNotFound)
}

// TenantAccount returns the tenant's account.
func (s *Store) TenantAccount(_ context.Context, tenantID string) (provisioning.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk, ok := s.tenants[tenantID]
	if !ok {
		return provisioning.Account{}, fmt.Errorf("tenant %s account: %w", tenantID, provisioning.ErrNotFound)
	}
	return copyAccount(s.accounts[pk].Account), nil
}

// CreateTenantAccount stores a unless the tenant has an account, which it
// returns instead.
func (s *Store) CreateTenantAccount(_ context.Context, a provisioning.Account) (provisioning.Account, bool, error) {
	if a.Kind == "" {
		a.Kind = provisioning.KindTenant
	}
	if a.Kind != provisioning.KindTenant || a.TenantID == "" || a.PubKey == "" {
		return provisioning.Account{}, false, errors.New("provisionmem: a tenant account needs kind tenant, a tenant id and a public key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pk, ok := s.tenants[a.TenantID]; ok {
		return copyAccount(s.accounts[pk].Account), false, nil
	}
	if _, ok := s.accounts[a.PubKey]; ok {
		return provisioning.Account{}, false, fmt.Errorf("provisionmem: account key %s is already in use", a.PubKey)
	}
	return s.putAccount(a, time.Now()), true, nil
}

// ListAccounts returns every account, oldest first.
func (s *Store) ListAccounts(context.Context) ([]provisioning.Account, error) {
	return s.list(func(*account) bool { return true }, func(a provisioning.Account) time.Time { return a.CreatedAt }), nil
}

// UnpushedAccounts returns the accounts whose current JWT has not been
// pushed, least recently changed first.
func (s *Store) UnpushedAccounts(context.Context) ([]provisioning.Account, error) {
	return s.list(func(a *account) bool { return !a.pushed }, func(a provisioning.Account) time.Time { return a.UpdatedAt }), nil
}

func (s *Store) list(keep func(*account) bool, by func(provisioning.Account) time.Time) []provisioning.Account {
	return locked.List(&s.mu, s.accounts, keep, func(a *account) provisioning.Account { return copyAccount(a.Account) },
		locked.OldestFirst(by, func(a provisioning.Account) string { return a.PubKey }))
}

// MarkPushed records that jwt reached NATS, unless the account's JWT has
// changed since (then the newer JWT still awaits its push).
func (s *Store) MarkPushed(_ context.Context, pubKey, jwt string) error {
	return locked.Update(&s.mu, s.accounts, pubKey, errNoAccount(pubKey), func(a *account) error {
		if a.JWT == jwt {
			a.pushed = true
		}
		return nil
	})
}

// ActiveSensorUser returns the sensor's unrevoked user.
func (s *Store) ActiveSensorUser(_ context.Context, tenantID, sensorID string) (provisioning.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pk, ok := s.active[[2]string{tenantID, sensorID}]; ok {
		return copyUser(s.users[pk]), nil
	}
	return provisioning.User{}, fmt.Errorf("sensor user %s/%s: %w", tenantID, sensorID, provisioning.ErrNotFound)
}

// ReplaceUserJWT replaces the JWT of an unrevoked user.
func (s *Store) ReplaceUserJWT(_ context.Context, userPubKey, jwt string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userPubKey]
	if !ok || !u.RevokedAt.IsZero() {
		return fmt.Errorf("active user %s: %w", userPubKey, provisioning.ErrNotFound)
	}
	u.JWT = jwt
	s.users[userPubKey] = u
	return nil
}

// ActiveBackendUser returns the named unrevoked backend user.
func (s *Store) ActiveBackendUser(_ context.Context, name string) (provisioning.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.Kind == provisioning.UserBackend && u.RevokedAt.IsZero() && u.Name == name {
			return copyUser(u), nil
		}
	}
	return provisioning.User{}, fmt.Errorf("backend user %s: %w", name, provisioning.ErrNotFound)
}

// CreateUser stores u unless an active user with the same identity exists
// (same account and sensor, or same backend name), which it returns instead.
func (s *Store) CreateUser(_ context.Context, u provisioning.User) (provisioning.User, bool, error) {
	if err := provisioning.CheckUser(u); err != nil {
		return provisioning.User{}, false, fmt.Errorf("provisionmem: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[u.AccountPubKey]; !ok {
		return provisioning.User{}, false, errNoAccount(u.AccountPubKey)
	}
	if u.Kind == provisioning.UserSensor {
		if pk, ok := s.active[[2]string{u.TenantID, u.SensorID}]; ok && sameIdentity(s.users[pk], u) {
			return copyUser(s.users[pk]), false, nil
		}
	} else {
		for _, e := range s.users {
			if sameIdentity(e, u) {
				return copyUser(e), false, nil
			}
		}
	}
	if _, ok := s.users[u.PubKey]; ok {
		return provisioning.User{}, false, fmt.Errorf("provisionmem: user key %s is already in use", u.PubKey)
	}
	u.Seed = bytes.Clone(u.Seed)
	u.CreatedAt = stamp(u.CreatedAt, time.Now())
	u.RevokedAt = time.Time{}
	s.users[u.PubKey] = u
	if u.Kind == provisioning.UserSensor {
		s.active[[2]string{u.TenantID, u.SensorID}] = u.PubKey
	}
	return copyUser(u), true, nil
}

// sameIdentity mirrors the PostgreSQL store's partial unique indexes.
func sameIdentity(e, u provisioning.User) bool {
	if !e.RevokedAt.IsZero() || e.Kind != u.Kind {
		return false
	}
	if u.Kind == provisioning.UserSensor {
		return e.AccountPubKey == u.AccountPubKey && e.SensorID == u.SensorID
	}
	return e.Name == u.Name
}

// Revoke records the revocation (keeping the earliest time), marks the user
// revoked if it belongs to the account, and stores the JWT resign returns for
// the account's full revocation list. Nothing changes when resign fails.
func (s *Store) Revoke(ctx context.Context, r provisioning.Revocation, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Revocation, provisioning.Account, error) {
	stored, a, err := s.RevokeMany(ctx, r.AccountPubKey, []provisioning.Revocation{r}, resign)
	if err != nil {
		return provisioning.Revocation{}, provisioning.Account{}, err
	}
	return stored[0], a, nil
}

// RevokeMany is Revoke for several users of one account, signed once.
func (s *Store) RevokeMany(_ context.Context, accountPubKey string, rs []provisioning.Revocation, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) ([]provisioning.Revocation, provisioning.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, a, _, err := s.revokeLocked(accountPubKey, rs, nil, time.Time{}, resign)
	return stored, a, err
}

// Reissue revokes every user of the account with one AllUsers entry.
func (s *Store) Reissue(_ context.Context, all provisioning.Revocation, rs []provisioning.Revocation, dropThrough time.Time, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Account, int, error) {
	if all.UserPubKey != provisioning.AllUsers || all.RevokedAt.IsZero() {
		return provisioning.Account{}, 0, fmt.Errorf("provisionmem: reissue needs an %q entry with a time", provisioning.AllUsers)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, a, n, err := s.revokeLocked(all.AccountPubKey, rs, &all, dropThrough, resign)
	return a, n, err
}

// revokeLocked is RevokeMany, and Reissue when all is set. Nothing changes
// when resign fails. The caller holds s.mu.
func (s *Store) revokeLocked(accountPubKey string, rs []provisioning.Revocation, all *provisioning.Revocation, dropThrough time.Time, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) ([]provisioning.Revocation, provisioning.Account, int, error) {
	a, ok := s.accounts[accountPubKey]
	if !ok {
		return nil, provisioning.Account{}, 0, errNoAccount(accountPubKey)
	}
	now := time.Now()
	byUser := map[string]revEntry{}
	for user, e := range s.revocations[accountPubKey] {
		byUser[user] = e
	}
	stored := make([]provisioning.Revocation, len(rs))
	var latest time.Time
	for i, r := range rs {
		if r.AccountPubKey != accountPubKey {
			return nil, provisioning.Account{}, 0, fmt.Errorf("provisionmem: revocation of %s names account %s, not %s", r.UserPubKey, r.AccountPubKey, accountPubKey)
		}
		r.RevokedAt = stamp(r.RevokedAt, now)
		if !r.ExpiresAt.IsZero() {
			r.ExpiresAt = stamp(r.ExpiresAt, now)
		}
		if prev, ok := byUser[r.UserPubKey]; ok {
			if prev.at.Before(r.RevokedAt) {
				r.RevokedAt = prev.at
			}
			if prev.expires.IsZero() || (!r.ExpiresAt.IsZero() && prev.expires.After(r.ExpiresAt)) {
				r.ExpiresAt = prev.expires
			}
		}
		byUser[r.UserPubKey] = revEntry{at: r.RevokedAt, expires: r.ExpiresAt}
		if r.RevokedAt.After(latest) {
			latest = r.RevokedAt
		}
		r.RetireSensor = false
		stored[i] = r
	}
	for user, e := range byUser {
		if !e.expires.IsZero() && !e.expires.After(latest) {
			delete(byUser, user)
		}
	}
	var starAt time.Time
	if all != nil {
		starAt = stamp(all.RevokedAt, now)
		if prev, ok := byUser[provisioning.AllUsers]; ok && prev.at.After(starAt) {
			starAt = prev.at
		}
		for user, e := range byUser {
			if user != provisioning.AllUsers && !e.at.After(dropThrough) {
				delete(byUser, user)
			}
		}
		byUser[provisioning.AllUsers] = revEntry{at: starAt}
	}
	list := make([]provisioning.Revocation, 0, len(byUser))
	for user, e := range byUser {
		list = append(list, provisioning.Revocation{AccountPubKey: accountPubKey, UserPubKey: user, RevokedAt: e.at, ExpiresAt: e.expires})
	}
	slices.SortFunc(list, func(x, y provisioning.Revocation) int { return strings.Compare(x.UserPubKey, y.UserPubKey) })
	jwt, err := resign(copyAccount(a.Account), list)
	if err != nil {
		return nil, provisioning.Account{}, 0, fmt.Errorf("re-sign account %s: %w", accountPubKey, err)
	}
	s.revocations[accountPubKey] = byUser
	for i, r := range stored {
		if u, ok := s.users[r.UserPubKey]; ok && u.AccountPubKey == accountPubKey && (u.RevokedAt.IsZero() || u.RevokedAt.After(r.RevokedAt)) {
			u.RevokedAt = r.RevokedAt
			s.revokedLocked(u)
		}
		if u, ok := s.users[r.UserPubKey]; ok && rs[i].RetireSensor && u.AccountPubKey == accountPubKey && u.Kind == provisioning.UserSensor {
			s.retireLocked(u.TenantID, u.SensorID)
		}
	}
	n := 0
	if all != nil {
		for pk, u := range s.users {
			if u.AccountPubKey == accountPubKey && u.RevokedAt.IsZero() && u.CreatedAt.Before(starAt.Add(time.Second)) {
				u.RevokedAt = starAt
				s.users[pk] = u
				s.revokedLocked(u)
				n++
			}
		}
	}
	a.JWT, a.UpdatedAt, a.pushed = jwt, stamp(time.Time{}, now), false
	return stored, copyAccount(a.Account), n, nil
}

// revokedLocked stores u, just marked revoked, and takes it out of the
// index of active sensor users.
func (s *Store) revokedLocked(u provisioning.User) {
	s.users[u.PubKey] = u
	k := [2]string{u.TenantID, u.SensorID}
	if u.Kind == provisioning.UserSensor && s.active[k] == u.PubKey {
		delete(s.active, k)
	}
}

// retireLocked retires the pair's claim unless the pair has an active user.
func (s *Store) retireLocked(tenantID, sensorID string) {
	if _, ok := s.active[[2]string{tenantID, sensorID}]; ok {
		return
	}
	if name, ok := s.claimed[[2]string{tenantID, sensorID}]; ok {
		s.retired[name] = true
	}
}

// User returns the user with the key, without its seed.
func (s *Store) User(_ context.Context, pubKey string) (provisioning.User, error) {
	return locked.Get(&s.mu, s.users, pubKey, fmt.Errorf("user %s: %w", pubKey, provisioning.ErrNotFound), func(u provisioning.User) provisioning.User {
		u.Seed = nil
		return u
	})
}

// RetiredClaims lists retired claims whose pair has no active user.
func (s *Store) RetiredClaims(context.Context) ([]provisioning.ConsumerClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []provisioning.ConsumerClaim
	for name := range s.retired {
		c := s.consumers[name]
		if _, ok := s.active[[2]string{c.TenantID, c.SensorID}]; !ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y provisioning.ConsumerClaim) int { return strings.Compare(x.Consumer, y.Consumer) })
	return out, nil
}

// ClaimConsumer records that consumer belongs to (tenantID, sensorID)
// unless it already does; another owner gives ErrConsumerNameTaken.
func (s *Store) ClaimConsumer(_ context.Context, consumer, tenantID, sensorID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimLocked(consumer, tenantID, sensorID)
}

// ClaimSensor reads the tenant's account, claims the consumer name and
// reads the sensor's active user, under one lock.
func (s *Store) ClaimSensor(_ context.Context, consumer, tenantID, sensorID string) (provisioning.SensorClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk, ok := s.tenants[tenantID]
	if !ok {
		return provisioning.SensorClaim{}, fmt.Errorf("tenant %s account: %w", tenantID, provisioning.ErrNotFound)
	}
	if err := s.claimLocked(consumer, tenantID, sensorID); err != nil {
		return provisioning.SensorClaim{}, err
	}
	claim := provisioning.SensorClaim{Account: copyAccount(s.accounts[pk].Account)}
	if upk, ok := s.active[[2]string{tenantID, sensorID}]; ok {
		c := copyUser(s.users[upk])
		claim.User = &c
	}
	return claim, nil
}

func (s *Store) claimLocked(consumer, tenantID, sensorID string) error {
	c, ok := s.consumers[consumer]
	if !ok {
		if other, ok := s.claimed[[2]string{tenantID, sensorID}]; ok {
			return fmt.Errorf("provisionmem: %s/%s already claims %s", tenantID, sensorID, other)
		}
		s.consumers[consumer] = provisioning.ConsumerClaim{Consumer: consumer, TenantID: tenantID, SensorID: sensorID}
		s.claimed[[2]string{tenantID, sensorID}] = consumer
		return nil
	}
	if c.TenantID != tenantID || c.SensorID != sensorID {
		return fmt.Errorf("consumer %s: %w", consumer, provisioning.ErrConsumerNameTaken)
	}
	delete(s.retired, consumer)
	return nil
}

// ConsumerClaims lists every claim.
func (s *Store) ConsumerClaims(context.Context) ([]provisioning.ConsumerClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]provisioning.ConsumerClaim, 0, len(s.consumers))
	for _, c := range s.consumers {
		out = append(out, c)
	}
	return out, nil
}

// ActiveUserCounts counts the unrevoked users of each kind.
func (s *Store) ActiveUserCounts(context.Context) (map[provisioning.UserKind]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[provisioning.UserKind]int{}
	for _, u := range s.users {
		if u.RevokedAt.IsZero() {
			out[u.Kind]++
		}
	}
	return out, nil
}

// ActiveUsers lists every unrevoked user without its seed, oldest first.
func (s *Store) ActiveUsers(context.Context) ([]provisioning.User, error) {
	return locked.List(&s.mu, s.users, func(u provisioning.User) bool { return u.RevokedAt.IsZero() },
		func(u provisioning.User) provisioning.User {
			u = copyUser(u)
			u.Seed = nil
			return u
		},
		locked.OldestFirst(func(u provisioning.User) time.Time { return u.CreatedAt }, func(u provisioning.User) string { return u.PubKey })), nil
}

// Resign lets resign replace the account's JWT while the store is locked.
func (s *Store) Resign(_ context.Context, pubKey string, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Account, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[pubKey]
	if !ok {
		return provisioning.Account{}, false, errNoAccount(pubKey)
	}
	jwt, err := resign(copyAccount(a.Account), s.revocationList(pubKey, provisioning.Revocation{}))
	if err != nil {
		return provisioning.Account{}, false, fmt.Errorf("re-sign account %s: %w", pubKey, err)
	}
	if jwt == "" {
		return copyAccount(a.Account), false, nil
	}
	a.JWT, a.UpdatedAt, a.pushed = jwt, stamp(time.Time{}, time.Now()), false
	return copyAccount(a.Account), true, nil
}

// revocationList is the account's revocations sorted by user key, with
// extra (when it names a user) in place of that user's stored one. The
// caller holds s.mu.
func (s *Store) revocationList(pubKey string, extra provisioning.Revocation) []provisioning.Revocation {
	all := []provisioning.Revocation{}
	if extra.UserPubKey != "" {
		all = append(all, extra)
	}
	for user, e := range s.revocations[pubKey] {
		if user != extra.UserPubKey {
			all = append(all, provisioning.Revocation{AccountPubKey: pubKey, UserPubKey: user, RevokedAt: e.at, ExpiresAt: e.expires})
		}
	}
	slices.SortFunc(all, func(x, y provisioning.Revocation) int { return strings.Compare(x.UserPubKey, y.UserPubKey) })
	return all
}

// stamp normalises t as PostgreSQL stores it (UTC, microseconds), or
// returns def when t is zero.
func stamp(t, def time.Time) time.Time {
	if t.IsZero() {
		t = def
	}
	return t.UTC().Truncate(time.Microsecond)
}

func copyAccount(a provisioning.Account) provisioning.Account {
	a.Seed = bytes.Clone(a.Seed)
	return a
}

func copyUser(u provisioning.User) provisioning.User {
	u.Seed = bytes.Clone(u.Seed)
	return u
}
