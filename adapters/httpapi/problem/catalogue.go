package problem

import "net/http"

// Entry is one stable problem code: what clients may rely on.
type Entry struct {
	Code    string
	Status  int // the usual status; sensor_revoked is 403 to sensors, 409 to operators
	Title   string
	Meaning string
}

// Catalogue is every problem code the provisioner and the control plane
// answer, in one place: the OpenAPI description lists it and a test keeps
// it equal to the codes the code can produce and to the README's table.
var Catalogue = []Entry{
	{"account_not_found", http.StatusNotFound, "Account not found", "provisioner: no account with that public key"},
	{"agent_upgrade_required", http.StatusBadRequest, "Sensor agent upgrade required", "the renewal lacks the proof of the current key that this release requires; upgrade the agent"},
	{"body_too_large", http.StatusRequestEntityTooLarge, "Request body too large", "the body exceeds the route's limit"},
	{"chat_unavailable", http.StatusServiceUnavailable, "Analytics chat unavailable", "the chat is disabled, not configured or its model provider is unreachable"},
	{"conflict", http.StatusConflict, "Conflict", "the request conflicts with the stored state (e.g. a duplicate e-mail, a used claim code)"},
	{"consumer_limit_reached", http.StatusConflict, "Consumer limit reached", "provisioner: the command stream holds COMMAND_STREAM_MAX_CONSUMERS consumers; not retryable until raised"},
	{"consumer_name_taken", http.StatusConflict, "Consumer name taken", "provisioner: another tenant and sensor own the consumer name cmd-<tenantId>-<sensorId>"},
	{"database_unavailable", http.StatusServiceUnavailable, "Database unavailable", "PostgreSQL did not answer; retry after Retry-After"},
	{"events_unavailable", http.StatusServiceUnavailable, "No stored events", "event storage is not set up on this control plane"},
	{"forbidden", http.StatusForbidden, "Forbidden", "the caller sees the object but its role does not allow this action"},
	{"internal", http.StatusInternalServerError, "Internal error", "an unexpected failure; see the service's log"},
	{"invalid_claim_code", http.StatusBadRequest, "Invalid claim code", "unknown, malformed, expired, used and revoked codes alike"},
	{"invalid_credentials", http.StatusUnauthorized, "Invalid credentials", "wrong e-mail or password (or a disabled account)"},
	{"invalid_csr", http.StatusBadRequest, "Invalid certificate signing request", "the CSR does not parse, is not self-signed or uses a refused key"},
	{"invalid_id", http.StatusBadRequest, "Invalid identifier", "ids must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
	{"invalid_input", http.StatusBadRequest, "Invalid input", "a field is missing or out of bounds; detail says which"},
	{"invalid_json", http.StatusBadRequest, "Malformed JSON body", "the body is not the JSON object the route takes"},
	{"invalid_name", http.StatusBadRequest, "Invalid name", "provisioner: a name is too long or holds control characters"},
	{"invalid_proof", http.StatusForbidden, "Invalid proof of possession", "the renewal is not signed by the key of the sensor's current certificate"},
	{"invalid_public_key", http.StatusBadRequest, "Invalid public key", "provisioner: not an account or user public key"},
	{"invalid_token", http.StatusUnauthorized, "Invalid token", "sensor routes: the bearer token is unknown, used, expired or revoked"},
	{"last_admin", http.StatusConflict, "Last admin", "the last enabled admin cannot be demoted or disabled"},
	{"login_busy", http.StatusServiceUnavailable, "Too many logins at once", "every password-hashing slot is busy; retry after Retry-After"},
	{"login_throttled", http.StatusTooManyRequests, "Too many failed logins", "the account or address is held back after repeated failures; retry after Retry-After"},
	{"messaging_disabled", http.StatusServiceUnavailable, "NATS messaging disabled", "commands cannot be delivered by this control plane"},
	{"method_not_allowed", http.StatusMethodNotAllowed, "Method not allowed", "the route exists for other methods (see Allow)"},
	{"model_unavailable", http.StatusBadGateway, "Model provider unavailable", "the chat's model provider failed or timed out"},
	{"nats_revoke_pending", http.StatusServiceUnavailable, "NATS revocation pending", "the sensor is revoked here but its NATS user is not yet; repeat the call"},
	{"nats_unavailable", http.StatusServiceUnavailable, "NATS unavailable", "NATS is not reachable; retry after Retry-After"},
	{"no_operator", http.StatusServiceUnavailable, "Operator not initialised", "provisioner: run provisioner init-operator"},
	{"not_found", http.StatusNotFound, "Not found", "no such object — or one of a tenant the caller is not granted"},
	{"not_ready", http.StatusServiceUnavailable, "Not ready", "a readiness check failed; detail names which"},
	{"origin_not_allowed", http.StatusForbidden, "Origin not allowed", "a state-changing cookie request from an origin not in CORS_ALLOWED_ORIGINS"},
	{"provisioner_unavailable", http.StatusServiceUnavailable, "NATS provisioner unavailable", "the provisioner did not complete the request, or the tenant's account is not made yet"},
	{"provisioning_disabled", http.StatusServiceUnavailable, "NATS provisioning disabled", "this control plane does not call the provisioner"},
	{"rate_limited", http.StatusTooManyRequests, "Too many requests", "a per-address or per-operator rate limit; retry after Retry-After"},
	{"route_not_found", http.StatusNotFound, "Not found", "no such route"},
	{"sensor_not_enrolled", http.StatusConflict, "Sensor not enrolled", "the sensor redeemed a claim code but has not enrolled"},
	{"sensor_revoked", http.StatusConflict, "Sensor revoked", "revoked for good (403 on the sensor's own routes); enrol again with a new claim code"},
	{"snapshot_too_large", http.StatusRequestEntityTooLarge, "Snapshot too large", "the chat's snapshot exceeds 16 KiB"},
	{"tenant_has_no_account", http.StatusNotFound, "Tenant has no account", "provisioner: create the tenant's account first"},
	{"timeout", http.StatusServiceUnavailable, "Timed out", "the request did not complete in time; retry"},
	{"unauthenticated", http.StatusUnauthorized, "Not logged in", "no valid session cookie or API token"},
	{"unauthorized", http.StatusUnauthorized, "Unauthorized", "provisioner: missing or wrong shared secret"},
	{"unsupported_media_type", http.StatusUnsupportedMediaType, "Unsupported media type", "send application/json"},
	{"wrong_password", http.StatusForbidden, "Wrong current password", "changing one's own password needs the current one (currentPassword), and it was missing or wrong"},
}

// Lookup returns the catalogue entry of code.
func Lookup(code string) (Entry, bool) {
	for _, e := range Catalogue {
		if e.Code == code {
			return e, true
		}
	}
	return Entry{}, false
}
