// Package operators holds the people who run the control plane: their
// accounts (an e-mail address and a password hash) and their login
// sessions. Passwords are hashed through the PasswordHasher port; session
// tokens are random, shown once, and stored only as SHA-256 hashes.
package operators

import (
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
	"unicode/utf8"
)

// Sentinel errors.
var (
	ErrNotFound           = errors.New("not found")
	ErrConflict           = errors.New("already exists")
	ErrInvalidInput       = errors.New("invalid input")
	ErrInvalidCredentials = errors.New("invalid email or password")
	ErrUnauthenticated    = errors.New("no valid session")
)

// Limits on credentials.
const (
	MinPasswordLen = 12
	// MaxPasswordBytes bounds the hashing work an attacker can ask for.
	MaxPasswordBytes  = 1024
	maxEmail          = 254
	DefaultSessionTTL = 12 * time.Hour
	tokenBytes        = 32
)

// Operator is a person allowed to run the fleet.
type Operator struct {
	ID        string
	Email     string
	CreatedAt time.Time
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

// Store persists operators.
type Store interface {
	// CreateOperator inserts o; ErrConflict when the email is taken.
	CreateOperator(ctx context.Context, o Operator, passwordHash string) error
	// OperatorByEmail returns the operator and its password hash, or ErrNotFound.
	OperatorByEmail(ctx context.Context, email string) (Operator, string, error)
	SessionStore
}

// SessionStore persists sessions.
type SessionStore interface {
	CreateSession(ctx context.Context, s Session) error
	// SessionOperator returns the operator of the session with that hash,
	// unless it expired at now; else ErrNotFound.
	SessionOperator(ctx context.Context, tokenHash []byte, now time.Time) (Operator, error)
	// DeleteSession removes a session; unknown hashes are not an error.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteExpiredSessions removes sessions expired at now and counts them.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
}

// Config wires a Service.
type Config struct {
	Store      Store
	Hasher     PasswordHasher
	SessionTTL time.Duration // default 12h
	Logger     *slog.Logger
	Clock      func() time.Time
}

// Service implements operator accounts and sessions.
type Service struct {
	store      Store
	hasher     PasswordHasher
	sessionTTL time.Duration
	// dummyHash is verified when the email is unknown, so a wrong email
	// costs the same time as a wrong password.
	dummyHash string
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
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	var pad [tokenBytes]byte
	if _, err := rand.Read(pad[:]); err != nil {
		return nil, err
	}
	dummy, err := cfg.Hasher.Hash(base64.RawURLEncoding.EncodeToString(pad[:]))
	if err != nil {
		return nil, fmt.Errorf("operators: hasher: %w", err)
	}
	return &Service{store: cfg.Store, hasher: cfg.Hasher, sessionTTL: cfg.SessionTTL, dummyHash: dummy, log: cfg.Logger, clock: cfg.Clock}, nil
}

func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// NormalizeEmail trims and lower-cases an address and checks its shape:
// one "@" with something on both sides, no spaces or control characters.
func NormalizeEmail(email string) (string, error) {
	if !utf8.ValidString(email) {
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

// CreateOperator adds an operator. Passwords need at least 12 characters.
func (s *Service) CreateOperator(ctx context.Context, email, password string) (Operator, error) {
	e, err := NormalizeEmail(email)
	if err != nil {
		return Operator{}, err
	}
	if utf8.RuneCountInString(password) < MinPasswordLen {
		return Operator{}, fmt.Errorf("%w: password shorter than %d characters", ErrInvalidInput, MinPasswordLen)
	}
	if len(password) > MaxPasswordBytes {
		return Operator{}, fmt.Errorf("%w: password longer than %d bytes", ErrInvalidInput, MaxPasswordBytes)
	}
	hash, err := s.hasher.Hash(password)
	if err != nil {
		return Operator{}, fmt.Errorf("hash password: %w", err)
	}
	id, err := newID()
	if err != nil {
		return Operator{}, err
	}
	o := Operator{ID: id, Email: e, CreatedAt: s.now()}
	if err := s.store.CreateOperator(ctx, o, hash); err != nil {
		return Operator{}, fmt.Errorf("create operator: %w", err)
	}
	s.log.InfoContext(ctx, "operator created", "operator_id", o.ID)
	return o, nil
}

// Login checks the credentials and opens a session, returning its token
// (shown once). Unknown emails and wrong passwords give the same
// ErrInvalidCredentials after the same amount of work.
func (s *Service) Login(ctx context.Context, email, password string) (Operator, string, time.Time, error) {
	if len(password) > MaxPasswordBytes {
		return Operator{}, "", time.Time{}, ErrInvalidCredentials
	}
	e, err := NormalizeEmail(email)
	if err != nil {
		// Same work as a real check: the shape of the email must not show.
		_, _ = s.hasher.Verify(s.dummyHash, password)
		return Operator{}, "", time.Time{}, ErrInvalidCredentials
	}
	o, hash, err := s.store.OperatorByEmail(ctx, e)
	switch {
	case errors.Is(err, ErrNotFound):
		_, _ = s.hasher.Verify(s.dummyHash, password)
		return Operator{}, "", time.Time{}, ErrInvalidCredentials
	case err != nil:
		return Operator{}, "", time.Time{}, fmt.Errorf("login: %w", err)
	}
	ok, err := s.hasher.Verify(hash, password)
	if err != nil {
		return Operator{}, "", time.Time{}, fmt.Errorf("login: verify password: %w", err)
	}
	if !ok {
		return Operator{}, "", time.Time{}, ErrInvalidCredentials
	}
	token, tokenHash, err := newToken()
	if err != nil {
		return Operator{}, "", time.Time{}, err
	}
	now := s.now()
	sess := Session{TokenHash: tokenHash, OperatorID: o.ID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL)}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return Operator{}, "", time.Time{}, fmt.Errorf("login: %w", err)
	}
	s.log.InfoContext(ctx, "operator logged in", "operator_id", o.ID)
	return o, token, sess.ExpiresAt, nil
}

// Authenticate returns the operator of a live session token.
func (s *Service) Authenticate(ctx context.Context, token string) (Operator, error) {
	if token == "" || len(token) > 2*tokenBytes {
		return Operator{}, ErrUnauthenticated
	}
	o, err := s.store.SessionOperator(ctx, hashToken(token), s.now())
	if errors.Is(err, ErrNotFound) {
		return Operator{}, ErrUnauthenticated
	}
	if err != nil {
		return Operator{}, fmt.Errorf("authenticate: %w", err)
	}
	return o, nil
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

func newToken() (string, []byte, error) {
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("session token: %w", err)
	}
	t := base64.RawURLEncoding.EncodeToString(raw[:])
	return t, hashToken(t), nil
}

// hashToken is the stored form of a session token. Lookup is by this hash,
// so comparing it is the database's index lookup on a value an attacker
// cannot choose without knowing the token.
func hashToken(t string) []byte {
	sum := sha256.Sum256([]byte(t))
	return sum[:]
}

func newID() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("operator id: %w", err)
	}
	return "op-" + hex.EncodeToString(raw[:]), nil
}
