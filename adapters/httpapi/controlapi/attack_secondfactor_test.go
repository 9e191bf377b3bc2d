package controlapi_test

import (
	"net/http"
	"testing"
)

// TestAttackAdminTokenMintedBeforeSecondFactorRequirement: an admin
// without a second factor mints an admin API token (allowed while the
// setting is off: a password alone opens the session). Once the deployment
// requires a second factor for admins, that token must not act as an admin
// either, or a stolen password used earlier keeps full admin through the
// token while every session of the same account is held to enrolment.
func TestAttackAdminTokenMintedBeforeSecondFactorRequirement(t *testing.T) {
	t.Parallel()
	e := withSecondFactors(t, newEnv(t, options{}), false)
	e.enrolTOTP(t, e.session)
	res := e.do(request{method: "POST", path: "/api/operators", session: e.session,
		body: `{"email":"nofactor@example.com","password":"another long passphrase","role":"admin","tenants":[]}`})
	res.expect(t, "create a second admin", http.StatusCreated, "")
	second := e.loginAs("nofactor@example.com", "another long passphrase")
	res = e.do(request{method: "POST", path: "/api/tokens", session: second, body: `{"name":"script","role":"admin","tenants":[]}`})
	res.expect(t, "admin token minted with the password alone", http.StatusCreated, "")
	bearer := map[string]string{"Authorization": "Bearer " + str(t, res.object(t), "token")}

	e.do(request{method: "PATCH", path: "/api/auth/settings", session: e.session, body: `{"requireAdminSecondFactor":true}`}).
		expect(t, "require a second factor for admins", http.StatusOK, "")
	e.do(request{method: "GET", path: "/api/tenants", session: second}).
		expect(t, "the session of the admin without a factor", http.StatusForbidden, "second_factor_required")
	for _, rq := range []request{
		{method: "GET", path: "/api/operators"},
		{method: "POST", path: "/api/tenants", body: `{"id":"sneaky","name":"Sneaky"}`},
		{method: "PATCH", path: "/api/auth/settings", body: `{"requireAdminSecondFactor":false}`},
		{method: "POST", path: "/api/tokens", body: `{"name":"y","role":"admin","tenants":[]}`},
	} {
		rq.header = bearer
		e.do(rq).expect(t, "token of an admin without a factor: "+rq.method+" "+rq.path, http.StatusForbidden, "second_factor_required")
	}
}
