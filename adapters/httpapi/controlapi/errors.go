package controlapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

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
// chat's event stream reuses its code and detail for `error` events): a
// problem passes through, anything else meets the rows of a.errorTable in
// order, and what matches none is an internal error.
func (a *API) problemFor(w http.ResponseWriter, r *http.Request, err error) *problem.Problem {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p
	}
	for _, rule := range a.errorTable {
		if !rule.match(err) {
			continue
		}
		if rule.warn != "" {
			a.log.Warn(rule.warn, "path", r.URL.Path, logkey.Error, err)
		}
		if rule.header != nil {
			rule.header(w.Header(), err)
		}
		d := rule.detail
		if d == "" {
			d = detail(err)
		}
		if errors.As(err, new(sensorCallerError)) {
			return problem.ForSensor(rule.code, d)
		}
		return problem.For(rule.code, d)
	}
	a.log.Error("request failed", "path", r.URL.Path, logkey.Error, err)
	return internalProblem()
}

// errorRule is one row of the table that maps errors to problem codes; the
// catalogue gives the code's status and title.
type errorRule struct {
	match func(error) bool
	code  problem.Code
	// detail is the problem's detail; empty, the error's own message.
	detail string
	// header sets response headers: Retry-After, WWW-Authenticate.
	header func(h http.Header, err error)
	// warn, when set, is logged at Warn level with the path and the error.
	warn string
}

// errorTable is the control plane's error → code table, first match wins.
// A pending NATS revocation comes before the provisioner's errors: it wraps
// them, and would otherwise read as an outage. dbDown tells the store's
// outage errors.
func errorTable(dbDown func(error) bool) []errorRule {
	const revokedHere = "the sensor is revoked here (certificate deactivated, tokens revoked, live streams closed), "
	return []errorRule{
		{match: dbDown, code: problem.CodeDatabaseUnavailable, header: retryAfter(retryDependency), warn: "database unavailable",
			detail: "the control plane's database did not answer; nothing was changed unless the answer to a retry says so, retry later"},
		{match: isAll(fleet.ErrNATSRevokePending, fleet.ErrProvisionerDisabled), code: problem.CodeNATSRevokePending,
			header: retryAfter(retryDependency), warn: "sensor revoked locally; nats revocation pending",
			detail: revokedHere + "but NATS provisioning is disabled so its NATS user stays valid; enable provisioning and repeat this call"},
		{match: is(fleet.ErrNATSRevokePending), code: problem.CodeNATSRevokePending,
			header: retryAfter(retryDependency), warn: "sensor revoked locally; nats revocation pending",
			detail: revokedHere + "but revoking its NATS user failed; repeat this call to retry the NATS part"},
		{match: is(ids.ErrInvalidID), code: problem.CodeInvalidID},
		// One answer for unknown, malformed, expired, used and revoked codes.
		{match: is(fleet.ErrInvalidClaimCode), code: problem.CodeInvalidClaimCode,
			detail: "the claim code is not valid: it may be mistyped, expired, already used or revoked"},
		{match: is(fleet.ErrInvalidToken), code: problem.CodeInvalidToken, header: invalidTokenChallenge,
			detail: "send a valid, unused and unexpired token as Authorization: Bearer <token>"},
		{match: is(fleet.ErrAgentUpgradeRequired), code: problem.CodeAgentUpgradeRequired,
			detail: "this control plane renews a certificate only with a proof of possession of the current certificate's key; upgrade the sensor agent (its certificate stays valid until it expires)"},
		{match: is(fleet.ErrInvalidProof), code: problem.CodeInvalidProof},
		{match: isA[*fleet.RateLimitError], code: problem.CodeRateLimited, header: retryAfterOf(func(e *fleet.RateLimitError) time.Duration { return e.RetryAfter })},
		{match: is(fleet.ErrInvalidCSR), code: problem.CodeInvalidCSR},
		// 403 to the sensor itself (problem.ForSensor), 409 to an operator.
		{match: is(fleet.ErrRevoked), code: problem.CodeSensorRevoked,
			detail: "the sensor is revoked for good; enrol it again with a new claim code"},
		{match: is(fleet.ErrNotEnrolled), code: problem.CodeSensorNotEnrolled,
			detail: "the sensor redeemed a claim code but has not enrolled yet"},
		{match: is(fleet.ErrTenantNotProvisioned), code: problem.CodeTenantNotProvisioned, header: retryAfter(retryProvisioned),
			detail: "the tenant's NATS account does not exist yet; the control plane creates it in the background, retry later"},
		{match: is(fleet.ErrProvisionerDisabled), code: problem.CodeProvisioningDisabled,
			detail: "NATS provisioning is disabled on this control plane"},
		{match: is(fleet.ErrProvisionerUnavailable), code: problem.CodeProvisionerUnavailable, header: retryAfter(retryDependency), warn: "provisioner unavailable",
			detail: "the NATS provisioner did not complete the request; nothing was consumed, retry later"},
		{match: is(fleet.ErrMessagingDisabled), code: problem.CodeMessagingDisabled,
			detail: "NATS messaging is disabled on this control plane, so commands cannot be delivered"},
		{match: is(fleet.ErrMessagingUnavailable), code: problem.CodeNATSUnavailable, header: retryAfter(retryDependency), warn: "messaging unavailable",
			detail: "NATS is not reachable: the command was recorded as failed and not delivered; retry later"},
		{match: isA[*operators.ThrottledError], code: problem.CodeLoginThrottled,
			header: retryAfterOf(func(e *operators.ThrottledError) time.Duration { return e.RetryAfter }),
			detail: "logins for this account or from this address are held back after repeated failures; retry after the time in Retry-After"},
		{match: is(operators.ErrBusy), code: problem.CodeLoginBusy, header: retryAfter("1"),
			detail: "the control plane is checking as many passwords as it allows at once; retry in a moment"},
		{match: is(operators.ErrForbidden), code: problem.CodeForbidden, detail: "your role does not allow this action here"},
		{match: is(operators.ErrLastAdmin), code: problem.CodeLastAdmin,
			detail: "the last enabled admin cannot be demoted or disabled; make another operator admin first"},
		{match: is(operators.ErrWrongPassword), code: problem.CodeWrongPassword,
			detail: "changing your own password needs your current one in currentPassword, and it was missing or wrong"},
		{match: is(operators.ErrNoRole), code: problem.CodeNoRole,
			detail: "you signed in at the identity provider, but none of your groups grants a role in RXC; ask an admin to add your group to OIDC_GROUP_MAP"},
		{match: is(operators.ErrFederationRefused), code: problem.CodeSSORefused},
		{match: is(oidcsignin.ErrUnavailable), code: problem.CodeSSOUnavailable, header: retryAfter(retryDependency),
			detail: "the identity provider's discovery document could not be read; retry later or sign in with the break-glass account"},
		{match: is(operators.ErrPasswordLoginDisabled), code: problem.CodePasswordLoginDisabled,
			detail: "this deployment is SSO-only: sign in with the identity provider (only the break-glass account signs in with a password, and only with its right one)"},
		{match: is(operators.ErrSecondFactorRequired), code: problem.CodeTOTPRequired,
			detail: "the account has a second factor: send the current code of your authenticator app in totp, or a recovery code in recoveryCode"},
		{match: is(operators.ErrInvalidSecondFactor), code: problem.CodeInvalidSecondFactor,
			detail: "the code is wrong, already used, or from a time step already used; wait for the next code"},
		{match: is(operators.ErrSecondFactorUnavailable), code: problem.CodeSecondFactorUnavail,
			detail: "this control plane has no OPERATOR_SECRET_ENCRYPTION_KEY, so second factors cannot be enrolled or checked"},
		{match: is(operators.ErrEnrolmentRequired), code: problem.CodeSecondFactorRequired,
			detail: "this deployment requires admins to have a second factor: enrol one (POST /api/auth/me/totp, then /api/auth/me/totp/confirm) first"},
		{match: is(operators.ErrInvalidCredentials), code: problem.CodeInvalidCredentials, detail: "wrong email or password"},
		{match: is(operators.ErrUnauthenticated), code: problem.CodeUnauthenticated, detail: "log in first: no valid session"},
		{match: is(fleet.ErrNotFound, operators.ErrNotFound), code: problem.CodeNotFound},
		{match: is(fleet.ErrConflict, operators.ErrConflict), code: problem.CodeConflict},
		{match: is(analytics.ErrChatDisabled), code: problem.CodeChatUnavailable,
			detail: "the analytics chat is disabled, not configured, or its model provider is unreachable"},
		{match: is(analytics.ErrModelUnavailable), code: problem.CodeModelUnavailable, warn: "model provider failed",
			detail: "the model provider did not answer in time or refused the request; retry later"},
		{match: is(analytics.ErrEventsUnavailable), code: problem.CodeEventsUnavailable,
			detail: "event storage is not set up on this control plane yet"},
		{match: is(fleet.ErrInvalidCursor), code: problem.CodeInvalidCursor},
		{match: is(fleet.ErrInvalidLimit), code: problem.CodeInvalidLimit},
		{match: is(fleet.ErrInvalidSort), code: problem.CodeInvalidSort},
		{match: is(fleet.ErrInvalidLabels), code: problem.CodeInvalidLabels},
		{match: is(fleet.ErrTenantHasSensors), code: problem.CodeTenantHasSensors},
		{match: is(fleet.ErrDecommissioned), code: problem.CodeSensorDecommissioned},
		{match: is(fleet.ErrBatchTooLarge), code: problem.CodeBatchTooLarge},
		{match: is(fleet.ErrInvalidInput, operators.ErrInvalidInput, analytics.ErrInvalidInput, audit.ErrInvalidInput), code: problem.CodeInvalidInput},
		{match: is(context.Canceled, context.DeadlineExceeded), code: problem.CodeTimeout, warn: "request cancelled or timed out",
			detail: "the request did not complete in time; retry"},
	}
}

// is matches an error that is any of targets (problem.Is).
var is = problem.Is

// isAll matches an error that is every one of targets.
func isAll(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if !errors.Is(err, t) {
				return false
			}
		}
		return true
	}
}

// isA matches an error that has a T in its chain (errors.As).
func isA[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// retryAfter sets a fixed Retry-After.
func retryAfter(seconds string) func(http.Header, error) {
	return func(h http.Header, _ error) { h.Set("Retry-After", seconds) }
}

// retryAfterOf sets Retry-After to the wait a T in err's chain names,
// rounded up to whole seconds.
func retryAfterOf[T error](wait func(T) time.Duration) func(http.Header, error) {
	return func(h http.Header, err error) {
		var t T
		if errors.As(err, &t) {
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait(t).Seconds()))))
		}
	}
}

// invalidTokenChallenge is RFC 6750's answer to a bad bearer token.
func invalidTokenChallenge(h http.Header, _ error) {
	h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
}

// detail is an error's message on one line (joined errors span several).
func detail(err error) string { return strings.ReplaceAll(err.Error(), "\n", ": ") }

func internalProblem() *problem.Problem {
	return problem.For(problem.CodeInternal, "the request failed; see the control plane's log")
}
