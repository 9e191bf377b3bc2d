// Package provisioningtest holds the fakes of the provisioning ports that
// are not stores: a signer whose JWTs are readable JSON (so the claims
// reader can check them), a pusher and a consumer creator that record their
// calls and can be told to fail. The use-case tests of core/provisioning
// run on them and on the in-memory store (adapters/memory/provisionmem),
// which passes the store's contract suite (core/provisioning/storetest).
package provisioningtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// claims is what a fake JWT carries.
type claims struct {
	Type        string                    `json:"type"` // "account" or "user"
	Account     *provisioning.AccountSpec `json:"account,omitempty"`
	User        string                    `json:"user,omitempty"`
	Issuer      string                    `json:"issuer,omitempty"` // the account that signed a user, the operator key that signed an account
	Permissions *topology.Permissions     `json:"permissions,omitempty"`
	ExpiresAt   time.Time                 `json:"expiresAt"`
	Serial      int                       `json:"serial"` // every JWT differs, as with a JWT id
}

const jwtPrefix = "fakejwt."

func encode(c claims) string {
	b, _ := json.Marshal(c)
	return jwtPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func decode(jwt string) (claims, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(jwt, jwtPrefix))
	if err != nil || !strings.HasPrefix(jwt, jwtPrefix) {
		return claims{}, errors.New("not a JWT of the fake signer")
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return claims{}, err
	}
	return c, nil
}

// Signer is a provisioning.Signer and provisioning.ClaimsReader: keys count
// up ("A0001…", "U0001…"), JWTs are the claims in JSON.
type Signer struct {
	mu     sync.Mutex
	serial int
	issuer string // the operator key accounts are signed with, when known
	// SignErr, when set, fails SignAccount.
	SignErr error
}

var (
	_ provisioning.Signer       = (*Signer)(nil)
	_ provisioning.ClaimsReader = (*Signer)(nil)
)

// setIssuer makes the accounts signed from now on name pub as their issuer.
func (s *Signer) setIssuer(pub string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issuer = pub
}

func (s *Signer) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serial++
	return s.serial
}

// NewAccountKey implements provisioning.Signer.
func (s *Signer) NewAccountKey() (string, []byte, error) {
	n := s.next()
	return fmt.Sprintf("A%055d", n), []byte(fmt.Sprintf("SA%d", n)), nil
}

// SignAccount implements provisioning.Signer.
func (s *Signer) SignAccount(spec provisioning.AccountSpec) (string, error) {
	s.mu.Lock()
	err, issuer := s.SignErr, s.issuer
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	spec.Revocations = slices.Clone(spec.Revocations)
	return encode(claims{Type: "account", Account: &spec, Issuer: issuer, Serial: s.next()}), nil
}

// MintUser implements provisioning.Signer.
func (s *Signer) MintUser(spec provisioning.UserSpec) (provisioning.MintedUser, error) {
	n := s.next()
	pub := fmt.Sprintf("U%055d", n)
	jwt, err := s.ResignUser(spec, pub)
	if err != nil {
		return provisioning.MintedUser{}, err
	}
	seed := []byte(fmt.Sprintf("SU%d", n))
	creds, _ := s.Creds(jwt, seed)
	return provisioning.MintedUser{PubKey: pub, Seed: seed, JWT: jwt, Creds: creds}, nil
}

// ResignUser implements provisioning.Signer.
func (s *Signer) ResignUser(spec provisioning.UserSpec, userPubKey string) (string, error) {
	if spec.AccountPubKey == "" || len(spec.AccountSeed) == 0 {
		return "", errors.New("fake signer: a user is signed by its account's key")
	}
	p := spec.Permissions
	return encode(claims{Type: "user", User: userPubKey, Issuer: spec.AccountPubKey, Permissions: &p, ExpiresAt: spec.ExpiresAt, Serial: s.next()}), nil
}

// UserExpiry implements provisioning.Signer.
func (s *Signer) UserExpiry(userJWT string) (time.Time, error) {
	c, err := decode(userJWT)
	if err != nil {
		return time.Time{}, err
	}
	return c.ExpiresAt, nil
}

// Creds implements provisioning.Signer.
func (s *Signer) Creds(userJWT string, userSeed []byte) ([]byte, error) {
	return []byte("-----BEGIN NATS USER JWT-----\n" + userJWT + "\n------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\n" + string(userSeed) + "\n------END USER NKEY SEED------\n"), nil
}

// UserClaims returns the user key, its signing account and its permissions
// of a user JWT the fake signed.
func UserClaims(userJWT string) (user, account string, p topology.Permissions, err error) {
	c, err := decode(userJWT)
	if err != nil || c.Type != "user" || c.Permissions == nil {
		return "", "", topology.Permissions{}, errors.New("not a user JWT")
	}
	return c.User, c.Issuer, *c.Permissions, nil
}

// AccountClaims returns what an account JWT the fake signed says.
func AccountClaims(accountJWT string) (provisioning.AccountSpec, error) {
	c, err := decode(accountJWT)
	if err != nil || c.Type != "account" || c.Account == nil {
		return provisioning.AccountSpec{}, errors.New("not an account JWT")
	}
	return *c.Account, nil
}

// UserJWTWith is a JWT for an existing user key granting p: what an older
// release handed out before the topology changed.
func (s *Signer) UserJWTWith(userPubKey, accountPubKey string, p topology.Permissions) string {
	return encode(claims{Type: "user", User: userPubKey, Issuer: accountPubKey, Permissions: &p, Serial: s.next()})
}

// HasPermissions implements provisioning.ClaimsReader.
func (s *Signer) HasPermissions(userJWT string, p topology.Permissions) (bool, error) {
	_, _, got, err := UserClaims(userJWT)
	if err != nil {
		return false, err
	}
	return sameSet(got.Publish, p.Publish) && sameSet(got.Subscribe, p.Subscribe) && got.Responses == p.Responses, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// AccountMatches implements provisioning.ClaimsReader.
func (s *Signer) AccountMatches(accountJWT string, spec provisioning.AccountSpec) (bool, error) {
	got, err := AccountClaims(accountJWT)
	if err != nil {
		return false, nil // a JWT that does not decode matches nothing
	}
	key := func(r provisioning.Revocation) string {
		return r.AccountPubKey + "/" + r.UserPubKey + "@" + r.RevokedAt.UTC().String()
	}
	var a, b []string
	for _, r := range got.Revocations {
		a = append(a, key(r))
	}
	for _, r := range spec.Revocations {
		b = append(b, key(r))
	}
	return got.PubKey == spec.PubKey && got.Name == spec.Name && got.Kind == spec.Kind && got.TenantID == spec.TenantID && sameSet(a, b), nil
}

// AccountRevocations implements provisioning.ClaimsReader.
func (s *Signer) AccountRevocations(accountJWT string) ([]provisioning.Revocation, error) {
	got, err := AccountClaims(accountJWT)
	if err != nil {
		return nil, err
	}
	return got.Revocations, nil
}

// Pusher is a provisioning.Pusher that keeps the JWTs pushed, per account.
type Pusher struct {
	mu     sync.Mutex
	err    error
	fail   map[string]error
	pushed map[string][]string
}

// FailAccount makes every later push of one account fail with err (nil:
// succeed again).
func (p *Pusher) FailAccount(pubKey string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail == nil {
		p.fail = map[string]error{}
	}
	p.fail[pubKey] = err
}

// Fail makes every later push fail with err (nil: succeed again).
func (p *Pusher) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// PushAccount implements provisioning.Pusher.
func (p *Pusher) PushAccount(_ context.Context, pubKey, jwt string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if err := p.fail[pubKey]; err != nil {
		return err
	}
	if p.pushed == nil {
		p.pushed = map[string][]string{}
	}
	p.pushed[pubKey] = append(p.pushed[pubKey], jwt)
	return nil
}

// Pushed lists the JWTs pushed for the account, in order.
func (p *Pusher) Pushed(pubKey string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pushed[pubKey])
}

// Consumers is a provisioning.Consumers and ConsumerLister over a set of
// consumer names.
type Consumers struct {
	mu        sync.Mutex
	err       error
	removeErr error
	names     map[string]bool
	purged    []string
}

var (
	_ provisioning.Consumers       = (*Consumers)(nil)
	_ provisioning.ConsumerLister  = (*Consumers)(nil)
	_ provisioning.ConsumerRemover = (*Consumers)(nil)
)

// FailRemove makes every later RemoveConsumer fail with err (nil: succeed
// again).
func (c *Consumers) FailRemove(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeErr = err
}

// RemoveConsumer implements provisioning.ConsumerRemover: it records the
// purge of the sensor's subject and forgets the consumer.
func (c *Consumers) RemoveConsumer(_ context.Context, s topology.Sensor) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removeErr != nil {
		return c.removeErr
	}
	c.purged = append(c.purged, s.CommandSubject())
	delete(c.names, s.Consumer())
	return nil
}

// Purged lists the subjects RemoveConsumer purged, in order.
func (c *Consumers) Purged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.purged)
}

// Has reports whether the consumer exists.
func (c *Consumers) Has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[name]
}

// Fail makes every later EnsureConsumer fail with err (nil: succeed again).
func (c *Consumers) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Drop forgets a consumer, as when a stream is lost.
func (c *Consumers) Drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.names, name)
}

// EnsureConsumer implements provisioning.Consumers.
func (c *Consumers) EnsureConsumer(_ context.Context, s topology.Sensor) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.names == nil {
		c.names = map[string]bool{}
	}
	c.names[s.Consumer()] = true
	return nil
}

// ConsumerNames implements provisioning.ConsumerLister.
func (c *Consumers) ConsumerNames(context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.names)), nil
}

// LastKnown is a provisioning.LastKnown in a map: the newest JWT (by
// UpdatedAt) of every account it observed.
type LastKnown struct {
	mu     sync.Mutex
	accts  map[string]provisioning.Account
	system string
}

var _ provisioning.LastKnown = (*LastKnown)(nil)

// Observe implements provisioning.LastKnown; an older JWT never replaces a newer one.
func (l *LastKnown) Observe(a provisioning.Account) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.accts == nil {
		l.accts = map[string]provisioning.Account{}
	}
	if old, ok := l.accts[a.PubKey]; ok && old.UpdatedAt.After(a.UpdatedAt) {
		return
	}
	l.accts[a.PubKey] = a
	if a.Kind == provisioning.KindSystem {
		l.system = a.PubKey
	}
}

// Get implements provisioning.LastKnown.
func (l *LastKnown) Get(pubKey string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accts[pubKey]
	return a.JWT, ok
}

// System implements provisioning.LastKnown.
func (l *LastKnown) System() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accts[l.system]
	return a.JWT, ok && l.system != ""
}
