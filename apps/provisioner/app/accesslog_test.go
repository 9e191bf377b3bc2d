package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/internal/logbuf"
)

// serve logs one info access record per request (route, status, never the
// shared secret or the query), and every record parses with each key once
// (start-up, failed NATS connections, requests, shutdown).
func TestServeAccessLogAndUniqueKeys(t *testing.T) {
	e := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	const secret = "access-log-secret-0123456789"
	srv := startServe(t, map[string]string{
		"PG_DSN": e.dsn, "OPERATOR_SEED_PATH": e.seed, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key, "LOG_LEVEL": "debug",
		"BACKEND_SHARED_SECRET": secret, "NATS_URL": "nats://127.0.0.1:1",
	})
	base := srv.base
	srv.waitAnswer(t, "/healthz", 0, 30*time.Second)
	req, _ := http.NewRequest(http.MethodPost, base+"/accounts?token=query-secret", strings.NewReader(`{}`))
	req.Header.Set("X-Backend-Shared-Secret", secret+"-wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", resp.StatusCode)
	}
	// The resolver's answers are summarised, its refusals logged each.
	for path, want := range map[string]int{"/jwt/v1/accounts/": http.StatusOK, "/jwt/v1/accounts/not-a-key": http.StatusBadRequest} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	srv.stopped(t)
	text := srv.logs.String()
	if dups := logbuf.DuplicateKeys(text); len(dups) > 0 {
		t.Fatalf("log records with a key twice:\n%s", strings.Join(dups, "\n"))
	}
	for _, s := range []string{secret, "query-secret"} {
		if strings.Contains(text, s) {
			t.Fatalf("the log holds %q:\n%s", s, text)
		}
	}
	seen := map[string]float64{}
	resolver := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["component"] == "access" && rec["level"] == "INFO" && rec["msg"] == "request" {
			seen[rec["route"].(string)] = rec["status"].(float64)
			if p, _ := rec["path"].(string); strings.HasPrefix(p, "/jwt/v1/accounts/") {
				resolver[p] = rec["status"].(float64)
			}
		}
	}
	if seen["GET /healthz"] == 0 || seen["POST /accounts"] != 401 {
		t.Fatalf("access records %v, want GET /healthz and POST /accounts 401:\n%s", seen, text)
	}
	if len(resolver) != 1 || resolver["/jwt/v1/accounts/not-a-key"] != 400 {
		t.Fatalf("resolver access records %v, want only the refusal's (400):\n%s", resolver, text)
	}
}
