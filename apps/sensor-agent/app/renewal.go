package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// ensureCertificate renews before connecting when the certificate cannot
// be used: it does not match its key (an interrupted renewal) or has
// expired. A certificate that is merely due is renewed by renewLoop, so a
// control plane that is down does not keep the sensor from starting.
func (a *Agent) ensureCertificate(ctx context.Context) error {
	_, err := a.st.TLSCertificate()
	switch {
	case err == nil && time.Now().Before(a.st.NotAfter):
		return nil
	case err != nil && !errors.Is(err, sensorclient.ErrKeyMismatch):
		return fmt.Errorf("state directory %s: %w", a.dir.Path(), err)
	case err == nil:
		err = errors.New("certificate expired")
	}
	a.log.Info("renewing the certificate before connecting", "reason", err.Error())
	if err := a.renew(ctx); err != nil {
		if errors.Is(err, sensorclient.ErrUnauthorized) {
			return a.revoked(err)
		}
		return err
	}
	return nil
}

// renewLoop renews the certificate when due until ctx ends or the sensor is
// found revoked.
func (a *Agent) renewLoop(ctx context.Context) error {
	for {
		due := a.current().RenewalDue(time.Now())
		wait := max(time.Until(due), minRenewPause)
		a.log.Debug("certificate renewal scheduled", "at", time.Now().Add(wait).UTC())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		err := a.renew(ctx)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, sensorclient.ErrUnauthorized):
			return a.revoked(err)
		default:
			// Not transient (retry gave up), e.g. a refused CSR: the
			// current certificate still works, so keep trying slowly.
			a.log.Error("certificate renewal failed; trying again later", logkey.Error, err, "not_after", a.current().NotAfter)
			if !a.cfg.Backoff.Wait(ctx, longestPause) {
				return nil
			}
		}
	}
}

// renew obtains, saves and starts using a new certificate, retrying
// transient failures with backoff.
func (a *Agent) renew(ctx context.Context) error {
	a.credMu.Lock()
	defer a.credMu.Unlock()
	a.mu.Lock()
	cur := a.st
	a.mu.Unlock()
	next, err := retry(ctx, a, "certificate renewal", time.Time{}, func(ctx context.Context) (*sensorclient.State, error) {
		return a.enroller.RenewIn(ctx, a.dir, cur)
	})
	if err != nil {
		return err
	}
	return a.adopt(next)
}

// adopt saves a renewed state, ends the renewal's journal and switches the
// gRPC client to it.
func (a *Agent) adopt(next *sensorclient.State) error {
	if err := a.dir.Save(next); err != nil {
		return err
	}
	if err := a.dir.ClearRenewal(); err != nil {
		a.log.Warn("remove the renewal journal", logkey.Error, err)
	}
	a.mu.Lock()
	a.st = next
	g, cmds := a.grpc, a.cmds
	a.mu.Unlock()
	// A renewal hands out NATS credentials with a later expiry: the next
	// reconnection (at the latest when the server closes the connection
	// of an expired JWT) presents them.
	if cmds != nil && len(next.Creds) > 0 {
		if err := cmds.SetCreds(next.Creds); err != nil {
			return err
		}
	}
	if g != nil {
		cert, err := next.TLSCertificate()
		if err != nil {
			return err
		}
		if err := g.SetCertificate(cert); err != nil {
			return err
		}
	}
	a.log.Info("certificate renewed", "serial", next.Serial, "not_after", next.NotAfter)
	return nil
}

// probe settles whether a refusal (gRPC PermissionDenied, NATS auth error)
// means the sensor was revoked, by asking the control plane for a new
// certificate: refused → revoked (ErrRevoked); granted → the old
// certificate had been replaced and the new one is in use (nil); the
// control plane unreachable → undecided, retry later (nil).
func (a *Agent) probe(ctx context.Context, cause error) error {
	a.credMu.Lock()
	defer a.credMu.Unlock()
	a.mu.Lock()
	cur := a.st
	a.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, sensorclient.DefaultHTTPTimeout)
	defer cancel()
	next, err := a.enroller.RenewIn(pctx, a.dir, cur)
	switch {
	case err == nil:
		a.log.Info("the control plane still accepts the sensor; continuing with a fresh certificate", "refusal", cause.Error())
		return a.adopt(next)
	case errors.Is(err, sensorclient.ErrUnauthorized):
		return a.revoked(fmt.Errorf("%w (renewal: %w)", cause, err))
	default:
		a.log.Warn("could not ask the control plane whether the sensor is revoked; retrying later", logkey.Error, err)
		return nil
	}
}

// revoked records the revocation in the state directory and returns
// ErrRevoked.
func (a *Agent) revoked(cause error) error {
	a.mu.Lock()
	st := a.st.Clone()
	a.mu.Unlock()
	now := time.Now().UTC()
	st.RevokedAt = &now
	if err := a.dir.Save(st); err != nil {
		a.log.Warn("record revocation in state", logkey.Error, err)
	}
	return fmt.Errorf("%w: %w", ErrRevoked, cause)
}
