package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// ClaimStore persists claim codes (as hashes).
type ClaimStore interface {
	CreateClaimCode(ctx context.Context, c ClaimCode, codeHash []byte) error
	// ClaimCodes lists a tenant's codes, newest first.
	ClaimCodes(ctx context.Context, tenantID string) ([]ClaimCode, error)
	// ClaimCode returns one claim code (never the code), or ErrNotFound.
	ClaimCode(ctx context.Context, id string) (ClaimCode, error)
	// RevokeClaimCode marks a code revoked; repeats are no-ops, unknown ids
	// give ErrNotFound and used codes ErrConflict.
	RevokeClaimCode(ctx context.Context, id string, at time.Time) error
}

// RedeemStore performs a redemption atomically.
type RedeemStore interface {
	// Redeem, in one transaction, consumes the unused, unrevoked, unexpired
	// code with r.CodeHash, creates sensor r.SensorID in state pending in
	// the code's tenant (named after the code's sensor name, else the
	// hostname, else the id) and stores the enrolment token hash. Any
	// unusable code gives ErrInvalidClaimCode.
	Redeem(ctx context.Context, r RedeemRecord) (Sensor, error)
}

// RedeemRecord is what a redemption writes.
type RedeemRecord struct {
	CodeHash       []byte
	SensorID       string
	Hostname       string
	TokenHash      []byte
	TokenExpiresAt time.Time
	At             time.Time
}

// Redemption is what a sensor gets for a valid claim code.
type Redemption struct {
	SensorID        string
	TenantID        string
	EnrollmentToken string
	ExpiresAt       time.Time
}

const (
	maxSensorName = 200
	maxHostname   = 253
	maxIssuer     = 320
)

// IssueClaimCode creates a one-time code for tenantID. ttl 0 means 24h;
// otherwise it must lie between one minute and 30 days. The clear code is
// returned once and never stored.
func (s *Claims) IssueClaimCode(ctx context.Context, tenantID string, ttl time.Duration, sensorName, issuedBy string) (ClaimCode, string, error) {
	if ttl == 0 {
		ttl = DefaultClaimCodeTTL
	}
	if ttl < MinClaimCodeTTL || ttl > MaxClaimCodeTTL {
		return ClaimCode{}, "", fmt.Errorf("%w: claim code lifetime %s outside [%s, %s]", ErrInvalidInput, ttl, MinClaimCodeTTL, MaxClaimCodeTTL)
	}
	sensorName = strings.TrimSpace(sensorName)
	if err := validateLabel("sensor name", sensorName, maxSensorName); err != nil {
		return ClaimCode{}, "", err
	}
	if err := validateLabel("issuer", issuedBy, maxIssuer); err != nil {
		return ClaimCode{}, "", err
	}
	if _, err := readValid(ctx, "tenant id", tenantID, s.store.Tenant); err != nil {
		return ClaimCode{}, "", fmt.Errorf("issue claim code: %w", err)
	}
	code, err := NewClaimCode()
	if err != nil {
		return ClaimCode{}, "", err
	}
	hash, err := HashClaimCode(code)
	if err != nil {
		return ClaimCode{}, "", err
	}
	id, err := NewUUID()
	if err != nil {
		return ClaimCode{}, "", err
	}
	now := s.now()
	c := ClaimCode{ID: id, TenantID: tenantID, SensorName: sensorName, ExpiresAt: now.Add(ttl), CreatedAt: now, CreatedBy: issuedBy}
	if err := s.store.CreateClaimCode(ctx, c, hash); err != nil {
		return ClaimCode{}, "", fmt.Errorf("issue claim code: %w", err)
	}
	s.log.InfoContext(ctx, "claim code issued", logkey.Tenant, tenantID, "claim_code_id", id, "expires_at", c.ExpiresAt)
	return c, code, nil
}

// ListClaimCodes returns a tenant's claim codes (never the codes themselves).
func (s *Claims) ListClaimCodes(ctx context.Context, tenantID string) ([]ClaimCode, error) {
	if _, err := readValid(ctx, "tenant id", tenantID, s.store.Tenant); err != nil {
		return nil, err
	}
	return s.store.ClaimCodes(ctx, tenantID)
}

// ClaimCode returns one claim code's record (never the code itself); the
// API resolves its tenant before letting anyone act on it.
func (s *Claims) ClaimCode(ctx context.Context, id string) (ClaimCode, error) {
	if err := validateID("claim code id", id); err != nil {
		return ClaimCode{}, err
	}
	c, err := s.store.ClaimCode(ctx, id)
	if err != nil {
		return ClaimCode{}, fmt.Errorf("claim code %s: %w", id, err)
	}
	return c, nil
}

// RevokeClaimCode makes a code unusable. Unknown ids give ErrNotFound.
func (s *Claims) RevokeClaimCode(ctx context.Context, id string) error {
	if err := validateID("claim code id", id); err != nil {
		return err
	}
	if err := s.store.RevokeClaimCode(ctx, id, s.now()); err != nil {
		return fmt.Errorf("revoke claim code: %w", err)
	}
	s.log.InfoContext(ctx, "claim code revoked", "claim_code_id", id)
	return nil
}

// RedeemClaimCode consumes a code and creates a pending sensor with a
// single-use enrolment token. Unknown, malformed, expired, used and revoked
// codes all give the same ErrInvalidClaimCode.
func (s *Claims) RedeemClaimCode(ctx context.Context, code, hostname string) (Redemption, error) {
	hash, err := HashClaimCode(code)
	if err != nil {
		return Redemption{}, ErrInvalidClaimCode
	}
	hostname = strings.TrimSpace(hostname)
	if err := validateLabel("hostname", hostname, maxHostname); err != nil {
		return Redemption{}, err
	}
	sensorID, err := newSensorID()
	if err != nil {
		return Redemption{}, err
	}
	token, tokenHash, err := newToken()
	if err != nil {
		return Redemption{}, err
	}
	now := s.now()
	expires := now.Add(s.enrollmentTTL)
	sensor, err := s.store.Redeem(ctx, RedeemRecord{
		CodeHash: hash, SensorID: sensorID, Hostname: hostname,
		TokenHash: tokenHash, TokenExpiresAt: expires, At: now,
	})
	if errors.Is(err, ErrInvalidClaimCode) {
		return Redemption{}, ErrInvalidClaimCode
	}
	if err != nil {
		return Redemption{}, fmt.Errorf("redeem claim code: %w", err)
	}
	s.log.InfoContext(ctx, "claim code redeemed", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID)
	return Redemption{SensorID: sensor.ID, TenantID: sensor.TenantID, EnrollmentToken: token, ExpiresAt: expires}, nil
}
