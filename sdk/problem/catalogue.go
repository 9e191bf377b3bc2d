package problem

import "net/http"

// Code is a stable problem code: the `code` member of a problem document,
// which clients branch on. Every code either service answers is one of the
// constants below and has an Entry in Catalogue; code outside this file
// names codes only through these constants (a test holds it to that).
type Code string

// The problem codes, in the catalogue's order.
const (
	CodeAccountJWTUndeliverable Code = "account_jwt_undeliverable"
	CodeAccountNotFound         Code = "account_not_found"
	CodeAgentUpgradeRequired    Code = "agent_upgrade_required"
	CodeBatchTooLarge           Code = "batch_too_large"
	CodeBodyTooLarge            Code = "body_too_large"
	CodeChatUnavailable         Code = "chat_unavailable"
	CodeConflict                Code = "conflict"
	CodeConsumerLimitReached    Code = "consumer_limit_reached"
	CodeConsumerNameTaken       Code = "consumer_name_taken"
	CodeDatabaseUnavailable     Code = "database_unavailable"
	CodeEventsUnavailable       Code = "events_unavailable"
	CodeForbidden               Code = "forbidden"
	CodeInternal                Code = "internal"
	CodeInvalidClaimCode        Code = "invalid_claim_code"
	CodeInvalidCredentials      Code = "invalid_credentials"
	CodeInvalidCSR              Code = "invalid_csr"
	CodeInvalidCursor           Code = "invalid_cursor"
	CodeInvalidID               Code = "invalid_id"
	CodeInvalidInput            Code = "invalid_input"
	CodeInvalidJSON             Code = "invalid_json"
	CodeInvalidLabels           Code = "invalid_labels"
	CodeInvalidLimit            Code = "invalid_limit"
	CodeInvalidName             Code = "invalid_name"
	CodeInvalidProof            Code = "invalid_proof"
	CodeInvalidPublicKey        Code = "invalid_public_key"
	CodeInvalidSecondFactor     Code = "invalid_second_factor"
	CodeInvalidSort             Code = "invalid_sort"
	CodeInvalidToken            Code = "invalid_token"
	CodeLastAdmin               Code = "last_admin"
	CodeLoginBusy               Code = "login_busy"
	CodeLoginThrottled          Code = "login_throttled"
	CodeMessagingDisabled       Code = "messaging_disabled"
	CodeMethodNotAllowed        Code = "method_not_allowed"
	CodeModelUnavailable        Code = "model_unavailable"
	CodeNATSRevokePending       Code = "nats_revoke_pending"
	CodeNATSUnavailable         Code = "nats_unavailable"
	CodeNoOperator              Code = "no_operator"
	CodeNoRole                  Code = "no_role"
	CodeNotFound                Code = "not_found"
	CodeNotReady                Code = "not_ready"
	CodeOriginNotAllowed        Code = "origin_not_allowed"
	CodePasswordLoginDisabled   Code = "password_login_disabled"
	CodeProvisionerUnavailable  Code = "provisioner_unavailable"
	CodeProvisioningDisabled    Code = "provisioning_disabled"
	CodeRateLimited             Code = "rate_limited"
	CodeRouteNotFound           Code = "route_not_found"
	CodeSecondFactorRequired    Code = "second_factor_required"
	CodeSecondFactorUnavail     Code = "second_factor_unavailable"
	CodeSensorDecommissioned    Code = "sensor_decommissioned"
	CodeSensorNotEnrolled       Code = "sensor_not_enrolled"
	CodeSensorRevoked           Code = "sensor_revoked"
	CodeSnapshotTooLarge        Code = "snapshot_too_large"
	CodeSSORefused              Code = "sso_refused"
	CodeSSOUnavailable          Code = "sso_unavailable"
	CodeTenantHasNoAccount      Code = "tenant_has_no_account"
	CodeTenantHasSensors        Code = "tenant_has_sensors"
	CodeTenantNotProvisioned    Code = "tenant_not_provisioned"
	CodeTimeout                 Code = "timeout"
	CodeTOTPRequired            Code = "totp_required"
	CodeUnauthenticated         Code = "unauthenticated"
	CodeUnauthorized            Code = "unauthorized"
	CodeUnsupportedMediaType    Code = "unsupported_media_type"
	CodeUserNotRevocable        Code = "user_not_revocable"
	CodeWrongPassword           Code = "wrong_password"
)

// Entry is one stable problem code: what clients may rely on.
type Entry struct {
	Code    Code
	Status  int // the usual status; sensor_revoked is 403 to sensors, 409 to operators
	Title   string
	Meaning string
}

// Catalogue is every problem code the provisioner and the control plane
// answer, in one place: the OpenAPI description lists it and a test keeps
// it equal to the codes the code can produce and to the table in docs/problem-codes.md.
var Catalogue = []Entry{
	{CodeAccountJWTUndeliverable, http.StatusBadGateway, "Account JWT undeliverable", "provisioner: NATS refuses the account JWT (over its maximum payload); the change is stored and retried in the background, not by repeating the call"},
	{CodeAccountNotFound, http.StatusNotFound, "Account not found", "provisioner: no account with that public key"},
	{CodeAgentUpgradeRequired, http.StatusBadRequest, "Sensor agent upgrade required", "the renewal lacks the proof of the current key that this release requires; upgrade the agent"},
	{CodeBatchTooLarge, http.StatusBadRequest, "Batch too large", "a command batch names more than 10,000 sensor ids or its filter matches more than 50,000 sensors"},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large", "the body exceeds the route's limit"},
	{CodeChatUnavailable, http.StatusServiceUnavailable, "Analytics chat unavailable", "the chat is disabled, not configured or its model provider is unreachable"},
	{CodeConflict, http.StatusConflict, "Conflict", "the request conflicts with the stored state (e.g. a duplicate e-mail, a used claim code)"},
	{CodeConsumerLimitReached, http.StatusConflict, "Consumer limit reached", "provisioner: the command stream holds COMMAND_STREAM_MAX_CONSUMERS consumers; not retryable until raised"},
	{CodeConsumerNameTaken, http.StatusConflict, "Consumer name taken", "provisioner: another tenant and sensor own the consumer name cmd-<tenantId>-<sensorId>"},
	{CodeDatabaseUnavailable, http.StatusServiceUnavailable, "Database unavailable", "PostgreSQL did not answer; retry after Retry-After"},
	{CodeEventsUnavailable, http.StatusServiceUnavailable, "No stored events", "event storage is not set up on this control plane"},
	{CodeForbidden, http.StatusForbidden, "Forbidden", "the caller sees the object but its role does not allow this action"},
	{CodeInternal, http.StatusInternalServerError, "Internal error", "an unexpected failure; see the service's log"},
	{CodeInvalidClaimCode, http.StatusBadRequest, "Invalid claim code", "unknown, malformed, expired, used and revoked codes alike"},
	{CodeInvalidCredentials, http.StatusUnauthorized, "Invalid credentials", "wrong e-mail or password (or a disabled account)"},
	{CodeInvalidCSR, http.StatusBadRequest, "Invalid certificate signing request", "the CSR does not parse, is not self-signed or uses a refused key"},
	{CodeInvalidCursor, http.StatusBadRequest, "Invalid cursor", "the cursor was not issued by this API, was altered, or belongs to another sort, filter or tenant scope; start again without one"},
	{CodeInvalidID, http.StatusBadRequest, "Invalid identifier", "ids must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
	{CodeInvalidInput, http.StatusBadRequest, "Invalid input", "a field is missing or out of bounds; detail says which"},
	{CodeInvalidJSON, http.StatusBadRequest, "Malformed JSON body", "the body is not the JSON object the route takes"},
	{CodeInvalidLabels, http.StatusBadRequest, "Invalid labels", "at most 16 labels; keys 1-63 of a-z 0-9 . _ - starting with a letter or digit, values 0-63 of A-Z a-z 0-9 . _ -; detail names the offending key"},
	{CodeInvalidLimit, http.StatusBadRequest, "Invalid limit", "a page size outside the route's bounds (GET /api/sensors: 1–500)"},
	{CodeInvalidName, http.StatusBadRequest, "Invalid name", "provisioner: a name is too long or holds control characters"},
	{CodeInvalidProof, http.StatusForbidden, "Invalid proof of possession", "the renewal is not signed by the key of the sensor's current certificate"},
	{CodeInvalidPublicKey, http.StatusBadRequest, "Invalid public key", "provisioner: not an account or user public key"},
	{CodeInvalidSecondFactor, http.StatusUnauthorized, "Invalid second factor", "the TOTP code or recovery code is wrong, already used, or a TOTP code of a time step already used (replay); counts as a failed login"},
	{CodeInvalidSort, http.StatusBadRequest, "Invalid sort", "the sort is not one the route documents"},
	{CodeInvalidToken, http.StatusUnauthorized, "Invalid token", "sensor routes: the bearer token is unknown, used, expired or revoked"},
	{CodeLastAdmin, http.StatusConflict, "Last admin", "the last enabled admin cannot be demoted or disabled"},
	{CodeLoginBusy, http.StatusServiceUnavailable, "Too many logins at once", "every password-hashing slot is busy; retry after Retry-After"},
	{CodeLoginThrottled, http.StatusTooManyRequests, "Too many failed logins", "the account or address is held back after repeated failures; retry after Retry-After"},
	{CodeMessagingDisabled, http.StatusServiceUnavailable, "NATS messaging disabled", "commands cannot be delivered by this control plane"},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed", "the route exists for other methods (see Allow)"},
	{CodeModelUnavailable, http.StatusBadGateway, "Model provider unavailable", "the chat's model provider failed or timed out"},
	{CodeNATSRevokePending, http.StatusServiceUnavailable, "NATS revocation pending", "the sensor is revoked here but its NATS user is not yet; repeat the call"},
	{CodeNATSUnavailable, http.StatusServiceUnavailable, "NATS unavailable", "NATS is not reachable; retry after Retry-After"},
	{CodeNoOperator, http.StatusServiceUnavailable, "Operator not initialised", "provisioner: run provisioner init-operator"},
	{CodeNoRole, http.StatusForbidden, "No role", "single sign-on: none of the person's groups maps to a role (OIDC_GROUP_MAP); no operator is created"},
	{CodeNotFound, http.StatusNotFound, "Not found", "no such object — or one of a tenant the caller is not granted"},
	{CodeNotReady, http.StatusServiceUnavailable, "Not ready", "a readiness check failed; detail names which"},
	{CodeOriginNotAllowed, http.StatusForbidden, "Origin not allowed", "a state-changing cookie request from an origin not in CORS_ALLOWED_ORIGINS"},
	{CodePasswordLoginDisabled, http.StatusForbidden, "Password sign-in disabled", "the deployment is SSO-only; only the break-glass account signs in with a password"},
	{CodeProvisionerUnavailable, http.StatusServiceUnavailable, "NATS provisioner unavailable", "the provisioner did not complete the request; retry after Retry-After (5 s)"},
	{CodeProvisioningDisabled, http.StatusServiceUnavailable, "NATS provisioning disabled", "this control plane does not call the provisioner"},
	{CodeRateLimited, http.StatusTooManyRequests, "Too many requests", "a per-address or per-operator rate limit; retry after Retry-After"},
	{CodeRouteNotFound, http.StatusNotFound, "Not found", "no such route"},
	{CodeSecondFactorRequired, http.StatusForbidden, "Second factor required", "this deployment requires admins to have a second factor: enrol one (POST /api/auth/me/totp) before anything else"},
	{CodeSecondFactorUnavail, http.StatusServiceUnavailable, "Second factor unavailable", "no OPERATOR_SECRET_ENCRYPTION_KEY is configured, so TOTP cannot be enrolled or checked"},
	{CodeSensorDecommissioned, http.StatusConflict, "Sensor decommissioned", "the sensor was decommissioned (retired for good); nothing about it can change any more"},
	{CodeSensorNotEnrolled, http.StatusConflict, "Sensor not enrolled", "the sensor redeemed a claim code but has not enrolled"},
	{CodeSensorRevoked, http.StatusConflict, "Sensor revoked", "revoked for good (403 on the sensor's own routes); enrol again with a new claim code"},
	{CodeSnapshotTooLarge, http.StatusRequestEntityTooLarge, "Snapshot too large", "the chat's snapshot exceeds 16 KiB"},
	{CodeSSORefused, http.StatusUnauthorized, "Single sign-on refused", "the sign-in's state, code, nonce or ID token (signature, issuer, audience, expiry) was refused"},
	{CodeSSOUnavailable, http.StatusServiceUnavailable, "Identity provider unreachable", "the OIDC provider's discovery document could not be read; retry after Retry-After"},
	{CodeTenantHasNoAccount, http.StatusNotFound, "Tenant has no account", "provisioner: create the tenant's account first"},
	{CodeTenantHasSensors, http.StatusConflict, "Tenant has live sensors", "a tenant is deleted only when every sensor of it is decommissioned; detail says how many are not"},
	{CodeTenantNotProvisioned, http.StatusServiceUnavailable, "Tenant not provisioned yet", "the tenant's NATS account is still being made in the background; retry after Retry-After (30 s)"},
	{CodeTimeout, http.StatusServiceUnavailable, "Timed out", "the request did not complete in time; retry"},
	{CodeTOTPRequired, http.StatusUnauthorized, "TOTP code required", "the password is right and the account has a second factor: send totp (or recoveryCode) with the login"},
	{CodeUnauthenticated, http.StatusUnauthorized, "Not logged in", "no valid session cookie or API token"},
	{CodeUnauthorized, http.StatusUnauthorized, "Unauthorized", "provisioner: missing or wrong shared secret"},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type", "send application/json"},
	{CodeUserNotRevocable, http.StatusForbidden, "User not revocable", "provisioner: a key of the SYS account, or of the CONTROL account that is not a backend user (the provisioner's own users); never revoked"},
	{CodeWrongPassword, http.StatusForbidden, "Wrong current password", "changing one's own password needs the current one (currentPassword), and it was missing or wrong"},
}

// byCode indexes Catalogue.
var byCode = func() map[Code]Entry {
	m := make(map[Code]Entry, len(Catalogue))
	for _, e := range Catalogue {
		m[e.Code] = e
	}
	return m
}()

// Lookup returns the catalogue entry of code.
func Lookup(code Code) (Entry, bool) {
	e, ok := byCode[code]
	return e, ok
}

// For returns the problem of code with the status and title the catalogue
// gives it, and detail. Errors know their code; the catalogue knows what
// the code answers, so no edge restates a status or a title. A code the
// catalogue lacks (internal/archtest keeps every code the source names in
// it) answers 500 rather than a status nobody chose.
func For(code Code, detail string) *Problem {
	e, ok := byCode[code]
	if !ok {
		return New(http.StatusInternalServerError, code, "Internal error", detail)
	}
	return New(e.Status, code, e.Title, detail)
}

// sensorStatus lists the codes a sensor is answered with another status on
// its own routes (redeem, enrol, renew) than Catalogue's: its own
// revocation refuses it its credentials (403), where an operator acting on
// a revoked sensor meets a state conflict (409).
var sensorStatus = map[Code]int{
	CodeSensorRevoked: http.StatusForbidden,
}

// ForSensor is For on a sensor's own routes: a code in sensorStatus
// answers that status there.
func ForSensor(code Code, detail string) *Problem {
	p := For(code, detail)
	if status, ok := sensorStatus[code]; ok {
		p.Status = status
	}
	return p
}

// WithTitle replaces the catalogue's title of p for this occurrence; status,
// code and type stay the catalogue's. The few answers that name what was
// limited or refused more closely than their code's title use it.
func (p *Problem) WithTitle(title string) *Problem {
	p.Title = title
	return p
}
