package controlapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

type auditRecord struct {
	Actor, ActorID, Action, TenantID, Target, Outcome, Source, Detail string
	Status                                                            int
}

func (w *rbacWorld) audit(t *testing.T, who string, q url.Values) []auditRecord {
	t.Helper()
	q.Set("limit", "500")
	res := w.as(who, request{method: "GET", path: "/api/audit?" + q.Encode()})
	res.expectStatus(t, "audit "+q.Encode(), http.StatusOK)
	var out struct{ Items []auditRecord }
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// TestSensorSideAudit: redemption, enrolment and renewal reach the audit
// trail with the sensor as the actor, its tenant, its address and the
// outcome, refused attempts too; revocation and decommission with the
// operator; all filterable like the rest and scoped by tenant.
func TestSensorSideAudit(t *testing.T) {
	w := newRBACWorld(t) // enrols a sensor in acme and in globex
	acme := w.sensor["acme"]
	one := func(who string, q url.Values) auditRecord {
		t.Helper()
		got := w.audit(t, who, q)
		if len(got) != 1 {
			t.Fatalf("audit %v as %s: %d records, want 1: %+v", q, who, len(got), got)
		}
		return got[0]
	}
	enrol := one("viewer", url.Values{"action": {"sensor.enroll"}, "actor": {"sensor:" + acme}})
	if enrol.TenantID != "acme" || enrol.Target != acme || enrol.Outcome != "success" || enrol.Status != http.StatusCreated || enrol.Source == "" || enrol.ActorID != "" {
		t.Errorf("enrolment record %+v", enrol)
	}
	redeem := one("admin", url.Values{"action": {"sensor.redeem"}, "actor": {"sensor:" + acme}})
	if redeem.TenantID != "acme" || redeem.Outcome != "success" || redeem.Status != http.StatusCreated {
		t.Errorf("redemption record %+v", redeem)
	}

	// Refused: a wrong claim code (no sensor yet: only admins see it), a
	// wrong enrolment token on acme's sensor (acme's trail), renewal with
	// a made-up token.
	w.e.do(request{method: "POST", path: "/api/sensors/claim/redeem", body: `{"claimCode":"WRONG-CODE-0000"}`}).expect(t, "bad code", http.StatusBadRequest, "invalid_claim_code")
	bad := one("admin", url.Values{"action": {"sensor.redeem"}, "actor": {"sensor"}})
	if bad.Outcome != "failure" || bad.Detail != "invalid_claim_code" || bad.TenantID != "" || bad.Source == "" {
		t.Errorf("refused redemption %+v", bad)
	}
	if got := w.audit(t, "viewer", url.Values{"action": {"sensor.redeem"}, "actor": {"sensor"}}); len(got) != 0 {
		t.Errorf("a viewer of acme sees tenantless refusals: %+v", got)
	}
	w.e.do(request{method: "POST", path: "/api/sensors/" + acme + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer not-the-token"}}).expect(t, "enrol with a wrong token", http.StatusUnauthorized, "invalid_token")
	denied := w.audit(t, "operator", url.Values{"action": {"sensor.enroll"}, "tenantId": {"acme"}})
	if len(denied) != 2 || denied[0].Outcome != "denied" || denied[0].Detail != "invalid_token" || denied[0].Actor != "sensor:"+acme {
		t.Errorf("acme's enrolment records %+v, want the refused one first", denied)
	}
	w.e.do(request{method: "POST", path: "/api/sensors/" + acme + "/agent/renew", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer made-up"}}).expect(t, "renew with a made-up token", http.StatusUnauthorized, "invalid_token")
	renew := one("viewer", url.Values{"action": {"sensor.renew"}})
	if renew.Outcome != "denied" || renew.TenantID != "acme" || renew.Target != acme {
		t.Errorf("refused renewal %+v", renew)
	}
	// Another tenant's sensor-side records stay out of acme's trail.
	for _, r := range w.audit(t, "viewer", url.Values{}) {
		if r.TenantID != "acme" {
			t.Errorf("a viewer of acme sees %+v", r)
		}
	}
	if got := w.audit(t, "admin", url.Values{"action": {"sensor.enroll"}, "tenantId": {"globex"}}); len(got) != 1 || got[0].Actor != "sensor:"+w.sensor["globex"] {
		t.Errorf("globex's enrolment records %+v", got)
	}

	// Revocation and decommission: the operator as the actor.
	w.as("operator", request{method: "POST", path: "/api/sensors/" + acme + "/revoke"}).expectStatus(t, "revoke", http.StatusOK)
	w.as("operator", request{method: "DELETE", path: "/api/sensors/" + acme}).expectStatus(t, "decommission", http.StatusNoContent)
	for _, action := range []string{"sensor.revoke", "sensor.decommission"} {
		r := one("viewer", url.Values{"action": {action}, "tenantId": {"acme"}})
		if r.Actor != "operator@acme.example" || r.Target != acme || r.Outcome != "success" {
			t.Errorf("%s record %+v", action, r)
		}
	}
	w.as("viewer", request{method: "DELETE", path: "/api/sensors/" + acme}).expect(t, "viewer decommissions", http.StatusForbidden, "forbidden")
	if got := w.audit(t, "admin", url.Values{"action": {"sensor.decommission"}, "actor": {"viewer@acme.example"}}); len(got) != 1 || got[0].Outcome != "denied" {
		t.Errorf("the viewer's refused decommission: %+v", got)
	}
}
