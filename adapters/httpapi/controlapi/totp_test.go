package controlapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/core/operators"
)

// withSecondFactors serves a variant of e whose operators service can
// seal TOTP secrets (OPERATOR_SECRET_ENCRYPTION_KEY set); with validate,
// every answer is validated against the OpenAPI description.
func withSecondFactors(t *testing.T, e *env, validate bool) *env {
	t.Helper()
	v := e.withOperators(t, operators.Config{Hasher: fastHasher(t), Sealer: newSealer(t)})
	if validate {
		val, _ := openAPIValidator(t)
		v.srv.Client().Transport = &validatingTransport{t: t, v: val, seen: map[string]bool{}}
	}
	return v
}

func (e *env) enrolTOTP(t *testing.T, session string) (secret string, recovery []string) {
	t.Helper()
	res := e.do(request{method: "POST", path: "/api/auth/me/totp", session: session})
	res.expect(t, "begin TOTP", http.StatusCreated, "")
	secret = str(t, res.object(t), "secret")
	if u := str(t, res.object(t), "otpauthUrl"); !strings.HasPrefix(u, "otpauth://totp/") || !strings.Contains(u, "secret="+secret) {
		t.Errorf("otpauthUrl %q", u)
	}
	code, err := operators.TOTPCode(secret, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	res = e.do(request{method: "POST", path: "/api/auth/me/totp/confirm", session: session, body: fmt.Sprintf(`{"code":%q}`, code)})
	res.expect(t, "confirm TOTP", http.StatusOK, "")
	var body struct{ RecoveryCodes []string }
	if err := json.Unmarshal(res.body, &body); err != nil || len(body.RecoveryCodes) != 10 {
		t.Fatalf("recovery codes %s: %v; want 10", res.body, err)
	}
	return secret, body.RecoveryCodes
}

func totpLogin(email, password, field, code string) string {
	return fmt.Sprintf(`{"email":%q,"password":%q,%q:%q}`, email, password, field, code)
}

// TestTOTPOverHTTP: enrolment, sign-in with a code and with a recovery code
// (once only), wrong and replayed codes refused, refusals and changes in
// the audit trail; an API token cannot enrol; without a sealing key
// enrolment answers 503.
func TestTOTPOverHTTP(t *testing.T) {
	t.Parallel()
	base := newEnv(t, options{})
	base.do(request{method: "POST", path: "/api/auth/me/totp", operator: true}).
		expect(t, "enrol without OPERATOR_SECRET_ENCRYPTION_KEY", http.StatusServiceUnavailable, "second_factor_unavailable")
	e := withSecondFactors(t, base, true)
	login := func(body string) response {
		return e.do(request{method: "POST", path: "/api/auth/login", body: body})
	}

	res := e.do(request{method: "POST", path: "/api/auth/me/totp", session: e.session})
	res.expect(t, "begin", http.StatusCreated, "")
	secret := str(t, res.object(t), "secret")
	e.do(request{method: "POST", path: "/api/auth/me/totp/confirm", session: e.session, body: `{"code":"000000"}`}).
		expect(t, "confirm with a wrong code", http.StatusUnauthorized, "invalid_second_factor")
	code, _ := operators.TOTPCode(secret, e.clock.Now())
	res = e.do(request{method: "POST", path: "/api/auth/me/totp/confirm", session: e.session, body: fmt.Sprintf(`{"code":%q}`, code)})
	res.expect(t, "confirm", http.StatusOK, "")
	var rc struct{ RecoveryCodes []string }
	if err := json.Unmarshal(res.body, &rc); err != nil || len(rc.RecoveryCodes) != 10 {
		t.Fatalf("recovery codes: %s", res.body)
	}
	me := e.do(request{method: "GET", path: "/api/auth/me", session: e.session})
	if me.object(t)["secondFactor"] != true {
		t.Errorf("me after enrolment: %s; want secondFactor true", me.body)
	}

	login(loginBody(operatorEmail, operatorPassword)).expect(t, "password alone", http.StatusUnauthorized, "totp_required")
	login(totpLogin(operatorEmail, operatorPassword, "totp", code)).expect(t, "the confirmation's code replayed", http.StatusUnauthorized, "invalid_second_factor")
	login(totpLogin(operatorEmail, "not the password", "totp", code)).expect(t, "wrong password with a code", http.StatusUnauthorized, "invalid_credentials")
	e.clock.Advance(30 * time.Second)
	code, _ = operators.TOTPCode(secret, e.clock.Now())
	res = login(totpLogin(operatorEmail, operatorPassword, "totp", code))
	res.expect(t, "password and the current code", http.StatusNoContent, "")
	if len(res.cookies) == 0 || res.cookies[0].Name != controlapi.SessionCookie {
		t.Errorf("no session cookie after a TOTP login: %v", res.cookies)
	}
	login(totpLogin(operatorEmail, operatorPassword, "totp", code)).expect(t, "the same code again", http.StatusUnauthorized, "invalid_second_factor")
	login(totpLogin(operatorEmail, operatorPassword, "recoveryCode", rc.RecoveryCodes[0])).expect(t, "a recovery code", http.StatusNoContent, "")
	login(totpLogin(operatorEmail, operatorPassword, "recoveryCode", rc.RecoveryCodes[0])).expect(t, "the recovery code again", http.StatusUnauthorized, "invalid_second_factor")

	// An API token of the operator cannot enrol or re-enrol.
	res = e.do(request{method: "POST", path: "/api/tokens", session: e.session, body: `{"name":"script","role":"admin","tenants":[]}`})
	res.expect(t, "token", http.StatusCreated, "")
	bearer := map[string]string{"Authorization": "Bearer " + str(t, res.object(t), "token")}
	e.do(request{method: "POST", path: "/api/auth/me/totp", header: bearer}).expect(t, "enrol with a token", http.StatusForbidden, "forbidden")

	// The audit trail has the enrolment and the refusals.
	res = e.do(request{method: "GET", path: "/api/audit?limit=100", session: e.session})
	res.expect(t, "audit", http.StatusOK, "")
	for _, want := range []string{`"auth.totp_begin"`, `"auth.totp_enable"`, `"totp_required"`, `"invalid_second_factor"`} {
		if !strings.Contains(string(res.body), want) {
			t.Errorf("audit trail lacks %s", want)
		}
	}
}

// TestRequireAdminSecondFactorOverHTTP: with the setting on, an admin
// without a second factor signs in but gets 403 second_factor_required
// everywhere except enrolment; after enrolling, everything works. An admin
// resets a lost factor; a viewer may not.
func TestRequireAdminSecondFactorOverHTTP(t *testing.T) {
	t.Parallel()
	// Not validated against the OpenAPI description: 403
	// second_factor_required can answer any operator route, which the
	// description says once rather than on every route.
	e := withSecondFactors(t, newEnv(t, options{}), false)
	e.enrolTOTP(t, e.session)

	secondID := e.createAdmin(t, "second@example.com")
	res := e.do(request{method: "POST", path: "/api/operators", session: e.session,
		body: `{"email":"viewer@example.com","password":"viewer long passphrase","role":"viewer","tenants":[]}`})
	res.expect(t, "create a viewer", http.StatusCreated, "")

	e.requireAdminSecondFactor(t)
	if got := e.do(request{method: "GET", path: "/api/auth/settings", session: e.session}).object(t)["requireAdminSecondFactor"]; got != true {
		t.Errorf("settings read back %v", got)
	}
	viewer := e.loginAs("viewer@example.com", "viewer long passphrase")
	e.do(request{method: "PATCH", path: "/api/auth/settings", session: viewer, body: `{"requireAdminSecondFactor":false}`}).
		expect(t, "a viewer changes the settings", http.StatusForbidden, "forbidden")
	e.do(request{method: "GET", path: "/api/tenants", session: viewer}).expect(t, "a viewer is not limited", http.StatusOK, "")

	second := e.loginAs("second@example.com", secondAdminPassword)
	e.do(request{method: "GET", path: "/api/tenants", session: second}).
		expect(t, "admin without a factor: GET /api/tenants", http.StatusForbidden, "second_factor_required")
	e.expectEnrolmentOnly(t, "admin without a factor", func(rq *request) { rq.session = second })
	if me := e.do(request{method: "GET", path: "/api/auth/me", session: second}).object(t); me["secondFactorRequired"] != true {
		t.Errorf("me of an enrolment-only session: %v", me)
	}
	e.enrolTOTP(t, second)
	e.do(request{method: "GET", path: "/api/tenants", session: second}).expect(t, "the same session after enrolment", http.StatusOK, "")

	e.do(request{method: "DELETE", path: "/api/operators/" + secondID + "/totp", session: viewer}).
		expect(t, "a viewer resets a second factor", http.StatusForbidden, "forbidden")
	e.do(request{method: "DELETE", path: "/api/operators/" + secondID + "/totp", session: e.session}).
		expect(t, "an admin resets a lost factor", http.StatusNoContent, "")
	e.do(request{method: "GET", path: "/api/tenants", session: second}).
		expect(t, "after the reset, enrolment only again", http.StatusForbidden, "second_factor_required")
	if o, err := e.store.OperatorByID(context.Background(), secondID); err != nil || o.SecondFactor {
		t.Errorf("stored operator after the reset: %+v, %v", o, err)
	}
}

// secondAdminPassword is the password of the admins createAdmin adds.
const secondAdminPassword = "another long passphrase"

// createAdmin adds an admin (no second factor) and returns its id.
func (e *env) createAdmin(t *testing.T, email string) string {
	t.Helper()
	res := e.do(request{method: "POST", path: "/api/operators", session: e.session,
		body: fmt.Sprintf(`{"email":%q,"password":%q,"role":"admin","tenants":[]}`, email, secondAdminPassword)})
	res.expect(t, "create a second admin", http.StatusCreated, "")
	return str(t, res.object(t), "id")
}

// requireAdminSecondFactor turns the deployment's requirement on.
func (e *env) requireAdminSecondFactor(t *testing.T) {
	t.Helper()
	e.do(request{method: "PATCH", path: "/api/auth/settings", session: e.session, body: `{"requireAdminSecondFactor":true}`}).
		expect(t, "require a second factor for admins", http.StatusOK, "")
}

// expectEnrolmentOnly checks that admin routes, sent with the credentials
// auth sets, are refused 403 second_factor_required.
func (e *env) expectEnrolmentOnly(t *testing.T, who string, auth func(*request)) {
	t.Helper()
	for _, rq := range []request{
		{method: "GET", path: "/api/operators"},
		{method: "POST", path: "/api/tenants", body: `{"id":"sneaky","name":"Sneaky"}`},
		{method: "PATCH", path: "/api/auth/settings", body: `{"requireAdminSecondFactor":false}`},
		{method: "POST", path: "/api/tokens", body: `{"name":"x","role":"admin","tenants":[]}`},
	} {
		auth(&rq)
		e.do(rq).expect(t, who+": "+rq.method+" "+rq.path, http.StatusForbidden, "second_factor_required")
	}
}
