package controlapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// rbacWorld: tenants acme and globex, each with an enrolled sensor and an
// open claim code; an admin, an operator and a viewer of acme, each signed
// in, and an API token of each role scoped to acme.
type rbacWorld struct {
	e        *env
	sessions map[string]string // principal → session cookie (or "" for tokens)
	tokens   map[string]string // principal → API token
	sensor   map[string]string // tenant → sensor id
	code     map[string]string // tenant → claim code id
}

const rbacPassword = "correct horse battery staple"

func newRBACWorld(t *testing.T) *rbacWorld {
	e := newEnv(t, options{})
	w := &rbacWorld{e: e, sessions: map[string]string{"admin": e.session}, tokens: map[string]string{}, sensor: map[string]string{}, code: map[string]string{}}
	for _, tn := range []string{"acme", "globex"} {
		e.createTenant(tn)
		w.sensor[tn], _ = e.enroll(tn)
		w.code[tn], _ = e.claimCode(tn, "")
	}
	for _, role := range []string{"operator", "viewer"} {
		email := role + "@acme.example"
		res := e.do(request{method: "POST", path: "/api/operators", operator: true,
			body: fmt.Sprintf(`{"email":%q,"password":%q,"role":%q,"tenants":["acme"]}`, email, rbacPassword, role)})
		res.expect(t, "create "+role, http.StatusCreated, "")
		w.sessions[role] = e.loginAs(email, rbacPassword)
		res = e.do(request{method: "POST", path: "/api/tokens", session: w.sessions[role],
			body: fmt.Sprintf(`{"name":"ci","role":%q,"tenants":["acme"]}`, role)})
		res.expect(t, "token of "+role, http.StatusCreated, "")
		w.tokens[role+"-token"] = str(t, res.object(t), "token")
	}
	return w
}

// as sends rq as the principal: a session cookie or an API token.
func (w *rbacWorld) as(who string, rq request) response {
	if tok, ok := w.tokens[who]; ok {
		rq.header = map[string]string{"Authorization": "Bearer " + tok}
	} else {
		rq.session = w.sessions[who]
	}
	return w.e.do(rq)
}

// TestRoleMatrix: each role × each operator route × own tenant / other
// tenant, with the expected status; tokens behave as their role. A
// forbidden object answers 404 like a missing one; a forbidden action on
// a visible object answers 403 forbidden.
func TestRoleMatrix(t *testing.T) {
	w := newRBACWorld(t)
	type route struct {
		name, method, path, body string
		action                   string // audit action of a state-changing route
	}
	routes := func(tn string) []route {
		s, c := w.sensor[tn], w.code[tn]
		return []route{
			{"get tenant", "GET", "/api/tenants/" + tn, "", ""},
			{"list claim codes", "GET", "/api/tenants/" + tn + "/claim-codes", "", ""},
			{"list sensors of tenant", "GET", "/api/sensors?tenantId=" + tn, "", ""},
			{"get sensor", "GET", "/api/sensors/" + s, "", ""},
			{"analytics", "GET", "/api/analytics/overview?tenantId=" + tn + "&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z", "", ""},
			{"audit of tenant", "GET", "/api/audit?tenantId=" + tn, "", ""},
			{"issue claim code", "POST", "/api/tenants/" + tn + "/claim-codes", `{}`, "claim_code.issue"},
			{"command", "POST", "/api/sensors/" + s + "/commands", `{"action":"start"}`, "sensor.command"},
			{"revoke claim code", "DELETE", "/api/claim-codes/" + c, "", "claim_code.revoke"},
			{"revoke sensor", "POST", "/api/sensors/" + s + "/revoke", "", "sensor.revoke"},
		}
	}
	// want[principal][own/other] per route, in routes' order. Analytics has
	// no events table in this world: 503 for whoever gets that far.
	const (
		ok  = 0 // 200, 201, 202 or 204
		nf  = http.StatusNotFound
		fb  = http.StatusForbidden
		off = http.StatusServiceUnavailable
	)
	read := []int{ok, ok, ok, ok, off, ok}
	hidden := []int{nf, nf, nf, nf, nf, nf, nf, nf, nf, nf}
	want := map[string]map[string][]int{
		"admin":          {"acme": append(read, ok, ok, ok, ok), "globex": append(read, ok, ok, ok, ok)},
		"operator":       {"acme": append(read, ok, ok, ok, ok), "globex": hidden},
		"viewer":         {"acme": append(read, fb, fb, fb, fb), "globex": hidden},
		"operator-token": {"acme": append(read, ok, ok, ok, ok), "globex": hidden},
		"viewer-token":   {"acme": append(read, fb, fb, fb, fb), "globex": hidden},
	}
	for _, who := range []string{"viewer", "viewer-token", "operator-token", "operator", "admin"} {
		for _, tn := range []string{"globex", "acme"} {
			// Fresh objects for each pass: an allowed revoke uses them up.
			w.sensor[tn], _ = w.e.enroll(tn)
			w.code[tn], _ = w.e.claimCode(tn, "")
			for i, rt := range routes(tn) {
				res := w.as(who, request{method: rt.method, path: rt.path, body: rt.body})
				exp := want[who][tn][i]
				good := exp == ok && res.status >= 200 && res.status < 300 || exp != ok && res.status == exp
				if !good {
					t.Errorf("%s %s on %s (%s %s): %d %s; want %d", who, rt.name, tn, rt.method, rt.path, res.status, res.body, exp)
				}
				if exp == fb && res.problemCode() != "forbidden" {
					t.Errorf("%s %s on %s: code %q, want forbidden", who, rt.name, tn, res.problemCode())
				}
			}
		}
	}

	// Lists are filtered, not refused.
	for who, wantTenants := range map[string][]string{"admin": {"acme", "globex"}, "viewer": {"acme"}, "operator-token": {"acme"}} {
		var ts struct{ Items []struct{ ID string } }
		res := w.as(who, request{method: "GET", path: "/api/tenants"})
		if json.Unmarshal(res.body, &ts) != nil {
			t.Fatal(string(res.body))
		}
		var got []string
		for _, it := range ts.Items {
			got = append(got, it.ID)
		}
		if strings.Join(got, ",") != strings.Join(wantTenants, ",") {
			t.Errorf("%s lists tenants %v, want %v", who, got, wantTenants)
		}
		var ss struct{ Items []struct{ TenantID string } }
		res = w.as(who, request{method: "GET", path: "/api/sensors"})
		if json.Unmarshal(res.body, &ss) != nil {
			t.Fatal(string(res.body))
		}
		for _, s := range ss.Items {
			if !strings.Contains(strings.Join(wantTenants, ","), s.TenantID) {
				t.Errorf("%s lists a sensor of %s", who, s.TenantID)
			}
		}
	}

	// Admin-only routes.
	for _, who := range []string{"operator", "viewer", "operator-token", "viewer-token"} {
		for _, rq := range []request{
			{method: "POST", path: "/api/tenants", body: `{"id":"evil","name":"Evil"}`},
			{method: "GET", path: "/api/operators"},
			{method: "POST", path: "/api/operators", body: `{"email":"x@evil.example","password":"0123456789abc","role":"admin"}`},
			{method: "POST", path: "/api/tokens", body: `{"name":"wider","role":"admin"}`},
			{method: "POST", path: "/api/tokens", body: `{"name":"other tenant","role":"viewer","tenants":["globex"]}`},
		} {
			res := w.as(who, rq)
			if res.status != http.StatusForbidden {
				t.Errorf("%s %s %s: %d %s; want 403", who, rq.method, rq.path, res.status, res.body)
			}
		}
	}
	// A viewer's token cannot be used to raise itself to operator.
	res := w.as("viewer", request{method: "POST", path: "/api/tokens", body: `{"name":"up","role":"operator","tenants":["acme"]}`})
	res.expect(t, "viewer mints an operator token", http.StatusForbidden, "forbidden")

	// Every state-changing request of the matrix is in the audit trail with
	// its actor; denials too.
	entries, err := w.e.store.ListAudit(context.Background(), audit.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, en := range entries {
		key := en.Actor + " " + en.Action + " " + en.TenantID + " " + en.Outcome
		seen[key] = true
		if en.Actor == "" || en.Source == "" || en.At.IsZero() {
			t.Errorf("audit entry without actor, source or time: %+v", en)
		}
		if strings.Contains(en.Detail, rbacPassword) || strings.Contains(en.Detail, "rxc_") {
			t.Errorf("audit entry carries a secret: %+v", en)
		}
	}
	for _, k := range []string{
		"admin@ops.example claim_code.issue globex success", "operator@acme.example sensor.command acme success",
		"operator@acme.example sensor.revoke acme success", "operator@acme.example claim_code.revoke acme success",
		"viewer@acme.example sensor.command acme denied", "viewer@acme.example sensor.command globex denied",
		"operator@acme.example sensor.command globex denied", "operator@acme.example tenant.create  denied",
		"admin@ops.example operator.create  success", "viewer@acme.example auth.login  success",
	} {
		k = strings.Replace(k, "admin@ops.example", operatorEmail, 1)
		if !seen[k] {
			t.Errorf("audit trail lacks %q", k)
		}
	}
	var tokenEntries int
	for _, en := range entries {
		if en.TokenID != "" {
			tokenEntries++
		}
	}
	if tokenEntries == 0 {
		t.Error("no audit entry names the API token it came with")
	}
}

// TestAuditListing: admins see every record, others only their tenants';
// pages follow the cursor.
func TestAuditListing(t *testing.T) {
	w := newRBACWorld(t)
	page := func(who, query string) (items []map[string]any, next string) {
		res := w.as(who, request{method: "GET", path: "/api/audit" + query})
		var out struct {
			Items      []map[string]any
			NextCursor string
		}
		if res.status != 200 || json.Unmarshal(res.body, &out) != nil {
			t.Fatalf("GET /api/audit%s as %s: %d %s", query, who, res.status, res.body)
		}
		return out.Items, out.NextCursor
	}
	all, _ := page("admin", "?limit=500")
	mine, _ := page("viewer", "?limit=500")
	if len(mine) == 0 || len(mine) >= len(all) {
		t.Fatalf("viewer sees %d of %d records, want some but not all", len(mine), len(all))
	}
	for _, it := range mine {
		if it["tenantId"] != "acme" {
			t.Errorf("viewer sees a record of tenant %q: %v", it["tenantId"], it)
		}
	}
	w.as("viewer", request{method: "GET", path: "/api/audit?tenantId=globex"}).expect(t, "viewer audits globex", http.StatusNotFound, "not_found")
	var ids []any
	cursor := ""
	for range 100 {
		items, next := page("admin", "?limit=3"+map[bool]string{true: "", false: "&cursor=" + cursor}[cursor == ""])
		for _, it := range items {
			ids = append(ids, it["id"])
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(ids) != len(all) {
		t.Errorf("paging by 3 gave %d records, want %d", len(ids), len(all))
	}
	w.as("admin", request{method: "GET", path: "/api/audit?cursor=bogus"}).expect(t, "bad cursor", http.StatusBadRequest, "invalid_input")
	w.as("admin", request{method: "GET", path: "/api/audit?limit=501"}).expect(t, "limit too large", http.StatusBadRequest, "invalid_input")
}

// TestOperatorManagement: change role and tenants, disable (ends sessions
// and tokens), reset password, sign out everywhere, and the last admin.
func TestOperatorManagement(t *testing.T) {
	w := newRBACWorld(t)
	e := w.e
	var ops struct {
		Items []struct{ ID, Email, Role string }
	}
	res := e.do(request{method: "GET", path: "/api/operators", operator: true})
	if json.Unmarshal(res.body, &ops) != nil || len(ops.Items) != 3 {
		t.Fatalf("list operators: %s", res.body)
	}
	id := map[string]string{}
	for _, o := range ops.Items {
		id[o.Email] = o.ID
	}
	viewer, admin := id["viewer@acme.example"], id[operatorEmail]

	// Widen the viewer to globex: the same session sees it at once.
	res = e.do(request{method: "PATCH", path: "/api/operators/" + viewer, operator: true, body: `{"tenants":["acme","globex"]}`})
	res.expect(t, "grant globex", http.StatusOK, "")
	w.as("viewer", request{method: "GET", path: "/api/tenants/globex"}).expect(t, "viewer reads globex after the grant", http.StatusOK, "")
	// The viewer's token stays within its own grant (acme).
	w.as("viewer-token", request{method: "GET", path: "/api/tenants/globex"}).expect(t, "token keeps its scope", http.StatusNotFound, "not_found")

	// Disable: session and token stop working at once; login refused.
	res = e.do(request{method: "PATCH", path: "/api/operators/" + viewer, operator: true, body: `{"disabled":true}`})
	res.expect(t, "disable", http.StatusOK, "")
	w.as("viewer", request{method: "GET", path: "/api/auth/me"}).expect(t, "disabled session", http.StatusUnauthorized, "unauthenticated")
	w.as("viewer-token", request{method: "GET", path: "/api/auth/me"}).expect(t, "disabled token", http.StatusUnauthorized, "unauthenticated")
	e.do(request{method: "POST", path: "/api/auth/login", body: fmt.Sprintf(`{"email":"viewer@acme.example","password":%q}`, rbacPassword)}).
		expect(t, "disabled login", http.StatusUnauthorized, "invalid_credentials")
	e.do(request{method: "PATCH", path: "/api/operators/" + viewer, operator: true, body: `{"disabled":false}`}).expect(t, "enable", http.StatusOK, "")

	// Reset password (admin) ends sessions; the new password works.
	w.sessions["viewer"] = e.loginAs("viewer@acme.example", rbacPassword)
	e.do(request{method: "POST", path: "/api/operators/" + viewer + "/password", operator: true, body: `{"password":"a brand new passphrase"}`}).
		expect(t, "reset", http.StatusNoContent, "")
	w.as("viewer", request{method: "GET", path: "/api/auth/me"}).expect(t, "session after reset", http.StatusUnauthorized, "unauthenticated")
	w.sessions["viewer"] = e.loginAs("viewer@acme.example", "a brand new passphrase")
	// An operator cannot reset someone else's password (not found to them).
	w.as("operator", request{method: "POST", path: "/api/operators/" + viewer + "/password", body: `{"password":"hijacked passphrase"}`}).
		expect(t, "operator resets the viewer", http.StatusNotFound, "not_found")
	// One's own password needs the current one: a session (or token) left
	// open cannot take the account over.
	self := "/api/operators/" + viewer + "/password"
	w.as("viewer", request{method: "POST", path: self, body: `{"password":"taken over passphrase"}`}).
		expect(t, "own password without the current one", http.StatusForbidden, "wrong_password")
	w.as("viewer", request{method: "POST", path: self, body: `{"currentPassword":"not it at all","password":"taken over passphrase"}`}).
		expect(t, "own password with a wrong current one", http.StatusForbidden, "wrong_password")
	w.as("viewer", request{method: "GET", path: "/api/auth/me"}).expect(t, "session after refused changes", http.StatusOK, "")
	w.sessions["viewer"] = e.loginAs("viewer@acme.example", "a brand new passphrase")
	w.as("viewer", request{method: "POST", path: self, body: `{"currentPassword":"a brand new passphrase","password":"my own new passphrase"}`}).
		expect(t, "own password with the current one", http.StatusNoContent, "")
	w.sessions["viewer"] = e.loginAs("viewer@acme.example", "my own new passphrase")
	// Guessing the current password is throttled like logins of the account.
	throttled := guessUntilThrottled(t, 30, func(_ int, body string) response {
		return w.as("viewer", request{method: "POST", path: self, body: body})
	})
	if !throttled {
		t.Error("30 wrong current passwords were never throttled")
	}
	// Sign out everywhere (self).
	res = w.as("viewer", request{method: "POST", path: "/api/operators/" + viewer + "/sign-out"})
	res.expect(t, "sign out everywhere", http.StatusOK, "")
	w.as("viewer", request{method: "GET", path: "/api/auth/me"}).expect(t, "after sign-out", http.StatusUnauthorized, "unauthenticated")

	// The last admin can be neither demoted nor disabled.
	e.do(request{method: "PATCH", path: "/api/operators/" + admin, operator: true, body: `{"role":"viewer"}`}).expect(t, "demote last admin", http.StatusConflict, "last_admin")
	e.do(request{method: "PATCH", path: "/api/operators/" + admin, operator: true, body: `{"disabled":true}`}).expect(t, "disable last admin", http.StatusConflict, "last_admin")
	// With a second admin it can.
	op := id["operator@acme.example"]
	e.do(request{method: "PATCH", path: "/api/operators/" + op, operator: true, body: `{"role":"admin"}`}).expect(t, "promote", http.StatusOK, "")
	e.do(request{method: "PATCH", path: "/api/operators/" + admin, operator: true, body: `{"role":"viewer","tenants":["acme"]}`}).expect(t, "demote with another admin", http.StatusOK, "")
	e.do(request{method: "GET", path: "/api/operators", operator: true}).expect(t, "demoted admin lists operators", http.StatusForbidden, "forbidden")
	// Bad input.
	w.as("operator", request{method: "PATCH", path: "/api/operators/" + viewer, body: `{"role":"superuser"}`}).expect(t, "unknown role", http.StatusBadRequest, "invalid_input")
	w.as("operator", request{method: "PATCH", path: "/api/operators/" + viewer, body: `{"tenants":["bad id!"]}`}).expect(t, "bad tenant", http.StatusBadRequest, "invalid_input")
	w.as("operator", request{method: "POST", path: "/api/operators", body: `{"email":"viewer@acme.example","password":"0123456789abc","role":"viewer"}`}).
		expect(t, "duplicate email", http.StatusConflict, "conflict")
}

// TestAPITokens: shown once, stored hashed, expiring, revocable, never wider
// than their creator, and refused after revocation or expiry.
func TestAPITokens(t *testing.T) {
	w := newRBACWorld(t)
	e := w.e
	res := e.do(request{method: "POST", path: "/api/tokens", operator: true, body: `{"name":"nightly export","role":"viewer","tenants":["globex"],"ttlSeconds":3600}`})
	res.expect(t, "create", http.StatusCreated, "")
	obj := res.object(t)
	tok, id := str(t, obj, "token"), str(t, obj, "id")
	if !strings.HasPrefix(tok, "rxc_") || len(tok) < 40 {
		t.Fatalf("token %q", tok)
	}
	var clear int
	if err := w.e.pool.QueryRow(context.Background(), `SELECT count(*) FROM api_tokens WHERE position(convert_to($1, 'UTF8') IN token_hash) > 0 OR name = $1`, tok).Scan(&clear); err != nil || clear != 0 {
		t.Errorf("token stored in clear (%d, %v)", clear, err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	e.do(request{method: "GET", path: "/api/tenants/globex", header: bearer}).expect(t, "token reads its tenant", http.StatusOK, "")
	e.do(request{method: "GET", path: "/api/tenants/acme", header: bearer}).expect(t, "token outside its tenants", http.StatusNotFound, "not_found")
	e.do(request{method: "POST", path: "/api/tenants/globex/claim-codes", header: bearer, body: `{}`}).expect(t, "viewer token issues", http.StatusForbidden, "forbidden")
	// Listing never shows the token again.
	res = e.do(request{method: "GET", path: "/api/tokens", operator: true})
	if strings.Contains(string(res.body), tok) || !strings.Contains(string(res.body), id) {
		t.Errorf("token list: %s", res.body)
	}
	// Others' tokens are not theirs to see or revoke.
	w.as("operator", request{method: "DELETE", path: "/api/tokens/" + id}).expect(t, "operator revokes admin's token", http.StatusNotFound, "not_found")
	w.as("operator", request{method: "GET", path: "/api/tokens?operatorId="}).expect(t, "operator lists all tokens", http.StatusForbidden, "forbidden")
	// Expiry.
	e.clock.Advance(time.Hour)
	e.do(request{method: "GET", path: "/api/auth/me", header: bearer}).expect(t, "expired token", http.StatusUnauthorized, "unauthenticated")
	e.clock.Advance(-time.Hour)
	// Revocation.
	e.do(request{method: "DELETE", path: "/api/tokens/" + id, operator: true}).expect(t, "revoke", http.StatusOK, "")
	e.do(request{method: "GET", path: "/api/auth/me", header: bearer}).expect(t, "revoked token", http.StatusUnauthorized, "unauthenticated")
	// A forged or truncated token.
	for _, bad := range []string{tok[:len(tok)-1] + "x", "rxc_", "rxc_" + strings.Repeat("A", 200), "Bearer"} {
		e.do(request{method: "GET", path: "/api/auth/me", header: map[string]string{"Authorization": "Bearer " + bad}}).expect(t, "bad token "+bad[:min(len(bad), 8)], http.StatusUnauthorized, "unauthenticated")
	}
	// Bad input.
	for _, body := range []string{`{"name":"","role":"viewer"}`, `{"name":"x","role":"root"}`, `{"name":"x","role":"viewer","ttlSeconds":60}`, `{"name":"x","role":"viewer","ttlSeconds":99999999999}`} {
		e.do(request{method: "POST", path: "/api/tokens", operator: true, body: body}).expect(t, "bad token request "+body, http.StatusBadRequest, "invalid_input")
	}
}
