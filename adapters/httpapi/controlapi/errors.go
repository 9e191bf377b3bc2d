package controlapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/rxc-project/rxc/adapters/httpapi/problem"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
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
		n.detail = p.Code
	}
	problem.Write(w, r, p)
}

// problemFor is the one place where core errors become HTTP problems (the
// chat's event stream reuses its code and detail for `error` events). The
// order matters: a provisioner refusal during enrolment also wraps
// ErrNotFound, and a failed NATS revocation also wraps the provisioner's
// error.
func (a *API) problemFor(w http.ResponseWriter, r *http.Request, err error) *problem.Problem {
	var (
		p       *problem.Problem
		limited *fleet.RateLimitError
	)
	switch {
	case errors.As(err, &p):
	case a.dbDown(err):
		a.log.Warn("database unavailable", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, "database_unavailable", "Database unavailable",
			"the control plane's database did not answer; nothing was changed unless the answer to a retry says so, retry later")
	case errors.Is(err, fleet.ErrNATSRevokePending):
		a.log.Warn("sensor revoked locally; nats revocation pending", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", retryDependency)
		msg := "the sensor is revoked here (certificate deactivated, tokens revoked, live streams closed), but revoking its NATS user failed; repeat this call to retry the NATS part"
		if errors.Is(err, fleet.ErrProvisionerDisabled) {
			msg = "the sensor is revoked here (certificate deactivated, tokens revoked, live streams closed), but NATS provisioning is disabled so its NATS user stays valid; enable provisioning and repeat this call"
		}
		p = problem.New(http.StatusServiceUnavailable, "nats_revoke_pending", "NATS revocation pending", msg)
	case errors.Is(err, ids.ErrInvalidID):
		p = problem.New(http.StatusBadRequest, "invalid_id", "Invalid identifier", detail(err))
	case errors.Is(err, fleet.ErrInvalidClaimCode):
		// One answer for unknown, malformed, expired, used and revoked codes.
		p = problem.New(http.StatusBadRequest, "invalid_claim_code", "Invalid claim code",
			"the claim code is not valid: it may be mistyped, expired, already used or revoked")
	case errors.Is(err, fleet.ErrInvalidToken):
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		p = problem.New(http.StatusUnauthorized, "invalid_token", "Invalid token",
			"send a valid, unused and unexpired token as Authorization: Bearer <token>")
	case errors.Is(err, fleet.ErrAgentUpgradeRequired):
		p = problem.New(http.StatusBadRequest, "agent_upgrade_required", "Sensor agent upgrade required",
			"this control plane renews a certificate only with a proof of possession of the current certificate's key; upgrade the sensor agent (its certificate stays valid until it expires)")
	case errors.Is(err, fleet.ErrInvalidProof):
		p = problem.New(http.StatusForbidden, "invalid_proof", "Invalid proof of possession", detail(err))
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		p = problem.New(http.StatusTooManyRequests, "rate_limited", "Too many requests", detail(err))
	case errors.Is(err, fleet.ErrInvalidCSR):
		p = problem.New(http.StatusBadRequest, "invalid_csr", "Invalid certificate signing request", detail(err))
	case errors.Is(err, fleet.ErrRevoked):
		status := http.StatusConflict
		if isSensorRoute(r) {
			status = http.StatusForbidden
		}
		p = problem.New(status, "sensor_revoked", "Sensor revoked", "the sensor is revoked for good; enrol it again with a new claim code")
	case errors.Is(err, fleet.ErrNotEnrolled):
		p = problem.New(http.StatusConflict, "sensor_not_enrolled", "Sensor not enrolled", "the sensor redeemed a claim code but has not enrolled yet")
	case errors.Is(err, fleet.ErrTenantNotProvisioned):
		w.Header().Set("Retry-After", retryProvisioned)
		p = problem.New(http.StatusServiceUnavailable, "provisioner_unavailable", "Tenant not provisioned yet",
			"the tenant's NATS account does not exist yet; the control plane creates it in the background, retry later")
	case errors.Is(err, fleet.ErrProvisionerDisabled):
		p = problem.New(http.StatusServiceUnavailable, "provisioning_disabled", "NATS provisioning disabled",
			"NATS provisioning is disabled on this control plane")
	case errors.Is(err, fleet.ErrProvisionerUnavailable):
		a.log.Warn("provisioner unavailable", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, "provisioner_unavailable", "NATS provisioner unavailable",
			"the NATS provisioner did not complete the request; nothing was consumed, retry later")
	case errors.Is(err, fleet.ErrMessagingDisabled):
		p = problem.New(http.StatusServiceUnavailable, "messaging_disabled", "NATS messaging disabled",
			"NATS messaging is disabled on this control plane, so commands cannot be delivered")
	case errors.Is(err, fleet.ErrMessagingUnavailable):
		a.log.Warn("messaging unavailable", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", retryDependency)
		p = problem.New(http.StatusServiceUnavailable, "nats_unavailable", "NATS unavailable",
			"NATS is not reachable: the command was recorded as failed and not delivered; retry later")
	case errors.As(err, new(*operators.ThrottledError)):
		var te *operators.ThrottledError
		errors.As(err, &te)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(te.RetryAfter.Seconds()))))
		p = problem.New(http.StatusTooManyRequests, "login_throttled", "Too many failed logins",
			"logins for this account or from this address are held back after repeated failures; retry after the time in Retry-After")
	case errors.Is(err, operators.ErrBusy):
		w.Header().Set("Retry-After", "1")
		p = problem.New(http.StatusServiceUnavailable, "login_busy", "Too many logins at once",
			"the control plane is checking as many passwords as it allows at once; retry in a moment")
	case errors.Is(err, operators.ErrForbidden):
		p = problem.New(http.StatusForbidden, "forbidden", "Forbidden", "your role does not allow this action here")
	case errors.Is(err, operators.ErrLastAdmin):
		p = problem.New(http.StatusConflict, "last_admin", "Last admin", "the last enabled admin cannot be demoted or disabled; make another operator admin first")
	case errors.Is(err, operators.ErrWrongPassword):
		p = problem.New(http.StatusForbidden, "wrong_password", "Wrong current password",
			"changing your own password needs your current one in currentPassword, and it was missing or wrong")
	case errors.Is(err, operators.ErrInvalidCredentials):
		p = problem.New(http.StatusUnauthorized, "invalid_credentials", "Invalid credentials", "wrong email or password")
	case errors.Is(err, operators.ErrUnauthenticated):
		p = problem.New(http.StatusUnauthorized, "unauthenticated", "Not logged in", "log in first: no valid session")
	case errors.Is(err, fleet.ErrNotFound), errors.Is(err, operators.ErrNotFound):
		p = problem.New(http.StatusNotFound, "not_found", "Not found", detail(err))
	case errors.Is(err, fleet.ErrConflict), errors.Is(err, operators.ErrConflict):
		p = problem.New(http.StatusConflict, "conflict", "Conflict", detail(err))
	case errors.Is(err, analytics.ErrChatDisabled):
		p = problem.New(http.StatusServiceUnavailable, "chat_unavailable", "Analytics chat unavailable",
			"the analytics chat is disabled, not configured, or its model provider is unreachable")
	case errors.Is(err, analytics.ErrModelUnavailable):
		a.log.Warn("model provider failed", "path", r.URL.Path, "error", err)
		p = problem.New(http.StatusBadGateway, "model_unavailable", "Model provider unavailable",
			"the model provider did not answer in time or refused the request; retry later")
	case errors.Is(err, analytics.ErrEventsUnavailable):
		p = problem.New(http.StatusServiceUnavailable, "events_unavailable", "No stored events",
			"event storage is not set up on this control plane yet")
	case errors.Is(err, fleet.ErrInvalidInput), errors.Is(err, operators.ErrInvalidInput), errors.Is(err, analytics.ErrInvalidInput), errors.Is(err, audit.ErrInvalidInput):
		p = problem.New(http.StatusBadRequest, "invalid_input", "Invalid input", detail(err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		a.log.Warn("request cancelled or timed out", "path", r.URL.Path, "error", err)
		p = problem.New(http.StatusServiceUnavailable, "timeout", "Timed out", "the request did not complete in time; retry")
	default:
		a.log.Error("request failed", "path", r.URL.Path, "error", err)
		p = internalProblem()
	}
	return p
}

// detail is an error's message on one line (joined errors span several).
func detail(err error) string { return strings.ReplaceAll(err.Error(), "\n", ": ") }

func internalProblem() *problem.Problem {
	return problem.New(http.StatusInternalServerError, "internal", "Internal error", "the request failed; see the control plane's log")
}
