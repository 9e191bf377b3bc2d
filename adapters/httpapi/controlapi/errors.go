package controlapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/rxc-project/rxc/adapters/oidcsignin"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// Seconds a client should wait before retrying a call that failed on a
// dependency.
const (
	retryDependency  = "5"
	retryProvisioned = "30"
)

// fail answers err as an HTTP problem.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := a.problemFor(w, r, err)
	if n := noteOf(r); n != nil {
		n.detail = string(p.Code)
	}
	problem.Write(w, r, p)
}

// sensorCallerError marks an error answered to a sensor on one of its own
// routes (redeem, enrol, renew), so the answer can depend on who asked.
type sensorCallerError struct{ error }

func (e sensorCallerError) Unwrap() error { return e.error }

// failSensor answers err to a sensor calling one of its own routes.
func (a *API) failSensor(w http.ResponseWriter, r *http.Request, err error) {
	a.fail(w, r, sensorCallerError{err})
}

// problemFor is the one place where core errors become HTTP problems (the
// chat's event stream reuses its code and detail for `error` events). A
// pending NATS revocation is checked first: it wraps the provisioner's
// error, which would otherwise read as an outage.
func (a *API) problemFor(w http.ResponseWriter, r *http.Request, err error) *problem.Problem {
	var (
		p       *problem.Problem
		limited *fleet.RateLimitError
	)
	switch {
	case errors.As(err, &p):
	case a.dbDown(err):
		a.log.Warn("database unavailable", "path", r.URL.Path, logkey.Error, err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeDatabaseUnavailable, "Database unavailable",
			"the control plane's database did not answer; nothing was changed unless the answer to a retry says so, retry later")
	case errors.Is(err, fleet.ErrNATSRevokePending):
		a.log.Warn("sensor revoked locally; nats revocation pending", "path", r.URL.Path, logkey.Error, err)
		w.Header().Set("Retry-After", retryDependency)
		msg := "the sensor is revoked here (certificate deactivated, tokens revoked, live streams closed), but revoking its NATS user failed; repeat this call to retry the NATS part"
		if errors.Is(err, fleet.ErrProvisionerDisabled) {
			msg = "the sensor is revoked here (certificate deactivated, tokens revoked, live streams closed), but NATS provisioning is disabled so its NATS user stays valid; enable provisioning and repeat this call"
		}
		p = problem.New(http.StatusServiceUnavailable, problem.CodeNATSRevokePending, "NATS revocation pending", msg)
	case errors.Is(err, ids.ErrInvalidID):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidID, "Invalid identifier", detail(err))
	case errors.Is(err, fleet.ErrInvalidClaimCode):
		// One answer for unknown, malformed, expired, used and revoked codes.
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidClaimCode, "Invalid claim code",
			"the claim code is not valid: it may be mistyped, expired, already used or revoked")
	case errors.Is(err, fleet.ErrInvalidToken):
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		p = problem.New(http.StatusUnauthorized, problem.CodeInvalidToken, "Invalid token",
			"send a valid, unused and unexpired token as Authorization: Bearer <token>")
	case errors.Is(err, fleet.ErrAgentUpgradeRequired):
		p = problem.New(http.StatusBadRequest, problem.CodeAgentUpgradeRequired, "Sensor agent upgrade required",
			"this control plane renews a certificate only with a proof of possession of the current certificate's key; upgrade the sensor agent (its certificate stays valid until it expires)")
	case errors.Is(err, fleet.ErrInvalidProof):
		p = problem.New(http.StatusForbidden, problem.CodeInvalidProof, "Invalid proof of possession", detail(err))
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		p = problem.New(http.StatusTooManyRequests, problem.CodeRateLimited, "Too many requests", detail(err))
	case errors.Is(err, fleet.ErrInvalidCSR):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidCSR, "Invalid certificate signing request", detail(err))
	case errors.Is(err, fleet.ErrRevoked):
		// The sensor itself is refused its own credentials (403); an
		// operator acting on a revoked sensor meets a state conflict (409).
		status := http.StatusConflict
		if errors.As(err, new(sensorCallerError)) {
			status = http.StatusForbidden
		}
		p = problem.New(status, problem.CodeSensorRevoked, "Sensor revoked", "the sensor is revoked for good; enrol it again with a new claim code")
	case errors.Is(err, fleet.ErrNotEnrolled):
		p = problem.New(http.StatusConflict, problem.CodeSensorNotEnrolled, "Sensor not enrolled", "the sensor redeemed a claim code but has not enrolled yet")
	case errors.Is(err, fleet.ErrTenantNotProvisioned):
		w.Header().Set("Retry-After", retryProvisioned)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeTenantNotProvisioned, "Tenant not provisioned yet",
			"the tenant's NATS account does not exist yet; the control plane creates it in the background, retry later")
	case errors.Is(err, fleet.ErrProvisionerDisabled):
		p = problem.New(http.StatusServiceUnavailable, problem.CodeProvisioningDisabled, "NATS provisioning disabled",
			"NATS provisioning is disabled on this control plane")
	case errors.Is(err, fleet.ErrProvisionerUnavailable):
		a.log.Warn("provisioner unavailable", "path", r.URL.Path, logkey.Error, err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeProvisionerUnavailable, "NATS provisioner unavailable",
			"the NATS provisioner did not complete the request; nothing was consumed, retry later")
	case errors.Is(err, fleet.ErrMessagingDisabled):
		p = problem.New(http.StatusServiceUnavailable, problem.CodeMessagingDisabled, "NATS messaging disabled",
			"NATS messaging is disabled on this control plane, so commands cannot be delivered")
	case errors.Is(err, fleet.ErrMessagingUnavailable):
		a.log.Warn("messaging unavailable", "path", r.URL.Path, logkey.Error, err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeNATSUnavailable, "NATS unavailable",
			"NATS is not reachable: the command was recorded as failed and not delivered; retry later")
	case errors.As(err, new(*operators.ThrottledError)):
		var te *operators.ThrottledError
		errors.As(err, &te)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(te.RetryAfter.Seconds()))))
		p = problem.New(http.StatusTooManyRequests, problem.CodeLoginThrottled, "Too many failed logins",
			"logins for this account or from this address are held back after repeated failures; retry after the time in Retry-After")
	case errors.Is(err, operators.ErrBusy):
		w.Header().Set("Retry-After", "1")
		p = problem.New(http.StatusServiceUnavailable, problem.CodeLoginBusy, "Too many logins at once",
			"the control plane is checking as many passwords as it allows at once; retry in a moment")
	case errors.Is(err, operators.ErrForbidden):
		p = problem.New(http.StatusForbidden, problem.CodeForbidden, "Forbidden", "your role does not allow this action here")
	case errors.Is(err, operators.ErrLastAdmin):
		p = problem.New(http.StatusConflict, problem.CodeLastAdmin, "Last admin", "the last enabled admin cannot be demoted or disabled; make another operator admin first")
	case errors.Is(err, operators.ErrWrongPassword):
		p = problem.New(http.StatusForbidden, problem.CodeWrongPassword, "Wrong current password",
			"changing your own password needs your current one in currentPassword, and it was missing or wrong")
	case errors.Is(err, operators.ErrNoRole):
		p = problem.New(http.StatusForbidden, problem.CodeNoRole, "No role",
			"you signed in at the identity provider, but none of your groups grants a role in RXC; ask an admin to add your group to OIDC_GROUP_MAP")
	case errors.Is(err, operators.ErrFederationRefused):
		p = problem.New(http.StatusUnauthorized, problem.CodeSSORefused, "Single sign-on refused", detail(err))
	case errors.Is(err, oidcsignin.ErrUnavailable):
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeSSOUnavailable, "Identity provider unreachable",
			"the identity provider's discovery document could not be read; retry later or sign in with the break-glass account")
	case errors.Is(err, operators.ErrPasswordLoginDisabled):
		p = problem.New(http.StatusForbidden, problem.CodePasswordLoginDisabled, "Password sign-in disabled",
			"this deployment is SSO-only: sign in with the identity provider")
	case errors.Is(err, operators.ErrSecondFactorRequired):
		p = problem.New(http.StatusUnauthorized, problem.CodeTOTPRequired, "TOTP code required",
			"the account has a second factor: send the current code of your authenticator app in totp, or a recovery code in recoveryCode")
	case errors.Is(err, operators.ErrInvalidSecondFactor):
		p = problem.New(http.StatusUnauthorized, problem.CodeInvalidSecondFactor, "Invalid second factor",
			"the code is wrong, already used, or from a time step already used; wait for the next code")
	case errors.Is(err, operators.ErrSecondFactorUnavailable):
		p = problem.New(http.StatusServiceUnavailable, problem.CodeSecondFactorUnavail, "Second factor unavailable",
			"this control plane has no OPERATOR_SECRET_ENCRYPTION_KEY, so second factors cannot be enrolled or checked")
	case errors.Is(err, operators.ErrEnrolmentRequired):
		p = problem.New(http.StatusForbidden, problem.CodeSecondFactorRequired, "Second factor required",
			"this deployment requires admins to have a second factor: enrol one (POST /api/auth/me/totp, then /api/auth/me/totp/confirm) first")
	case errors.Is(err, operators.ErrInvalidCredentials):
		p = problem.New(http.StatusUnauthorized, problem.CodeInvalidCredentials, "Invalid credentials", "wrong email or password")
	case errors.Is(err, operators.ErrUnauthenticated):
		p = problem.New(http.StatusUnauthorized, problem.CodeUnauthenticated, "Not logged in", "log in first: no valid session")
	case errors.Is(err, fleet.ErrNotFound), errors.Is(err, operators.ErrNotFound):
		p = problem.New(http.StatusNotFound, problem.CodeNotFound, "Not found", detail(err))
	case errors.Is(err, fleet.ErrConflict), errors.Is(err, operators.ErrConflict):
		p = problem.New(http.StatusConflict, problem.CodeConflict, "Conflict", detail(err))
	case errors.Is(err, analytics.ErrChatDisabled):
		p = problem.New(http.StatusServiceUnavailable, problem.CodeChatUnavailable, "Analytics chat unavailable",
			"the analytics chat is disabled, not configured, or its model provider is unreachable")
	case errors.Is(err, analytics.ErrModelUnavailable):
		a.log.Warn("model provider failed", "path", r.URL.Path, logkey.Error, err)
		p = problem.New(http.StatusBadGateway, problem.CodeModelUnavailable, "Model provider unavailable",
			"the model provider did not answer in time or refused the request; retry later")
	case errors.Is(err, analytics.ErrEventsUnavailable):
		p = problem.New(http.StatusServiceUnavailable, problem.CodeEventsUnavailable, "No stored events",
			"event storage is not set up on this control plane yet")
	case errors.Is(err, fleet.ErrInvalidCursor):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidCursor, "Invalid cursor", detail(err))
	case errors.Is(err, fleet.ErrInvalidLimit):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidLimit, "Invalid limit", detail(err))
	case errors.Is(err, fleet.ErrInvalidSort):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidSort, "Invalid sort", detail(err))
	case errors.Is(err, fleet.ErrInvalidLabels):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidLabels, "Invalid labels", detail(err))
	case errors.Is(err, fleet.ErrTenantHasSensors):
		p = problem.New(http.StatusConflict, problem.CodeTenantHasSensors, "Tenant has live sensors", detail(err))
	case errors.Is(err, fleet.ErrDecommissioned):
		p = problem.New(http.StatusConflict, problem.CodeSensorDecommissioned, "Sensor decommissioned", detail(err))
	case errors.Is(err, fleet.ErrBatchTooLarge):
		p = problem.New(http.StatusBadRequest, problem.CodeBatchTooLarge, "Batch too large", detail(err))
	case errors.Is(err, fleet.ErrInvalidInput), errors.Is(err, operators.ErrInvalidInput), errors.Is(err, analytics.ErrInvalidInput), errors.Is(err, audit.ErrInvalidInput):
		p = problem.New(http.StatusBadRequest, problem.CodeInvalidInput, "Invalid input", detail(err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		a.log.Warn("request cancelled or timed out", "path", r.URL.Path, logkey.Error, err)
		p = problem.New(http.StatusServiceUnavailable, problem.CodeTimeout, "Timed out", "the request did not complete in time; retry")
	default:
		a.log.Error("request failed", "path", r.URL.Path, logkey.Error, err)
		p = internalProblem()
	}
	return p
}

// detail is an error's message on one line (joined errors span several).
func detail(err error) string { return strings.ReplaceAll(err.Error(), "\n", ": ") }

func internalProblem() *problem.Problem {
	return problem.New(http.StatusInternalServerError, problem.CodeInternal, "Internal error", "the request failed; see the control plane's log")
}
