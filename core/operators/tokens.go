package operators

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rxc-project/rxc/core/ids"
)

// TokenPrefix starts every API token, so a leaked one is easy to find.
const TokenPrefix = "rxc_"

// API token lifetimes.
const (
	DefaultTokenTTL = 90 * 24 * time.Hour
	MinTokenTTL     = time.Hour
	MaxTokenTTL     = 366 * 24 * time.Hour
	maxTokenName    = 128
)

// APIToken lets automation act for an operator with a role and tenants no
// wider than the operator's own. The token itself is shown once; only its
// hash is stored.
type APIToken struct {
	ID         string
	OperatorID string
	Name       string
	Role       Role
	Tenants    []string
	CreatedBy  string // e-mail of the operator who created it
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  time.Time // zero while usable
}

// TokenStore persists API tokens.
type TokenStore interface {
	CreateAPIToken(ctx context.Context, t APIToken, hash []byte) error
	// APITokenByHash returns the token with that hash and its operator, or
	// ErrNotFound.
	APITokenByHash(ctx context.Context, hash []byte) (APIToken, Operator, error)
	// APITokenByID returns the token, or ErrNotFound.
	APITokenByID(ctx context.Context, id string) (APIToken, error)
	// ListAPITokens returns the operator's tokens ("" for everyone's), newest first.
	ListAPITokens(ctx context.Context, operatorID string) ([]APIToken, error)
	// RevokeAPIToken marks the token revoked at at (keeping an earlier
	// revocation) and returns it.
	RevokeAPIToken(ctx context.Context, id string, at time.Time) (APIToken, error)
	APITokenPruner
}

// APITokenPruner deletes API tokens that ended (APITokenEnded) before a
// cut-off (history retention, core/retention): at most limit per call,
// returning how many. A token that is still usable is never deleted; an
// ended one authenticates nobody whether or not it is still listed.
type APITokenPruner interface {
	PruneAPITokens(ctx context.Context, before time.Time, limit int) (int, error)
}

// APITokenEnded is when t stopped being usable: the first of its
// revocation and its expiry.
func APITokenEnded(t APIToken) time.Time {
	if !t.RevokedAt.IsZero() && t.RevokedAt.Before(t.ExpiresAt) {
		return t.RevokedAt
	}
	return t.ExpiresAt
}

// NewAPIToken is what creating a token takes.
type NewAPIToken struct {
	OperatorID string // "" for the caller
	Name       string
	Role       Role
	Tenants    []string
	TTL        time.Duration // 0 for DefaultTokenTTL
}

// CreateAPIToken creates a token for the caller, or (admins only) for
// another operator. Its grant must lie within both the caller's and the
// owner's. It returns the token's record and the token, shown once.
func (s *Service) CreateAPIToken(ctx context.Context, p Principal, n NewAPIToken) (APIToken, string, error) {
	owner := p.Operator
	if n.OperatorID != "" && n.OperatorID != owner.ID {
		if !p.Can(PermAdmin, "") {
			return APIToken{}, "", fmt.Errorf("create a token for another operator: %w", ErrForbidden)
		}
		o, err := s.store.OperatorByID(ctx, n.OperatorID)
		if err != nil {
			return APIToken{}, "", fmt.Errorf("token owner %s: %w", n.OperatorID, err)
		}
		owner = o
	}
	name := strings.TrimSpace(n.Name)
	if name == "" || utf8.RuneCountInString(name) > maxTokenName || !utf8.ValidString(name) ||
		strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return APIToken{}, "", fmt.Errorf("%w: name must be 1 to %d printable characters", ErrInvalidInput, maxTokenName)
	}
	tenants, err := checkGrant(n.Role, n.Tenants, ids.Validate)
	if err != nil {
		return APIToken{}, "", err
	}
	ttl := n.TTL
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < MinTokenTTL || ttl > MaxTokenTTL {
		return APIToken{}, "", fmt.Errorf("%w: lifetime must lie between %s and %s", ErrInvalidInput, MinTokenTTL, MaxTokenTTL)
	}
	if !owner.Enabled() {
		return APIToken{}, "", fmt.Errorf("token owner %s is disabled: %w", owner.ID, ErrInvalidInput)
	}
	if !p.within(n.Role, tenants) || !owner.Principal().within(n.Role, tenants) {
		return APIToken{}, "", fmt.Errorf("a token may not grant more than its creator and its owner hold: %w", ErrForbidden)
	}
	id, err := newID("tok-")
	if err != nil {
		return APIToken{}, "", err
	}
	token, hash, err := newToken(TokenPrefix)
	if err != nil {
		return APIToken{}, "", err
	}
	now := s.now()
	t := APIToken{ID: id, OperatorID: owner.ID, Name: name, Role: n.Role, Tenants: tenants, CreatedBy: p.Actor(), CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.store.CreateAPIToken(ctx, t, hash); err != nil {
		return APIToken{}, "", fmt.Errorf("create token: %w", err)
	}
	s.log.InfoContext(ctx, "api token created", "token_id", t.ID, "operator_id", owner.ID, "role", string(t.Role))
	return t, token, nil
}

// AuthenticateToken returns the principal of a live API token. Its scope
// is the token's grant narrowed to what its operator holds now, so
// demoting an operator narrows their tokens at once; a disabled operator's
// tokens, revoked and expired tokens are refused.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (Principal, error) {
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > len(TokenPrefix)+2*tokenBytes {
		return Principal{}, ErrUnauthenticated
	}
	t, o, err := s.store.APITokenByHash(ctx, hashToken(token))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate token: %w", err)
	}
	if !t.RevokedAt.IsZero() || !s.now().Before(t.ExpiresAt) || !o.Enabled() {
		return Principal{}, ErrUnauthenticated
	}
	p := scoped(o, t)
	// A token minted before the deployment required a second factor for
	// admins (or before an admin's factor was reset) must not outlive
	// the rule: its operator is held to enrolment, which a token cannot do.
	if p.EnrolmentOnly, err = s.enrolmentOnly(ctx, o); err != nil {
		return Principal{}, fmt.Errorf("authenticate token: %w", err)
	}
	return p, nil
}

// scoped is the token's grant within its operator's current one.
func scoped(o Operator, t APIToken) Principal {
	p := Principal{Operator: o, TokenID: t.ID, Role: t.Role, Tenants: t.Tenants}
	if o.Role == RoleAdmin {
		return p // an admin's token keeps its own grant
	}
	if t.Role.rank() > o.Role.rank() {
		p.Role = o.Role
	}
	src := t.Tenants
	if t.Role == RoleAdmin {
		src = o.Tenants // an admin token names no tenants: it had them all
	}
	p.Tenants = nil
	for _, tn := range src {
		if slices.Contains(o.Tenants, tn) {
			p.Tenants = append(p.Tenants, tn)
		}
	}
	return p
}

// ListAPITokens lists the caller's tokens, or (admins) anyone's ("" for all).
func (s *Service) ListAPITokens(ctx context.Context, p Principal, operatorID string) ([]APIToken, error) {
	if operatorID != p.Operator.ID && !p.Can(PermAdmin, "") {
		return nil, fmt.Errorf("tokens of another operator: %w", ErrForbidden)
	}
	return s.store.ListAPITokens(ctx, operatorID)
}

// RevokeAPIToken revokes one of the caller's tokens, or (admins) anyone's.
// Another operator's token is ErrNotFound to a non-admin.
func (s *Service) RevokeAPIToken(ctx context.Context, p Principal, id string) (APIToken, error) {
	t, err := s.store.APITokenByID(ctx, id)
	if err != nil {
		return APIToken{}, fmt.Errorf("token %s: %w", id, err)
	}
	if t.OperatorID != p.Operator.ID && !p.Can(PermAdmin, "") {
		return APIToken{}, fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	t, err = s.store.RevokeAPIToken(ctx, id, s.now())
	if err != nil {
		return APIToken{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	s.log.InfoContext(ctx, "api token revoked", "token_id", id)
	return t, nil
}
