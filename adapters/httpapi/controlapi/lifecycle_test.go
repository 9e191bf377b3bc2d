package controlapi_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type sensorView struct {
	ID, TenantID, Name, State string
	Labels                    map[string]string
	DecommissionedAt          *string
}

func (w *rbacWorld) sensorView(t *testing.T, id string) sensorView {
	t.Helper()
	res := w.as("admin", request{method: "GET", path: "/api/sensors/" + id})
	res.expectStatus(t, "read "+id, http.StatusOK)
	var s sensorView
	if err := json.Unmarshal(res.body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// enrollLabeled redeems and enrols a sensor of tenant declaring labels.
func (w *rbacWorld) enrollLabeled(t *testing.T, tenant string, labels map[string]string) (string, response) {
	t.Helper()
	id, token := w.e.redeem(tenant)
	body := jsonString(t, map[string]any{"csr": newCSR(t), "labels": labels})
	return id, w.e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: body,
		header: map[string]string{"Authorization": "Bearer " + token}})
}

func (w *rbacWorld) patch(who, id, body, contentType string) response {
	rq := request{method: "PATCH", path: "/api/sensors/" + id, body: body}
	if tok, ok := w.tokens[who]; ok {
		rq.header = map[string]string{"Authorization": "Bearer " + tok}
	} else {
		rq.session = w.sessions[who]
		rq.header = map[string]string{}
	}
	if contentType != "" {
		rq.header["Content-Type"] = contentType
	}
	return w.e.do(rq)
}

func TestSensorLabels(t *testing.T) {
	w := newRBACWorld(t)
	// Declared at enrolment; bad labels are refused before the token is
	// spent, so the sensor can enrol with good ones.
	id, token := w.e.redeem("acme")
	res := w.e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll",
		body:   jsonString(t, map[string]any{"csr": newCSR(t), "labels": map[string]string{"Site": "ams"}}),
		header: map[string]string{"Authorization": "Bearer " + token}})
	res.expect(t, "enrol with an upper-case key", http.StatusBadRequest, "invalid_labels")
	if !strings.Contains(string(res.body), `Site`) {
		t.Errorf("the refusal does not name the key: %s", res.body)
	}
	res = w.e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll",
		body:   jsonString(t, map[string]any{"csr": newCSR(t), "labels": map[string]string{"site": "ams", "role": "edge"}}),
		header: map[string]string{"Authorization": "Bearer " + token}})
	res.expectStatus(t, "enrol with labels after a refusal", http.StatusCreated)
	ams := id
	if got := w.sensorView(t, ams).Labels; !maps.Equal(got, map[string]string{"site": "ams", "role": "edge"}) {
		t.Errorf("labels after enrolment %v", got)
	}
	fra, res := w.enrollLabeled(t, "acme", map[string]string{"site": "fra", "role": "edge"})
	res.expectStatus(t, "enrol fra", http.StatusCreated)
	if got := w.sensorView(t, w.sensor["acme"]).Labels; got == nil || len(got) != 0 {
		t.Errorf("a sensor without labels shows %v, want {}", got)
	}

	// The contract's limits, each named by key, each changing nothing.
	seventeen := map[string]string{}
	for i := range 17 {
		seventeen["k"+strings.Repeat("x", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		body string
		key  string
	}{
		{"key with an upper-case letter", `{"labels":{"Site":"x"}}`, "Site"},
		{"key starting with a dot", `{"labels":{".site":"x"}}`, ".site"},
		{"empty key", `{"labels":{"":"x"}}`, `\"\"`},
		{"key of 64", `{"labels":{"` + strings.Repeat("k", 64) + `":"x"}}`, strings.Repeat("k", 64)},
		{"value of 64", `{"labels":{"site":"` + strings.Repeat("v", 64) + `"}}`, "site"},
		{"value with a space", `{"labels":{"site":"a b"}}`, "site"},
		{"value with a slash", `{"labels":{"site":"a/b"}}`, "site"},
		{"value not a string", `{"labels":{"site":1}}`, ""},
		{"labels not an object", `{"labels":["site"]}`, ""},
		{"seventeen labels", jsonString(t, map[string]any{"labels": seventeen}), "k"},
	} {
		res := w.patch("operator", ams, tc.body, "application/merge-patch+json")
		res.expect(t, tc.name, http.StatusBadRequest, "invalid_labels")
		if !strings.Contains(string(res.body), tc.key) {
			t.Errorf("%s: the refusal does not name %s: %s", tc.name, tc.key, res.body)
		}
	}
	// Sixteen after the merge is the limit: 2 + 15 new is refused.
	fifteen := map[string]any{}
	for i := range 15 {
		fifteen["n"+strings.Repeat("x", i)] = "v"
	}
	w.patch("operator", ams, jsonString(t, map[string]any{"labels": fifteen}), "").expect(t, "17 after merging", http.StatusBadRequest, "invalid_labels")
	for _, tc := range []struct{ name, body, ct, code string }{
		{"not an object", `["x"]`, "application/merge-patch+json", "invalid_json"},
		{"null name", `{"name":null}`, "", "invalid_input"},
		{"empty name", `{"name":""}`, "", "invalid_input"},
		{"state cannot change", `{"state":"running"}`, "", "invalid_input"},
		{"another tenant cannot change", `{"tenantId":"globex"}`, "", "invalid_input"},
	} {
		w.patch("operator", ams, tc.body, tc.ct).expect(t, tc.name, http.StatusBadRequest, tc.code)
	}
	w.patch("operator", ams, `{"name":"x"}`, "text/plain").expect(t, "text/plain", http.StatusUnsupportedMediaType, "unsupported_media_type")
	if s := w.sensorView(t, ams); !maps.Equal(s.Labels, map[string]string{"site": "ams", "role": "edge"}) || s.TenantID != "acme" {
		t.Fatalf("refused patches changed the sensor: %+v", s)
	}

	// Boundaries: another tenant's sensor is 404 like none, viewers 403,
	// nothing changed either way.
	w.patch("operator", w.sensor["globex"], `{"name":"mine"}`, "").expect(t, "operator patches globex's sensor", http.StatusNotFound, "not_found")
	w.patch("operator-token", w.sensor["globex"], `{"name":"mine"}`, "").expect(t, "operator token patches globex's sensor", http.StatusNotFound, "not_found")
	w.patch("viewer", ams, `{"name":"mine"}`, "").expect(t, "viewer patches", http.StatusForbidden, "forbidden")
	w.patch("viewer-token", ams, `{"name":"mine"}`, "").expect(t, "viewer token patches", http.StatusForbidden, "forbidden")
	w.patch("operator", "no-such-sensor", `{"name":"mine"}`, "").expect(t, "unknown sensor", http.StatusNotFound, "not_found")
	if w.sensorView(t, w.sensor["globex"]).Name == "mine" || w.sensorView(t, ams).Name == "mine" {
		t.Fatal("a refused patch renamed a sensor")
	}

	// The merge patch: set, replace, remove a key; rename; both content types.
	res = w.patch("operator", ams, `{"name":"edge-ams-1","labels":{"role":null,"rack":"r12","site":"ams"}}`, "application/merge-patch+json")
	res.expectStatus(t, "merge patch", http.StatusOK)
	var got sensorView
	json.Unmarshal(res.body, &got)
	if got.Name != "edge-ams-1" || !maps.Equal(got.Labels, map[string]string{"site": "ams", "rack": "r12"}) {
		t.Errorf("after the patch %+v", got)
	}
	res = w.patch("operator-token", fra, `{"labels":{"rack":""}}`, "application/json")
	res.expectStatus(t, "patch as application/json by a token", http.StatusOK)
	if l := w.sensorView(t, fra).Labels; !maps.Equal(l, map[string]string{"site": "fra", "role": "edge", "rack": ""}) {
		t.Errorf("fra labels %v", l)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE action = 'sensor.update' AND outcome = 'success' AND target = $1`, ams); n != 1 {
		t.Errorf("%d audit records of the update, want 1", n)
	}

	// Listing by labels: every label must match, with the other filters.
	list := func(who string, q url.Values) []string {
		t.Helper()
		var out []string
		for _, s := range w.listAll(t, who, q) {
			out = append(out, s.ID)
		}
		slices.Sort(out)
		return out
	}
	want := func(ids ...string) []string { slices.Sort(ids); return ids }
	if got := list("viewer", url.Values{"label": {"rack=r12"}}); !slices.Equal(got, want(ams)) {
		t.Errorf("rack=r12: %v", got)
	}
	if got := list("viewer", url.Values{"label": {"site=fra", "role=edge"}}); !slices.Equal(got, want(fra)) {
		t.Errorf("site=fra&role=edge: %v", got)
	}
	if got := list("viewer", url.Values{"label": {"site=ams", "role=edge"}}); len(got) != 0 {
		t.Errorf("site=ams&role=edge (role removed): %v", got)
	}
	if got := list("viewer", url.Values{"label": {"rack="}}); !slices.Equal(got, want(fra)) {
		t.Errorf("rack= (empty value): %v", got)
	}
	if got := list("viewer", url.Values{"label": {"site=fra"}, "state": {"offline"}, "q": {"edge"}}); len(got) != 0 && !slices.Equal(got, want(fra)) {
		t.Errorf("with state and q: %v", got)
	}
	w.e.do(request{method: "PATCH", path: "/api/sensors/" + w.sensor["globex"], operator: true, body: `{"labels":{"site":"ams"}}`}).expectStatus(t, "admin labels globex's sensor", http.StatusOK)
	if got := list("operator", url.Values{"label": {"site=ams"}}); !slices.Equal(got, want(ams)) {
		t.Errorf("the acme operator's site=ams: %v, want no globex sensor", got)
	}
	if got := list("admin", url.Values{"label": {"site=ams"}}); !slices.Equal(got, want(ams, w.sensor["globex"])) {
		t.Errorf("the admin's site=ams: %v", got)
	}
	for _, q := range []string{"label=site", "label=Site=x", "label=site=a%20b", "label=site=a&label=site=b"} {
		_, res := w.list(t, "viewer", q)
		res.expect(t, q, http.StatusBadRequest, "invalid_labels")
	}
	// A cursor is bound to its labels.
	p, _ := w.list(t, "admin", "limit=1&label=site=ams")
	if p.NextCursor == nil {
		t.Fatal("no cursor")
	}
	_, res = w.list(t, "admin", "limit=1&label=site=fra&cursor="+url.QueryEscape(*p.NextCursor))
	res.expect(t, "a cursor of other labels", http.StatusBadRequest, "invalid_cursor")

	// Batches by labels.
	b, res := w.batch(t, "operator", `{"action":"stop","filter":{"labels":{"role":"edge"}}}`, "")
	res.expectStatus(t, "batch by labels", http.StatusAccepted)
	if b.Total != 1 || b.Matched != 1 {
		t.Errorf("role=edge batch %+v, want fra only", b)
	}
	if n := w.count(t, `SELECT count(*) FROM commands WHERE batch_id = $1 AND sensor_id = $2`, b.BatchID, fra); n != 1 {
		t.Errorf("fra got %d commands of the batch", n)
	}
	_, res = w.batch(t, "operator", `{"action":"stop","filter":{"labels":{"Role":"edge"}}}`, "")
	res.expect(t, "batch with a bad label key", http.StatusBadRequest, "invalid_labels")
}

func TestDecommission(t *testing.T) {
	w := newRBACWorld(t)
	id, token := w.e.enroll("acme")
	other, _ := w.e.enroll("acme")
	pend, enrolToken := w.e.redeem("acme")
	del := func(who, sensor string) response {
		return w.as(who, request{method: "DELETE", path: "/api/sensors/" + sensor})
	}
	// Boundaries first: nothing changes.
	del("viewer", id).expect(t, "viewer decommissions", http.StatusForbidden, "forbidden")
	del("viewer-token", id).expect(t, "viewer token decommissions", http.StatusForbidden, "forbidden")
	del("operator", w.sensor["globex"]).expect(t, "operator decommissions globex's sensor", http.StatusNotFound, "not_found")
	del("operator-token", w.sensor["globex"]).expect(t, "operator token decommissions globex's sensor", http.StatusNotFound, "not_found")
	del("operator", "bad id!").expect(t, "bad id", http.StatusBadRequest, "invalid_id")
	for _, s := range []string{id, w.sensor["globex"]} {
		if v := w.sensorView(t, s); v.DecommissionedAt != nil || v.State == "revoked" {
			t.Fatalf("a refused decommission changed %s: %+v", s, v)
		}
	}

	res := del("operator", id)
	res.expectStatus(t, "decommission", http.StatusNoContent)
	if len(res.body) != 0 {
		t.Errorf("204 with a body: %s", res.body)
	}
	v := w.sensorView(t, id)
	if v.DecommissionedAt == nil || v.State != "revoked" {
		t.Errorf("after decommission: %+v", v)
	}
	// Its sensor token no longer renews.
	res = w.e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/renew", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer " + token}})
	if res.status < 400 {
		t.Errorf("renewal with the decommissioned sensor's token: %d", res.status)
	}
	// Twice: the stated code, the first record kept.
	del("admin", id).expect(t, "decommission twice", http.StatusConflict, "sensor_decommissioned")
	if again := w.sensorView(t, id); *again.DecommissionedAt != *v.DecommissionedAt {
		t.Errorf("the second call moved the decommission: %v → %v", *v.DecommissionedAt, *again.DecommissionedAt)
	}
	// Out of the lists, unless asked for; out of batch filters.
	var ids []string
	for _, s := range w.listAll(t, "operator", url.Values{}) {
		ids = append(ids, s.ID)
	}
	if slices.Contains(ids, id) || !slices.Contains(ids, other) {
		t.Errorf("list %v: want %s out and %s in", ids, id, other)
	}
	ids = nil
	for _, s := range w.listAll(t, "operator", url.Values{"include": {"decommissioned"}}) {
		ids = append(ids, s.ID)
	}
	if !slices.Contains(ids, id) {
		t.Errorf("include=decommissioned lists %v, want %s in", ids, id)
	}
	_, res = w.list(t, "operator", "include=everything")
	res.expect(t, "unknown include", http.StatusBadRequest, "invalid_input")
	b, res := w.batch(t, "operator", `{"action":"stop","filter":{"tenantId":"acme"}}`, "")
	res.expectStatus(t, "batch after decommission", http.StatusAccepted)
	if n := w.count(t, `SELECT count(*) FROM commands WHERE batch_id = $1 AND sensor_id = $2`, b.BatchID, id); n != 0 {
		t.Error("a batch filter reached the decommissioned sensor")
	}
	// No changes any more; history kept.
	w.patch("operator", id, `{"name":"back"}`, "").expect(t, "rename a decommissioned sensor", http.StatusConflict, "sensor_decommissioned")
	w.as("operator", request{method: "GET", path: "/api/sensors/" + id + "/commands"}).expectStatus(t, "history of the decommissioned sensor", http.StatusOK)

	// A decommissioned id never enrols again.
	del("operator", pend).expectStatus(t, "decommission a sensor that never enrolled", http.StatusNoContent)
	res = w.e.do(request{method: "POST", path: "/api/sensors/" + pend + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer " + enrolToken}})
	if res.status < 400 {
		t.Fatalf("a decommissioned id enrolled: %d %s", res.status, res.body)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE action = 'sensor.decommission' AND outcome = 'success' AND target = $1`, id); n != 1 {
		t.Errorf("%d audit records of the decommission, want 1", n)
	}
}

// TestDecommissionRevokesNATSUser: the decommission revokes the sensor's
// NATS user through the provisioner, and a second call retries a
// revocation that failed before it answers sensor_decommissioned.
func TestDecommissionRevokesNATSUser(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	id, _ := e.enroll("acme")
	e.prov.Fail(nil, nil, errors.New("provisioner down"))
	res := e.do(request{method: "DELETE", path: "/api/sensors/" + id, operator: true})
	res.expect(t, "decommission while the provisioner fails", http.StatusServiceUnavailable, "nats_revoke_pending")
	if len(e.prov.Revocations()) != 0 {
		t.Fatal("revoked with a failing provisioner")
	}
	e.prov.Fail(nil, nil, nil)
	res = e.do(request{method: "DELETE", path: "/api/sensors/" + id, operator: true})
	res.expect(t, "second decommission", http.StatusConflict, "sensor_decommissioned")
	if diff := cmp.Diff([][2]string{{"A-acme", "U-" + id}}, e.prov.Revocations()); diff != "" {
		t.Errorf("NATS revocations (-want +got):\n%s", diff)
	}
}

func TestDeleteTenant(t *testing.T) {
	w := newRBACWorld(t)
	del := func(who, tenant string) response {
		return w.as(who, request{method: "DELETE", path: "/api/tenants/" + tenant})
	}
	del("operator", "acme").expect(t, "operator deletes its tenant", http.StatusForbidden, "forbidden")
	del("viewer-token", "acme").expect(t, "viewer token deletes its tenant", http.StatusForbidden, "forbidden")
	del("operator", "globex").expect(t, "operator deletes another tenant", http.StatusNotFound, "not_found")
	res := del("admin", "globex")
	res.expect(t, "admin deletes a tenant with a live sensor", http.StatusConflict, "tenant_has_sensors")
	if !strings.Contains(string(res.body), "1 sensors") {
		t.Errorf("the refusal does not say how many: %s", res.body)
	}
	w.as("admin", request{method: "GET", path: "/api/tenants/globex"}).expectStatus(t, "globex after the refusals", http.StatusOK)

	w.as("admin", request{method: "DELETE", path: "/api/sensors/" + w.sensor["globex"]}).expectStatus(t, "decommission globex's sensor", http.StatusNoContent)
	del("admin", "globex").expectStatus(t, "delete globex", http.StatusNoContent)
	w.as("admin", request{method: "GET", path: "/api/tenants/globex"}).expect(t, "deleted tenant", http.StatusNotFound, "not_found")
	del("admin", "globex").expect(t, "delete twice", http.StatusNotFound, "not_found")
	w.as("admin", request{method: "POST", path: "/api/tenants", body: `{"id":"globex","name":"globex"}`}).expect(t, "reuse the id", http.StatusConflict, "conflict")
	w.as("admin", request{method: "POST", path: "/api/tenants/globex/claim-codes", body: `{}`}).expect(t, "claim code of a deleted tenant", http.StatusNotFound, "not_found")
	if n := w.count(t, `SELECT count(*) FROM claim_codes WHERE tenant_id = 'globex' AND used_at IS NULL AND revoked_at IS NULL`); n != 0 {
		t.Errorf("%d usable claim codes of the deleted tenant", n)
	}
	var tenants struct{ Items []struct{ ID string } }
	if err := json.Unmarshal(w.as("admin", request{method: "GET", path: "/api/tenants"}).body, &tenants); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tn := range tenants.Items {
		listed = append(listed, tn.ID)
	}
	if slices.Contains(listed, "globex") || !slices.Contains(listed, "acme") {
		t.Errorf("tenants listed %v, want acme and not the deleted globex", listed)
	}
}
