package controlapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
)

// Attacks on changing one's own password (POST /api/operators/{id}/password
// needs currentPassword for oneself): whoever holds an admin's session or
// API token must not take the account over by setting a password, through
// the admin rule, a token, another spelling of the id, or by spreading
// guesses of the current password over addresses. Each denial sits next to
// a positive control.
func TestAttackOwnPasswordChange(t *testing.T) {
	e := newEnv(t, options{api: func(c *controlapi.Config) { c.TrustProxy = true }})
	me := e.do(request{method: "GET", path: "/api/auth/me", operator: true})
	me.expect(t, "me", http.StatusOK, "")
	adminID := str(t, me.object(t), "id")
	self := "/api/operators/" + adminID + "/password"

	res := e.do(request{method: "POST", path: "/api/operators", operator: true,
		body: `{"email":"second@example.com","password":"another long passphrase","role":"operator","tenants":[]}`})
	res.expect(t, "create a second operator", http.StatusCreated, "")
	otherID := str(t, res.object(t), "id")

	token := func(role string) map[string]string {
		t.Helper()
		res := e.do(request{method: "POST", path: "/api/tokens", operator: true, body: fmt.Sprintf(`{"name":"script","role":%q,"tenants":[]}`, role)})
		res.expect(t, "token "+role, http.StatusCreated, "")
		return map[string]string{"Authorization": "Bearer " + str(t, res.object(t), "token")}
	}
	adminToken, viewerToken, operatorToken := token("admin"), token("viewer"), token("operator")

	// Positive control: an admin sets another operator's password without
	// knowing it, so the refusals below are the rule for oneself.
	e.do(request{method: "POST", path: "/api/operators/" + otherID + "/password", operator: true, body: `{"password":"reset by the admin"}`}).
		expect(t, "positive control: admin resets another operator", http.StatusNoContent, "")

	// An admin's session and an admin token are admins, yet not for their own row.
	e.do(request{method: "POST", path: self, operator: true, body: `{"password":"taken over passphrase"}`}).
		expect(t, "admin session, own password, no current", http.StatusForbidden, "wrong_password")
	e.do(request{method: "POST", path: self, header: adminToken, body: `{"password":"taken over passphrase"}`}).
		expect(t, "admin API token, owner's password, no current", http.StatusForbidden, "wrong_password")
	e.do(request{method: "POST", path: self, header: adminToken, body: `{"currentPassword":"","password":"taken over passphrase"}`}).
		expect(t, "admin API token, owner's password, empty current", http.StatusForbidden, "wrong_password")
	// Another spelling of one's own id is not a way around the self rule.
	for _, spelled := range []string{strings.ToUpper(adminID), adminID + "-", "-" + adminID} {
		res := e.do(request{method: "POST", path: "/api/operators/" + spelled + "/password", operator: true, body: `{"password":"taken over passphrase"}`})
		if res.status < 400 {
			t.Fatalf("BROKEN: own password changed without the current one through the id %q: %d", spelled, res.status)
		}
	}
	// Narrowed tokens of an admin are not admins.
	for name, h := range map[string]map[string]string{"viewer": viewerToken, "operator": operatorToken} {
		e.do(request{method: "POST", path: "/api/operators/" + otherID + "/password", header: h, body: `{"password":"hijacked passphrase"}`}).
			expect(t, "admin's "+name+" token resets another operator", http.StatusNotFound, "not_found")
	}
	// The admin still signs in with the old password: nothing above changed it.
	e.loginAs(operatorEmail, operatorPassword)

	// Guessing the current password from ever new addresses: the count is the
	// account's, so it is throttled all the same, and the throttle is the
	// login throttle of the account (a login from yet another address waits).
	throttled := guessUntilThrottled(t, 40, func(i int, body string) response {
		return e.do(request{method: "POST", path: self, operator: true, body: body,
			header: map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i+1)}})
	})
	if !throttled {
		t.Fatal("BROKEN: 40 guesses of the current password from 40 addresses were never throttled")
	}
	e.do(request{method: "POST", path: self, operator: true, body: fmt.Sprintf(`{"currentPassword":%q,"password":"taken over passphrase"}`, operatorPassword),
		header: map[string]string{"X-Forwarded-For": "203.0.113.77"}}).
		expect(t, "the right current password while the account is held back", http.StatusTooManyRequests, "login_throttled")
	e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(operatorEmail, operatorPassword),
		header: map[string]string{"X-Forwarded-For": "203.0.113.78"}}).
		expect(t, "a login of the account while it is held back", http.StatusTooManyRequests, "login_throttled")
}

// guessUntilThrottled sends up to n password changes with a wrong current
// password through send (i counts them from 0) until one is throttled,
// and reports whether one was. Every guess before must be refused as a
// wrong password, the throttled one as login_throttled.
func guessUntilThrottled(t *testing.T, n int, send func(i int, body string) response) bool {
	t.Helper()
	for i := range n {
		res := send(i, `{"currentPassword":"guess guess guess","password":"taken over passphrase"}`)
		if res.status == http.StatusTooManyRequests {
			res.expect(t, "a throttled guess of the current password", http.StatusTooManyRequests, "login_throttled")
			return true
		}
		res.expect(t, "a wrong current password", http.StatusForbidden, "wrong_password")
	}
	return false
}
