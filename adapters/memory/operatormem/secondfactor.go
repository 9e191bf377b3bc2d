package operatormem

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/operators"
)

// SetPendingTOTP implements operators.SecondFactorStore.
func (s *Store) SetPendingTOTP(_ context.Context, operatorID string, sealed []byte) error {
	return locked.Update(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) error {
		o.totp.Pending = slices.Clone(sealed)
		return nil
	})
}

// TOTP implements operators.SecondFactorStore.
func (s *Store) TOTP(_ context.Context, operatorID string) (operators.TOTPRecord, error) {
	return locked.Get(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) operators.TOTPRecord {
		r := o.totp
		r.Pending, r.Active = slices.Clone(r.Pending), slices.Clone(r.Active)
		return r
	})
}

// EnableTOTP implements operators.SecondFactorStore.
func (s *Store) EnableTOTP(_ context.Context, operatorID string, pending []byte, step int64, recoveryHashes [][]byte) error {
	return locked.Update(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) error {
		if o.totp.Pending == nil || !bytes.Equal(o.totp.Pending, pending) {
			return operators.ErrConflict
		}
		o.totp = operators.TOTPRecord{Active: o.totp.Pending, LastStep: step}
		o.recovery = map[string]bool{}
		for _, h := range recoveryHashes {
			o.recovery[hex.EncodeToString(h)] = false
		}
		o.SecondFactor = true
		return nil
	})
}

// UseTOTPStep implements operators.SecondFactorStore.
func (s *Store) UseTOTPStep(_ context.Context, operatorID string, step int64) error {
	return locked.Update(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) error {
		if step <= o.totp.LastStep {
			return operators.ErrReplayed
		}
		o.totp.LastStep = step
		return nil
	})
}

// UseRecoveryCode implements operators.SecondFactorStore.
func (s *Store) UseRecoveryCode(_ context.Context, operatorID string, hash []byte, _ time.Time) error {
	return locked.Update(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) error {
		k := hex.EncodeToString(hash)
		if used, ok := o.recovery[k]; !ok || used {
			return operators.ErrNotFound
		}
		o.recovery[k] = true
		return nil
	})
}

// DisableTOTP implements operators.SecondFactorStore.
func (s *Store) DisableTOTP(_ context.Context, operatorID string) error {
	return locked.Update(&s.mu, s.operators, operatorID, operators.ErrNotFound, func(o *operator) error {
		o.totp, o.recovery, o.SecondFactor = operators.TOTPRecord{}, nil, false
		return nil
	})
}

// AuthSettings implements operators.SecondFactorStore.
func (s *Store) AuthSettings(context.Context) (operators.AuthSettings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings, nil
}

// SetAuthSettings implements operators.SecondFactorStore.
func (s *Store) SetAuthSettings(_ context.Context, set operators.AuthSettings) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings = set
	return nil
}
