package controlapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/sdk/problem"
)

func openAPIValidator(t *testing.T) (validator.Validator, map[string]any) {
	t.Helper()
	raw, err := controlapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatalf("parse the OpenAPI description: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	return v, tree
}

// TestOpenAPIDescribesTheAPI: the description is valid OpenAPI 3.1 (checked
// by a real validator against the specification's schema), it describes
// every route the API serves and no other, it lists the problem-code
// catalogue, and it is served at GET /api/openapi.json.
func TestOpenAPIDescribesTheAPI(t *testing.T) {
	t.Parallel()
	v, tree := openAPIValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("OpenAPI document: %s: %s", e.Message, e.Reason)
			for _, f := range e.SchemaValidationErrors {
				t.Errorf("  %s", f.Reason)
			}
		}
	}
	if tree["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", tree["openapi"])
	}

	var described []string
	for path, item := range tree["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			described = append(described, strings.ToUpper(method)+" "+path)
		}
	}
	e := newEnv(t, options{})
	served := e.api.Routes()
	sort.Strings(described)
	sort.Strings(served)
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not described", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(served, d) {
			t.Errorf("described route %s does not exist", d)
		}
	}
	if len(served) < 30 {
		t.Fatalf("the API reports %d routes; the comparison would be vacuous", len(served))
	}

	enum := tree["components"].(map[string]any)["schemas"].(map[string]any)["Problem"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	if len(enum) != len(problem.Catalogue) {
		t.Errorf("Problem.code enum has %d codes, the catalogue %d", len(enum), len(problem.Catalogue))
	}

	res := e.do(request{method: "GET", path: "/api/openapi.json"})
	if res.status != http.StatusOK || !json.Valid(res.body) || !bytes.Contains(res.body, []byte(`"x-problem-codes"`)) {
		t.Fatalf("GET /api/openapi.json: %d %.200s", res.status, res.body)
	}
}

// TestOpenAPIExamplesValidate: every request example validates against its
// operation's request schema.
func TestOpenAPIExamplesValidate(t *testing.T) {
	t.Parallel()
	v, tree := openAPIValidator(t)
	n := 0
	for _, op := range operations(tree) {
		rb, _ := op.spec["requestBody"].(map[string]any)
		if ref, ok := rb["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/requestBodies/")
			rb = tree["components"].(map[string]any)["requestBodies"].(map[string]any)[name].(map[string]any)
		}
		content, _ := rb["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		ex, ok := media["example"]
		if !ok {
			continue
		}
		body, _ := json.Marshal(ex)
		concrete := strings.NewReplacer("{id}", "acme").Replace(op.path)
		req, _ := http.NewRequest(strings.ToUpper(op.method), "http://localhost"+concrete, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer rxc_example")
		if ok, errs := v.ValidateHttpRequest(req); !ok {
			t.Errorf("%s %s example %s: %v", strings.ToUpper(op.method), op.path, body, describe(errs))
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d examples found", n)
	}
}

// operation is one operation of the OpenAPI description.
type operation struct {
	path, method string // method in lower case, as the description writes it
	spec         map[string]any
}

// operations lists the description's operations (a path's shared
// parameters are none).
func operations(tree map[string]any) []operation {
	var out []operation
	for path, item := range tree["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			spec, ok := op.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			out = append(out, operation{path: path, method: method, spec: spec})
		}
	}
	return out
}

func describe[E interface{ Error() string }](errs []E) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "; ")
}

// validatingTransport checks every request and its response against the
// OpenAPI description with a real validator.
type validatingTransport struct {
	t    *testing.T
	v    validator.Validator
	mu   sync.Mutex
	seen map[string]bool // "METHOD path-pattern status" checked
}

func (vt *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return res, err
	}
	resBody, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(resBody))
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(reqBody))
	checkRes := *res
	checkRes.Body = io.NopCloser(bytes.NewReader(resBody))
	if ok, errs := vt.v.ValidateHttpResponse(check, &checkRes); !ok {
		vt.t.Errorf("%s %s → %d does not match the OpenAPI description: %s\n%.300s", req.Method, req.URL.Path, res.StatusCode, describe(errs), resBody)
	}
	vt.mu.Lock()
	vt.seen[fmt.Sprintf("%s %d", req.Method, res.StatusCode)] = true
	vt.mu.Unlock()
	return res, nil
}

// TestRealTrafficMatchesOpenAPI runs the role matrix world — sessions, API
// tokens, every fleet and operator route, refusals — with every answer
// checked against the description.
func TestRealTrafficMatchesOpenAPI(t *testing.T) {
	v, _ := openAPIValidator(t)
	vt := &validatingTransport{t: t, v: v, seen: map[string]bool{}}
	w := newRBACWorld(t)
	w.e.srv.Client().Transport = vt
	// Everything the matrix does, validated.
	for _, who := range []string{"admin", "operator", "viewer", "viewer-token"} {
		for _, tn := range []string{"acme", "globex"} {
			s := w.sensor[tn]
			for _, rq := range []request{
				{method: "GET", path: "/api/auth/me"},
				{method: "GET", path: "/api/tenants"},
				{method: "GET", path: "/api/tenants/" + tn},
				{method: "GET", path: "/api/tenants/" + tn + "/claim-codes"},
				{method: "GET", path: "/api/sensors"},
				{method: "GET", path: "/api/sensors/" + s},
				{method: "GET", path: "/api/sensors/" + s + "/commands"},
				{method: "POST", path: "/api/sensors/" + s + "/commands", body: `{"action":"start"}`},
				{method: "POST", path: "/api/tenants/" + tn + "/claim-codes", body: `{}`},
				{method: "GET", path: "/api/operators"},
				{method: "GET", path: "/api/tokens"},
				{method: "GET", path: "/api/audit?limit=5"},
				{method: "GET", path: "/api/analytics/chat/status"},
				{method: "GET", path: "/api/sensors/not!valid"},
				{method: "GET", path: "/api/sensors?tenantId=" + tn + "&limit=1&sort=-lastSeen&q=s"},
				{method: "GET", path: "/api/sensors?limit=900"},
				{method: "GET", path: "/api/sensors?cursor=forged"},
				{method: "GET", path: "/api/sensors/summary?tenantId=" + tn},
				{method: "POST", path: "/api/commands", body: `{"action":"stop","sensorIds":["` + s + `"]}`},
				{method: "POST", path: "/api/commands", body: `{"action":"stop","filter":{"tenantId":"` + tn + `","state":"offline"}}`},
				{method: "GET", path: "/api/commands/batches/no-such-batch"},
			} {
				w.as(who, rq)
			}
		}
	}
	e := w.e
	e.do(request{method: "GET", path: "/readyz"})
	e.do(request{method: "GET", path: "/api/openapi.json"})
	e.do(request{method: "POST", path: "/api/auth/login", body: `{"email":"nobody@example.com","password":"wrong"}`})
	e.do(request{method: "POST", path: "/api/tokens", operator: true, body: `{"name":"x","role":"viewer","tenants":["acme"]}`})
	e.do(request{method: "POST", path: "/api/operators", operator: true, body: `{"email":"new@example.com","password":"0123456789abcdef","role":"viewer","tenants":["acme"]}`})
	id, tok := e.redeem("acme")
	e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer " + tok}})
	e.do(request{method: "POST", path: "/api/sensors/claim/redeem", body: `{"claimCode":"NOPE"}`})
	e.do(request{method: "POST", path: "/api/sensors/" + w.sensor["acme"] + "/revoke", operator: true})
	res := e.do(request{method: "POST", path: "/api/commands", operator: true, body: `{"action":"start","filter":{}}`})
	var b struct{ BatchID string }
	if err := json.Unmarshal(res.body, &b); err != nil || b.BatchID == "" {
		t.Fatalf("batch: %d %s", res.status, res.body)
	}
	e.do(request{method: "GET", path: "/api/commands/batches/" + b.BatchID, operator: true})
	// Every operation that takes a body, sent the wrong media type and then a body over every
	// route's limit: whatever each answers must be a status its description declares.
	_, tree := openAPIValidator(t)
	ids := map[string]string{"/api/tenants/{id}": "acme", "/api/sensors/{id}": w.sensor["globex"]}
	var got415, got413 int
	for _, op := range operations(tree) {
		if _, ok := op.spec["requestBody"]; !ok {
			continue
		}
		id := "no-such-id"
		for prefix, v := range ids {
			if strings.HasPrefix(op.path, prefix) {
				id = v
			}
		}
		p := strings.ReplaceAll(op.path, "{id}", id)
		m := strings.ToUpper(op.method)
		if r := e.do(request{method: m, path: p, operator: true, body: "plain text", header: map[string]string{"Content-Type": "text/plain"}}); r.status == http.StatusUnsupportedMediaType {
			got415++
		}
		big := `{"name":"` + strings.Repeat("a", controlapi.MaxBatchBodyBytes+1) + `"}`
		if r := e.do(request{method: m, path: p, operator: true, body: big}); r.status == http.StatusRequestEntityTooLarge {
			got413++
		}
	}
	if got415 < 10 || got413 < 10 {
		t.Errorf("only %d operations answered 415 and %d answered 413 to a wrong media type and an oversized body", got415, got413)
	}
	if len(vt.seen) < 8 {
		t.Fatalf("only %d method/status pairs validated: %v", len(vt.seen), vt.seen)
	}
}

// Every operation has an operationId, unique and in lowerCamelCase, so generated clients get
// stable method names.
func TestOpenAPIOperationsHaveIDs(t *testing.T) {
	_, tree := openAPIValidator(t)
	seen := map[string]string{}
	camel := regexp.MustCompile(`^[a-z][A-Za-z0-9]+$`)
	ops := operations(tree)
	for _, op := range ops {
		id, _ := op.spec["operationId"].(string)
		switch {
		case !camel.MatchString(id):
			t.Errorf("%s %s: operationId %q, want lowerCamelCase", op.method, op.path, id)
		case seen[id] != "":
			t.Errorf("%s %s: operationId %q is also %s's", op.method, op.path, id, seen[id])
		}
		seen[id] = op.method + " " + op.path
	}
	if n := len(ops); n < 30 {
		t.Fatalf("only %d operations found; the check would pass vacuously", n)
	}
}
