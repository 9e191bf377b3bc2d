package app_test

// Long-lived fleets (issue 21): revocation lists with a bound, revocations
// delivered per account, and nothing left behind by a revoked sensor,
// against the real provisioner, PostgreSQL and nats-server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/natstest"
)

// accountClaims reads the account JWT the resolver serves.
func accountClaims(t *testing.T, s *provisionertest.Stack, pk string) (*jwt.AccountClaims, int) {
	t.Helper()
	tok := getJWT(t, s.URL, pk)
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	return ac, len(tok)
}

func revoke(t *testing.T, s *provisionertest.Stack, u provisionerwire.UserResponse) {
	t.Helper()
	status, body := s.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": u.UserPubKey})
	decode[map[string]any](t, status, body, 200)
}

// Far more revocations than the bound holds: the account JWT stays under
// it (re-issues with a "*" entry), and after a nats-server restart the
// never-revoked sensors connect (with the new user their next POST /users
// hands out, as their agents ask when NATS refuses the old one), the
// revoked ones are refused, whether by their own entry or by "*".
func TestRevocationListBoundOnARealServer(t *testing.T) {
	const bound = 12 << 10 // ~120 entries
	s := provisionertest.Start(t, provisionertest.Options{AccountJWTMaxBytes: bound})
	account(t, s, "acme")
	account(t, s, "beta")
	live := sensorUser(t, s, "acme", "live")
	other := sensorUser(t, s, "beta", "other")
	lc, err := connectSensor(t, s, live)
	if err != nil {
		t.Fatal(err)
	}
	var revoked []provisionerwire.UserResponse
	var acmeKey string
	stars := 0
	var lastStar int64
	for i := range 400 {
		u := sensorUser(t, s, "acme", fmt.Sprintf("r%d", i))
		revoke(t, s, u)
		revoked = append(revoked, u)
		acmeKey = u.AccountID
		ac, n := accountClaims(t, s, acmeKey)
		if n > bound {
			t.Fatalf("after %d revocations the account JWT is %d bytes, over the bound %d", i+1, n, bound)
		}
		if at, ok := ac.Revocations[jwt.All]; ok && at != lastStar {
			lastStar, stars = at, stars+1
		}
	}
	if stars < 2 {
		t.Fatalf("400 revocations re-issued the tenant %d times; want at least 2 with a bound of %d bytes", stars, bound)
	}
	// The live sensor's old credentials stopped working with the re-issue
	// (nats-server closes the connection); POST /users hands it a new user.
	lc.closedWithin(t, 5*time.Second, "a re-issue left the old credentials connected")
	if _, err := connectSensor(t, s, live); err == nil {
		t.Fatal("credentials issued before the re-issue still connect")
	}
	renewed := sensorUser(t, s, "acme", "live")
	if renewed.UserPubKey == live.UserPubKey {
		t.Fatal("POST /users after a re-issue handed out the re-issued user")
	}
	fresh := sensorUser(t, s, "acme", "fresh")

	s.RestartNATS()

	for _, u := range []provisionerwire.UserResponse{renewed, fresh, other} {
		if _, err := connectSensor(t, s, u); err != nil {
			t.Errorf("never-revoked sensor %s/%s refused after the restart: %v", u.TenantID, u.SensorID, err)
		}
	}
	for _, u := range []provisionerwire.UserResponse{revoked[0], revoked[len(revoked)/2], revoked[len(revoked)-1]} {
		if _, err := connectSensor(t, s, u); err == nil {
			t.Errorf("revoked sensor %s accepted after the restart", u.SensorID)
		}
	}
	if _, n := accountClaims(t, s, acmeKey); n > bound {
		t.Errorf("account JWT %d bytes after the restart, over %d", n, bound)
	}
}

// An account JWT NATS refuses (over the server's max_payload, with no
// bound set) is answered 502 account_jwt_undeliverable, not 503
// nats_unavailable; /readyz details and a metric show it while the
// provisioner stays ready; another tenant's revocation is delivered at once.
func TestUndeliverableRevocationDelaysNoOtherAccount(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{AccountJWTMaxBytes: -1})
	s.StopNATS()
	natstest.Start(t, natstest.Options{Dir: s.Dir, Name: "rxc-small", Port: s.NATS.Port(), InProcess: true,
		Config: "include \"nats-operator.conf\"\nmax_payload: 6000\n"})
	s.WaitNATSReady()
	account(t, s, "big")
	account(t, s, "small")
	undelivered := false
	for i := range 120 {
		u := sensorUser(t, s, "big", fmt.Sprintf("s%d", i))
		status, body := s.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": u.UserPubKey})
		if status == 200 {
			continue
		}
		if status != 502 || !strings.Contains(string(body), `"account_jwt_undeliverable"`) {
			t.Fatalf("revocation %d: %d %s; want 200 or 502 account_jwt_undeliverable", i, status, body)
		}
		undelivered = true
		break
	}
	if !undelivered {
		t.Fatal("120 revocations never passed a max_payload of 6000 bytes")
	}
	status, _, body := s.Request("GET", "/readyz", nil)
	var ready struct {
		Ready   bool              `json:"ready"`
		Checks  map[string]string `json:"checks"`
		Details map[string]string `json:"details"`
	}
	if err := json.Unmarshal(body, &ready); err != nil {
		t.Fatal(err)
	}
	if status != 200 || !ready.Ready || ready.Checks["account_jwts"] != "degraded" || !strings.Contains(ready.Details["account_jwts"], "undeliverable") {
		t.Errorf("/readyz = %d %s; want ready with account_jwts degraded and why", status, body)
	}
	if v := metricValue(scrape(t, s), "rxc_provisioner_undeliverable_accounts"); v != "1" {
		t.Errorf("rxc_provisioner_undeliverable_accounts = %q, want 1", v)
	}
	// Another tenant's revocation goes through at once, with the background
	// retry failing on "big" meanwhile.
	victim := sensorUser(t, s, "small", "v")
	vc, err := connectSensor(t, s, victim)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second) // one background retry of "big" has run
	revoke(t, s, victim)
	vc.closedWithin(t, 5*time.Second, "a revocation in another tenant waited for the undeliverable account")
}

// Revoking a sensor removes its consumer and pending commands within 10 s;
// a revocation whose clean-up failed (NATS down) is finished by the repair
// pass after the reconnect; other sensors keep theirs.
func TestRevokedSensorLeavesNoConsumer(t *testing.T) {
	s := acmeStack(t)
	gone := sensorUser(t, s, "acme", "gone")
	later := sensorUser(t, s, "acme", "later")
	kept := sensorUser(t, s, "acme", "kept")
	_, bjs := backend(t, s)
	ctx := context.Background()
	for _, u := range []provisionerwire.UserResponse{gone, later, kept} {
		for i := range 3 {
			if _, err := bjs.Publish(ctx, u.CommandSubject, fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, admin := controlAdmin(t, s)
	pending := func(subject string) uint64 {
		t.Helper()
		st, err := admin.Stream(ctx, gone.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	consumerGone := func(u provisionerwire.UserResponse, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			_, err := admin.Consumer(ctx, u.Stream, u.Consumer)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumer %s still there %s after the revocation (%v)", u.Consumer, within, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := pending(u.CommandSubject); n != 0 {
			t.Errorf("%d commands of %s left in the stream", n, u.SensorID)
		}
	}
	revoke(t, s, gone)
	consumerGone(gone, 10*time.Second)

	// NATS down: the revocation is stored (503), the clean-up waits for the
	// reconnect.
	s.StopNATS()
	status, body := s.Post("/revoke", map[string]string{"accountId": later.AccountID, "userPubKey": later.UserPubKey})
	if status != 503 {
		t.Fatalf("revoke with NATS down: %d %s; want 503", status, body)
	}
	s.StartNATS()
	s.WaitNATSReady()
	_, admin = controlAdmin(t, s)
	consumerGone(later, 10*time.Second)

	if _, err := admin.Consumer(ctx, kept.Stream, kept.Consumer); err != nil {
		t.Errorf("another sensor's consumer: %v", err)
	}
	if n := pending(kept.CommandSubject); n != 3 {
		t.Errorf("another sensor has %d pending commands, want 3", n)
	}
	// The revoked pair may come back (the control plane decides); it gets
	// a user and a consumer again, and no other pair can take its name.
	back := sensorUser(t, s, "acme", "gone")
	if _, err := admin.Consumer(ctx, back.Stream, back.Consumer); err != nil {
		t.Errorf("the pair asking again has no consumer: %v", err)
	}
}

// A burst of revocations within one second can pass the bound with the
// current second's entries alone: the re-issue then waits for the next
// second and covers them, and every revocation answers 200.
func TestRevocationBurstAtTheBound(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{AccountJWTMaxBytes: 4 << 10})
	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	for i := range 100 {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		status, body := s.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": pub})
		if status != 200 {
			t.Fatalf("revocation %d: %d %s", i, status, body)
		}
		if _, n := accountClaims(t, s, u.AccountID); n > 4<<10 {
			t.Fatalf("revocation %d: account JWT %d bytes", i, n)
		}
	}
}
