package operators

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// Federated sign-in errors.
var (
	// ErrNoRole: none of the person's groups maps to a role; nothing is
	// created.
	ErrNoRole = errors.New("none of your groups grants a role in RXC")
	// ErrFederationRefused: the identity provider's answer was refused
	// (state, nonce, code, token signature, issuer, audience or expiry).
	ErrFederationRefused = errors.New("single sign-on refused")
	// ErrPasswordLoginDisabled: the deployment is SSO-only and the account
	// is not the break-glass account.
	ErrPasswordLoginDisabled = errors.New("password sign-in is disabled: sign in with single sign-on")
)

// ExternalPasswordHash is stored for operators created by single sign-on:
// no password verifies against it (it is not a hash the hasher produces),
// so they cannot sign in with a password until an admin sets one. Stores
// report it as Operator.External.
const ExternalPasswordHash = "!sso"

// GroupRule maps one identity-provider group to a role and, for operators
// and viewers, the tenants granted.
type GroupRule struct {
	Group   string
	Role    Role
	Tenants []string
}

// GroupMap is the OIDC_GROUP_MAP: the rules in order.
type GroupMap []GroupRule

// ParseGroupMap reads "group=role" and "group=role:t1|t2" entries,
// comma-separated.
func ParseGroupMap(s string) (GroupMap, error) {
	var out GroupMap
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		group, rest, ok := strings.Cut(entry, "=")
		group = strings.TrimSpace(group)
		if !ok || group == "" {
			return nil, fmt.Errorf("%w: group map entry %q is not group=role or group=role:tenant1|tenant2", ErrInvalidInput, entry)
		}
		role, tenants, _ := strings.Cut(rest, ":")
		r := Role(strings.TrimSpace(role))
		if !r.Valid() {
			return nil, fmt.Errorf("%w: group map entry %q: role must be admin, operator or viewer", ErrInvalidInput, entry)
		}
		rule := GroupRule{Group: group, Role: r}
		if tenants != "" {
			for _, t := range strings.Split(tenants, "|") {
				t = strings.TrimSpace(t)
				if err := ids.Validate(t); err != nil {
					return nil, fmt.Errorf("%w: group map entry %q: tenant %q", ErrInvalidInput, entry, t)
				}
				rule.Tenants = append(rule.Tenants, t)
			}
		}
		out = append(out, rule)
	}
	return out, nil
}

// Resolve returns the role and tenants the groups grant: the highest role
// any group maps to, with the tenants of every matching rule of that role
// (none for an admin). ok is false when no group maps to a role.
func (m GroupMap) Resolve(groups []string) (role Role, tenants []string, ok bool) {
	for _, rule := range m {
		if !slices.Contains(groups, rule.Group) {
			continue
		}
		switch {
		case !ok || rule.Role.rank() > role.rank():
			role, tenants, ok = rule.Role, slices.Clone(rule.Tenants), true
		case rule.Role == role:
			tenants = append(tenants, rule.Tenants...)
		}
	}
	if !ok {
		return "", nil, false
	}
	if role == RoleAdmin {
		return role, nil, true
	}
	slices.Sort(tenants)
	return role, slices.Compact(tenants), true
}

// Identity is a person as the identity provider vouched for them in a
// validated ID token.
type Identity struct {
	Issuer, Subject string
	Email           string
	// EmailVerified is false only when the provider said so explicitly.
	EmailVerified bool
	Groups        []string
}

// SignInFederated signs a person in from a validated ID token: the
// operator with that e-mail is created, or updated, with the role and
// tenants their groups map to (ErrNoRole, nothing created or changed, when
// none does), and a session opens as for a password login. A disabled
// operator stays disabled (ErrInvalidCredentials).
func (s *Service) SignInFederated(ctx context.Context, id Identity, groups GroupMap) (Operator, string, time.Time, error) {
	if !id.EmailVerified {
		return Operator{}, "", time.Time{}, fmt.Errorf("%w: the provider says the e-mail address is not verified", ErrFederationRefused)
	}
	email, err := NormalizeEmail(id.Email)
	if err != nil {
		return Operator{}, "", time.Time{}, fmt.Errorf("%w: the ID token carries no usable e-mail address", ErrFederationRefused)
	}
	role, tenants, ok := groups.Resolve(id.Groups)
	if !ok {
		return Operator{}, "", time.Time{}, ErrNoRole
	}
	o, _, err := s.store.OperatorByEmail(ctx, email)
	switch {
	case errors.Is(err, ErrNotFound):
		nid, err := newID("op-")
		if err != nil {
			return Operator{}, "", time.Time{}, err
		}
		o = Operator{ID: nid, Email: email, Role: role, Tenants: tenants, CreatedAt: s.now()}
		if err := s.store.CreateOperator(ctx, o, ExternalPasswordHash); err != nil {
			return Operator{}, "", time.Time{}, fmt.Errorf("sso: create operator: %w", err)
		}
		s.log.InfoContext(ctx, "operator created by single sign-on", "operator_id", o.ID, "role", string(role))
	case err != nil:
		return Operator{}, "", time.Time{}, fmt.Errorf("sso: %w", err)
	default:
		if !o.Enabled() {
			return Operator{}, "", time.Time{}, ErrInvalidCredentials
		}
		if o.Role != role || !slices.Equal(o.Tenants, tenants) {
			if glass, err := s.isBreakGlass(ctx, o.Email); err != nil {
				return Operator{}, "", time.Time{}, fmt.Errorf("sso: %w", err)
			} else if glass && role != RoleAdmin {
				return Operator{}, "", time.Time{}, fmt.Errorf("%w: the identity provider's groups would demote the break-glass account; it signs in with its password", ErrFederationRefused)
			}
			o, err = s.store.UpdateOperator(ctx, o.ID, func(op *Operator) error {
				op.Role, op.Tenants = role, tenants
				return nil
			})
			if err != nil {
				return Operator{}, "", time.Time{}, fmt.Errorf("sso: update operator: %w", err)
			}
		}
	}
	token, expires, err := s.startSession(ctx, o)
	if err != nil {
		return Operator{}, "", time.Time{}, fmt.Errorf("sso: %w", err)
	}
	s.log.InfoContext(ctx, "operator signed in by single sign-on", "operator_id", o.ID)
	return o, token, expires, nil
}
