package controlapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/core/operators"
)

func TestSessionCookie(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		localMode  bool
		wantSecure bool
	}{
		{"production", false, true},
		{"local mode", true, false},
	}
	base := newEnv(t, options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := base.variant(t, func(c *controlapi.Config) { c.LocalMode = tc.localMode })
			res := e.do(request{method: "POST", path: "/api/auth/login", body: fmt.Sprintf(`{"email":%q,"password":%q}`, "  OPS@example.com ", operatorPassword)})
			if res.status != http.StatusNoContent || len(res.body) != 0 {
				t.Fatalf("login: %d %s", res.status, res.body)
			}
			c := sessionCookie(res)
			if c == nil {
				t.Fatal("no session cookie")
			}
			got := struct {
				HttpOnly, Secure bool
				SameSite         http.SameSite
				Path             string
				MaxAge           int
			}{c.HttpOnly, c.Secure, c.SameSite, c.Path, c.MaxAge}
			want := got
			want.HttpOnly, want.Secure, want.SameSite, want.Path = true, tc.wantSecure, http.SameSiteLaxMode, "/"
			want.MaxAge = int(operators.DefaultSessionTTL / time.Second)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cookie attributes (-want +got):\n%s", diff)
			}

			e.session = c.Value
			e.do(request{method: "GET", path: "/api/auth/me", operator: true}).expect(t, "me with the new session", http.StatusOK, "")
			e.clock.Advance(operators.DefaultSessionTTL + time.Second)
			e.do(request{method: "GET", path: "/api/auth/me", operator: true}).expect(t, "me with an expired session", http.StatusUnauthorized, "unauthenticated")
		})
	}
}

func TestWrongCredentialsLookAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	wrongPassword := e.do(request{method: "POST", path: "/api/auth/login", body: fmt.Sprintf(`{"email":%q,"password":"not the password"}`, operatorEmail)})
	unknownEmail := e.do(request{method: "POST", path: "/api/auth/login", body: `{"email":"nobody@example.com","password":"not the password"}`})
	malformedEmail := e.do(request{method: "POST", path: "/api/auth/login", body: `{"email":"nobody","password":"not the password"}`})
	for name, res := range map[string]response{"unknown email": unknownEmail, "malformed email": malformedEmail} {
		if res.status != http.StatusUnauthorized || string(res.body) != string(wrongPassword.body) || sessionCookie(res) != nil {
			t.Errorf("%s: %d %s; want the wrong password's 401 %s without a cookie", name, res.status, res.body, wrongPassword.body)
		}
	}
	wrongPassword.expect(t, "wrong password", http.StatusUnauthorized, "invalid_credentials")
}

func TestCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	tests := []struct {
		name string
		req  request
		// wantStatus 0 skips the status check.
		wantStatus int
		wantHeader map[string]string
	}{
		{
			name:       "allowed origin",
			req:        request{method: "GET", path: "/api/auth/me", operator: true, header: map[string]string{"Origin": allowedOrigin}},
			wantStatus: 200,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": allowedOrigin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin", "Access-Control-Expose-Headers": "Retry-After"},
		},
		{
			name:       "foreign origin",
			req:        request{method: "GET", path: "/api/auth/me", operator: true, header: map[string]string{"Origin": "https://evil.example"}},
			wantStatus: 200,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": "", "Vary": "Origin", "Access-Control-Expose-Headers": ""},
		},
		{
			name:       "origin differing in port",
			req:        request{method: "GET", path: "/api/auth/me", operator: true, header: map[string]string{"Origin": allowedOrigin + ":8080"}},
			wantStatus: 200,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": ""},
		},
		{
			name: "preflight from the allowed origin",
			req: request{method: "OPTIONS", path: "/api/tenants", header: map[string]string{
				"Origin": allowedOrigin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,idempotency-key",
			}},
			wantStatus: 204,
			wantHeader: map[string]string{
				"Access-Control-Allow-Origin": allowedOrigin, "Access-Control-Allow-Credentials": "true",
				"Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE", "Access-Control-Allow-Headers": "Content-Type, Authorization, Idempotency-Key",
			},
		},
		{
			name:       "preflight from a foreign origin",
			req:        request{method: "OPTIONS", path: "/api/tenants", header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}},
			wantStatus: 403,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(tc.req)
			if res.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", res.status, tc.wantStatus, res.body)
			}
			for k, want := range tc.wantHeader {
				if got := res.header.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestOriginCheck covers the state-changing requests that pass: the
// allowed origin, the API's own host, a Referer from either, and tools
// that send neither header.
func TestOriginCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	self, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		header map[string]string
	}{
		{"allowed origin", map[string]string{"Origin": allowedOrigin}},
		{"own host", map[string]string{"Origin": "http://" + self.Host}},
		{"referer from the allowed origin", map[string]string{"Referer": allowedOrigin + "/tenants"}},
		{"same-site fetch without origin", map[string]string{"Sec-Fetch-Site": "same-origin"}},
		{"no origin, no referer", nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"t%d"}`, i)
			e.do(request{method: "POST", path: "/api/tenants", body: body, operator: true, header: tc.header}).expect(t, "create tenant", http.StatusCreated, "")
		})
	}
}

// TestConcurrentTenantCreation sends 20 identical creations at once: one
// creates, the others see it, and one tenant exists.
func TestConcurrentTenantCreation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	const n = 20
	count := map[int]int{}
	for _, res := range atOnce(n, func(int) response {
		return e.do(request{method: "POST", path: "/api/tenants", body: `{"id":"acme","name":"Acme"}`, operator: true})
	}) {
		count[res.status]++
	}
	if diff := cmp.Diff(map[int]int{http.StatusCreated: 1, http.StatusOK: n - 1}, count); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	var list struct{ Items []struct{ ID string } }
	res := e.do(request{method: "GET", path: "/api/tenants", operator: true})
	if err := json.Unmarshal(res.body, &list); err != nil || len(list.Items) != 1 {
		t.Errorf("tenants after concurrent creation: %s", res.body)
	}
}

// Without an analytics service the chat reports itself off; the live
// status with a model provider is tested in chat_test.go.
func TestChatStatusWithoutAnalytics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	wantObject(t, "chat status", e.do(request{method: "GET", path: "/api/analytics/chat/status", operator: true}), http.StatusOK, map[string]any{
		"enabled": false, "model": "", "capabilities": map[string]any{"threatIntel": false, "historicalEnrichment": false, "playbooks": false},
	})
}
