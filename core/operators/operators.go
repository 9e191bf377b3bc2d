// Package operators holds the people who run the control plane and what
// they may do: accounts (an e-mail address, a password hash, a role and the
// tenants granted), login sessions, API tokens for automation, and the
// login protection that keeps guessing slow and hashing bounded. Passwords
// are hashed through the PasswordHasher port; session and API tokens are
// random, shown once, and stored only as SHA-256 hashes.
package operators

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rxc-project/rxc/core/ids"
)

// Sentinel errors.
var (
	ErrNotFound           = errors.New("not found")
	ErrConflict           = errors.New("already exists")
	ErrInvalidInput       = errors.New("invalid input")
	ErrInvalidCredentials = errors.New("invalid email or password")
	// ErrWrongPassword: changing one's own password needs the current one,
	// and it was missing or wrong.
	ErrWrongPassword   = errors.New("the current password is missing or wrong")
	ErrUnauthenticated = errors.New("no valid session")
	// ErrForbidden: the principal sees the object but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrLastAdmin: the change would leave no enabled admin.
	ErrLastAdmin = errors.New("the last enabled admin cannot be removed, demoted or disabled")
	// ErrBusy: too many password hashes are being computed; retry shortly.
	ErrBusy = errors.New("too many logins in progress")
)

// ThrottledError is returned while a login is held back after repeated
// failures, for the account or the client address.
type ThrottledError struct {
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed logins: retry in %s", e.RetryAfter.Round(time.Second))
}

// Limits on credentials.
const (
	MinPasswordLen = 12
	// MaxPasswordBytes bounds the hashing work an attacker can ask for.
	MaxPasswordBytes   = 1024
	maxEmail           = 254
	maxTenantsPerGrant = 1000
	DefaultSessionTTL  = 12 * time.Hour
	tokenBytes         = 32
)

// Operator is a person allowed to run the fleet.
type Operator struct {
	ID    string
	Email string
	Role  Role
	// Tenants granted (sorted); empty for an admin, who sees all.
	Tenants    []string
	DisabledAt time.Time // zero while enabled
	CreatedAt  time.Time
	// SecondFactor: TOTP is enabled; a login needs a code.
	SecondFactor bool
	// External: created by single sign-on and without a password of its
	// own (stores report it from the ExternalPasswordHash marker).
	External bool
}

// Enabled reports whether the operator may sign in.
func (o Operator) Enabled() bool { return o.DisabledAt.IsZero() }

// Principal is the operator acting with everything their account grants.
func (o Operator) Principal() Principal {
	return Principal{Operator: o, Role: o.Role, Tenants: o.Tenants}
}

// Session is a login, known by the hash of its token.
type Session struct {
	TokenHash  []byte
	OperatorID string
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// PasswordHasher hashes and verifies passwords (argon2id in production).
type PasswordHasher interface {
	Hash(password string) (string, error)
	Verify(hash, password string) (bool, error)
}

// Store persists operators, their sessions and tokens, and login failures.
type Store interface {
	// CreateOperator inserts o; ErrConflict when the email is taken.
	CreateOperator(ctx context.Context, o Operator, passwordHash string) error
	// OperatorByEmail returns the operator (enabled or not) and its
	// password hash, or ErrNotFound.
	OperatorByEmail(ctx context.Context, email string) (Operator, string, error)
	// OperatorByID returns the operator, or ErrNotFound.
	OperatorByID(ctx context.Context, id string) (Operator, error)
	// ListOperators returns every operator, by e-mail.
	ListOperators(ctx context.Context) ([]Operator, error)
	// UpdateOperator hands the stored operator to change and stores what it
	// leaves, atomically with the check that an enabled admin remains
	// (ErrLastAdmin, nothing stored). A disabled operator's sessions and
	// API tokens stop working at once.
	UpdateOperator(ctx context.Context, id string, change func(*Operator) error) (Operator, error)
	// SetPassword replaces the password hash and ends the operator's sessions.
	SetPassword(ctx context.Context, id, passwordHash string) error
	SessionStore
	TokenStore
	ThrottleStore
	SecondFactorStore
}

// SessionStore persists sessions.
type SessionStore interface {
	CreateSession(ctx context.Context, s Session) error
	// SessionOperator returns the enabled operator of the session with that
	// hash, unless it expired at now; else ErrNotFound.
	SessionOperator(ctx context.Context, tokenHash []byte, now time.Time) (Operator, error)
	// DeleteSession removes a session; unknown hashes are not an error.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteOperatorSessions removes every session of the operator.
	DeleteOperatorSessions(ctx context.Context, operatorID string) (int, error)
	// DeleteExpiredSessions removes sessions expired at now and counts them.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
}

// Config wires a Service.
type Config struct {
	Store      Store
	Hasher     PasswordHasher
	SessionTTL time.Duration // default 12h
	// Throttle limits failed logins; zero fields take DefaultThrottle's.
	Throttle ThrottlePolicy
	// MaxConcurrentHashes bounds the password hashes computed at once
	// (argon2id takes ~19 MiB each); beyond it a login answers ErrBusy.
	// Default 4.
	MaxConcurrentHashes int
	// Sealer encrypts TOTP secrets at rest; without it no second factor
	// can be enrolled (ErrSecondFactorUnavailable).
	Sealer SecretSealer
	// Issuer names the service in authenticator apps (default "RXC").
	Issuer string
	Logger *slog.Logger
	Clock  func() time.Time
}

// DefaultMaxConcurrentHashes is Config.MaxConcurrentHashes' default.
const DefaultMaxConcurrentHashes = 4

// Service implements operator accounts, sessions, API tokens and login
// protection.
type Service struct {
	store      Store
	hasher     PasswordHasher
	sessionTTL time.Duration
	throttle   ThrottlePolicy
	hashes     chan struct{}
	// dummyHash is verified when the email is unknown, so a wrong email
	// costs the same time as a wrong password.
	dummyHash string
	sealer    SecretSealer
	issuer    string
	log       *slog.Logger
	clock     func() time.Time
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Hasher == nil {
		return nil, errors.New("operators: store and hasher are required")
	}
	if cfg.SessionTTL < 0 {
		return nil, errors.New("operators: negative session lifetime")
	}
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	if cfg.MaxConcurrentHashes <= 0 {
		cfg.MaxConcurrentHashes = DefaultMaxConcurrentHashes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	cfg.Issuer = cmp.Or(cfg.Issuer, "RXC")
	var pad [tokenBytes]byte
	if _, err := rand.Read(pad[:]); err != nil {
		return nil, err
	}
	dummy, err := cfg.Hasher.Hash(base64.RawURLEncoding.EncodeToString(pad[:]))
	if err != nil {
		return nil, fmt.Errorf("operators: hasher: %w", err)
	}
	return &Service{
		store: cfg.Store, hasher: cfg.Hasher, sessionTTL: cfg.SessionTTL, throttle: cfg.Throttle.withDefaults(),
		hashes: make(chan struct{}, cfg.MaxConcurrentHashes), dummyHash: dummy, sealer: cfg.Sealer, issuer: cfg.Issuer, log: cfg.Logger, clock: cfg.Clock,
	}, nil
}

func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// NormalizeEmail trims and lower-cases an address and checks its shape:
// one "@" with something on both sides, no spaces or control characters.
func NormalizeEmail(email string) (string, error) {
	if !utf8.ValidString(email) {
		return "", fmt.Errorf("%w: email address", ErrInvalidInput)
	}
	// A character outside ASCII whose lower case is ASCII (KELVIN SIGN
	// to k, DOTTED CAPITAL I to i) would fold another mailbox's address
	// onto an existing account's: refused, so no spelling of an address
	// signs in, or is vouched for by an identity provider, as another.
	if strings.ContainsFunc(email, func(r rune) bool { return r > unicode.MaxASCII && unicode.ToLower(r) <= unicode.MaxASCII }) {
		return "", fmt.Errorf("%w: email address", ErrInvalidInput)
	}
	e := strings.ToLower(strings.TrimSpace(email))
	at := strings.IndexByte(e, '@')
	bad := len(e) > maxEmail || at < 1 || at == len(e)-1 || at != strings.LastIndexByte(e, '@') ||
		strings.ContainsFunc(e, func(r rune) bool { return r <= ' ' || r == 0x7f })
	if bad {
		return "", fmt.Errorf("%w: email address", ErrInvalidInput)
	}
	return e, nil
}

func checkPassword(password string) error {
	if utf8.RuneCountInString(password) < MinPasswordLen {
		return fmt.Errorf("%w: password shorter than %d characters", ErrInvalidInput, MinPasswordLen)
	}
	if len(password) > MaxPasswordBytes {
		return fmt.Errorf("%w: password longer than %d bytes", ErrInvalidInput, MaxPasswordBytes)
	}
	return nil
}

// NewOperator is what creating an operator takes.
type NewOperator struct {
	Email, Password string
	Role            Role
	Tenants         []string
}

// CreateOperator adds an operator with a role and the tenants granted
// (ignored for admins). Passwords need at least 12 characters.
func (s *Service) CreateOperator(ctx context.Context, n NewOperator) (Operator, error) {
	e, err := NormalizeEmail(n.Email)
	if err != nil {
		return Operator{}, err
	}
	tenants, err := checkGrant(n.Role, n.Tenants, ids.Validate)
	if err != nil {
		return Operator{}, err
	}
	if err := checkPassword(n.Password); err != nil {
		return Operator{}, err
	}
	hash, err := s.hash(n.Password)
	if err != nil {
		return Operator{}, err
	}
	id, err := newID("op-")
	if err != nil {
		return Operator{}, err
	}
	o := Operator{ID: id, Email: e, Role: n.Role, Tenants: tenants, CreatedAt: s.now()}
	if err := s.store.CreateOperator(ctx, o, hash); err != nil {
		return Operator{}, fmt.Errorf("create operator %s: %w", e, err)
	}
	s.log.InfoContext(ctx, "operator created", "operator_id", o.ID, "role", string(o.Role))
	return o, nil
}

// hash computes a password hash within the concurrency bound.
func (s *Service) hash(password string) (string, error) {
	if !s.acquire() {
		return "", ErrBusy
	}
	defer s.release()
	h, err := s.hasher.Hash(password)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// acquire takes a hashing slot, waiting briefly for one to free up.
func (s *Service) acquire() bool {
	select {
	case s.hashes <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(hashSlotWait)
	defer t.Stop()
	select {
	case s.hashes <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (s *Service) release() { <-s.hashes }

// hashSlotWait is how long a login waits for a hashing slot before it is
// answered ErrBusy: long enough to ride out a burst of real logins.
const hashSlotWait = 2 * time.Second

// Login checks the credentials and opens a session, returning its token
// (shown once). Unknown emails, disabled accounts and wrong passwords give
// the same ErrInvalidCredentials after the same amount of work. Repeated
// failures for the account or from the address hold further attempts back
// (*ThrottledError, without hashing); too many logins at once give ErrBusy.
func (s *Service) Login(ctx context.Context, email, password, address string) (Operator, string, time.Time, error) {
	return s.LoginWith(ctx, Credentials{Email: email, Password: password, Address: address})
}

// LoginWith is Login with a second factor: for an account with TOTP, the
// right password alone answers ErrSecondFactorRequired, and a wrong,
// replayed or used code ErrInvalidSecondFactor, counted as a failed login
// like a wrong password.
func (s *Service) LoginWith(ctx context.Context, c Credentials) (Operator, string, time.Time, error) {
	keys := s.throttleKeys(c.Email, c.Address)
	if err := s.checkThrottle(ctx, keys); err != nil {
		return Operator{}, "", time.Time{}, err
	}
	ssoOnly, allowed, err := s.passwordLoginAllowed(ctx, c.Email)
	if err != nil {
		return Operator{}, "", time.Time{}, err
	}
	// Under SSO-only every password is still checked, and a right one of
	// an account that may not use it counts as wrong: the break-glass
	// account must not show, neither by the work done (a refusal without
	// hashing was measurably faster) nor by the answer.
	o, err := s.verify(ctx, c.Email, c.Password)
	if err == nil && !allowed {
		err = ErrInvalidCredentials
	}
	if err == nil {
		err = s.checkSecondFactor(ctx, o, c)
	}
	if errors.Is(err, ErrInvalidCredentials) || errors.Is(err, ErrInvalidSecondFactor) {
		if ferr := s.recordFailure(ctx, keys); ferr != nil {
			return Operator{}, "", time.Time{}, ferr
		}
		if ssoOnly && errors.Is(err, ErrInvalidCredentials) {
			err = ErrPasswordLoginDisabled
		}
		return Operator{}, "", time.Time{}, err
	}
	if err != nil {
		return Operator{}, "", time.Time{}, err
	}
	if err := s.resetFailures(ctx, keys); err != nil {
		return Operator{}, "", time.Time{}, err
	}
	token, expires, err := s.startSession(ctx, o)
	if err != nil {
		return Operator{}, "", time.Time{}, fmt.Errorf("login: %w", err)
	}
	s.log.InfoContext(ctx, "operator logged in", "operator_id", o.ID)
	return o, token, expires, nil
}

// startSession stores a new session of o and returns its token (shown to the
// caller once, stored as a hash) and when it expires.
func (s *Service) startSession(ctx context.Context, o Operator) (string, time.Time, error) {
	token, tokenHash, err := newToken("")
	if err != nil {
		return "", time.Time{}, err
	}
	now := s.now()
	sess := Session{TokenHash: tokenHash, OperatorID: o.ID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL)}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return "", time.Time{}, err
	}
	return token, sess.ExpiresAt, nil
}

// verify checks email and password within the hashing bound.
func (s *Service) verify(ctx context.Context, email, password string) (Operator, error) {
	if len(password) > MaxPasswordBytes {
		return Operator{}, ErrInvalidCredentials
	}
	if !s.acquire() {
		return Operator{}, ErrBusy
	}
	defer s.release()
	e, err := NormalizeEmail(email)
	if err != nil {
		// Same work as a real check: the shape of the email must not show.
		_, _ = s.hasher.Verify(s.dummyHash, password)
		return Operator{}, ErrInvalidCredentials
	}
	o, hash, err := s.store.OperatorByEmail(ctx, e)
	switch {
	case errors.Is(err, ErrNotFound):
		_, _ = s.hasher.Verify(s.dummyHash, password)
		return Operator{}, ErrInvalidCredentials
	case err != nil:
		return Operator{}, fmt.Errorf("login: %w", err)
	case hash == ExternalPasswordHash:
		// Created by single sign-on: no password of theirs exists.
		_, _ = s.hasher.Verify(s.dummyHash, password)
		return Operator{}, ErrInvalidCredentials
	}
	ok, err := s.hasher.Verify(hash, password)
	if err != nil {
		return Operator{}, fmt.Errorf("login: verify password: %w", err)
	}
	if !ok || !o.Enabled() {
		return Operator{}, ErrInvalidCredentials
	}
	return o, nil
}

// Authenticate returns the principal of a live session token: the
// operator with everything their account grants now.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" || len(token) > 2*tokenBytes {
		return Principal{}, ErrUnauthenticated
	}
	o, err := s.store.SessionOperator(ctx, hashToken(token), s.now())
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	p := o.Principal()
	if p.EnrolmentOnly, err = s.enrolmentOnly(ctx, o); err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	return p, nil
}

// Logout ends a session; unknown tokens are not an error.
func (s *Service) Logout(ctx context.Context, token string) error {
	if token == "" || len(token) > 2*tokenBytes {
		return nil
	}
	if err := s.store.DeleteSession(ctx, hashToken(token)); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// PurgeExpiredSessions deletes expired sessions (a periodic housekeeping
// job; expired sessions are refused whether or not they were purged).
func (s *Service) PurgeExpiredSessions(ctx context.Context) (int, error) {
	n, err := s.store.DeleteExpiredSessions(ctx, s.now())
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", err)
	}
	return n, nil
}

// newToken returns a random token with prefix and its stored hash.
func newToken(prefix string) (string, []byte, error) {
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("token: %w", err)
	}
	t := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return t, hashToken(t), nil
}

// hashToken is the stored form of a session or API token. Lookup is by this
// hash, so comparing it is the database's index lookup on a value an
// attacker cannot choose without knowing the token.
func hashToken(t string) []byte {
	sum := sha256.Sum256([]byte(t))
	return sum[:]
}

func newID(prefix string) (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("id: %w", err)
	}
	return prefix + hex.EncodeToString(raw[:]), nil
}
