package controlapi_test

import (
	"net/http"
	"testing"
	"time"
)

// Attack over HTTP: a renewal request is captured and replayed byte for
// byte after the control plane answered it. The replay answers 409
// conflict and hands out nothing (no certificate, token or NATS
// credentials); the agent's own request sent again with a fresh proof
// (positive control) is answered, and its copy is refused in turn.
func TestAttackReplayedRenewalRequest(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	id, enrolToken := e.redeem("acme")
	key, csr := newKeyCSR(t)
	res := e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: jsonString(t, map[string]string{"csr": csr}),
		header: map[string]string{"Authorization": "Bearer " + enrolToken}})
	res.expect(t, "enrol", http.StatusCreated, "")
	enrolled := res.object(t)
	certPEM, token := str(t, enrolled, "certificate"), str(t, enrolled, "sensorToken")

	e.clock.Advance(time.Hour)
	_, renewCSR := newKeyCSR(t)
	captured := request{method: "POST", path: "/api/sensors/" + id + "/agent/renew", body: renewBody(t, key, certPEM, id, renewCSR, e.clock.Now()),
		header: map[string]string{"Authorization": "Bearer " + token}}
	e.do(captured).expect(t, "the renewal", http.StatusOK, "")

	e.clock.Advance(20 * time.Second)
	replay := e.do(captured)
	if replay.status == http.StatusOK {
		t.Fatalf("BROKEN: the replayed renewal request was answered: %s", replay.body)
	}
	replay.expect(t, "the replayed request", http.StatusConflict, "conflict")

	again := captured
	again.body = renewBody(t, key, certPEM, id, renewCSR, e.clock.Now())
	e.do(again).expect(t, "positive control: the agent sends its request again with a fresh proof", http.StatusOK, "")
	e.clock.Advance(time.Second)
	e.do(again).expect(t, "a copy of the request sent again", http.StatusConflict, "conflict")
}
