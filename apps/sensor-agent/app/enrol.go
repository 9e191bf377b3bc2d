package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// enrolled loads the state or enrols with the claim code.
func (a *Agent) enrolled(ctx context.Context) (*sensorclient.State, error) {
	st, err := a.dir.Load()
	switch {
	case err == nil && st.RevokedAt == nil:
		if a.cfg.ClaimCode != "" {
			a.log.Info("state directory already holds an enrolled sensor; the claim code is not used", logkey.Sensor, st.SensorID)
		}
		a.log.Info("resuming sensor from state", logkey.Sensor, st.SensorID, logkey.Tenant, st.TenantID, "state_dir", a.dir.Path())
		return st, nil
	case err == nil && a.cfg.ClaimCode == "":
		return nil, fmt.Errorf("sensor %s in %s was revoked: enrol again with a new claim code: %w", st.SensorID, a.dir.Path(), ErrRevoked)
	case err != nil && !errors.Is(err, sensorclient.ErrNoState):
		return nil, fmt.Errorf("state directory %s: %w", a.dir.Path(), err)
	}

	red, err := a.redemption(ctx)
	if err != nil {
		return nil, err
	}
	st, err = retry(ctx, a, "enrol", red.ExpiresAt, func(ctx context.Context) (*sensorclient.State, error) {
		return a.enroller.EnrollIn(ctx, a.dir, red)
	})
	if err != nil {
		if errors.Is(err, sensorclient.ErrUnauthorized) {
			_ = a.dir.ClearRedemption()
			return nil, fmt.Errorf("the control plane refused the enrolment token (expired or used): redeem a new claim code: %w", err)
		}
		return nil, err
	}
	if err := a.dir.Save(st); err != nil {
		return nil, err
	}
	if err := a.dir.ClearRedemption(); err != nil {
		a.log.Warn("remove redemption file", logkey.Error, err)
	}
	a.log.Info("sensor enrolled", logkey.Sensor, st.SensorID, logkey.Tenant, st.TenantID, "serial", st.Serial,
		"not_after", st.NotAfter, "nats", st.NATS != nil, "grpc", st.GRPCAddress)
	return st, nil
}

// redemption returns the redemption of an interrupted enrolment that has
// not expired, or redeems the claim code and keeps the answer on disk, so
// a restart before the enrolment completes does not spend the code twice.
func (a *Agent) redemption(ctx context.Context) (sensorclient.Redemption, error) {
	red, err := a.dir.LoadRedemption()
	switch {
	case err == nil && time.Now().Before(red.ExpiresAt):
		a.log.Info("resuming an interrupted enrolment", logkey.Sensor, red.SensorID)
		return red, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return red, err
	}
	if a.cfg.ClaimCode == "" {
		return red, fmt.Errorf("no enrolled sensor in %s: pass --claim-code (or RXC_CLAIM_CODE) for the first run", a.dir.Path())
	}
	red, err = retry(ctx, a, "redeem claim code", time.Time{}, func(ctx context.Context) (sensorclient.Redemption, error) {
		return a.enroller.Redeem(ctx, a.cfg.ClaimCode, a.cfg.Hostname)
	})
	if errors.Is(err, sensorclient.ErrInvalidClaimCode) {
		return red, errors.New("the control plane refused the claim code: it is unknown, expired or already used")
	}
	if err != nil {
		return red, err
	}
	if err := a.dir.SaveRedemption(red); err != nil {
		return red, err
	}
	a.log.Info("claim code redeemed", logkey.Sensor, red.SensorID, logkey.Tenant, red.TenantID)
	return red, nil
}

// retry calls fn until it succeeds, fails for good, ctx ends or until
// passes (when set), pausing with backoff after retryable failures.
func retry[T any](ctx context.Context, a *Agent, what string, until time.Time, fn func(context.Context) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := fn(ctx)
		if err == nil || !sensorclient.Retryable(err) || (!until.IsZero() && time.Now().After(until)) {
			return v, err
		}
		if attempt == 0 || attempt%10 == 0 {
			a.log.Warn(what+" failed; retrying", logkey.Error, err, "attempt", attempt+1)
		}
		pause := max(a.cfg.Backoff.Delay(attempt), sensorclient.RetryAfter(err))
		if !backoff.Sleep(ctx, pause) {
			return v, ctx.Err()
		}
	}
}
