package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/waitfor"
)

// replica runs a second provisioner on the stack's database and NATS, with
// its own port and snapshot, as a second replica behind a load balancer.
func replica(t *testing.T, s *provisionertest.Stack) string {
	t.Helper()
	cfg := s.Config
	cfg.ListenAddr = fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	cfg.ResolverSnapshotPath = filepath.Join(t.TempDir(), "replica-snapshot.json")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !srv.NATSReady() {
		if time.Now().After(deadline) {
			t.Fatal("replica not connected to NATS within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + cfg.ListenAddr
}

func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Two replicas on one database: what one creates the other resolves at
// once, a revocation made through one reaches the other's resolver within
// RESOLVER_CACHE_TTL and NATS at once, and identical requests through both
// leave one record.
func TestTwoReplicas(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	b := replica(t, s)
	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	if st, _ := getStatus(t, b+"/jwt/v1/accounts/"+u.AccountID); st != http.StatusOK {
		t.Fatalf("replica B does not resolve an account replica A created: %d", st)
	}
	// Through B, the same sensor is the same user.
	status, _, body := s.Request("POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s1"})
	first := decode[provisionerwire.UserResponse](t, status, body, 200)
	reqB, _ := http.NewRequest("GET", b+"/readyz", nil)
	if resp, err := http.DefaultClient.Do(reqB); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("replica B /readyz: %v %v", resp.StatusCode, err)
	}
	bs := *s
	bs.URL = b
	again := sensorUser(t, &bs, "acme", "s1")
	if again.UserPubKey != first.UserPubKey {
		t.Fatal("replica B minted a second user for the same sensor")
	}
	revokeThroughB := func(u provisionerwire.UserResponse) {
		t.Helper()
		if st, body := bs.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": u.UserPubKey}); st != http.StatusOK {
			t.Fatalf("revoke through B: %d %s", st, body)
		}
	}

	// Revoked through B: the push reaches the nats-server that has the
	// account loaded (the sensor is connected) at once; A's resolver, which
	// nats-servers that load the account later ask, serves the revocation
	// within its cache lifetime (RESOLVER_CACHE_TTL, 1 s in tests).
	live, err := connectCreds(t, s.NATSURL, u.Creds)
	if err != nil {
		t.Fatal(err)
	}
	revokeThroughB(u)
	waitfor.Until(t, 10*time.Second, "the connection of a user revoked through replica B to close", live.IsClosed)
	if nc, err := connectCreds(t, s.NATSURL, u.Creds); err == nil {
		nc.Close()
		t.Fatal("user revoked through replica B still connects")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, tok := getStatus(t, s.URL+"/jwt/v1/accounts/"+u.AccountID)
		if ac, err := jwt.DecodeAccountClaims(tok); err == nil && ac.Revocations[u.UserPubKey] != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica A's resolver does not serve B's revocation within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A nats-server that loads an account right after another replica's
	// revocation may get the JWT from this replica's cache, stale for up to
	// its TTL; the revoking replica pushes once more after that window, so
	// the revoked user is shut out then at the latest.
	account(t, s, "globex")
	g := sensorUser(t, s, "globex", "g1")
	getJWT(t, s.URL, g.AccountID) // A caches globex's JWT
	revokeThroughB(g)
	if late, err := connectCreds(t, s.NATSURL, g.Creds); err == nil {
		waitfor.Until(t, 15*time.Second, "a user revoked through replica B, admitted from A's stale cache, to be disconnected", late.IsClosed)
	}
	if nc, err := connectCreds(t, s.NATSURL, g.Creds); err == nil {
		nc.Close()
		t.Fatal("revoked user connects again after the second push")
	}
}

// A replica whose resolver answers an account without pause (as
// nats-servers starting one after another ask it) serves another
// replica's revocation as soon as one that is idle: the background read of
// a hot cache entry brings it in, an entry is never served longer than
// RESOLVER_CACHE_TTL (1 s in tests) after it was read.
func TestHotResolverServesAnotherReplicasRevocation(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	b := replica(t, s)
	bs := *s
	bs.URL = b
	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	url := s.URL + "/jwt/v1/accounts/" + u.AccountID
	revoked := func() bool {
		_, tok := getStatus(t, url)
		ac, err := jwt.DecodeAccountClaims(tok)
		return err == nil && ac.Revocations[u.UserPubKey] != 0
	}
	if revoked() {
		t.Fatal("revoked before the revocation (control)")
	}
	// Keep A's entry hot: a request every millisecond, from before the
	// revocation until after it is served.
	stop := make(chan struct{})
	hot := make(chan int, 1)
	go func() {
		n := 0
		defer func() { hot <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				n++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(1500 * time.Millisecond) // past one TTL: the entry is refreshed ahead at least once
	if st, body := bs.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": u.UserPubKey}); st != http.StatusOK {
		t.Fatalf("revoke through B: %d %s", st, body)
	}
	start := time.Now()
	for !revoked() {
		if time.Since(start) > 10*time.Second {
			close(stop)
			t.Fatalf("replica A, answering the account without pause (%d requests), does not serve B's revocation within 10s", <-hot)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	t.Logf("A served B's revocation %s after it was stored, under %d resolver requests", time.Since(start).Round(time.Millisecond), <-hot)
}
