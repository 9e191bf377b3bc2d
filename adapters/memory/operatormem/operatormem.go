// Package operatormem is an in-memory implementation of operators.Store
// (operators, sessions, API tokens, login failures), for tests and local
// experiments. It passes the same contract suite
// (core/operators/operatorstest) as the PostgreSQL store; one mutex makes
// every method atomic, which is what the PostgreSQL store's transactions
// give.
package operatormem

import (
	"bytes"
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/hashed"
	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/operators"
)

// Config is empty; it exists for the usual New(Config) shape.
type Config struct{}

type operator struct {
	operators.Operator
	passwordHash string
	totp         operators.TOTPRecord
	recovery     map[string]bool // hex hash → used
}

type token struct {
	operators.APIToken
	hash []byte
}

type failures struct {
	count       int
	last, until time.Time
}

// Store keeps everything in maps guarded by one mutex.
type Store struct {
	mu        sync.Mutex
	operators map[string]*operator // by id
	sessions  map[string]operators.Session
	tokens    map[string]*token // by id
	failures  map[string]*failures
	settings  operators.AuthSettings
}

// New returns an empty Store.
func New(Config) (*Store, error) {
	return &Store{
		operators: map[string]*operator{}, sessions: map[string]operators.Session{},
		tokens: map[string]*token{}, failures: map[string]*failures{},
	}, nil
}

var _ operators.Store = (*Store)(nil)

// view copies an operator so callers never share the stored slices.
func view(o operators.Operator) operators.Operator {
	o.Tenants = slices.Clone(o.Tenants)
	if len(o.Tenants) == 0 {
		o.Tenants = nil
	}
	return o
}

func viewToken(t operators.APIToken) operators.APIToken {
	t.Tenants = slices.Clone(t.Tenants)
	if len(t.Tenants) == 0 {
		t.Tenants = nil
	}
	return t
}

// sortedTenants is what the PostgreSQL store reads back: sorted, without
// repeats, nil when empty.
func sortedTenants(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

func (s *Store) byEmail(email string) *operator {
	for _, o := range s.operators {
		if o.Email == email {
			return o
		}
	}
	return nil
}

// CreateOperator implements operators.Store.
func (s *Store) CreateOperator(_ context.Context, o operators.Operator, passwordHash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.operators[o.ID]; ok || s.byEmail(o.Email) != nil {
		return operators.ErrConflict
	}
	o.Tenants = sortedTenants(o.Tenants)
	o.CreatedAt, o.DisabledAt = utc(o.CreatedAt), utc(o.DisabledAt)
	o.SecondFactor, o.External = false, passwordHash == operators.ExternalPasswordHash
	s.operators[o.ID] = &operator{Operator: o, passwordHash: passwordHash}
	return nil
}

// OperatorByEmail implements operators.Store.
func (s *Store) OperatorByEmail(_ context.Context, email string) (operators.Operator, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.byEmail(email)
	if o == nil {
		return operators.Operator{}, "", operators.ErrNotFound
	}
	return view(o.Operator), o.passwordHash, nil
}

// OperatorByID implements operators.Store.
func (s *Store) OperatorByID(_ context.Context, id string) (operators.Operator, error) {
	return locked.Get(&s.mu, s.operators, id, operators.ErrNotFound, func(o *operator) operators.Operator { return view(o.Operator) })
}

// ListOperators implements operators.Store.
func (s *Store) ListOperators(context.Context) ([]operators.Operator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]operators.Operator, 0, len(s.operators))
	for _, o := range s.operators {
		out = append(out, view(o.Operator))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Email < out[j].Email })
	return out, nil
}

// UpdateOperator implements operators.Store: the change and the check that
// an enabled admin remains happen under the store's lock.
func (s *Store) UpdateOperator(_ context.Context, id string, change func(*operators.Operator) error) (operators.Operator, error) {
	return locked.Apply(&s.mu, s.operators, id, operators.ErrNotFound, func(o *operator) (operators.Operator, error) {
		return s.updateOperator(id, o, change)
	})
}

// updateOperator is UpdateOperator on o, the operator stored under id (s.mu
// held).
func (s *Store) updateOperator(id string, o *operator, change func(*operators.Operator) error) (operators.Operator, error) {
	next := view(o.Operator)
	if err := change(&next); err != nil {
		return operators.Operator{}, err
	}
	next.ID, next.Email, next.CreatedAt, next.SecondFactor, next.External = o.ID, o.Email, o.CreatedAt, o.SecondFactor, o.External // not changed by an update
	// Like the PostgreSQL store, answer the operator as the change left
	// it and store it normalised.
	out := next
	out.Tenants = slices.Clone(next.Tenants)
	next.Tenants, next.DisabledAt = sortedTenants(next.Tenants), utc(next.DisabledAt)
	admins := 0
	for oid, other := range s.operators {
		cand := other.Operator
		if oid == id {
			cand = next
		}
		if cand.Role == operators.RoleAdmin && cand.Enabled() {
			admins++
		}
	}
	if admins == 0 {
		return operators.Operator{}, operators.ErrLastAdmin
	}
	o.Operator = next
	return out, nil
}

// SetPassword implements operators.Store.
func (s *Store) SetPassword(_ context.Context, id, passwordHash string) error {
	return locked.Update(&s.mu, s.operators, id, operators.ErrNotFound, func(o *operator) error {
		o.passwordHash = passwordHash
		o.External = passwordHash == operators.ExternalPasswordHash
		s.deleteSessions(id)
		return nil
	})
}

// CreateSession implements operators.SessionStore.
func (s *Store) CreateSession(_ context.Context, sess operators.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.operators[sess.OperatorID]; !ok {
		return operators.ErrNotFound
	}
	if _, ok := s.sessions[string(sess.TokenHash)]; ok {
		return operators.ErrConflict
	}
	sess.TokenHash = bytes.Clone(sess.TokenHash)
	s.sessions[string(sess.TokenHash)] = sess
	return nil
}

// SessionOperator implements operators.SessionStore.
func (s *Store) SessionOperator(_ context.Context, tokenHash []byte, now time.Time) (operators.Operator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[string(tokenHash)]
	if !ok || !sess.ExpiresAt.After(now) {
		return operators.Operator{}, operators.ErrNotFound
	}
	o, ok := s.operators[sess.OperatorID]
	if !ok || !o.Enabled() {
		return operators.Operator{}, operators.ErrNotFound
	}
	return view(o.Operator), nil
}

// DeleteSession implements operators.SessionStore.
func (s *Store) DeleteSession(_ context.Context, tokenHash []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, string(tokenHash))
	return nil
}

func (s *Store) deleteSessions(operatorID string) int {
	n := 0
	for k, sess := range s.sessions {
		if sess.OperatorID == operatorID {
			delete(s.sessions, k)
			n++
		}
	}
	return n
}

// DeleteOperatorSessions implements operators.SessionStore.
func (s *Store) DeleteOperatorSessions(_ context.Context, operatorID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteSessions(operatorID), nil
}

// DeleteExpiredSessions implements operators.SessionStore.
func (s *Store) DeleteExpiredSessions(_ context.Context, now time.Time) (int, error) {
	return locked.Prune(&s.mu, s.sessions, math.MaxInt, func(sess operators.Session) bool { return !sess.ExpiresAt.After(now) }), nil
}

func tokenHash(t *token) []byte { return t.hash }

// CreateAPIToken implements operators.TokenStore.
func (s *Store) CreateAPIToken(_ context.Context, t operators.APIToken, hash []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.operators[t.OperatorID]; !ok {
		return operators.ErrNotFound
	}
	if hashed.Taken(s.tokens, t.ID, hash, tokenHash) {
		return operators.ErrConflict
	}
	t = viewToken(t)
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = utc(t.CreatedAt), utc(t.ExpiresAt), utc(t.RevokedAt)
	s.tokens[t.ID] = &token{APIToken: t, hash: bytes.Clone(hash)}
	return nil
}

// APITokenByHash implements operators.TokenStore.
func (s *Store) APITokenByHash(_ context.Context, hash []byte) (operators.APIToken, operators.Operator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := hashed.Find(s.tokens, hash, tokenHash); ok {
		if o, ok := s.operators[t.OperatorID]; ok {
			return viewToken(t.APIToken), view(o.Operator), nil
		}
	}
	return operators.APIToken{}, operators.Operator{}, operators.ErrNotFound
}

// APITokenByID implements operators.TokenStore.
func (s *Store) APITokenByID(_ context.Context, id string) (operators.APIToken, error) {
	return locked.Get(&s.mu, s.tokens, id, operators.ErrNotFound, func(t *token) operators.APIToken { return viewToken(t.APIToken) })
}

// ListAPITokens implements operators.TokenStore: newest first, then by id.
func (s *Store) ListAPITokens(_ context.Context, operatorID string) ([]operators.APIToken, error) {
	return locked.List(&s.mu, s.tokens, func(t *token) bool { return operatorID == "" || t.OperatorID == operatorID },
		func(t *token) operators.APIToken { return viewToken(t.APIToken) },
		locked.NewestFirst(func(t operators.APIToken) time.Time { return t.CreatedAt }, func(t operators.APIToken) string { return t.ID })), nil
}

// RevokeAPIToken implements operators.TokenStore.
func (s *Store) RevokeAPIToken(_ context.Context, id string, at time.Time) (operators.APIToken, error) {
	return locked.Apply(&s.mu, s.tokens, id, operators.ErrNotFound, func(t *token) (operators.APIToken, error) {
		if t.RevokedAt.IsZero() {
			t.RevokedAt = utc(at)
		}
		return viewToken(t.APIToken), nil
	})
}

// LoginLockedUntil implements operators.ThrottleStore.
func (s *Store) LoginLockedUntil(_ context.Context, keys []string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var until time.Time
	for _, k := range keys {
		if f, ok := s.failures[k]; ok && f.until.After(until) {
			until = f.until
		}
	}
	return until, nil
}

// RecordLoginFailure implements operators.ThrottleStore.
func (s *Store) RecordLoginFailure(_ context.Context, key string, now time.Time, window time.Duration, hold func(int) time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = utc(now)
	f, ok := s.failures[key]
	switch {
	case !ok:
		f = &failures{count: 1, until: now}
		s.failures[key] = f
	case f.last.Before(now.Add(-window)):
		f.count = 1
	default:
		f.count++
	}
	f.last = now
	if d := hold(f.count); d > 0 && now.Add(d).After(f.until) {
		f.until = now.Add(d)
	}
	return f.count, nil
}

// ResetLoginFailures implements operators.ThrottleStore.
func (s *Store) ResetLoginFailures(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failures, key)
	return nil
}

// PurgeLoginFailures implements operators.ThrottleStore.
func (s *Store) PurgeLoginFailures(_ context.Context, before time.Time) (int, error) {
	return locked.Prune(&s.mu, s.failures, math.MaxInt, func(f *failures) bool { return f.last.Before(before) && f.until.Before(before) }), nil
}

// utc is t in UTC, as the PostgreSQL store reads times back; the zero time
// stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// PruneAPITokens implements operators.APITokenPruner.
func (s *Store) PruneAPITokens(_ context.Context, before time.Time, limit int) (int, error) {
	return locked.Prune(&s.mu, s.tokens, limit, func(t *token) bool { return operators.APITokenEnded(t.APIToken).Before(before) }), nil
}
