package controlapi_test

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/fleet"
)

// wantObject fails unless the answer has the status and exactly the JSON
// object want.
func wantObject(t *testing.T, what string, res response, status int, want map[string]any) {
	t.Helper()
	if res.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, res.status, status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	if diff := cmp.Diff(want, res.object(t)); diff != "" {
		t.Errorf("%s: body mismatch (-want +got):\n%s", what, diff)
	}
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// str returns a string member, failing unless it is a non-empty string.
func str(t *testing.T, m map[string]any, key string) string {
	t.Helper()
	s, ok := m[key].(string)
	if !ok || s == "" {
		t.Fatalf("member %q = %#v, want a non-empty string", key, m[key])
	}
	return s
}

// verifyCertificate checks that certPEM chains to caPEM for client
// authentication and names the sensor in its URI SAN, and returns it.
func verifyCertificate(t *testing.T, certPEM, caPEM, tenantID, sensorID string, at time.Time) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatal("caCertificate holds no certificate")
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("certificate is not PEM: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("certificate does not chain to caCertificate: %v", err)
	}
	wantURI := fmt.Sprintf("urn:rxc:sensor:%s:%s", tenantID, sensorID)
	if len(cert.URIs) != 1 || cert.URIs[0].String() != wantURI || cert.Subject.CommonName != sensorID {
		t.Fatalf("certificate names %v (CN %q), want URI SAN %s and CN %s", cert.URIs, cert.Subject.CommonName, wantURI, sensorID)
	}
	return cert
}

// TestFlow walks a sensor's life over HTTP and checks every answer's shape:
// login, tenant, claim code, redemption, enrolment with a real CSR, renewal,
// a command, revocation, logout. Each step is a subtest and builds on the
// ones before it, so the walk stops at the first step that fails.
func TestFlow(t *testing.T) {
	t.Parallel()
	f := &flow{e: newEnv(t, options{provisioning: true})}
	f.t0 = f.e.clock.Now()
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Me", f.me},
		{"CreateTenant", f.createTenant},
		{"IssueClaimCode", f.issueClaimCode},
		{"Redeem", f.redeem},
		{"Enrol", f.enrol},
		{"Renew", f.renew},
		{"Command", f.command},
		{"ListSensors", f.listSensors},
		{"Revoke", f.revoke},
		{"RevokeClaimCodes", f.revokeClaimCodes},
		{"Logout", f.logout},
	} {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %s failed; the later steps build on it", step.name)
		}
	}
}

// flow is what TestFlow's steps hand on to the next.
type flow struct {
	e      *env
	t0, t1 time.Time // the start and the renewal, an hour later

	codeID, code string
	claim        map[string]any // the claim code as the list shows it
	sensorID     string
	sensor       map[string]any // the sensor as GET /api/sensors/{id} shows it

	enrolToken, sensorToken string
	enrolKey                *ecdsa.PrivateKey
	certPEM, caPEM, serial  string
	renewal                 request // sent again after the revocation
	renewedToken            string
}

// sensorNATS is the nats member of the enrolment's and the renewal's answer.
func (f *flow) sensorNATS() map[string]any {
	id := f.sensorID
	return map[string]any{
		"url": publicNATS, "creds": "creds of " + id, "stream": "RXC_CMD", "consumer": "cmd-acme-" + id,
		"jsApiPrefix": "ctrl.API", "inboxPrefix": "_INBOX_acme_" + id,
		"commandSubject": "rxc.acme." + id + ".cmd", "statusSubject": "rxc.acme." + id + ".status",
	}
}

// getSensor checks GET /api/sensors/{id} against f.sensor.
func (f *flow) getSensor(t *testing.T, what string) {
	t.Helper()
	wantObject(t, what, f.e.do(request{method: "GET", path: "/api/sensors/" + f.sensorID, operator: true}), http.StatusOK, f.sensor)
}

// listClaimCodes checks the tenant's claim-code list against f.claim.
func (f *flow) listClaimCodes(t *testing.T, what string) {
	t.Helper()
	wantObject(t, what, f.e.do(request{method: "GET", path: "/api/tenants/acme/claim-codes", operator: true}), http.StatusOK, map[string]any{"items": []any{f.claim}})
}

func (f *flow) me(t *testing.T) {
	res := f.e.do(request{method: "GET", path: "/api/auth/me", operator: true})
	me := res.object(t)
	wantObject(t, "me", res, http.StatusOK, map[string]any{"id": str(t, me, "id"), "email": operatorEmail, "role": "admin", "tenants": []any{}, "secondFactor": false, "secondFactorRequired": false})
}

func (f *flow) createTenant(t *testing.T) {
	e, t0 := f.e, f.t0
	pendingTenant := map[string]any{"id": "acme", "name": "Acme", "natsAccountPubKey": nil, "natsStatus": "pending", "createdAt": ts(t0)}
	res := e.do(request{method: "POST", path: "/api/tenants", body: `{"id":"acme","name":"Acme"}`, operator: true})
	wantObject(t, "create tenant", res, http.StatusCreated, pendingTenant)
	res = e.do(request{method: "POST", path: "/api/tenants", body: `{"id":"acme","name":"Acme"}`, operator: true})
	wantObject(t, "create the same tenant again", res, http.StatusOK, pendingTenant)
	res = e.do(request{method: "POST", path: "/api/tenants", body: `{"id":"acme","name":"Other"}`, operator: true})
	res.expect(t, "same id, other name", http.StatusConflict, "conflict")

	if _, err := e.fleet.ReconcileTenants(t.Context()); err != nil {
		t.Fatal(err)
	}
	tenant := map[string]any{"id": "acme", "name": "Acme", "natsAccountPubKey": "A-acme", "natsStatus": "provisioned", "createdAt": ts(t0)}
	wantObject(t, "list tenants", e.do(request{method: "GET", path: "/api/tenants", operator: true}), http.StatusOK, map[string]any{"items": []any{tenant}})
	wantObject(t, "get tenant", e.do(request{method: "GET", path: "/api/tenants/acme", operator: true}), http.StatusOK, tenant)
}

func (f *flow) issueClaimCode(t *testing.T) {
	t0 := f.t0
	res := f.e.do(request{method: "POST", path: "/api/tenants/acme/claim-codes", body: `{"ttlSeconds":3600,"sensorName":"edge-1"}`, operator: true})
	issued := res.object(t)
	f.codeID, f.code = str(t, issued, "id"), str(t, issued, "code")
	if _, err := fleet.NormalizeClaimCode(f.code); err != nil {
		t.Fatalf("issued code %q does not parse: %v", f.code, err)
	}
	wantObject(t, "issue claim code", res, http.StatusCreated, map[string]any{"id": f.codeID, "code": f.code, "expiresAt": ts(t0.Add(time.Hour))})

	f.claim = map[string]any{
		"id": f.codeID, "tenantId": "acme", "sensorName": "edge-1", "expiresAt": ts(t0.Add(time.Hour)), "createdAt": ts(t0),
		"usedAt": nil, "revokedAt": nil, "sensorId": nil,
	}
	f.listClaimCodes(t, "list claim codes")
}

func (f *flow) redeem(t *testing.T) {
	t0 := f.t0
	// Codes typed by hand: lower case, no dashes.
	typed := strings.ToLower(strings.ReplaceAll(f.code, "-", ""))
	res := f.e.do(request{method: "POST", path: "/api/sensors/claim/redeem", body: fmt.Sprintf(`{"claimCode":%q,"hostname":"edge-host"}`, typed)})
	red := res.object(t)
	f.sensorID, f.enrolToken = str(t, red, "sensorId"), str(t, red, "enrollmentToken")
	if !regexp.MustCompile(`^s-[0-9a-f]{16}$`).MatchString(f.sensorID) {
		t.Errorf("sensorId %q", f.sensorID)
	}
	wantObject(t, "redeem", res, http.StatusCreated, map[string]any{"sensorId": f.sensorID, "tenantId": "acme", "enrollmentToken": f.enrolToken, "expiresAt": ts(t0.Add(15 * time.Minute))})

	f.claim["usedAt"], f.claim["sensorId"] = ts(t0), f.sensorID
	f.listClaimCodes(t, "claim code after use")

	f.sensor = map[string]any{
		"id": f.sensorID, "tenantId": "acme", "name": "edge-1", "hostname": "edge-host", "state": "pending",
		"lastSeenAt": nil, "certificate": nil, "lastCommand": nil, "createdAt": ts(t0),
		"agentVersion": nil, "address": nil, "labels": map[string]any{}, "decommissionedAt": nil,
	}
	f.getSensor(t, "pending sensor")
}

func (f *flow) enrol(t *testing.T) {
	e, t0, sensorID := f.e, f.t0, f.sensorID
	var enrolCSR string
	f.enrolKey, enrolCSR = newKeyCSR(t)
	enrol := request{method: "POST", path: "/api/sensors/" + sensorID + "/agent/enroll", body: jsonString(t, map[string]string{"csr": enrolCSR}),
		header: map[string]string{"Authorization": "Bearer " + f.enrolToken}}
	res := e.do(enrol)
	en := res.object(t)
	f.certPEM, f.caPEM, f.serial, f.sensorToken = str(t, en, "certificate"), str(t, en, "caCertificate"), str(t, en, "serial"), str(t, en, "sensorToken")
	if f.caPEM != string(e.ca.CACertificatePEM()) {
		t.Error("caCertificate is not the sensor CA")
	}
	cert := verifyCertificate(t, f.certPEM, f.caPEM, "acme", sensorID, t0)
	if x509ca.SerialHex(cert.SerialNumber) != f.serial {
		t.Errorf("serial %q, certificate says %s", f.serial, x509ca.SerialHex(cert.SerialNumber))
	}
	notAfter := t0.Add(fleet.DefaultSensorCertTTL)
	wantObject(t, "enroll", res, http.StatusCreated, map[string]any{
		"sensorId": sensorID, "tenantId": "acme", "certificate": f.certPEM, "caCertificate": f.caPEM,
		"serial": f.serial, "notAfter": ts(notAfter), "sensorToken": f.sensorToken,
		"nats": f.sensorNATS(),
		"grpc": map[string]any{"address": publicGRPC},
	})
	enrol.body = jsonString(t, map[string]string{"csr": newCSR(t)})
	e.do(enrol).expect(t, "enrol twice with one token", http.StatusUnauthorized, "invalid_token")

	f.sensor["state"], f.sensor["certificate"] = "offline", map[string]any{"serial": f.serial, "notAfter": ts(notAfter)}
	f.getSensor(t, "enrolled sensor")
}

func (f *flow) renew(t *testing.T) {
	e, sensorID := f.e, f.sensorID
	e.clock.Advance(time.Hour)
	t1 := e.clock.Now()
	f.t1 = t1
	renewCSR := newCSR(t)
	f.renewal = request{method: "POST", path: "/api/sensors/" + sensorID + "/agent/renew", body: renewBody(t, f.enrolKey, f.certPEM, sensorID, renewCSR, t1),
		header: map[string]string{"Authorization": "Bearer " + f.sensorToken}}
	res := e.do(f.renewal)
	rn := res.object(t)
	f.renewedToken = str(t, rn, "sensorToken")
	if f.renewedToken == f.sensorToken {
		t.Error("renewal kept the sensor token")
	}
	renewedPEM, renewedSerial := str(t, rn, "certificate"), str(t, rn, "serial")
	verifyCertificate(t, renewedPEM, f.caPEM, "acme", sensorID, t1)
	if renewedSerial == f.serial {
		t.Error("renewal kept the serial")
	}
	wantObject(t, "renew", res, http.StatusOK, map[string]any{
		"sensorId": sensorID, "sensorToken": f.renewedToken, "certificate": renewedPEM, "caCertificate": f.caPEM, "serial": renewedSerial,
		"notAfter": ts(t1.Add(fleet.DefaultSensorCertTTL)),
		"nats":     f.sensorNATS(),
	})
	f.sensor["certificate"] = map[string]any{"serial": renewedSerial, "notAfter": ts(t1.Add(fleet.DefaultSensorCertTTL))}
}

func (f *flow) command(t *testing.T) {
	e, t1, sensorID := f.e, f.t1, f.sensorID
	res := e.do(request{method: "POST", path: "/api/sensors/" + sensorID + "/commands", body: `{"action":"start"}`, operator: true})
	commandID := str(t, res.object(t), "commandId")
	command := map[string]any{
		"commandId": commandID, "action": "start", "issuedAt": ts(t1), "issuedBy": operatorEmail,
		"expiresAt": ts(t1.Add(fleet.DefaultCommandTTL)), "idempotencyKey": nil, "status": "accepted",
		"acceptedAt": ts(t1), "streamSequence": float64(1), "failedAt": nil,
		"reportedAt": nil, "acknowledgedAt": nil, "outcome": nil, "outcomeReason": nil, "outcomeDetail": nil,
	}
	wantObject(t, "command", res, http.StatusAccepted, command)
	msgs := e.pub.Messages()
	if len(msgs) != 1 || msgs[0].TenantID != "acme" || msgs[0].SensorID != sensorID || msgs[0].ID != commandID {
		t.Fatalf("published %+v, want one command to acme/%s with id %s", msgs, sensorID, commandID)
	}
	// What the publisher puts on the wire is sensorbus's test.
	type sentCommand struct {
		ID, TenantID, SensorID, IssuedBy string
		Action                           fleet.Action
		IssuedAt, ExpiresAt              time.Time
	}
	sent := sentCommand{msgs[0].ID, msgs[0].TenantID, msgs[0].SensorID, msgs[0].IssuedBy, msgs[0].Action, msgs[0].IssuedAt, msgs[0].ExpiresAt}
	wantSent := sentCommand{commandID, "acme", sensorID, operatorEmail, fleet.ActionStart, t1, t1.Add(fleet.DefaultCommandTTL)}
	if diff := cmp.Diff(wantSent, sent); diff != "" {
		t.Errorf("published command (-want +got):\n%s", diff)
	}
	f.sensor["lastCommand"] = command
	f.getSensor(t, "sensor with command")
}

func (f *flow) listSensors(t *testing.T) {
	for _, c := range []struct {
		name, query string
		want        []any
	}{
		{"all", "", []any{f.sensor}},
		{"tenant", "?tenantId=acme", []any{f.sensor}},
		{"tenant and state", "?tenantId=acme&state=offline", []any{f.sensor}},
		{"other state", "?state=running", []any{}},
		{"other tenant", "?tenantId=globex", []any{}},
	} {
		wantObject(t, "list sensors "+c.name, f.e.do(request{method: "GET", path: "/api/sensors" + c.query, operator: true}), http.StatusOK, map[string]any{"items": c.want, "nextCursor": nil})
	}
}

func (f *flow) revoke(t *testing.T) {
	e, sensorID := f.e, f.sensorID
	res := e.do(request{method: "POST", path: "/api/sensors/" + sensorID + "/revoke", operator: true})
	f.sensor["state"], f.sensor["certificate"] = "revoked", nil
	wantObject(t, "revoke", res, http.StatusOK, f.sensor)
	if diff := cmp.Diff([][2]string{{"A-acme", "U-" + sensorID}}, e.prov.Revocations()); diff != "" {
		t.Errorf("provisioner revocations (-want +got):\n%s", diff)
	}
	wantObject(t, "revoke again", e.do(request{method: "POST", path: "/api/sensors/" + sensorID + "/revoke", operator: true}), http.StatusOK, f.sensor)
	f.renewal.header = map[string]string{"Authorization": "Bearer " + f.renewedToken}
	e.do(f.renewal).expect(t, "renew after revocation", http.StatusForbidden, "sensor_revoked")
	e.do(request{method: "POST", path: "/api/sensors/" + sensorID + "/commands", body: `{"action":"stop"}`, operator: true}).
		expect(t, "command after revocation", http.StatusConflict, "sensor_revoked")
}

func (f *flow) revokeClaimCodes(t *testing.T) {
	e := f.e
	otherID, _ := e.claimCode("acme", "")
	res := e.do(request{method: "DELETE", path: "/api/claim-codes/" + otherID, operator: true})
	if res.status != http.StatusNoContent || len(res.body) != 0 {
		t.Fatalf("revoke claim code: %d %s", res.status, res.body)
	}
	e.do(request{method: "DELETE", path: "/api/claim-codes/" + f.codeID, operator: true}).expect(t, "revoke a used claim code", http.StatusConflict, "conflict")
	var list struct {
		Items []struct{ ID, RevokedAt string }
	}
	if err := json.Unmarshal(e.do(request{method: "GET", path: "/api/tenants/acme/claim-codes", operator: true}).body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].ID != otherID || list.Items[0].RevokedAt != ts(f.t1) {
		t.Errorf("claim codes after revoking %s: %+v", otherID, list.Items)
	}
}

func (f *flow) logout(t *testing.T) {
	e := f.e
	res := e.do(request{method: "POST", path: "/api/auth/logout", operator: true})
	if res.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", res.status, res.body)
	}
	if c := sessionCookie(res); c == nil || c.Value != "" || c.MaxAge >= 0 {
		t.Errorf("logout cookie %+v, want %s cleared", c, controlapi.SessionCookie)
	}
	e.do(request{method: "GET", path: "/api/auth/me", operator: true}).expect(t, "me after logout", http.StatusUnauthorized, "unauthenticated")
}

func sessionCookie(res response) *http.Cookie {
	for _, c := range res.cookies {
		if c.Name == controlapi.SessionCookie {
			return c
		}
	}
	return nil
}
