package controlapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
	"github.com/rxc-project/rxc/core/fleet"
)

type listedSensor struct {
	ID, TenantID, Name, State string
	Hostname                  *string
	AgentVersion, Address     *string
}

// pageOf is one page of a paged listing (GET /api/sensors, GET
// /api/commands/batches).
type pageOf[T any] struct {
	Items      []T
	NextCursor *string
}

func (w *rbacWorld) list(t *testing.T, who, query string) (pageOf[listedSensor], response) {
	t.Helper()
	return getAs[pageOf[listedSensor]](t, w, who, "/api/sensors?"+query)
}

// getAs asks GET path as who and decodes a 200's body into a T (the zero
// T for any other answer).
func getAs[T any](t *testing.T, w *rbacWorld, who, path string) (T, response) {
	t.Helper()
	res := w.as(who, request{method: "GET", path: path})
	var v T
	if res.status == http.StatusOK {
		if err := json.Unmarshal(res.body, &v); err != nil {
			t.Fatal(err)
		}
	}
	return v, res
}

// listAll follows nextCursor to the end.
func (w *rbacWorld) listAll(t *testing.T, who string, q url.Values) []listedSensor {
	t.Helper()
	var all []listedSensor
	cursor := ""
	for range 1000 {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		p, res := w.list(t, who, v.Encode())
		res.expectStatus(t, "list "+v.Encode(), http.StatusOK)
		all = append(all, p.Items...)
		if p.NextCursor == nil {
			return all
		}
		cursor = *p.NextCursor
	}
	t.Fatal("paging did not end")
	return nil
}

// seed adds n fake sensors to tenant, ids prefix000001…
func (w *rbacWorld) seed(t *testing.T, tenant, prefix string, n int) {
	t.Helper()
	if _, err := fleetseed.Seed(context.Background(), w.e.pool, fleetseed.Spec{TenantID: tenant, Count: n, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
}

func ids(items []listedSensor) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = s.ID
	}
	return out
}

func TestSensorListPagesSortsAndSearches(t *testing.T) {
	w := newRBACWorld(t)
	w.seed(t, "acme", "seed-", 230)
	w.seed(t, "globex", "gx-", 20)

	all := w.listAll(t, "admin", url.Values{"tenantId": {"acme"}})
	if len(all) != 231 { // and the enrolled one
		t.Fatalf("%d sensors of acme, want 231", len(all))
	}
	got := ids(all)
	if len(slices.Compact(slices.Sorted(slices.Values(got)))) != 231 {
		t.Fatal("a sensor was listed twice")
	}
	if !slices.IsSortedFunc(all, func(a, b listedSensor) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	}) {
		t.Error("default order is not by name, then id")
	}
	for _, s := range all {
		if s.TenantID != "acme" {
			t.Fatalf("sensor %s of tenant %s in acme's list", s.ID, s.TenantID)
		}
		if strings.HasPrefix(s.ID, "seed-") && (s.Hostname == nil || *s.Hostname == "") {
			t.Fatalf("sensor %s without hostname", s.ID)
		}
	}

	// Default page 50, bounds 1–500.
	p, res := w.list(t, "admin", "")
	res.expectStatus(t, "default page", http.StatusOK)
	if len(p.Items) != 50 || p.NextCursor == nil {
		t.Errorf("default page: %d items, next %v; want 50 and a cursor", len(p.Items), p.NextCursor)
	}
	p, res = w.list(t, "admin", "limit=500")
	res.expectStatus(t, "page of 500", http.StatusOK)
	if len(p.Items) != 252 || p.NextCursor != nil {
		t.Errorf("page of 500: %d items, next %v; want all 252 and no cursor", len(p.Items), p.NextCursor)
	}
	for _, bad := range []string{"0", "-1", "501", "1e3", "abc", "99999999999999999999"} {
		_, res := w.list(t, "admin", "limit="+bad)
		res.expect(t, "limit="+bad, http.StatusBadRequest, "invalid_limit")
	}
	for _, bad := range []string{"Name", "name,id", "-", "--name", "hostname", "id"} {
		_, res := w.list(t, "admin", "sort="+url.QueryEscape(bad))
		res.expect(t, "sort="+bad, http.StatusBadRequest, "invalid_sort")
	}
	_, res = w.list(t, "admin", "state=sleeping")
	res.expect(t, "unknown state", http.StatusBadRequest, "invalid_input")
	_, res = w.list(t, "admin", "q="+strings.Repeat("x", 129))
	res.expect(t, "long q", http.StatusBadRequest, "invalid_input")
	_, res = w.list(t, "admin", "tenantId="+url.QueryEscape("a b"))
	res.expect(t, "bad tenant id", http.StatusBadRequest, "invalid_id")

	// Every sort pages through every sensor once, in its order.
	for _, sort := range []string{"name", "-name", "createdAt", "-createdAt", "lastSeen", "-lastSeen", "state", "-state"} {
		got := w.listAll(t, "admin", url.Values{"tenantId": {"acme"}, "sort": {sort}, "limit": {"37"}})
		if len(got) != 231 || len(slices.Compact(slices.Sorted(slices.Values(ids(got))))) != 231 {
			t.Errorf("sort %s: %d sensors listed (distinct or not), want 231 once each", sort, len(got))
		}
	}
	desc := w.listAll(t, "admin", url.Values{"tenantId": {"acme"}, "sort": {"-state"}, "limit": {"100"}})
	if !slices.IsSortedFunc(desc, func(a, b listedSensor) int {
		if c := strings.Compare(b.State, a.State); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	}) {
		t.Error("-state is not by state, then id, both descending")
	}

	// q: name, hostname or id, any case; wildcards are plain text.
	q := w.listAll(t, "admin", url.Values{"q": {"CORE-FRA"}, "limit": {"500"}})
	if len(q) == 0 {
		t.Fatal("q=CORE-FRA matched nothing")
	}
	for _, s := range q {
		if s.Hostname == nil || !strings.Contains(strings.ToLower(s.Name+" "+*s.Hostname+" "+s.ID), "core-fra") {
			t.Errorf("q=CORE-FRA matched %+v", s)
		}
	}
	if got := w.listAll(t, "admin", url.Values{"q": {"gx-000007"}}); len(got) != 1 || got[0].ID != "gx-000007" {
		t.Errorf("q by id: %v", ids(got))
	}
	for _, wild := range []string{"%", "_", `\`, "seed-00000_"} {
		if got := w.listAll(t, "admin", url.Values{"q": {wild}}); len(got) != 0 {
			t.Errorf("q=%q matched %d sensors; wildcards must be plain text", wild, len(got))
		}
	}
	running := w.listAll(t, "admin", url.Values{"tenantId": {"acme"}, "state": {"running"}, "limit": {"500"}})
	for _, s := range running {
		if s.State != "running" {
			t.Fatalf("state=running listed %s in %s", s.ID, s.State)
		}
	}
	if len(running) != 150 { // seeded i%100 < 60: 1–59, 100–159, 200–230
		t.Errorf("%d running in acme, want 150", len(running))
	}

	// The summary counts the same.
	var sum struct {
		Total   int
		ByState map[string]int
	}
	res = w.as("admin", request{method: "GET", path: "/api/sensors/summary?tenantId=acme"})
	res.expectStatus(t, "summary", http.StatusOK)
	if err := json.Unmarshal(res.body, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Total != 231 || sum.ByState["running"] != 150 || len(sum.ByState) != 7 {
		t.Errorf("summary %+v, want 231 in total, 150 running, all 7 states", sum)
	}
	res = w.as("admin", request{method: "GET", path: "/api/sensors/summary"})
	if err := json.Unmarshal(res.body, &sum); err != nil || sum.Total != 252 {
		t.Errorf("admin's summary of everything: %+v, want 252", sum)
	}
}

// TestSensorListNeverLeaksOtherTenants: a tenant-scoped principal sees its
// tenants only, whatever it asks; another tenant's id is answered as a
// tenant that does not exist.
func TestSensorListNeverLeaksOtherTenants(t *testing.T) {
	w := newRBACWorld(t)
	w.seed(t, "acme", "ac-", 60)
	w.seed(t, "globex", "gx-", 60)
	for _, who := range []string{"operator", "viewer", "viewer-token", "operator-token"} {
		for _, q := range []url.Values{{}, {"q": {"gx-"}}, {"sort": {"-createdAt"}}, {"state": {"running"}}} {
			for _, s := range w.listAll(t, who, q) {
				if s.TenantID != "acme" {
					t.Fatalf("%s listing %v got %s of %s", who, q, s.ID, s.TenantID)
				}
			}
		}
		_, res := w.list(t, who, "tenantId=globex")
		res.expect(t, who+" lists globex", http.StatusNotFound, "not_found")
		_, ghost := w.list(t, who, "tenantId=nosuch")
		ghost.expect(t, who+" lists a tenant that does not exist", http.StatusNotFound, "not_found")
		res = w.as(who, request{method: "GET", path: "/api/sensors/summary?tenantId=globex"})
		res.expect(t, who+" summary of globex", http.StatusNotFound, "not_found")
		res = w.as(who, request{method: "GET", path: "/api/sensors/summary"})
		var sum struct{ Total int }
		if err := json.Unmarshal(res.body, &sum); err != nil || sum.Total != 61 {
			t.Errorf("%s summary: %s, want acme's 61 only", who, res.body)
		}
	}
}

func TestSensorListCursorsAreBoundAndChecked(t *testing.T) {
	w := newRBACWorld(t)
	w.seed(t, "acme", "ac-", 30)
	w.seed(t, "globex", "gx-", 30)
	first, res := w.list(t, "admin", "tenantId=acme&limit=5&sort=name")
	res.expectStatus(t, "first page", http.StatusOK)
	cursor := *first.NextCursor
	next, res := w.list(t, "admin", "tenantId=acme&limit=5&sort=name&cursor="+url.QueryEscape(cursor))
	res.expectStatus(t, "second page", http.StatusOK)
	if len(next.Items) != 5 || next.Items[0].ID == first.Items[4].ID {
		t.Fatalf("second page %v after %v", ids(next.Items), ids(first.Items))
	}
	// A page size change keeps the cursor valid: it is a position.
	_, res = w.list(t, "admin", "tenantId=acme&limit=7&sort=name&cursor="+url.QueryEscape(cursor))
	res.expectStatus(t, "other limit", http.StatusOK)

	payload, sum, _ := strings.Cut(cursor, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatalf("cursor %q: %v", cursor, err)
	}
	flipped := []byte(payload)
	flipped[len(flipped)/2] ^= 1
	moved := strings.Replace(string(raw), `"i":"`, `"i":"z`, 1)
	for name, q := range map[string]string{
		"another sort":        "tenantId=acme&limit=5&sort=-name&cursor=",
		"another tenant":      "tenantId=globex&limit=5&sort=name&cursor=",
		"all tenants":         "limit=5&sort=name&cursor=",
		"another state":       "tenantId=acme&state=running&limit=5&sort=name&cursor=",
		"another q":           "tenantId=acme&q=ac&limit=5&sort=name&cursor=",
		"a time sort":         "tenantId=acme&limit=5&sort=createdAt&cursor=",
		"the default sort ok": "",
	} {
		if q == "" {
			continue
		}
		_, res := w.list(t, "admin", q+url.QueryEscape(cursor))
		res.expect(t, "cursor replayed with "+name, http.StatusBadRequest, "invalid_cursor")
	}
	for name, bad := range map[string]string{
		"flipped byte":    string(flipped) + "." + sum,
		"edited position": base64.RawURLEncoding.EncodeToString([]byte(moved)) + "." + sum,
		"no checksum":     payload,
		"empty checksum":  payload + ".",
		"not base64":      "!!!.???",
		"truncated":       cursor[:len(cursor)-3],
		"too long":        strings.Repeat("A", 2000) + "." + sum,
		"json":            `{"v":1}`,
	} {
		_, res := w.list(t, "admin", "tenantId=acme&limit=5&sort=name&cursor="+url.QueryEscape(bad))
		res.expect(t, "cursor "+name, http.StatusBadRequest, "invalid_cursor")
	}

	// An admin's cursor over every tenant does not serve a scoped operator
	// (another scope), and the operator's own paging never leaves acme.
	adminPage, _ := w.list(t, "admin", "limit=5")
	_, res = w.list(t, "operator", "limit=5&cursor="+url.QueryEscape(*adminPage.NextCursor))
	res.expect(t, "admin's cursor used by the operator", http.StatusBadRequest, "invalid_cursor")
	opPage, _ := w.list(t, "operator", "tenantId=acme&limit=5")
	_, res = w.list(t, "operator", "tenantId=globex&limit=5&cursor="+url.QueryEscape(*opPage.NextCursor))
	res.expect(t, "operator's cursor on globex", http.StatusNotFound, "not_found")
}

// TestSensorListKeysetStability: sensors added while an operator pages
// never make one that existed before appear twice or go missing.
func TestSensorListKeysetStability(t *testing.T) {
	w := newRBACWorld(t)
	w.seed(t, "acme", "seed-", 300)
	before := map[string]bool{}
	for _, s := range w.listAll(t, "admin", url.Values{"tenantId": {"acme"}, "limit": {"500"}}) {
		before[s.ID] = true
	}
	for _, sort := range []string{"name", "-createdAt", "lastSeen"} {
		seen := map[string]int{}
		cursor := ""
		for page := 0; ; page++ {
			// Between pages, new sensors land all over the order.
			// (Fresh ids each time: a sensor whose sort key changes while
			// an operator pages may show twice or not at all, as the
			// README says; that is not what this test is about.)
			if _, err := fleetseed.Seed(context.Background(), w.e.pool, fleetseed.Spec{TenantID: "acme", Count: 5, Prefix: fmt.Sprintf("%s-p%d-", sort[len(sort)-1:], page)}); err != nil {
				t.Fatal(err)
			}
			q := "tenantId=acme&limit=23&sort=" + url.QueryEscape(sort)
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			p, res := w.list(t, "admin", q)
			res.expectStatus(t, "page", http.StatusOK)
			for _, s := range p.Items {
				seen[s.ID]++
			}
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("sort %s: %s listed %d times", sort, id, n)
			}
		}
		for id := range before {
			if seen[id] != 1 {
				t.Errorf("sort %s: %s, there before paging began, listed %d times", sort, id, seen[id])
			}
		}
	}
}

type batchAnswer struct {
	BatchID                                                   string
	Action, CreatedBy                                         string
	TenantIDs                                                 []string
	Matched, Total, SkippedRevoked, SkippedNotEnrolled        int
	Pending, Accepted, Acknowledged, Refused, Failed, Expired int
	Done                                                      bool
}

func (w *rbacWorld) batch(t *testing.T, who, body, key string) (batchAnswer, response) {
	t.Helper()
	rq := request{method: "POST", path: "/api/commands", body: body}
	res := w.as(who, rq)
	if key != "" {
		rq.header = map[string]string{"Idempotency-Key": key}
		if tok, ok := w.tokens[who]; ok {
			rq.header["Authorization"] = "Bearer " + tok
		} else {
			rq.session = w.sessions[who]
		}
		res = w.e.do(rq)
	}
	var b batchAnswer
	if res.status < 300 {
		if err := json.Unmarshal(res.body, &b); err != nil {
			t.Fatal(err)
		}
	}
	return b, res
}

func (w *rbacWorld) batchStatus(t *testing.T, who, id string) (batchAnswer, response) {
	t.Helper()
	return getAs[batchAnswer](t, w, who, "/api/commands/batches/"+id)
}

// checkBatchRule holds an answer to the Batch schema's rule: the statuses
// add up to total, and done means nothing is pending.
func checkBatchRule(t *testing.T, what string, b batchAnswer) {
	t.Helper()
	if b.Pending+b.Accepted+b.Failed+b.Expired != b.Total || b.Done != (b.Pending == 0) {
		t.Errorf("%s breaks the batch rule: %+v", what, b)
	}
}

// enrollSensors enrols n sensors of tenant and returns their ids.
func (w *rbacWorld) enrollSensors(tenant string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i], _ = w.e.enroll(tenant)
	}
	return out
}

func (w *rbacWorld) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := w.e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCommandBatches(t *testing.T) {
	w := newRBACWorld(t)
	ctx := context.Background()
	acme := w.enrollSensors("acme", 4)
	revoked, _ := w.e.enroll("acme")
	w.as("admin", request{method: "POST", path: "/api/sensors/" + revoked + "/revoke"}).expectStatus(t, "revoke", http.StatusOK)
	notEnrolled, _ := w.e.redeem("acme")
	globex := w.sensor["globex"]
	idsJSON := func(ids ...string) string {
		b, _ := json.Marshal(ids)
		return string(b)
	}
	batches := func() int { return w.count(t, `SELECT count(*) FROM command_batches`) }
	published := len(w.e.pub.Messages())

	// Refusals record nothing, and never say which sensor was the problem.
	for _, tc := range []struct {
		who, body, status, code string
	}{
		{"viewer", `{"action":"start","sensorIds":` + idsJSON(acme[0]) + `}`, "403", "forbidden"},
		{"viewer-token", `{"action":"start","filter":{"tenantId":"acme"}}`, "403", "forbidden"},
		{"viewer", `{"action":"start","sensorIds":` + idsJSON(globex) + `}`, "403", "forbidden"},
		{"operator", `{"action":"start","sensorIds":` + idsJSON(acme[0], globex) + `}`, "404", "not_found"},
		{"operator", `{"action":"start","sensorIds":` + idsJSON(acme[0], "no-such-sensor") + `}`, "404", "not_found"},
		{"operator-token", `{"action":"start","sensorIds":` + idsJSON(globex) + `}`, "404", "not_found"},
		{"operator", `{"action":"start","filter":{"tenantId":"globex"}}`, "404", "not_found"},
		{"operator", `{"action":"start","filter":{"tenantId":"nosuch"}}`, "404", "not_found"},
		{"operator", `{"action":"start"}`, "400", "invalid_input"},
		{"operator", `{"action":"start","sensorIds":[],"filter":{}}`, "400", "invalid_input"},
		{"operator", `{"action":"start","sensorIds":[]}`, "400", "invalid_input"},
		{"operator", `{"action":"reboot","sensorIds":` + idsJSON(acme[0]) + `}`, "400", "invalid_input"},
		{"operator", `{"action":"start","sensorIds":["a b"]}`, "400", "invalid_id"},
		{"operator", `{"action":"start","filter":{"state":"asleep"}}`, "400", "invalid_input"},
		{"operator", `{"action":"start","sensorIds":` + idsJSON(acme[0]) + `,"extra":1}`, "400", "invalid_json"},
	} {
		_, res := w.batch(t, tc.who, tc.body, "")
		res.expect(t, tc.who+" "+tc.body, map[string]int{"400": 400, "403": 403, "404": 404}[tc.status], tc.code)
		if strings.Contains(string(res.body), globex) || strings.Contains(string(res.body), "no-such-sensor") {
			t.Errorf("%s %s: the answer names the sensor: %s", tc.who, tc.body, res.body)
		}
	}
	many := make([]string, 10_001)
	for i := range many {
		many[i] = fmt.Sprintf("s-%05d", i)
	}
	_, res := w.batch(t, "operator", `{"action":"stop","sensorIds":`+idsJSON(many...)+`}`, "")
	res.expect(t, "10,001 ids", http.StatusBadRequest, "batch_too_large")
	if n := batches(); n != 0 {
		t.Fatalf("%d batches recorded by refused requests", n)
	}

	// By ids: revoked and never-enrolled sensors are skipped and counted.
	target := append(slices.Clone(acme), revoked, notEnrolled, acme[0])
	b, res := w.batch(t, "operator", `{"action":"stop","sensorIds":`+idsJSON(target...)+`}`, "")
	res.expectStatus(t, "batch by ids", http.StatusAccepted)
	if b.Total != 4 || b.Matched != 6 || b.SkippedRevoked != 1 || b.SkippedNotEnrolled != 1 || b.Action != "stop" ||
		b.CreatedBy != "operator@acme.example" || !slices.Equal(b.TenantIDs, []string{"acme"}) {
		t.Errorf("batch %+v", b)
	}
	// The 202 tells the truth: nothing is sent yet, so every command is
	// pending and the batch is not done.
	checkBatchRule(t, "202", b)
	if b.Pending != 4 || b.Done {
		t.Errorf("202 answer %+v, want 4 pending, not done", b)
	}
	if loc := res.header.Get("Location"); loc != "/api/commands/batches/"+b.BatchID {
		t.Errorf("Location %q", loc)
	}
	// Answered before anything is published.
	if got := len(w.e.pub.Messages()); got != published {
		t.Errorf("%d commands published while answering", got-published)
	}
	st, res := w.batchStatus(t, "viewer", b.BatchID)
	res.expectStatus(t, "viewer reads the batch", http.StatusOK)
	if st.Pending != 4 || st.Done {
		t.Errorf("before publishing: %+v", st)
	}
	n, err := w.e.fleet.PublishQueued(ctx)
	if err != nil || n != 4 {
		t.Fatalf("published %d, %v; want 4", n, err)
	}
	msgs := w.e.pub.Messages()[published:]
	var msgIDs []string
	for _, m := range msgs {
		if m.Action != fleet.ActionStop || !slices.Contains(acme, m.SensorID) || m.TenantID != "acme" {
			t.Errorf("published %+v", m)
		}
		msgIDs = append(msgIDs, m.SensorID)
	}
	slices.Sort(msgIDs)
	if want := slices.Sorted(slices.Values(acme)); !slices.Equal(msgIDs, want) {
		t.Errorf("published to %v, want %v", msgIDs, want)
	}
	st, _ = w.batchStatus(t, "operator", b.BatchID)
	if st.Accepted != 4 || st.Pending != 0 || !st.Done || st.Total != 4 {
		t.Errorf("after publishing: %+v", st)
	}
	// Each sensor's last command is its batch command, settled as one.
	var sensor struct {
		LastCommand struct{ Status, Action string }
	}
	json.Unmarshal(w.as("operator", request{method: "GET", path: "/api/sensors/" + acme[1]}).body, &sensor)
	if sensor.LastCommand.Status != "accepted" || sensor.LastCommand.Action != "stop" {
		t.Errorf("last command of %s: %+v", acme[1], sensor.LastCommand)
	}

	// One audit record for the batch.
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE action = 'command.batch' AND outcome = 'success' AND target = $1 AND tenant_id = 'acme'`, b.BatchID); n != 1 {
		t.Errorf("%d audit records of the batch, want 1", n)
	}

	// By filter, within the operator's tenants only.
	w.seed(t, "globex", "gx-", 10)
	fb, res := w.batch(t, "operator", `{"action":"start","filter":{"state":"offline"}}`, "")
	res.expectStatus(t, "batch by filter", http.StatusAccepted)
	if n := w.count(t, `SELECT count(*) FROM commands WHERE batch_id = $1 AND tenant_id <> 'acme'`, fb.BatchID); n != 0 || fb.Total == 0 {
		t.Errorf("filter batch of the acme operator: %d commands outside acme, total %d", n, fb.Total)
	}
	// An admin's batch over globex is not the acme operator's to read.
	gb, res := w.batch(t, "admin", `{"action":"start","filter":{"tenantId":"globex"}}`, "")
	res.expectStatus(t, "admin batch on globex", http.StatusAccepted)
	if want := w.count(t, `SELECT count(*) FROM sensors WHERE tenant_id = 'globex' AND state NOT IN ('revoked','pending')`); gb.Total != want {
		t.Errorf("globex batch total %d, want %d", gb.Total, want)
	}
	_, res = w.batchStatus(t, "operator", gb.BatchID)
	res.expect(t, "operator reads globex's batch", http.StatusNotFound, "not_found")
	_, res = w.batchStatus(t, "admin", gb.BatchID)
	res.expectStatus(t, "admin reads it", http.StatusOK)
	_, res = w.batchStatus(t, "admin", "no-such-batch")
	res.expect(t, "unknown batch", http.StatusNotFound, "not_found")

	// Messaging off: refused before anything is recorded.
	off := w.e.variant(t, func(c *controlapi.Config) { c.MessagingEnabled = false })
	before := batches()
	res = off.do(request{method: "POST", path: "/api/commands", operator: true, body: `{"action":"start","sensorIds":` + idsJSON(acme[0]) + `}`})
	res.expect(t, "messaging off", http.StatusServiceUnavailable, "messaging_disabled")
	if batches() != before {
		t.Error("a batch was recorded with messaging off")
	}
}

func TestCommandBatchIdempotency(t *testing.T) {
	w := newRBACWorld(t)
	acme := w.enrollSensors("acme", 3)
	body := `{"action":"start","sensorIds":["` + strings.Join(acme, `","`) + `"]}`
	first, res := w.batch(t, "operator", body, "key-1")
	res.expectStatus(t, "first", http.StatusAccepted)
	again, res := w.batch(t, "operator", body, "key-1")
	res.expectStatus(t, "repeat", http.StatusOK)
	if again.BatchID != first.BatchID || again.Total != 3 {
		t.Errorf("repeat gave %+v, want batch %s", again, first.BatchID)
	}
	checkBatchRule(t, "first", first)
	checkBatchRule(t, "repeat before publishing", again)
	if first.Pending != 3 || again.Pending != 3 || again.Done {
		t.Errorf("first %+v, repeat %+v: want 3 pending in both", first, again)
	}
	if _, err := w.e.fleet.PublishQueued(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, _ = w.batch(t, "operator", body, "key-1")
	checkBatchRule(t, "repeat after publishing", again)
	if again.Accepted != 3 || again.Pending != 0 || !again.Done {
		t.Errorf("repeat after publishing %+v, want the batch as it stands: 3 accepted, done", again)
	}
	// The same targets in another order and with a duplicate are the same request.
	reordered := `{"action":"start","sensorIds":["` + acme[2] + `","` + acme[0] + `","` + acme[1] + `","` + acme[0] + `"]}`
	if b, res := w.batch(t, "operator", reordered, "key-1"); res.status != http.StatusOK || b.BatchID != first.BatchID {
		t.Errorf("reordered repeat: %d %s", res.status, res.body)
	}
	_, res = w.batch(t, "operator", `{"action":"stop","sensorIds":["`+acme[0]+`"]}`, "key-1")
	res.expect(t, "another request with the key", http.StatusConflict, "conflict")
	// Keys are per operator: the admin's key-1 is another batch.
	adm, res := w.batch(t, "admin", body, "key-1")
	res.expectStatus(t, "admin's key-1", http.StatusAccepted)
	if adm.BatchID == first.BatchID {
		t.Error("the admin got the operator's batch")
	}

	// Concurrent identical requests leave one batch and one command per sensor.
	type answer struct {
		b   batchAnswer
		res response
	}
	seen, code := map[string]int{}, map[int]int{}
	for _, a := range atOnce(10, func(int) answer {
		b, res := w.batch(t, "operator", body, "key-2")
		return answer{b, res}
	}) {
		seen[a.b.BatchID]++
		code[a.res.status]++
	}
	if len(seen) != 1 || code[http.StatusAccepted] != 1 || code[http.StatusOK] != 9 {
		t.Fatalf("concurrent identical batches: ids %v, statuses %v; want one batch, one 202 and nine 200", seen, code)
	}
	for id := range seen {
		if n := w.count(t, `SELECT count(*) FROM commands WHERE batch_id = $1`, id); n != 3 {
			t.Errorf("%d commands in the batch, want 3", n)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM command_batches WHERE idempotency_key = 'key-2'`); n != 1 {
		t.Errorf("%d batches with key-2, want 1", n)
	}
}

func (w *rbacWorld) batches(t *testing.T, who, query string) (pageOf[batchAnswer], response) {
	t.Helper()
	return getAs[pageOf[batchAnswer]](t, w, who, "/api/commands/batches?"+query)
}

// TestBatchListing: past batches newest first, paged by cursor, each
// obeying the batch rule, and never another tenant's.
func TestBatchListing(t *testing.T) {
	w := newRBACWorld(t)
	acme := w.enrollSensors("acme", 2)
	var made []string
	for i := range 3 {
		b, res := w.batch(t, "operator", `{"action":"stop","sensorIds":["`+acme[i%2]+`"]}`, "")
		res.expectStatus(t, "operator batch", http.StatusAccepted)
		made = append(made, b.BatchID)
		w.e.clock.Advance(time.Second)
	}
	gb, res := w.batch(t, "admin", `{"action":"start","filter":{"tenantId":"globex"}}`, "")
	res.expectStatus(t, "admin batch on globex", http.StatusAccepted)

	// Newest first across pages of 2, as the viewer of acme.
	var got []string
	cursor := ""
	for range 10 {
		q := "limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p, res := w.batches(t, "viewer", q)
		res.expectStatus(t, "viewer lists", http.StatusOK)
		for _, b := range p.Items {
			checkBatchRule(t, "listed "+b.BatchID, b)
			got = append(got, b.BatchID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	want := []string{made[2], made[1], made[0]}
	if !slices.Equal(got, want) {
		t.Errorf("viewer of acme lists %v, want %v (newest first, no globex batch)", got, want)
	}
	p, _ := w.batches(t, "admin", "")
	if len(p.Items) != 4 || p.Items[0].BatchID != gb.BatchID || p.Items[0].Pending != p.Items[0].Total {
		t.Errorf("admin lists %+v, want 4 batches, the globex one first and pending", p.Items)
	}
	// Published: the listing shows where each stands.
	if _, err := w.e.fleet.PublishQueued(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ = w.batches(t, "operator", "")
	for _, b := range p.Items {
		checkBatchRule(t, "after publishing", b)
		if !b.Done || b.Accepted != 1 {
			t.Errorf("after publishing %+v, want accepted, done", b)
		}
	}
	// Another tenant's scope is answered like a tenant that does not exist;
	// bad limits and foreign cursors are refused.
	_, res = w.batches(t, "operator", "tenantId=globex")
	res.expect(t, "operator asks for globex's batches", http.StatusNotFound, "not_found")
	_, res = w.batches(t, "operator", "limit=0")
	res.expect(t, "limit 0", http.StatusBadRequest, "invalid_limit")
	_, res = w.batches(t, "operator", "limit=201")
	res.expect(t, "limit 201", http.StatusBadRequest, "invalid_limit")
	adminPage, _ := w.batches(t, "admin", "limit=1")
	if adminPage.NextCursor == nil {
		t.Fatal("admin's first page of 1 has no cursor")
	}
	_, res = w.batches(t, "operator", "cursor="+url.QueryEscape(*adminPage.NextCursor))
	res.expect(t, "the admin's cursor used by the operator", http.StatusBadRequest, "invalid_cursor")
}

// TestBatchDryRun: the preview counts exactly what the batch then sends
// and why the rest are skipped, and records nothing.
func TestBatchDryRun(t *testing.T) {
	w := newRBACWorld(t)
	for range 3 {
		w.e.enroll("acme")
	}
	revoked, _ := w.e.enroll("acme")
	w.as("admin", request{method: "POST", path: "/api/sensors/" + revoked + "/revoke"}).expectStatus(t, "revoke", http.StatusOK)
	w.e.redeem("acme")
	body := `{"action":"stop","filter":{"tenantId":"acme"}}`
	res := w.as("operator", request{method: "POST", path: "/api/commands?dryRun=true", body: body})
	res.expectStatus(t, "dry run", http.StatusOK)
	var pv struct{ Matched, Total, SkippedRevoked, SkippedNotEnrolled int }
	if err := json.Unmarshal(res.body, &pv); err != nil {
		t.Fatal(err)
	}
	// acme: the world's own sensor, 3 more, 1 revoked, 1 never enrolled.
	if pv.Total != 4 || pv.SkippedRevoked != 1 || pv.SkippedNotEnrolled != 1 || pv.Matched != 6 {
		t.Errorf("preview %+v, want 4 to send, 1 revoked, 1 never enrolled of 6", pv)
	}
	if n := w.count(t, `SELECT count(*) FROM command_batches`); n != 0 {
		t.Fatalf("the dry run recorded %d batches", n)
	}
	b, res := w.batch(t, "operator", body, "")
	res.expectStatus(t, "the batch itself", http.StatusAccepted)
	if b.Total != pv.Total || b.SkippedRevoked != pv.SkippedRevoked || b.SkippedNotEnrolled != pv.SkippedNotEnrolled {
		t.Errorf("batch %+v differs from its preview %+v", b, pv)
	}
	w.as("viewer", request{method: "POST", path: "/api/commands?dryRun=true", body: body}).expect(t, "viewer dry run", http.StatusForbidden, "forbidden")
	w.as("operator", request{method: "POST", path: "/api/commands?dryRun=true", body: `{"action":"stop","filter":{"tenantId":"globex"}}`}).expect(t, "dry run on another tenant", http.StatusNotFound, "not_found")
	w.as("operator", request{method: "POST", path: "/api/commands?dryRun=yes", body: body}).expect(t, "dryRun=yes", http.StatusBadRequest, "invalid_input")
}
