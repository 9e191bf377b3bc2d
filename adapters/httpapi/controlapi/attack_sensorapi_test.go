package controlapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

// Attacks on the sensors' routes since they moved to package sensorapi:
// a claim code redeemed twice, an enrolment token replayed or used on
// another tenant's sensor, a sensor token used on another sensor's renewal
// or as an operator's bearer, an enrolment token at renewal, malformed
// path ids. Each refusal answers the catalogue code and hands out nothing;
// each has its positive control beside it (the same credential on its own
// route works once).
func TestAttackSensorRoutesKeepTheirChecks(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	e.createTenant("globex")

	// A claim code is redeemed once.
	_, code := e.claimCode("acme", "")
	body := fmt.Sprintf(`{"claimCode":%q}`, code)
	e.do(request{method: "POST", path: "/api/sensors/claim/redeem", body: body}).expect(t, "control: the first redemption", http.StatusCreated, "")
	e.do(request{method: "POST", path: "/api/sensors/claim/redeem", body: body}).expect(t, "the claim code redeemed again", http.StatusBadRequest, "invalid_claim_code")

	// An enrolment token works on its own sensor only, and once.
	acmeID, acmeEnrol := e.redeem("acme")
	globexID, globexEnrol := e.redeem("globex")
	enrol := func(id, token string) response {
		return e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
			header: map[string]string{"Authorization": "Bearer " + token}})
	}
	denied := func(what string, r response, status int, code string) {
		t.Helper()
		r.expect(t, what, status, code)
		obj := r.object(t)
		for _, k := range []string{"sensorToken", "certificate", "nats", "enrollmentToken"} {
			if _, ok := obj[k]; ok {
				t.Errorf("%s: the refusal carries %q", what, k)
			}
		}
	}
	denied("acme's enrolment token on globex's sensor", enrol(globexID, acmeEnrol), http.StatusUnauthorized, "invalid_token")
	res := enrol(acmeID, acmeEnrol)
	res.expect(t, "control: acme's token on acme's sensor", http.StatusCreated, "")
	acmeToken := str(t, res.object(t), "sensorToken")
	denied("the enrolment token replayed", enrol(acmeID, acmeEnrol), http.StatusUnauthorized, "invalid_token")
	res = enrol(globexID, globexEnrol)
	res.expect(t, "control: globex's token, unharmed by acme's attempt", http.StatusCreated, "")
	globexToken := str(t, res.object(t), "sensorToken")

	// A sensor token renews its own sensor only (no proof: the
	// possession check comes after the token's; the token check must
	// refuse first).
	renew := func(id, token string) response {
		return e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/renew", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
			header: map[string]string{"Authorization": "Bearer " + token}})
	}
	denied("acme's sensor token on globex's renewal", renew(globexID, acmeToken), http.StatusUnauthorized, "invalid_token")
	denied("globex's enrolment token (spent) at renewal", renew(globexID, globexEnrol), http.StatusUnauthorized, "invalid_token")
	if r := renew(acmeID, acmeToken); r.status == http.StatusUnauthorized {
		t.Errorf("control: acme's own token on its renewal is refused as a token: %d %s", r.status, r.body)
	}

	// A sensor token is no operator credential.
	for _, tok := range []string{acmeToken, globexToken, "rxc_" + acmeToken} {
		r := e.do(request{method: "GET", path: "/api/sensors", header: map[string]string{"Authorization": "Bearer " + tok}})
		if r.status != http.StatusUnauthorized {
			t.Errorf("a sensor token as an operator's bearer: %d %s", r.status, r.body)
		}
	}

	// Path ids are validated before anything is looked up.
	for _, id := range []string{"..", "a.b", "-x", "%2e%2e", "a%00b"} {
		r := enrol(id, acmeToken)
		if r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
			t.Errorf("enrol at id %q: %d %s", id, r.status, r.body)
		}
		if r.status == http.StatusCreated || r.status == http.StatusOK {
			t.Errorf("enrol at id %q answered %d", id, r.status)
		}
	}
}
