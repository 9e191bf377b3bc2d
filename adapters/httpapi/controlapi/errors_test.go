package controlapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
)

// TestBadInput sends every route what it must refuse and checks the status
// and problem code.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	pendingID, enrolToken := e.redeem("acme")
	enrolledID, sensorToken := e.enroll("acme")

	tooBig := bodyOf(controlapi.MaxBodyBytes + 1)
	csr := jsonString(t, map[string]string{"csr": newCSR(t)})
	badCSR := `{"csr":"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"}`
	withBearer := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	enrolPath := "/api/sensors/" + pendingID + "/agent/enroll"
	renewPath := "/api/sensors/" + enrolledID + "/agent/renew"
	foreign := map[string]string{"Origin": "https://evil.example"}

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		wantHeader map[string]string
	}{
		{"login malformed JSON", request{method: "POST", path: "/api/auth/login", body: `{"email":`}, 400, "invalid_json", nil},
		{"login trailing data", request{method: "POST", path: "/api/auth/login", body: `{} {}`}, 400, "invalid_json", nil},
		{"login unknown field", request{method: "POST", path: "/api/auth/login", body: `{"user":"x"}`}, 400, "invalid_json", nil},
		{"login oversize", request{method: "POST", path: "/api/auth/login", body: tooBig}, 413, "body_too_large", nil},
		{"login not JSON", request{method: "POST", path: "/api/auth/login", body: `x`, header: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported_media_type", nil},
		{"login wrong password", request{method: "POST", path: "/api/auth/login", body: fmt.Sprintf(`{"email":%q,"password":"wrong password!"}`, operatorEmail)}, 401, "invalid_credentials", nil},
		{"login unknown email", request{method: "POST", path: "/api/auth/login", body: `{"email":"nobody@example.com","password":"wrong password!"}`}, 401, "invalid_credentials", nil},
		{"login foreign origin", request{method: "POST", path: "/api/auth/login", body: `{}`, header: foreign}, 403, "origin_not_allowed", nil},
		{"me without session", request{method: "GET", path: "/api/auth/me"}, 401, "unauthenticated", nil},
		{"me with unknown session", request{method: "GET", path: "/api/auth/me", header: map[string]string{"Cookie": controlapi.SessionCookie + "=forged"}}, 401, "unauthenticated", nil},

		{"list tenants without session", request{method: "GET", path: "/api/tenants"}, 401, "unauthenticated", nil},
		{"create tenant without session", request{method: "POST", path: "/api/tenants", body: `{"id":"x"}`}, 401, "unauthenticated", nil},
		{"create tenant foreign origin", request{method: "POST", path: "/api/tenants", body: `{"id":"x"}`, operator: true, header: foreign}, 403, "origin_not_allowed", nil},
		{"create tenant null origin", request{method: "POST", path: "/api/tenants", body: `{"id":"x"}`, operator: true, header: map[string]string{"Origin": "null"}}, 403, "origin_not_allowed", nil},
		{"create tenant foreign referer", request{method: "POST", path: "/api/tenants", body: `{"id":"x"}`, operator: true, header: map[string]string{"Referer": "https://evil.example/page"}}, 403, "origin_not_allowed", nil},
		{"create tenant cross-site fetch", request{method: "POST", path: "/api/tenants", body: `{"id":"x"}`, operator: true, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, "origin_not_allowed", nil},
		{"create tenant malformed JSON", request{method: "POST", path: "/api/tenants", body: `{"id":1}`, operator: true}, 400, "invalid_json", nil},
		{"create tenant empty body", request{method: "POST", path: "/api/tenants", operator: true}, 400, "invalid_json", nil},
		{"create tenant oversize", request{method: "POST", path: "/api/tenants", body: tooBig, operator: true}, 413, "body_too_large", nil},
		{"create tenant invalid id", request{method: "POST", path: "/api/tenants", body: `{"id":"a.b","name":"x"}`, operator: true}, 400, "invalid_id", nil},
		{"create tenant empty id", request{method: "POST", path: "/api/tenants", body: `{"name":"x"}`, operator: true}, 400, "invalid_id", nil},
		{"create tenant control character in name", request{method: "POST", path: "/api/tenants", body: `{"id":"x","name":"a\u0007b"}`, operator: true}, 400, "invalid_input", nil},
		{"get tenant invalid id", request{method: "GET", path: "/api/tenants/-x", operator: true}, 400, "invalid_id", nil},
		{"get tenant unknown", request{method: "GET", path: "/api/tenants/globex", operator: true}, 404, "not_found", nil},

		{"issue claim code unknown tenant", request{method: "POST", path: "/api/tenants/globex/claim-codes", operator: true}, 404, "not_found", nil},
		{"issue claim code invalid tenant id", request{method: "POST", path: "/api/tenants/a%2Eb/claim-codes", operator: true}, 400, "invalid_id", nil},
		{"issue claim code ttl too short", request{method: "POST", path: "/api/tenants/acme/claim-codes", body: `{"ttlSeconds":10}`, operator: true}, 400, "invalid_input", nil},
		{"issue claim code negative ttl", request{method: "POST", path: "/api/tenants/acme/claim-codes", body: `{"ttlSeconds":-1}`, operator: true}, 400, "invalid_input", nil},
		{"issue claim code huge ttl", request{method: "POST", path: "/api/tenants/acme/claim-codes", body: `{"ttlSeconds":9223372036854775807}`, operator: true}, 400, "invalid_input", nil},
		{"issue claim code ttl not a number", request{method: "POST", path: "/api/tenants/acme/claim-codes", body: `{"ttlSeconds":"1h"}`, operator: true}, 400, "invalid_json", nil},
		{"issue claim code oversize", request{method: "POST", path: "/api/tenants/acme/claim-codes", body: tooBig, operator: true}, 413, "body_too_large", nil},
		{"issue claim code foreign origin", request{method: "POST", path: "/api/tenants/acme/claim-codes", operator: true, header: foreign}, 403, "origin_not_allowed", nil},
		{"list claim codes unknown tenant", request{method: "GET", path: "/api/tenants/globex/claim-codes", operator: true}, 404, "not_found", nil},
		{"list claim codes without session", request{method: "GET", path: "/api/tenants/acme/claim-codes"}, 401, "unauthenticated", nil},
		{"revoke claim code unknown", request{method: "DELETE", path: "/api/claim-codes/0b5c3b0e-0000-4000-8000-000000000000", operator: true}, 404, "not_found", nil},
		{"revoke claim code invalid id", request{method: "DELETE", path: "/api/claim-codes/_x", operator: true}, 400, "invalid_id", nil},
		{"revoke claim code without session", request{method: "DELETE", path: "/api/claim-codes/abc"}, 401, "unauthenticated", nil},
		{"revoke claim code foreign origin", request{method: "DELETE", path: "/api/claim-codes/abc", operator: true, header: foreign}, 403, "origin_not_allowed", nil},

		{"list sensors invalid tenant id", request{method: "GET", path: "/api/sensors?tenantId=a.b", operator: true}, 400, "invalid_id", nil},
		{"list sensors invalid state", request{method: "GET", path: "/api/sensors?state=asleep", operator: true}, 400, "invalid_input", nil},
		{"list sensors without session", request{method: "GET", path: "/api/sensors"}, 401, "unauthenticated", nil},
		{"get sensor unknown", request{method: "GET", path: "/api/sensors/s-0000000000000000", operator: true}, 404, "not_found", nil},
		{"get sensor invalid id", request{method: "GET", path: "/api/sensors/%C3%A9", operator: true}, 400, "invalid_id", nil},
		{"command wrong action", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: `{"action":"reboot"}`, operator: true}, 400, "invalid_input", nil},
		{"command missing action", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: `{}`, operator: true}, 400, "invalid_input", nil},
		{"command malformed JSON", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: `{"action":`, operator: true}, 400, "invalid_json", nil},
		{"command oversize", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: tooBig, operator: true}, 413, "body_too_large", nil},
		{"command unknown sensor", request{method: "POST", path: "/api/sensors/s-0000000000000000/commands", body: `{"action":"start"}`, operator: true}, 404, "not_found", nil},
		{"command invalid id", request{method: "POST", path: "/api/sensors/-s/commands", body: `{"action":"start"}`, operator: true}, 400, "invalid_id", nil},
		{"command pending sensor", request{method: "POST", path: "/api/sensors/" + pendingID + "/commands", body: `{"action":"start"}`, operator: true}, 409, "sensor_not_enrolled", nil},
		{"command without session", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: `{"action":"start"}`}, 401, "unauthenticated", nil},
		{"command foreign origin", request{method: "POST", path: "/api/sensors/" + enrolledID + "/commands", body: `{"action":"start"}`, operator: true, header: foreign}, 403, "origin_not_allowed", nil},
		{"revoke unknown sensor", request{method: "POST", path: "/api/sensors/s-0000000000000000/revoke", operator: true}, 404, "not_found", nil},
		{"revoke invalid id", request{method: "POST", path: "/api/sensors/a%20b/revoke", operator: true}, 400, "invalid_id", nil},
		{"revoke without session", request{method: "POST", path: "/api/sensors/" + enrolledID + "/revoke"}, 401, "unauthenticated", nil},
		{"revoke foreign origin", request{method: "POST", path: "/api/sensors/" + enrolledID + "/revoke", operator: true, header: foreign}, 403, "origin_not_allowed", nil},
		{"chat status without session", request{method: "GET", path: "/api/analytics/chat/status"}, 401, "unauthenticated", nil},

		{"redeem malformed JSON", request{method: "POST", path: "/api/sensors/claim/redeem", body: `{"claimCode"}`}, 400, "invalid_json", nil},
		{"redeem oversize", request{method: "POST", path: "/api/sensors/claim/redeem", body: tooBig}, 413, "body_too_large", nil},
		{"redeem wrong type", request{method: "POST", path: "/api/sensors/claim/redeem", body: `{"claimCode":42}`}, 400, "invalid_json", nil},
		{"enroll without bearer", request{method: "POST", path: enrolPath, body: csr}, 401, "invalid_token", map[string]string{"WWW-Authenticate": `Bearer error="invalid_token"`}},
		{"enroll basic auth", request{method: "POST", path: enrolPath, body: csr, header: map[string]string{"Authorization": "Basic " + enrolToken}}, 401, "invalid_token", nil},
		{"enroll wrong bearer", request{method: "POST", path: enrolPath, body: csr, header: withBearer(strings.Repeat("A", 43))}, 401, "invalid_token", nil},
		{"enroll with the sensor token", request{method: "POST", path: "/api/sensors/" + enrolledID + "/agent/enroll", body: csr, header: withBearer(sensorToken)}, 401, "invalid_token", nil},
		{"enroll another sensor's token", request{method: "POST", path: "/api/sensors/" + enrolledID + "/agent/enroll", body: csr, header: withBearer(enrolToken)}, 401, "invalid_token", nil},
		{"enroll unknown sensor", request{method: "POST", path: "/api/sensors/s-0000000000000000/agent/enroll", body: csr, header: withBearer(enrolToken)}, 401, "invalid_token", nil},
		{"enroll invalid id", request{method: "POST", path: "/api/sensors/-s/agent/enroll", body: csr, header: withBearer(enrolToken)}, 400, "invalid_id", nil},
		{"enroll bad CSR", request{method: "POST", path: enrolPath, body: badCSR, header: withBearer(enrolToken)}, 400, "invalid_csr", nil},
		{"enroll empty CSR", request{method: "POST", path: enrolPath, body: `{"csr":""}`, header: withBearer(enrolToken)}, 400, "invalid_csr", nil},
		{"enroll malformed JSON", request{method: "POST", path: enrolPath, body: `{"csr":`, header: withBearer(enrolToken)}, 400, "invalid_json", nil},
		{"enroll oversize", request{method: "POST", path: enrolPath, body: tooBig, header: withBearer(enrolToken)}, 413, "body_too_large", nil},
		{"renew with the enrolment token", request{method: "POST", path: "/api/sensors/" + pendingID + "/agent/renew", body: csr, header: withBearer(enrolToken)}, 401, "invalid_token", nil},
		{"renew wrong bearer", request{method: "POST", path: renewPath, body: csr, header: withBearer("nope")}, 401, "invalid_token", nil},
		// An agent from before proof of possession is told to upgrade.
		{"renew without a proof", request{method: "POST", path: renewPath, body: badCSR, header: withBearer(sensorToken)}, 400, "agent_upgrade_required", nil},
		{"renew malformed JSON", request{method: "POST", path: renewPath, body: `[`, header: withBearer(sensorToken)}, 400, "invalid_json", nil},
		{"renew oversize", request{method: "POST", path: renewPath, body: tooBig, header: withBearer(sensorToken)}, 413, "body_too_large", nil},

		{"unknown route", request{method: "GET", path: "/api/nothing"}, 404, "route_not_found", nil},
		{"wrong method", request{method: "PUT", path: "/api/tenants", operator: true}, 405, "method_not_allowed", map[string]string{"Allow": "GET, POST"}},
		{"wrong method on a sensor", request{method: "PUT", path: "/api/sensors/" + enrolledID, operator: true}, 405, "method_not_allowed", map[string]string{"Allow": "GET, PATCH, DELETE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(tc.req)
			if res.status != tc.wantStatus || res.problemCode() != tc.wantCode {
				t.Fatalf("got %d %q, want %d %q: %s", res.status, res.problemCode(), tc.wantStatus, tc.wantCode, res.body)
			}
			for k, want := range tc.wantHeader {
				if got := res.header.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
		})
	}

	// None of the refusals consumed the enrolment token or changed a sensor.
	e.do(request{method: "POST", path: enrolPath, body: csr, header: withBearer(enrolToken)}).expect(t, "enrol after the refusals", http.StatusCreated, "")
}
