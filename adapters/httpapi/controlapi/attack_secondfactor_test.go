package controlapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/operators"
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
	e.createAdmin(t, "nofactor@example.com")
	second := e.loginAs("nofactor@example.com", secondAdminPassword)
	res := e.do(request{method: "POST", path: "/api/tokens", session: second, body: `{"name":"script","role":"admin","tenants":[]}`})
	res.expect(t, "admin token minted with the password alone", http.StatusCreated, "")
	bearer := map[string]string{"Authorization": "Bearer " + str(t, res.object(t), "token")}

	e.requireAdminSecondFactor(t)
	e.do(request{method: "GET", path: "/api/tenants", session: second}).
		expect(t, "the session of the admin without a factor", http.StatusForbidden, "second_factor_required")
	e.expectEnrolmentOnly(t, "token of an admin without a factor", func(rq *request) { rq.header = bearer })
}

// twoReplicas serves two control planes over one database, each with its
// own operators service sealing with the same key, as two replicas behind
// a load balancer are.
func twoReplicas(t *testing.T) (*env, *env) {
	t.Helper()
	base := newEnv(t, options{})
	cfg := operators.Config{Hasher: fastHasher(t), Sealer: newSealer(t), MaxConcurrentHashes: 16}
	replica := func() *env { return base.withOperators(t, cfg) }
	return replica(), replica()
}

// TestAttackSecondFactorReplayAcrossReplicas: the same TOTP code, and the
// same recovery code, sent at once to two replicas signs in exactly once.
func TestAttackSecondFactorReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	r1, r2 := twoReplicas(t)
	secret, recovery := r1.enrolTOTP(t, r1.session)
	r1.clock.Advance(30 * time.Second)
	code, err := operators.TOTPCode(secret, r1.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	race := func(what, field, value string) {
		t.Helper()
		// Fewer than the pair threshold (5), so no refusal is a throttle.
		const n = 4
		logins := atOnce(n, func(i int) response {
			r := r1
			if i%2 == 1 {
				r = r2
			}
			return r.do(request{method: "POST", path: "/api/auth/login", body: totpLogin(operatorEmail, operatorPassword, field, value)})
		})
		ok := 0
		for _, res := range logins {
			switch {
			case res.status == http.StatusNoContent:
				ok++
			case res.status == http.StatusUnauthorized && res.problemCode() == "invalid_second_factor":
			default:
				t.Errorf("%s: %d %s", what, res.status, res.body)
			}
		}
		if ok != 1 {
			t.Errorf("%s sent %d times at once to two replicas signed in %d times, want once", what, n, ok)
		}
	}
	race("one TOTP code", "totp", code)
	r1.clock.Advance(2 * time.Hour) // the failures above are forgotten
	race("one recovery code", "recoveryCode", recovery[0])
}
