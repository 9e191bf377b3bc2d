package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// getJWT fetches an account JWT from the resolver; pk "" asks the base URL.
func getJWT(t *testing.T, base, pk string) string {
	t.Helper()
	resp, err := http.Get(base + "/jwt/v1/accounts/" + pk)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jwt" {
		t.Fatalf("GET resolver %q: %d %s %s", pk, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return string(body)
}

func TestResolver(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	account(t, s, "acme")

	sys, err := jwt.DecodeAccountClaims(getJWT(t, s.URL, ""))
	if err != nil || sys.Subject != s.Operator.SystemAccount {
		t.Fatalf("base URL answers %v (err %v), want the SYS account %s", sys, err, s.Operator.SystemAccount)
	}
	ctl, err := jwt.DecodeAccountClaims(getJWT(t, s.URL, s.Operator.ControlAccount))
	if err != nil || ctl.Name != "CONTROL" || len(ctl.Exports) != 5 {
		t.Fatalf("CONTROL JWT: %+v err %v", ctl, err)
	}

	resp, err := http.Get(s.URL + "/jwt/v1/accounts/" + s.Operator.ControlAccount)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}

	tests := []struct {
		name        string
		path        string
		ifNoneMatch string
		status      int
		code        string
	}{
		{"matching etag", s.Operator.ControlAccount, etag, 304, ""},
		{"weak matching etag in a list", s.Operator.ControlAccount, `"nope", W/` + etag, 304, ""},
		{"stale etag", s.Operator.ControlAccount, `"0000"`, 200, ""},
		{"not an account key", "UABC", "", 400, "invalid_public_key"},
		{"operator key is not an account", s.Operator.PubKey, "", 400, "invalid_public_key"},
		{"unknown account", "ADUQSHUIDOWZ3ASXIDULEISXDMYOYTSNQBXWLBJCROYLLB7HVYCTMJAF", "", 404, "account_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.URL+"/jwt/v1/accounts/"+tt.path, nil)
			if tt.ifNoneMatch != "" {
				req.Header.Set("If-None-Match", tt.ifNoneMatch)
			}
			body := wantAnswer(t, req, tt.status, tt.code)
			if tt.status == 304 && len(body) != 0 {
				t.Fatalf("304 with a body")
			}
		})
	}
}

// wantAnswer sends req and fails t unless the answer has status and, when
// code is not empty, is that problem; it returns the body.
func wantAnswer(t *testing.T, req *http.Request, status int, code string) []byte {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL.Path, resp.StatusCode, status, body)
	}
	if code != "" {
		assertProblem(t, resp, body, code)
	}
	return body
}

func assertProblem(t *testing.T, resp *http.Response, body []byte, code string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json", ct)
	}
	var p struct {
		Type, Title, Code string
		Status            int
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %s: %v", body, err)
	}
	if p.Code != code || p.Status != resp.StatusCode || p.Title == "" || p.Type == "" {
		t.Fatalf("problem %+v, want code %q status %d", p, code, resp.StatusCode)
	}
}

func TestWriteRoutesRejectBadInput(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	account(t, s, "acme")
	huge := `{"tenantId":"` + strings.Repeat("a", 70<<10) + `"}`
	validAcct := s.Operator.ControlAccount
	tests := []struct {
		name   string
		path   string
		header string
		secret string
		body   string
		status int
		code   string
	}{
		{"no secret", "/accounts", "", "", `{"tenantId":"a"}`, 401, "unauthorized"},
		{"wrong secret", "/accounts", "X-Backend-Shared-Secret", "wrong-secret-0123456789", `{"tenantId":"a"}`, 401, "unauthorized"},
		{"secret prefix", "/users", "X-Backend-Shared-Secret", "test-shared", `{}`, 401, "unauthorized"},
		{"legacy header accepted", "/accounts", "X-Product-Provisioner-Secret", "", `{"tenantId":"legacy"}`, 201, ""},
		{"malformed json", "/accounts", "", "ok", `{"tenantId":`, 400, "invalid_json"},
		{"two values", "/accounts", "", "ok", `{"tenantId":"a"}{}`, 400, "invalid_json"},
		{"unknown field", "/users", "", "ok", `{"tenantId":"acme","sensorId":"s","x":1}`, 400, "invalid_json"},
		{"wrong type", "/users", "", "ok", `{"tenantId":1}`, 400, "invalid_json"},
		{"empty body", "/revoke", "", "ok", ``, 400, "invalid_json"},
		{"oversize body", "/accounts", "", "ok", huge, 413, "body_too_large"},
		{"invalid tenant id", "/accounts", "", "ok", `{"tenantId":"a.b"}`, 400, "invalid_id"},
		{"empty tenant id", "/accounts", "", "ok", `{"tenantId":""}`, 400, "invalid_id"},
		{"wildcard sensor id", "/users", "", "ok", `{"tenantId":"acme","sensorId":"*"}`, 400, "invalid_id"},
		{"long sensor id", "/users", "", "ok", `{"tenantId":"acme","sensorId":"` + strings.Repeat("s", 65) + `"}`, 400, "invalid_id"},
		{"tenant without account", "/users", "", "ok", `{"tenantId":"ghost","sensorId":"s1"}`, 404, "tenant_has_no_account"},
		{"invalid backend name", "/backend-user", "", "ok", `{"name":"a b"}`, 400, "invalid_name"},
		{"revoke malformed account", "/revoke", "", "ok", `{"accountId":"x","userPubKey":"UABC"}`, 400, "invalid_public_key"},
		{"revoke malformed user", "/revoke", "", "ok", `{"accountId":"` + validAcct + `","userPubKey":"` + validAcct + `"}`, 400, "invalid_public_key"},
		{"revoke unknown account", "/revoke", "", "ok", `{"accountId":"ADUQSHUIDOWZ3ASXIDULEISXDMYOYTSNQBXWLBJCROYLLB7HVYCTMJAF","userPubKey":"UA7KWYFCS7HDDPVHTP3MTGJ7TERY3R6GR6HYGGXG7IUWJNPAOD2AIQYC"}`, 404, "account_not_found"},
		{"wrong media type", "/accounts", "", "ok", "tenantId=a", 415, "unsupported_media_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.URL+tt.path, bytes.NewBufferString(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.code == "unsupported_media_type" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			header, secret := tt.header, tt.secret
			if header == "" && secret == "ok" {
				header = "X-Backend-Shared-Secret"
			}
			if secret == "ok" || secret == "" {
				secret = s.Secret
			}
			if header != "" {
				req.Header.Set(header, secret)
			}
			wantAnswer(t, req, tt.status, tt.code)
		})
	}

	t.Run("nothing was stored by rejected requests", func(t *testing.T) {
		status, body := s.Post("/users", map[string]string{"tenantId": "a", "sensorId": "s"})
		if status != 404 {
			t.Fatalf("tenant 'a' got an account from a rejected request: %d %s", status, body)
		}
	})
	t.Run("unknown route and method are problems", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/accounts", nil)
		wantAnswer(t, req, 405, "method_not_allowed")
	})
}

func decodeInto(tb testing.TB, body []byte, v any) {
	tb.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		tb.Fatalf("decode %s: %v", body, err)
	}
}

func getOK(tb testing.TB, url string) {
	resp, err := http.Get(url)
	if err != nil {
		tb.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Errorf("GET %s: %d", url, resp.StatusCode)
	}
}
