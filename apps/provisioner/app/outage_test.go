package app_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// expectReady checks GET /readyz's report of each dependency.
func expectReady(t *testing.T, s *provisionertest.Stack, postgres, nats string) {
	t.Helper()
	st, hdr, body := s.Request("GET", "/readyz", nil)
	var got struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("/readyz: %d %s: %v", st, body, err)
	}
	ready := postgres == "ok" && nats == "ok"
	want := http.StatusOK
	if !ready {
		want = http.StatusServiceUnavailable
	}
	if st != want || got.Ready != ready || got.Checks["postgres"] != postgres || got.Checks["nats"] != nats || (!ready && hdr.Get("Retry-After") == "") {
		t.Errorf("/readyz: %d %s, want %d with postgres %s, nats %s", st, body, want, postgres, nats)
	}
}

type route struct {
	name, method, path string
	body               any
}

// expectProblem checks one answer during an outage: the status, the stable
// code and a Retry-After; never 500.
func expectProblem(t *testing.T, s *provisionertest.Stack, r route, status int, code string) {
	t.Helper()
	got, hdr, body := s.Request(r.method, r.path, r.body)
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	if got != status || p.Code != code || hdr.Get("Retry-After") == "" {
		t.Errorf("%s (%s %s): %d %q Retry-After %q, want %d %q with Retry-After: %s",
			r.name, r.method, r.path, got, p.Code, hdr.Get("Retry-After"), status, code, body)
	}
}

// TestDatabaseOutageAnswers503 stops the provisioner's PostgreSQL: every
// route that needs it answers 503 database_unavailable with Retry-After,
// never 500; once PostgreSQL is back every route works and nothing asked
// during the outage was half made.
func TestDatabaseOutageAnswers503(t *testing.T) {
	cluster := pgtest.Own(t)
	s := provisionertest.Start(t, provisionertest.Options{PGDSN: cluster.DSN("postgres")})
	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	victim := sensorUser(t, s, "acme", "s2")

	routes := []route{
		{"existing account", "POST", "/accounts", map[string]string{"tenantId": "acme", "name": "Acme"}},
		{"new account", "POST", "/accounts", map[string]string{"tenantId": "globex", "name": "Globex"}},
		{"existing user", "POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s1"}},
		{"new user", "POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s9"}},
		{"backend user", "POST", "/backend-user", map[string]string{"name": "backend"}},
		{"revoke", "POST", "/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": victim.UserPubKey}},
		{"health", "GET", "/healthz", nil},
	}
	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		expectProblem(t, s, r, http.StatusServiceUnavailable, "database_unavailable")
	}
	expectReady(t, s, "unavailable", "ok")

	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, _, _ := s.Request("GET", "/healthz", nil); st == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("provisioner not healthy within 60s of PostgreSQL's return")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Nothing asked during the outage happened: globex is created now, s9
	// minted now, the victim still connects.
	if st, body := s.Post("/accounts", map[string]string{"tenantId": "globex", "name": "Globex"}); st != http.StatusCreated {
		t.Fatalf("new account after the outage: %d %s, want 201 (the outage must not have made it)", st, body)
	}
	if st, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s9"}); st != http.StatusCreated {
		t.Fatalf("new user after the outage: %d %s, want 201", st, body)
	}
	if again := sensorUser(t, s, "acme", "s2"); again.UserPubKey != victim.UserPubKey {
		t.Fatal("the revocation asked during the outage took effect")
	}
	if nc, err := connectCreds(t, s.NATSURL, victim.Creds); err != nil {
		t.Fatalf("the user a refused revocation named cannot connect: %v", err)
	} else {
		nc.Close()
	}
}

// TestNATSOutageAnswers503 stops nats-server: routes that need it answer
// 503 nats_unavailable with Retry-After, the others keep working, and what
// was stored meanwhile is completed once NATS is back.
func TestNATSOutageAnswers503(t *testing.T) {
	s := acmeStack(t)
	u := sensorUser(t, s, "acme", "s1")
	victim := sensorUser(t, s, "acme", "s2")
	s.StopNATS()
	deadline := time.Now().Add(30 * time.Second)
	for s.NATSReady() {
		if time.Now().After(deadline) {
			t.Fatal("provisioner still connected 30s after nats-server stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}

	expectProblem(t, s, route{"new user", "POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s3"}},
		http.StatusServiceUnavailable, "nats_unavailable")
	expectProblem(t, s, route{"revoke", "POST", "/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": victim.UserPubKey}},
		http.StatusServiceUnavailable, "nats_unavailable")
	// What does not need NATS works.
	if st, body := s.Post("/accounts", map[string]string{"tenantId": "globex", "name": "Globex"}); st != http.StatusCreated {
		t.Errorf("new account with NATS down: %d %s", st, body)
	}
	if st, body := s.Post("/backend-user", map[string]string{"name": "backend"}); st != http.StatusCreated && st != http.StatusOK {
		t.Errorf("backend user with NATS down: %d %s", st, body)
	}
	getJWT(t, s.URL, u.AccountID)
	getJWT(t, s.URL, "")
	if st, _, body := s.Request("GET", "/healthz", nil); st != http.StatusNoContent {
		t.Errorf("/healthz with NATS down: %d %s", st, body)
	}
	expectReady(t, s, "ok", "unavailable")

	s.StartNATS()
	s.WaitNATSReady()
	expectReady(t, s, "ok", "ok")
	// The stored revocation reaches NATS without being asked again.
	deadline = time.Now().Add(30 * time.Second)
	for {
		nc, err := connectCreds(t, s.NATSURL, victim.Creds)
		if err != nil {
			break
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("the user revoked during the outage still connects 30s after NATS returned")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The user asked for during the outage was kept; a retry finishes it.
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s3"})
		if st == http.StatusOK {
			break
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("POST /users after NATS returned: %d %s, want 200 (the user was kept)", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
