package operators

import (
	"fmt"
	"slices"
)

// Role says what an operator may do on the tenants granted to them.
type Role string

// Roles, from most to least powerful.
const (
	// RoleAdmin may do everything on every tenant, operators included.
	RoleAdmin Role = "admin"
	// RoleOperator may issue commands and claim codes and revoke sensors on
	// the tenants granted, and read them.
	RoleOperator Role = "operator"
	// RoleViewer may only read the tenants granted.
	RoleViewer Role = "viewer"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleOperator || r == RoleViewer }

// rank orders roles for "at most": viewer < operator < admin.
func (r Role) rank() int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleOperator:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// Permission is what a request needs on a tenant.
type Permission int

// Permissions, each implying the ones before it.
const (
	// PermView reads a tenant and what belongs to it.
	PermView Permission = iota + 1
	// PermOperate changes a tenant's fleet: claim codes, commands, revocation.
	PermOperate
	// PermAdmin manages tenants and operators.
	PermAdmin
)

// Principal is who makes a request: an operator signed in with a session,
// or an API token an operator created. Role and Tenants are what the
// request may use: a token's own scope, never more than its operator's.
type Principal struct {
	Operator Operator
	Role     Role
	// Tenants granted; every tenant for an admin.
	Tenants []string
	// TokenID names the API token the request came with; "" for a session.
	TokenID string
	// EnrolmentOnly: an admin without a second factor where the settings
	// require one; such a session sees and may do nothing but enrol.
	EnrolmentOnly bool
}

// Sees reports whether tenantID is visible at all: an object of a tenant the
// principal does not see is answered as if it did not exist.
func (p Principal) Sees(tenantID string) bool {
	if p.EnrolmentOnly {
		return false
	}
	return p.Role == RoleAdmin || slices.Contains(p.Tenants, tenantID)
}

// Can reports whether the principal holds perm on tenantID ("" for actions
// that concern no tenant, such as managing operators).
func (p Principal) Can(perm Permission, tenantID string) bool {
	if p.EnrolmentOnly {
		return false
	}
	switch perm {
	case PermAdmin:
		return p.Role == RoleAdmin
	case PermOperate:
		return p.Sees(tenantID) && (p.Role == RoleAdmin || p.Role == RoleOperator)
	case PermView:
		return p.Sees(tenantID)
	}
	return false
}

// Actor is how audit records and logs name the principal.
func (p Principal) Actor() string { return p.Operator.Email }

// checkGrant validates a role and its tenants; tenant ids are checked by
// the caller's id grammar (validID).
func checkGrant(role Role, tenants []string, validID func(string) error) ([]string, error) {
	if !role.Valid() {
		return nil, fmt.Errorf("%w: role %q (want admin, operator or viewer)", ErrInvalidInput, role)
	}
	if role == RoleAdmin {
		return nil, nil // an admin sees every tenant
	}
	out := make([]string, 0, len(tenants))
	for _, t := range tenants {
		if err := validID(t); err != nil {
			return nil, fmt.Errorf("%w: tenant %q: %v", ErrInvalidInput, t, err)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > maxTenantsPerGrant {
		return nil, fmt.Errorf("%w: at most %d tenants", ErrInvalidInput, maxTenantsPerGrant)
	}
	slices.Sort(out)
	return out, nil
}

// within reports whether a grant (role, tenants) is no more than p holds:
// what p may hand to an API token or another operator.
func (p Principal) within(role Role, tenants []string) bool {
	if role.rank() > p.Role.rank() {
		return false
	}
	if p.Role == RoleAdmin {
		return true
	}
	if role == RoleAdmin {
		return false
	}
	for _, t := range tenants {
		if !slices.Contains(p.Tenants, t) {
			return false
		}
	}
	return true
}
