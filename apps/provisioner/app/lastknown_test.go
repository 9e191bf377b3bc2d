package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// resolverStatus GETs a resolver path and returns status and body.
func resolverStatus(t *testing.T, s *provisionertest.Stack, pk string) (int, string) {
	t.Helper()
	st, _, body := s.Request("GET", "/jwt/v1/accounts/"+pk, nil)
	return st, string(body)
}

// TestResolverOutlivesDatabaseOutage stops PostgreSQL: the resolver keeps
// answering every known account from its last known copy, also after the
// provisioner restarts during the outage; a nats-server restarted during
// the outage comes up and admits the existing sensors, and a user revoked
// before the outage stays revoked; write routes answer 503; once
// PostgreSQL is back the provisioner finishes starting and nothing is half
// made.
func TestResolverOutlivesDatabaseOutage(t *testing.T) {
	cluster := pgtest.Own(t)
	s := provisionertest.Start(t, provisionertest.Options{PGDSN: cluster.DSN("postgres")})
	account(t, s, "acme")
	account(t, s, "globex")
	s1 := sensorUser(t, s, "acme", "s1")
	s2 := sensorUser(t, s, "acme", "s2")
	g1 := sensorUser(t, s, "globex", "g1")
	if st, body := s.Post("/revoke", map[string]string{"accountId": s2.AccountID, "userPubKey": s2.UserPubKey}); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	known := map[string]string{"": getJWT(t, s.URL, "")}
	for _, pk := range []string{s1.AccountID, g1.AccountID, s.Operator.SystemAccount, s.Operator.ControlAccount} {
		known[pk] = getJWT(t, s.URL, pk)
	}

	// The snapshot file catches up with what the resolver serves.
	path := s.Config.ResolverSnapshotPath
	deadline := time.Now().Add(20 * time.Second)
	for {
		var snap struct {
			Accounts map[string]string `json:"accounts"`
		}
		data, err := os.ReadFile(path)
		current := err == nil && json.Unmarshal(data, &snap) == nil
		for pk, tok := range known {
			current = current && (pk == "" || snap.Accounts[pk] == tok)
		}
		if current {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot %s not current within 20s: %v", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode: %v %v, want 0600", st.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("snapshot folder holds %d entries, want the file alone (no temporary files)", len(entries))
	}

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	unknown, _ := nkeys.CreateAccount()
	unknownPub, _ := unknown.PublicKey()
	checkResolver := func(when string) {
		t.Helper()
		for pk, tok := range known {
			if st, body := resolverStatus(t, s, pk); st != http.StatusOK || body != tok {
				t.Errorf("%s: resolver %q: %d, want 200 with the last known JWT", when, pk, st)
			}
		}
		expectProblem(t, s, route{when + ": unknown account", "GET", "/jwt/v1/accounts/" + unknownPub, nil},
			http.StatusServiceUnavailable, "database_unavailable")
	}
	// Past the resolver cache's lifetime (1 s in tests) every answer comes
	// from the last known copy.
	time.Sleep(1500 * time.Millisecond)
	checkResolver("database down")

	s.StopServe()
	s.StartServe()
	checkResolver("restarted during the outage")
	for _, r := range []route{
		{"new user", "POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s9"}},
		{"new account", "POST", "/accounts", map[string]string{"tenantId": "initech", "name": "Initech"}},
		{"revoke", "POST", "/revoke", map[string]string{"accountId": s1.AccountID, "userPubKey": s1.UserPubKey}},
		{"backend user", "POST", "/backend-user", map[string]string{"name": "backend"}},
		{"health", "GET", "/healthz", nil},
	} {
		expectProblem(t, s, r, http.StatusServiceUnavailable, "database_unavailable")
	}
	if st, _, _ := s.Request("POST", "/users", nil); st == http.StatusServiceUnavailable {
		// The secret is checked before anything else, also while starting.
		req, _ := http.NewRequest("POST", s.URL+"/users", strings.NewReader("{}"))
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /users without the secret while starting: %v %v, want 401", resp.StatusCode, err)
		}
	}

	s.StopNATS()
	s.StartNATS()
	for _, u := range []provisionerwire.UserResponse{s1, g1} {
		nc, err := connectCreds(t, s.NATSURL, u.Creds)
		if err != nil {
			t.Fatalf("sensor %s refused by a nats-server restarted during the outage: %v", u.SensorID, err)
		}
		nc.Close()
	}
	if nc, err := connectCreds(t, s.NATSURL, s2.Creds); err == nil {
		nc.Close()
		t.Fatal("a user revoked before the outage connects again: the snapshot resurrected it")
	}

	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	s.WaitNATSReady()
	if again := sensorUser(t, s, "acme", "s1"); again.UserPubKey != s1.UserPubKey {
		t.Fatal("s1 got a new user after the outage: the refused revocation happened")
	}
	if st, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s9"}); st != http.StatusCreated {
		t.Fatalf("user asked for during the outage: %d %s, want 201 now", st, body)
	}
	if st, body := s.Post("/accounts", map[string]string{"tenantId": "initech", "name": "Initech"}); st != http.StatusCreated {
		t.Fatalf("account asked for during the outage: %d %s, want 201 now", st, body)
	}
	if fresh := sensorUser(t, s, "acme", "s2"); fresh.UserPubKey == s2.UserPubKey {
		t.Fatal("the revoked user came back")
	}
	if st, _, _ := s.Request("GET", "/healthz", nil); st != http.StatusNoContent {
		t.Fatalf("/healthz after recovery: %d", st)
	}
}

// TestNATSServerNeedsTheResolverAtStart records what nats-server does when
// no resolver answers at its start: it exits (it cannot load its system
// account), so it must be restarted once a provisioner answers.
func TestNATSServerNeedsTheResolverAtStart(t *testing.T) {
	if !natstest.External() {
		t.Skip("an in-process nats-server cannot exit; run with RXC_NATS_SERVER_BIN (make test-nats-compat)")
	}
	s := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	s.StopServe()
	err := s.NATS.TryStart()
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("nats-server without a resolver: %v, want it to exit", err)
	}
	s.StartServe()
	s.StartNATS()
	s.WaitNATSReady()
}
