package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/apps/provisioner/app"
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
	clearServeEnv(t)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const secret = "access-log-secret-0123456789"
	for k, v := range map[string]string{
		"PG_DSN": e.dsn, "OPERATOR_SEED_PATH": e.seed, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key, "LOG_LEVEL": "debug",
		"BACKEND_SHARED_SECRET": secret, "LISTEN_ADDR": addr, "NATS_URL": "nats://127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- app.Run(ctx, []string{"serve"}, &logs, &logs) }()
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer within 30s: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
	text := logs.String()
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
