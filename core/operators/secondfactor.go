package operators

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Second-factor errors.
var (
	// ErrSecondFactorRequired: the password was right and the account has
	// a second factor; the login must carry a TOTP or recovery code.
	ErrSecondFactorRequired = errors.New("a second factor is required")
	// ErrInvalidSecondFactor: the TOTP or recovery code is wrong, used or
	// replayed (a TOTP of a step already used).
	ErrInvalidSecondFactor = errors.New("the second factor is wrong, used or replayed")
	// ErrSecondFactorUnavailable: no key to seal second-factor secrets is
	// configured, so none can be enrolled.
	ErrSecondFactorUnavailable = errors.New("second factors are not configured on this control plane")
	// ErrEnrolmentRequired: the deployment requires a second factor for
	// admins and this admin has none yet; only enrolment is allowed.
	ErrEnrolmentRequired = errors.New("enrol a second factor first: this deployment requires one for admins")
	// ErrReplayed is the store's answer to a TOTP step at or before the
	// last one used.
	ErrReplayed = errors.New("time step already used")
)

// RecoveryCodes is how many one-time recovery codes an enrolment gives.
const RecoveryCodes = 10

// SecretSealer encrypts secrets at rest (AES-256-GCM in production, see
// adapters/seal); aad binds a sealed value to its owner.
type SecretSealer interface {
	Seal(plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

// TOTPRecord is an operator's stored TOTP state; secrets are sealed.
type TOTPRecord struct {
	Pending  []byte // sealed secret of an enrolment not yet confirmed
	Active   []byte // sealed secret in use; nil while TOTP is off
	LastStep int64  // the last time step a code was accepted for
}

// AuthSettings are the deployment's sign-in rules an admin sets.
type AuthSettings struct {
	// RequireAdminSecondFactor: admins without a second factor may only
	// enrol one (every other request answers ErrEnrolmentRequired).
	RequireAdminSecondFactor bool
	// SSOOnly refuses password sign-in (ErrPasswordLoginDisabled) except
	// for BreakGlassEmail, the local account kept for when the identity
	// provider is down.
	SSOOnly         bool
	BreakGlassEmail string
}

// SecondFactorStore persists second factors and the sign-in settings.
type SecondFactorStore interface {
	// SetPendingTOTP stores a sealed secret awaiting confirmation,
	// replacing any earlier one; ErrNotFound for an unknown operator.
	SetPendingTOTP(ctx context.Context, operatorID string, sealed []byte) error
	// TOTP returns the operator's TOTP state; ErrNotFound when unknown.
	TOTP(ctx context.Context, operatorID string) (TOTPRecord, error)
	// EnableTOTP makes the pending secret (it must still equal pending)
	// the active one, records step as used and replaces the recovery
	// codes by these hashes; ErrConflict when the pending secret changed.
	EnableTOTP(ctx context.Context, operatorID string, pending []byte, step int64, recoveryHashes [][]byte) error
	// UseTOTPStep records step as used, atomically: ErrReplayed when it is
	// not after the last step used.
	UseTOTPStep(ctx context.Context, operatorID string, step int64) error
	// UseRecoveryCode marks the unused code with this hash used at at,
	// atomically; ErrNotFound when there is none.
	UseRecoveryCode(ctx context.Context, operatorID string, hash []byte, at time.Time) error
	// DisableTOTP removes the operator's TOTP secrets and recovery codes.
	DisableTOTP(ctx context.Context, operatorID string) error
	// AuthSettings returns the settings (zero values when never set).
	AuthSettings(ctx context.Context) (AuthSettings, error)
	// SetAuthSettings stores the settings.
	SetAuthSettings(ctx context.Context, s AuthSettings) error
}

// Credentials are what a login presents.
type Credentials struct {
	Email, Password string
	// TOTP or RecoveryCode: the second factor, for accounts that have one.
	TOTP, RecoveryCode string
	// Address is the client's, for throttling.
	Address string
}

// TOTPEnrolment is a new secret, shown once.
type TOTPEnrolment struct {
	Secret     string // base32
	OTPAuthURL string
}

func totpAAD(operatorID string) []byte { return []byte("rxc-totp:" + operatorID) }

// BeginTOTP creates a new TOTP secret for the principal's own account and
// returns it (shown once); it takes effect when ConfirmTOTP sees a code of
// it. An active second factor stays in force until then. Sessions only:
// an API token cannot enrol its operator.
func (s *Service) BeginTOTP(ctx context.Context, p Principal) (TOTPEnrolment, error) {
	if p.TokenID != "" {
		return TOTPEnrolment{}, fmt.Errorf("%w: enrol a second factor from a signed-in session, not with an API token", ErrForbidden)
	}
	if s.sealer == nil {
		return TOTPEnrolment{}, ErrSecondFactorUnavailable
	}
	raw := make([]byte, totpSecretSize)
	if _, err := rand.Read(raw); err != nil {
		return TOTPEnrolment{}, fmt.Errorf("totp secret: %w", err)
	}
	sealed, err := s.sealer.Seal(raw, totpAAD(p.Operator.ID))
	if err != nil {
		return TOTPEnrolment{}, fmt.Errorf("totp secret: %w", err)
	}
	if err := s.store.SetPendingTOTP(ctx, p.Operator.ID, sealed); err != nil {
		return TOTPEnrolment{}, fmt.Errorf("begin totp: %w", err)
	}
	secret := totpEncoding.EncodeToString(raw)
	s.log.InfoContext(ctx, "totp enrolment started", "operator_id", p.Operator.ID)
	return TOTPEnrolment{Secret: secret, OTPAuthURL: otpauthURL(s.issuer, p.Operator.Email, secret)}, nil
}

// ConfirmTOTP enables the pending TOTP secret when code is one of its
// current codes, and returns the new one-time recovery codes (shown once,
// stored hashed; earlier ones stop working). Replacing a factor that is on
// also takes currentCode, a current code of that factor: a session left open
// cannot swap the account's factor for its own (an admin resets a lost one).
// Wrong codes count as failed logins of the account.
func (s *Service) ConfirmTOTP(ctx context.Context, p Principal, code, currentCode string) ([]string, error) {
	if p.TokenID != "" {
		return nil, fmt.Errorf("%w: enrol a second factor from a signed-in session, not with an API token", ErrForbidden)
	}
	if s.sealer == nil {
		return nil, ErrSecondFactorUnavailable
	}
	keys := s.throttleKeys(p.Operator.Email, "")
	if err := s.checkThrottle(ctx, keys); err != nil {
		return nil, err
	}
	rec, err := s.store.TOTP(ctx, p.Operator.ID)
	if err != nil {
		return nil, fmt.Errorf("confirm totp: %w", err)
	}
	if rec.Pending == nil {
		return nil, fmt.Errorf("%w: no TOTP enrolment in progress; start one first", ErrInvalidInput)
	}
	if rec.Active != nil {
		if currentCode == "" {
			return nil, fmt.Errorf("%w: two-factor authentication is on: send currentCode, a current code of it, to replace it (an admin can reset a lost one)", ErrInvalidInput)
		}
		active, err := s.sealer.Open(rec.Active, totpAAD(p.Operator.ID))
		if err != nil {
			return nil, fmt.Errorf("confirm totp: %w", err)
		}
		if _, ok := matchTOTP(active, currentCode, s.now()); !ok {
			if err := s.recordFailure(ctx, keys); err != nil {
				return nil, err
			}
			return nil, ErrInvalidSecondFactor
		}
	}
	key, err := s.sealer.Open(rec.Pending, totpAAD(p.Operator.ID))
	if err != nil {
		return nil, fmt.Errorf("confirm totp: %w", err)
	}
	step, ok := matchTOTP(key, code, s.now())
	if !ok {
		if err := s.recordFailure(ctx, keys); err != nil {
			return nil, err
		}
		return nil, ErrInvalidSecondFactor
	}
	codes := make([]string, RecoveryCodes)
	hashes := make([][]byte, RecoveryCodes)
	for i := range codes {
		if codes[i], err = newRecoveryCode(); err != nil {
			return nil, err
		}
		hashes[i] = hashToken(normalizeRecoveryCode(codes[i]))
	}
	if err := s.store.EnableTOTP(ctx, p.Operator.ID, rec.Pending, step, hashes); err != nil {
		return nil, fmt.Errorf("confirm totp: %w", err)
	}
	s.log.InfoContext(ctx, "totp enabled", "operator_id", p.Operator.ID)
	return codes, nil
}

// ResetSecondFactor removes an operator's TOTP and recovery codes (an
// admin's remedy for a lost device); the operator signs in with the
// password alone until they enrol again.
func (s *Service) ResetSecondFactor(ctx context.Context, p Principal, id string) error {
	if !p.Can(PermAdmin, "") {
		return fmt.Errorf("operator %s: %w", id, ErrForbidden)
	}
	if _, err := s.store.OperatorByID(ctx, id); err != nil {
		return fmt.Errorf("operator %s: %w", id, err)
	}
	if err := s.store.DisableTOTP(ctx, id); err != nil {
		return fmt.Errorf("reset second factor %s: %w", id, err)
	}
	s.log.InfoContext(ctx, "second factor reset", "operator_id", id, "by", p.Operator.ID)
	return nil
}

// AuthSettings returns the sign-in settings (admins).
func (s *Service) AuthSettings(ctx context.Context, p Principal) (AuthSettings, error) {
	if !p.Can(PermAdmin, "") {
		return AuthSettings{}, ErrForbidden
	}
	return s.store.AuthSettings(ctx)
}

// SetAuthSettings changes the sign-in settings (admins). SSO-only needs a
// break-glass account: an enabled admin with a password.
func (s *Service) SetAuthSettings(ctx context.Context, p Principal, set AuthSettings) error {
	if !p.Can(PermAdmin, "") {
		return ErrForbidden
	}
	if set.BreakGlassEmail != "" {
		e, err := NormalizeEmail(set.BreakGlassEmail)
		if err != nil {
			return fmt.Errorf("%w: break-glass e-mail address", ErrInvalidInput)
		}
		set.BreakGlassEmail = e
	}
	if set.SSOOnly {
		if set.BreakGlassEmail == "" {
			return fmt.Errorf("%w: SSO-only needs a break-glass account (breakGlassEmail)", ErrInvalidInput)
		}
		o, _, err := s.store.OperatorByEmail(ctx, set.BreakGlassEmail)
		if errors.Is(err, ErrNotFound) || err == nil && (o.Role != RoleAdmin || !o.Enabled()) {
			return fmt.Errorf("%w: the break-glass account must be an enabled admin", ErrInvalidInput)
		}
		if err == nil && o.External {
			// Created by single sign-on: no password, so no way in when
			// the identity provider is down, which is what it is for.
			return fmt.Errorf("%w: the break-glass account must have a password (it was created by single sign-on; set one first)", ErrInvalidInput)
		}
		if err != nil {
			return fmt.Errorf("auth settings: %w", err)
		}
	}
	if err := s.store.SetAuthSettings(ctx, set); err != nil {
		return fmt.Errorf("auth settings: %w", err)
	}
	s.log.InfoContext(ctx, "auth settings changed", "by", p.Operator.ID, "require_admin_second_factor", set.RequireAdminSecondFactor, "sso_only", set.SSOOnly)
	return nil
}

// checkSecondFactor verifies the login's TOTP or recovery code for o, whose
// password was right. Wrong codes are failures for the throttle.
func (s *Service) checkSecondFactor(ctx context.Context, o Operator, c Credentials) error {
	if !o.SecondFactor {
		return nil
	}
	switch {
	case c.TOTP != "":
		rec, err := s.store.TOTP(ctx, o.ID)
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if rec.Active == nil || s.sealer == nil {
			return ErrSecondFactorUnavailable
		}
		key, err := s.sealer.Open(rec.Active, totpAAD(o.ID))
		if err != nil {
			return fmt.Errorf("login: totp secret: %w", err)
		}
		step, ok := matchTOTP(key, c.TOTP, s.now())
		if !ok {
			return ErrInvalidSecondFactor
		}
		if err := s.store.UseTOTPStep(ctx, o.ID, step); errors.Is(err, ErrReplayed) {
			s.log.WarnContext(ctx, "replayed totp refused", "operator_id", o.ID)
			return ErrInvalidSecondFactor
		} else if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		return nil
	case c.RecoveryCode != "":
		if len(c.RecoveryCode) > 64 {
			return ErrInvalidSecondFactor
		}
		err := s.store.UseRecoveryCode(ctx, o.ID, hashToken(normalizeRecoveryCode(c.RecoveryCode)), s.now())
		if errors.Is(err, ErrNotFound) {
			return ErrInvalidSecondFactor
		}
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		s.log.InfoContext(ctx, "recovery code used", "operator_id", o.ID)
		return nil
	}
	return ErrSecondFactorRequired
}

// isBreakGlass reports whether email is the break-glass account of an
// SSO-only deployment: the one way in while the identity provider is
// down, which must stay an enabled admin.
func (s *Service) isBreakGlass(ctx context.Context, email string) (bool, error) {
	set, err := s.store.AuthSettings(ctx)
	if err != nil {
		return false, err
	}
	return set.SSOOnly && set.BreakGlassEmail != "" && email == set.BreakGlassEmail, nil
}

// errBreakGlassKept refuses to disable or demote the break-glass account.
var errBreakGlassKept = fmt.Errorf("%w: it is the break-glass account of SSO-only sign-in; name another one (or turn SSO-only off) first", ErrInvalidInput)

// passwordLoginAllowed reports whether SSO-only is on and whether email
// may sign in with a password (SSO-only off, or the break-glass account).
func (s *Service) passwordLoginAllowed(ctx context.Context, email string) (ssoOnly, allowed bool, err error) {
	set, err := s.store.AuthSettings(ctx)
	if err != nil {
		return false, false, fmt.Errorf("login: %w", err)
	}
	if !set.SSOOnly {
		return false, true, nil
	}
	e, err := NormalizeEmail(email)
	return true, err == nil && e == set.BreakGlassEmail, nil
}

// enrolmentOnly reports whether o must enrol a second factor before
// anything else: an admin without one where the settings require it. An
// admin created by single sign-on has no password to protect: the identity
// provider's own second factor is theirs.
func (s *Service) enrolmentOnly(ctx context.Context, o Operator) (bool, error) {
	if o.Role != RoleAdmin || o.SecondFactor || o.External {
		return false, nil
	}
	set, err := s.store.AuthSettings(ctx)
	if err != nil {
		return false, err
	}
	return set.RequireAdminSecondFactor, nil
}

// recoveryAlphabet avoids letters and digits that read alike.
const recoveryAlphabet = "abcdefghjkmnpqrstuvwxyz23456789"

// newRecoveryCode returns a random code like "k7mq-x2pa-9dhw-tr4e"
// (16 characters of a 31-letter alphabet, about 79 bits).
func newRecoveryCode() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("recovery code: %w", err)
	}
	var b strings.Builder
	for i, c := range raw {
		if i > 0 && i%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(recoveryAlphabet[int(c)%len(recoveryAlphabet)])
	}
	return b.String(), nil
}

// normalizeRecoveryCode drops separators and case, so a code typed with or
// without dashes or spaces matches.
func normalizeRecoveryCode(c string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == ' ':
			return -1
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return r
	}, c)
}
