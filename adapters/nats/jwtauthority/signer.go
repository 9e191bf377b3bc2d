// Package jwtauthority is the provisioner's NATS credential authority: it holds the
// operator key, signs account JWTs (SYS, CONTROL and one per tenant) whose
// exports, imports and limits come from package topology, mints user JWTs
// signed directly by their account key, and renders the nats-server
// configuration fragment that trusts the operator. It implements the Signer
// port of core/provisioning; every claim is validated before it is signed.
package jwtauthority

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// Errors of the signer. Invalid keys wrap provisioning.ErrInvalidPublicKey.
var (
	// ErrInvalidSeed is wrapped when a seed does not decode to the expected
	// kind of nkey.
	ErrInvalidSeed = errors.New("invalid nkey seed")
	// ErrNoControlAccount is returned when a tenant account is signed by a
	// signer that does not know the CONTROL account.
	ErrNoControlAccount = errors.New("control account unknown to the signer")
	// ErrInvalidClaims is wrapped when jwt validation reports blocking issues.
	ErrInvalidClaims = errors.New("invalid claims")
	// ErrInvalidConfig is wrapped by New for unusable configuration.
	ErrInvalidConfig = errors.New("invalid signer config")
)

// Limits are the CONTROL account's JetStream limits. -1 means unlimited; a
// zero DiskStorage and MemoryStorage together would disable JetStream and are
// refused.
type Limits struct {
	DiskStorage   int64
	MemoryStorage int64
	Streams       int64
	Consumers     int64
}

// Config configures a Signer.
type Config struct {
	// OperatorSeed is the seed ("SO…") of the key that signs accounts: the
	// operator's identity key, or one of the signing keys its JWT lists
	// (then the identity key can stay offline).
	OperatorSeed []byte
	// Stream is the command stream's name; it appears in exports and imports.
	Stream string
	// ControlAccount is the CONTROL account's public key, needed to sign
	// tenant accounts (they import from it). It may be empty while the
	// CONTROL account does not exist yet (init-operator); see
	// WithControlAccount.
	ControlAccount string
	// ControlJetStream are the CONTROL account's JetStream limits.
	ControlJetStream Limits
}

// Signer signs account and user JWTs. It is safe for concurrent use.
type Signer struct {
	operator    nkeys.KeyPair
	operatorPub string
	stream      string
	control     string
	limits      Limits
}

var _ provisioning.Signer = (*Signer)(nil)

// New checks cfg and returns a Signer holding the operator key.
func New(cfg Config) (*Signer, error) {
	kp, pub, err := keyFromSeed(cfg.OperatorSeed, nkeys.PrefixByteOperator)
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: operator seed: %w", err)
	}
	if err := ids.Validate(cfg.Stream); err != nil {
		return nil, fmt.Errorf("jwtauthority: %w: stream name: %v", ErrInvalidConfig, err)
	}
	if cfg.ControlAccount != "" && !IsAccountKey(cfg.ControlAccount) {
		return nil, fmt.Errorf("jwtauthority: control account: %w", provisioning.ErrInvalidPublicKey)
	}
	if err := cfg.ControlJetStream.check(); err != nil {
		return nil, fmt.Errorf("jwtauthority: %w: control JetStream limits: %v", ErrInvalidConfig, err)
	}
	return &Signer{operator: kp, operatorPub: pub, stream: cfg.Stream, control: cfg.ControlAccount, limits: cfg.ControlJetStream}, nil
}

func (l Limits) check() error {
	for name, v := range map[string]int64{"disk": l.DiskStorage, "memory": l.MemoryStorage, "streams": l.Streams, "consumers": l.Consumers} {
		if v < -1 {
			return fmt.Errorf("%s limit %d is below -1 (unlimited)", name, v)
		}
	}
	if l.DiskStorage == 0 && l.MemoryStorage == 0 {
		return errors.New("disk and memory storage are both 0, which disables JetStream; use -1 for unlimited")
	}
	if l.Streams == 0 || l.Consumers == 0 {
		return errors.New("streams and consumers must be positive or -1 (unlimited)")
	}
	return nil
}

// WithControlAccount returns a copy of s that signs tenant accounts importing
// from the CONTROL account pk. init-operator uses it after creating the
// CONTROL key with the same signer.
func (s *Signer) WithControlAccount(pk string) (*Signer, error) {
	if !IsAccountKey(pk) {
		return nil, fmt.Errorf("jwtauthority: control account: %w", provisioning.ErrInvalidPublicKey)
	}
	c := *s
	c.control = pk
	return &c, nil
}

// OperatorPublicKey is the public key of the operator key the signer signs
// accounts with: the identity key or a signing key.
func (s *Signer) OperatorPublicKey() string { return s.operatorPub }

// NewAccountKey creates a fresh account key pair.
func (s *Signer) NewAccountKey() (string, []byte, error) {
	return newKey(nkeys.CreateAccount)
}

// SignAccount signs the account JWT that spec.Kind calls for: SYS has a name
// only; CONTROL has JetStream and the public service exports of
// topology.ControlExports; a tenant imports topology.TenantImports from the
// CONTROL account. Every kind carries spec.Revocations.
func (s *Signer) SignAccount(spec provisioning.AccountSpec) (string, error) {
	ac, err := s.accountClaims(spec)
	if err != nil {
		return "", err
	}
	tok, err := ac.Encode(s.operator)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: sign account %s: %w", spec.PubKey, err)
	}
	return tok, nil
}

// AccountMatches reports whether accountJWT, signed by this signer's key,
// carries exactly the claims SignAccount would sign for spec now (so an
// account signed by another signing key of the operator is re-signed). The issue time and
// the JWT id (a hash that covers it) are left out of the comparison. A JWT
// that does not decode (or whose signature does not verify) matches nothing,
// so re-signing repairs it; an invalid spec is an error.
//
// The wanted claims go through the library's encoding (issuer, type,
// version, sorted exports and imports) without a signature: an ed25519
// signature per account would triple the cost of serve's start-up check.
func (s *Signer) AccountMatches(accountJWT string, spec provisioning.AccountSpec) (bool, error) {
	want, err := s.accountClaims(spec)
	if err != nil {
		return false, err
	}
	issuer, err := nkeys.FromPublicKey(s.operatorPub)
	if err != nil {
		return false, fmt.Errorf("jwtauthority: operator key: %w", err)
	}
	unsigned := func(string, []byte) ([]byte, error) { return nil, nil }
	if _, err := want.EncodeWithSigner(issuer, unsigned); err != nil {
		return false, fmt.Errorf("jwtauthority: encode account %s: %w", spec.PubKey, err)
	}
	have, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil {
		return false, nil
	}
	a, err := stableClaims(have)
	if err != nil {
		return false, err
	}
	b, err := stableClaims(want)
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}

// RevocationMargin is added to every revocation time signed into an account
// JWT (and taken off again by AccountRevocations). nats-server refuses a
// user JWT issued at or before its key's revocation time, counted in
// seconds. Sensor user JWTs are signed again at every renewal, possibly by
// another provisioner replica whose clock runs ahead of the one revoking:
// without a margin, a JWT signed in the moment of the revocation could carry
// a later issue time and outlive it until it expires. A revoked key is never
// signed again (the store refuses it), so refusing its JWTs issued up to the
// margin later costs nothing. An hour covers any clock that is kept at all.
const RevocationMargin = provisioning.RevocationMargin

// AccountRevocations returns the revocations in accountJWT's claims, sorted
// by user key, at the times they were made (RevocationMargin taken off; an
// AllUsers entry carries none). It reads the claims without checking the signature, which
// AccountMatches does.
func (s *Signer) AccountRevocations(accountJWT string) ([]provisioning.Revocation, error) {
	parts := strings.Split(accountJWT, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("jwtauthority: account JWT: %w", ErrInvalidClaims)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: account JWT payload: %w", err)
	}
	var ac jwt.AccountClaims
	if err := json.Unmarshal(payload, &ac); err != nil {
		return nil, fmt.Errorf("jwtauthority: account JWT payload: %w", err)
	}
	out := make([]provisioning.Revocation, 0, len(ac.Revocations))
	for user, at := range ac.Revocations {
		t := time.Unix(at, 0).UTC()
		if user != provisioning.AllUsers {
			t = t.Add(-RevocationMargin)
		}
		out = append(out, provisioning.Revocation{AccountPubKey: ac.Subject, UserPubKey: user, RevokedAt: t})
	}
	slices.SortFunc(out, func(a, b provisioning.Revocation) int { return strings.Compare(a.UserPubKey, b.UserPubKey) })
	return out, nil
}

// stableClaims is the JSON of ac without what changes on every signing.
func stableClaims(ac *jwt.AccountClaims) ([]byte, error) {
	c := *ac
	c.IssuedAt, c.ID = 0, ""
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: encode account claims: %w", err)
	}
	return out, nil
}

// accountClaims builds the unsigned claims SignAccount signs.
func (s *Signer) accountClaims(spec provisioning.AccountSpec) (*jwt.AccountClaims, error) {
	if !IsAccountKey(spec.PubKey) {
		return nil, fmt.Errorf("jwtauthority: account %q: %w", spec.PubKey, provisioning.ErrInvalidPublicKey)
	}
	ac := jwt.NewAccountClaims(spec.PubKey)
	ac.Name = spec.Name
	switch spec.Kind {
	case provisioning.KindSystem:
	case provisioning.KindControl:
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
			DiskStorage:   s.limits.DiskStorage,
			MemoryStorage: s.limits.MemoryStorage,
			Streams:       s.limits.Streams,
			Consumer:      s.limits.Consumers,
		}
		for _, e := range topology.ControlExports(s.stream) {
			ac.Exports.Add(export(e))
		}
	case provisioning.KindTenant:
		if s.control == "" {
			return nil, fmt.Errorf("jwtauthority: tenant account %s: %w", spec.PubKey, ErrNoControlAccount)
		}
		if err := ids.Validate(spec.TenantID); err != nil {
			return nil, fmt.Errorf("jwtauthority: tenant id: %w", err)
		}
		for _, im := range topology.TenantImports(s.stream, spec.TenantID) {
			ac.Imports.Add(&jwt.Import{
				Name:         im.Name,
				Subject:      jwt.Subject(im.Subject),
				LocalSubject: jwt.RenamingSubject(im.LocalSubject),
				Account:      s.control,
				Type:         jwt.Service,
			})
		}
	default:
		return nil, fmt.Errorf("jwtauthority: %w: unknown account kind %q", ErrInvalidClaims, spec.Kind)
	}
	for _, r := range spec.Revocations {
		if r.AccountPubKey != spec.PubKey {
			return nil, fmt.Errorf("jwtauthority: %w: revocation for account %s signed into %s", ErrInvalidClaims, r.AccountPubKey, spec.PubKey)
		}
		if r.UserPubKey != provisioning.AllUsers && !IsUserKey(r.UserPubKey) {
			return nil, fmt.Errorf("jwtauthority: revoked user %q: %w", r.UserPubKey, provisioning.ErrInvalidPublicKey)
		}
		if r.RevokedAt.IsZero() {
			return nil, fmt.Errorf("jwtauthority: %w: revocation of %s has no time", ErrInvalidClaims, r.UserPubKey)
		}
		if r.UserPubKey == provisioning.AllUsers {
			// No margin: every user minted after the entry must work.
			ac.RevokeAt(jwt.All, r.RevokedAt)
			continue
		}
		ac.RevokeAt(r.UserPubKey, r.RevokedAt.Add(RevocationMargin))
	}
	if err := validate(ac); err != nil {
		return nil, fmt.Errorf("jwtauthority: account %s: %w", spec.PubKey, err)
	}
	return ac, nil
}

func export(e topology.Export) *jwt.Export {
	rt := jwt.ResponseType(jwt.ResponseTypeSingleton)
	if e.StreamResponse {
		rt = jwt.ResponseTypeStream
	}
	return &jwt.Export{Name: e.Name, Subject: jwt.Subject(e.Subject), Type: jwt.Service, ResponseType: rt}
}

// MintUser creates a user key and signs its JWT with the account key: no
// issuer account (no signing keys), the spec's allow lists, name and tags,
// and spec.ExpiresAt as its expiry (none when zero). Both allow lists must
// be non-empty: an empty list would allow everything.
func (s *Signer) MintUser(spec provisioning.UserSpec) (provisioning.MintedUser, error) {
	return mintUser(spec)
}

// ResignUser signs a new JWT for the existing user key userPubKey from
// spec, as MintUser would: a sensor's credentials renewed with a later
// expiry keep their key (and consumer, and revocation entry if any).
func (s *Signer) ResignUser(spec provisioning.UserSpec, userPubKey string) (string, error) {
	if !IsUserKey(userPubKey) {
		return "", fmt.Errorf("jwtauthority: user %q: %w", userPubKey, provisioning.ErrInvalidPublicKey)
	}
	acct, err := userAccount(spec)
	if err != nil {
		return "", err
	}
	return signUser(acct, userPubKey, spec)
}

func userAccount(spec provisioning.UserSpec) (nkeys.KeyPair, error) {
	acct, pub, err := keyFromSeed(spec.AccountSeed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: account seed: %w", err)
	}
	if spec.AccountPubKey != "" && spec.AccountPubKey != pub {
		return nil, fmt.Errorf("jwtauthority: %w: account seed does not belong to %s", ErrInvalidSeed, spec.AccountPubKey)
	}
	if len(spec.Permissions.Publish) == 0 || len(spec.Permissions.Subscribe) == 0 {
		return nil, fmt.Errorf("jwtauthority: %w: user %q needs publish and subscribe allow lists", ErrInvalidClaims, spec.Name)
	}
	return acct, nil
}

func mintUser(spec provisioning.UserSpec) (provisioning.MintedUser, error) {
	acct, err := userAccount(spec)
	if err != nil {
		return provisioning.MintedUser{}, err
	}
	userPub, seed, err := newKey(nkeys.CreateUser)
	if err != nil {
		return provisioning.MintedUser{}, err
	}
	tok, err := signUser(acct, userPub, spec)
	if err != nil {
		return provisioning.MintedUser{}, err
	}
	creds, err := formatCreds(tok, seed)
	if err != nil {
		return provisioning.MintedUser{}, err
	}
	return provisioning.MintedUser{PubKey: userPub, Seed: seed, JWT: tok, Creds: creds}, nil
}

func signUser(acct nkeys.KeyPair, userPub string, spec provisioning.UserSpec) (string, error) {
	uc := jwt.NewUserClaims(userPub)
	uc.Name = spec.Name
	uc.Pub.Allow.Add(spec.Permissions.Publish...)
	uc.Sub.Allow.Add(spec.Permissions.Subscribe...)
	if spec.Permissions.Responses {
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: topology.ResponseWindow}
	}
	uc.Tags.Add(spec.Tags...)
	if !spec.ExpiresAt.IsZero() {
		uc.Expires = spec.ExpiresAt.Unix()
	}
	if err := validate(uc); err != nil {
		return "", fmt.Errorf("jwtauthority: user %q: %w", spec.Name, err)
	}
	tok, err := uc.Encode(acct)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: sign user %q: %w", spec.Name, err)
	}
	return tok, nil
}

// UserExpiry returns the expiry of a user JWT (zero when it has none),
// without checking its signature.
func (s *Signer) UserExpiry(userJWT string) (time.Time, error) {
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		return time.Time{}, fmt.Errorf("jwtauthority: decode user JWT: %w", err)
	}
	if uc.Expires == 0 {
		return time.Time{}, nil
	}
	return time.Unix(uc.Expires, 0).UTC(), nil
}

// Creds formats a .creds file: the decorated JWT and seed. It refuses a seed
// that does not belong to the JWT's user, which would give a sensor creds
// that can never connect.
func (s *Signer) Creds(userJWT string, userSeed []byte) ([]byte, error) {
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: creds: %w", err)
	}
	if _, pub, err := keyFromSeed(userSeed, nkeys.PrefixByteUser); err != nil || pub != uc.Subject {
		return nil, fmt.Errorf("jwtauthority: creds: %w: seed is not the key of user %s", ErrInvalidSeed, uc.Subject)
	}
	return formatCreds(userJWT, userSeed)
}

// formatCreds lays out a .creds file as jwt.FormatUserConfig does, which
// would decode and verify the JWT a second time (a tenth of a millisecond
// per enrolment); the caller knows the seed is the JWT's user's.
func formatCreds(userJWT string, userSeed []byte) ([]byte, error) {
	seed, err := jwt.DecorateSeed(userSeed)
	if err != nil {
		return nil, fmt.Errorf("jwtauthority: creds: %w", err)
	}
	b := make([]byte, 0, len(userJWT)+len(seed)+96)
	b = append(b, "-----BEGIN NATS USER JWT-----\n"...)
	b = append(b, userJWT...)
	b = append(b, "\n------END NATS USER JWT------\n\n"...)
	return append(b, seed...), nil
}

// SystemUser mints an ephemeral user of the SYS account with
// topology.SystemPermissions: enough to push claim updates and read the
// replies. It is not stored; the provisioner mints one per process.
func SystemUser(sysSeed []byte) (string, []byte, error) {
	return ephemeral(sysSeed, "rxc-provisioner-sys", topology.SystemPermissions())
}

// ControlAdminUser mints an ephemeral user of the CONTROL account with
// topology.ControlAdminPermissions, for managing the command stream and the
// sensors' consumers.
func ControlAdminUser(controlSeed []byte) (string, []byte, error) {
	return ephemeral(controlSeed, "rxc-control-admin", topology.ControlAdminPermissions())
}

func ephemeral(accountSeed []byte, name string, p topology.Permissions) (string, []byte, error) {
	m, err := mintUser(provisioning.UserSpec{AccountSeed: accountSeed, Name: name, Permissions: p})
	if err != nil {
		return "", nil, err
	}
	return m.JWT, m.Seed, nil
}

func validate(c jwt.Claims) error {
	vr := jwt.CreateValidationResults()
	c.Validate(vr)
	if vr.IsBlocking(true) {
		return fmt.Errorf("%w: %w", ErrInvalidClaims, errors.Join(vr.Errors()...))
	}
	return nil
}

func newKey(create func() (nkeys.KeyPair, error)) (string, []byte, error) {
	kp, err := create()
	if err != nil {
		return "", nil, fmt.Errorf("jwtauthority: create key: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", nil, fmt.Errorf("jwtauthority: public key: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", nil, fmt.Errorf("jwtauthority: seed: %w", err)
	}
	return pub, seed, nil
}

// keyFromSeed decodes seed and checks it is of the wanted kind. Errors never
// include the seed.
func keyFromSeed(seed []byte, want nkeys.PrefixByte) (nkeys.KeyPair, string, error) {
	prefix, _, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, "", fmt.Errorf("%w: does not decode", ErrInvalidSeed)
	}
	if prefix != want {
		return nil, "", fmt.Errorf("%w: %s seed, want %s", ErrInvalidSeed, prefix, want)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, "", fmt.Errorf("%w: does not decode", ErrInvalidSeed)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("%w: no public key", ErrInvalidSeed)
	}
	return kp, pub, nil
}

// HasPermissions implements provisioning.ClaimsReader: it decodes userJWT
// (without trusting it: the caller stored it) and reports whether its allow
// lists are exactly p's, it answers requests exactly when p says so, and it
// denies nothing.
func (s *Signer) HasPermissions(userJWT string, p topology.Permissions) (bool, error) {
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		return false, fmt.Errorf("jwtauthority: decode user JWT: %w", err)
	}
	if len(uc.Pub.Deny) > 0 || len(uc.Sub.Deny) > 0 {
		return false, nil
	}
	if (uc.Resp != nil) != p.Responses || (uc.Resp != nil && (uc.Resp.MaxMsgs != 1 || uc.Resp.Expires != topology.ResponseWindow)) {
		return false, nil
	}
	return sameSet(uc.Pub.Allow, p.Publish) && sameSet(uc.Sub.Allow, p.Subscribe), nil
}

func sameSet(got jwt.StringList, want []string) bool {
	a := slices.Compact(slices.Sorted(slices.Values(got)))
	b := slices.Compact(slices.Sorted(slices.Values(want)))
	return slices.Equal(a, b)
}
