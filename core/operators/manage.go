package operators

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// ListOperators lists every operator (admins only).
func (s *Service) ListOperators(ctx context.Context, p Principal) ([]Operator, error) {
	if !p.Can(PermAdmin, "") {
		return nil, fmt.Errorf("list operators: %w", ErrForbidden)
	}
	return s.store.ListOperators(ctx)
}

// Operator returns one operator: any to an admin, oneself to anyone.
func (s *Service) Operator(ctx context.Context, p Principal, id string) (Operator, error) {
	if id != p.Operator.ID && !p.Can(PermAdmin, "") {
		return Operator{}, fmt.Errorf("operator %s: %w", id, ErrNotFound)
	}
	return s.store.OperatorByID(ctx, id)
}

// AddOperator creates an operator on an admin's behalf.
func (s *Service) AddOperator(ctx context.Context, p Principal, n NewOperator) (Operator, error) {
	if !p.Can(PermAdmin, "") {
		return Operator{}, fmt.Errorf("create operator: %w", ErrForbidden)
	}
	return s.CreateOperator(ctx, n)
}

// Update changes an operator; nil fields stay as they are.
type Update struct {
	Role     *Role
	Tenants  *[]string
	Disabled *bool
}

// UpdateOperator changes an operator's role, tenants or enabled state
// (admins only). Disabling ends the operator's sessions; the last enabled
// admin can be neither demoted nor disabled (ErrLastAdmin).
func (s *Service) UpdateOperator(ctx context.Context, p Principal, id string, u Update) (Operator, error) {
	if !p.Can(PermAdmin, "") {
		return Operator{}, fmt.Errorf("update operator: %w", ErrForbidden)
	}
	now := s.now()
	set, err := s.store.AuthSettings(ctx)
	if err != nil {
		return Operator{}, fmt.Errorf("update operator: %w", err)
	}
	o, err := s.store.UpdateOperator(ctx, id, func(o *Operator) error {
		glass := set.SSOOnly && set.BreakGlassEmail != "" && o.Email == set.BreakGlassEmail
		if glass && (u.Role != nil && *u.Role != RoleAdmin || u.Disabled != nil && *u.Disabled) {
			return errBreakGlassKept
		}
		role, tenants := o.Role, o.Tenants
		if u.Role != nil {
			role = *u.Role
		}
		if u.Tenants != nil {
			tenants = *u.Tenants
		} else if u.Role != nil && *u.Role != RoleAdmin && o.Role == RoleAdmin {
			tenants = nil // a demoted admin starts with no tenants
		}
		checked, err := checkGrant(role, tenants, ids.Validate)
		if err != nil {
			return err
		}
		o.Role, o.Tenants = role, checked
		if u.Disabled != nil {
			switch {
			case *u.Disabled && o.Enabled():
				o.DisabledAt = now
			case !*u.Disabled:
				o.DisabledAt = time.Time{}
			}
		}
		return nil
	})
	if err != nil {
		return Operator{}, fmt.Errorf("update operator %s: %w", id, err)
	}
	if !o.Enabled() {
		if _, err := s.store.DeleteOperatorSessions(ctx, id); err != nil {
			return Operator{}, fmt.Errorf("end sessions of disabled operator %s: %w", id, err)
		}
	}
	s.log.InfoContext(ctx, "operator updated", "operator_id", id, "role", string(o.Role), "enabled", o.Enabled())
	return o, nil
}

// ResetPassword sets a new password for oneself or (admins) anyone. Changing
// one's own needs the current password too (ErrWrongPassword otherwise), so
// a session or API token left open cannot take the account over; a wrong one
// counts as a failed login of the account (the same throttle).
func (s *Service) ResetPassword(ctx context.Context, p Principal, id, currentPassword, password string) error {
	if id != p.Operator.ID && !p.Can(PermAdmin, "") {
		return fmt.Errorf("operator %s: %w", id, ErrNotFound)
	}
	if err := checkPassword(password); err != nil {
		return err
	}
	if id == p.Operator.ID {
		if err := s.checkCurrentPassword(ctx, p.Operator.Email, currentPassword); err != nil {
			return err
		}
	}
	if _, err := s.store.OperatorByID(ctx, id); err != nil {
		return fmt.Errorf("operator %s: %w", id, err)
	}
	hash, err := s.hash(password)
	if err != nil {
		return err
	}
	if err := s.store.SetPassword(ctx, id, hash); err != nil {
		return fmt.Errorf("reset password of %s: %w", id, err)
	}
	s.log.InfoContext(ctx, "operator password reset", "operator_id", id)
	return nil
}

// checkCurrentPassword verifies an operator's own password under the login
// throttle of their account.
func (s *Service) checkCurrentPassword(ctx context.Context, email, password string) error {
	keys := s.throttleKeys(email, "")
	if err := s.checkThrottle(ctx, keys); err != nil {
		return err
	}
	_, err := s.verify(ctx, email, password)
	if errors.Is(err, ErrInvalidCredentials) {
		if ferr := s.recordFailure(ctx, keys); ferr != nil {
			return ferr
		}
		return ErrWrongPassword
	}
	if err != nil {
		return err
	}
	return s.resetFailures(ctx, keys)
}

// SignOutEverywhere ends every session of oneself or (admins) anyone.
func (s *Service) SignOutEverywhere(ctx context.Context, p Principal, id string) (int, error) {
	if id != p.Operator.ID && !p.Can(PermAdmin, "") {
		return 0, fmt.Errorf("operator %s: %w", id, ErrNotFound)
	}
	if _, err := s.store.OperatorByID(ctx, id); err != nil {
		return 0, fmt.Errorf("operator %s: %w", id, err)
	}
	n, err := s.store.DeleteOperatorSessions(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("sign out %s: %w", id, err)
	}
	return n, nil
}
