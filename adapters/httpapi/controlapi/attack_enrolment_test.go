package controlapi_test

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// provenSensor redeems a claim code and enrols with a proof; it returns
// the sensor, its enrolment token, key and CSR, and the answer.
func (e *env) provenSensor(t *testing.T) (id, token string, key *ecdsa.PrivateKey, csr string, answer map[string]any) {
	t.Helper()
	id, token = e.redeem("acme")
	key, csr = newKeyCSR(t)
	res := e.do(enrolRequest(id, token, enrolBody(t, key, id, csr, e.clock.Now())))
	res.expect(t, "enrol with a proof", http.StatusCreated, "")
	return id, token, key, csr, res.object(t)
}

func (e *env) activeCertificates(t *testing.T, sensorID string) (serials []string) {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), `SELECT serial FROM sensor_certificates WHERE sensor_id = $1 AND active`, sensorID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		serials = append(serials, s)
	}
	return serials
}

// Attack over HTTP, on PostgreSQL and the real CA: an enrolment whose
// answer was lost. A copy of the answered request (a proxy's log) answers
// 409 and hands out nothing; another CSR, another sensor's token, the
// token after a renewal, after revocation or after its expiry are refused;
// the agent's own request with a fresh proof (positive control) gets a
// certificate for its key, superseding the undelivered one.
func TestAttackEnrolmentAnsweredAgain(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	id, token := e.redeem("acme")
	key, csr := newKeyCSR(t)
	captured := enrolRequest(id, token, enrolBody(t, key, id, csr, e.clock.Now()))
	lost := e.do(captured)
	lost.expect(t, "the enrolment (its answer lost)", http.StatusCreated, "")
	lostSerial := str(t, lost.object(t), "serial")
	otherID, otherToken, _, _, _ := e.provenSensor(t)

	e.clock.Advance(20 * time.Second)
	replay := e.do(captured)
	if replay.status == http.StatusCreated {
		t.Fatalf("BROKEN: the copy of the answered enrolment was answered: %s", replay.body)
	}
	replay.expect(t, "a copy of the answered request", http.StatusConflict, "conflict")
	otherKey, otherCSR := newKeyCSR(t)
	e.do(enrolRequest(id, token, enrolBody(t, otherKey, id, otherCSR, e.clock.Now()))).
		expect(t, "another CSR with the used token", http.StatusUnauthorized, "invalid_token")
	e.do(enrolRequest(id, otherToken, enrolBody(t, key, id, csr, e.clock.Now()))).
		expect(t, "another sensor's used token", http.StatusUnauthorized, "invalid_token")
	e.do(enrolRequest(otherID, token, enrolBody(t, key, otherID, csr, e.clock.Now()))).
		expect(t, "the token on another sensor", http.StatusUnauthorized, "invalid_token")
	e.do(enrolRequest(id, token, jsonString(t, map[string]string{"csr": csr}))).
		expect(t, "the request without a proof (an old agent)", http.StatusUnauthorized, "invalid_token")
	e.do(enrolRequest(id, token, enrolBody(t, otherKey, id, csr, e.clock.Now()))).
		expect(t, "a proof by another key", http.StatusForbidden, "invalid_proof")
	if got := e.activeCertificates(t, id); len(got) != 1 || got[0] != lostSerial {
		t.Fatalf("refused requests changed the active certificates to %v", got)
	}

	again := e.do(enrolRequest(id, token, enrolBody(t, key, id, csr, e.clock.Now())))
	again.expect(t, "positive control: the agent sends its request again with a fresh proof", http.StatusCreated, "")
	answer := again.object(t)
	serial := str(t, answer, "serial")
	block, _ := pem.Decode([]byte(str(t, answer, "certificate")))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) || serial == lostSerial {
		t.Fatalf("the answer sent again is not a new certificate for the agent's key (serial %s, lost %s)", serial, lostSerial)
	}
	if answer["nats"] == nil || str(t, answer, "sensorToken") == "" {
		t.Fatalf("the answer sent again lacks NATS credentials or a sensor token: %s", again.body)
	}
	if got := e.activeCertificates(t, id); len(got) != 1 || got[0] != serial {
		t.Fatalf("active certificates %v, want only %s", got, serial)
	}

	// A renewal ends it.
	e.clock.Advance(2 * time.Minute)
	_, renewCSR := newKeyCSR(t)
	e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/renew",
		body:   renewBody(t, key, str(t, answer, "certificate"), id, renewCSR, e.clock.Now()),
		header: map[string]string{"Authorization": "Bearer " + str(t, answer, "sensorToken")}}).expect(t, "renew", http.StatusOK, "")
	e.do(enrolRequest(id, token, enrolBody(t, key, id, csr, e.clock.Now()))).
		expect(t, "the re-ask after a renewal", http.StatusUnauthorized, "invalid_token")

	// Revocation ends it.
	rid, rtoken, rkey, rcsr, _ := e.provenSensor(t)
	e.do(request{method: "POST", path: "/api/sensors/" + rid + "/revoke", operator: true}).expect(t, "revoke", http.StatusOK, "")
	e.clock.Advance(time.Second)
	e.do(enrolRequest(rid, rtoken, enrolBody(t, rkey, rid, rcsr, e.clock.Now()))).
		expect(t, "the re-ask after revocation", http.StatusForbidden, "sensor_revoked")

	// The token's original expiry ends it.
	xid, xtoken, xkey, xcsr, _ := e.provenSensor(t)
	e.clock.Advance(fleet.DefaultEnrollmentTokenTTL)
	e.do(enrolRequest(xid, xtoken, enrolBody(t, xkey, xid, xcsr, e.clock.Now()))).
		expect(t, "the re-ask after the token's expiry", http.StatusUnauthorized, "invalid_token")
}

// Re-asks racing on PostgreSQL leave one active certificate: one is
// answered, the others refused.
func TestAttackEnrolmentReAsksRacing(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	id, token, key, csr, _ := e.provenSensor(t)
	e.clock.Advance(time.Second)
	const n = 6
	statuses := map[int]int{}
	for _, res := range atOnce(n, func(int) response {
		return e.do(enrolRequest(id, token, enrolBody(t, key, id, csr, e.clock.Now())))
	}) {
		statuses[res.status]++
	}
	if statuses[http.StatusCreated] != 1 || statuses[http.StatusCreated]+statuses[http.StatusConflict]+statuses[http.StatusUnauthorized] != n {
		t.Fatalf("answers %v, want one 201 and the rest 409 or 401", statuses)
	}
	if got := e.activeCertificates(t, id); len(got) != 1 {
		t.Fatalf("active certificates %v, want one", got)
	}
}
