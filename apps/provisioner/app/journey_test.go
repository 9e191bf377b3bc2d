package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func decode[T any](t *testing.T, status int, body []byte, want ...int) T {
	t.Helper()
	ok := false
	for _, w := range want {
		ok = ok || status == w
	}
	if !ok {
		t.Fatalf("status %d, want one of %v: %s", status, want, body)
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

// acmeStack starts a provisioner holding the tenant acme's account.
func acmeStack(t *testing.T) *provisionertest.Stack {
	t.Helper()
	s := provisionertest.Start(t, provisionertest.Options{})
	account(t, s, "acme")
	return s
}

func account(t *testing.T, s *provisionertest.Stack, tenant string) {
	t.Helper()
	status, body := s.Post("/accounts", map[string]string{"tenantId": tenant, "name": tenant + " Inc."})
	decode[map[string]any](t, status, body, 200, 201)
}

func sensorUser(t *testing.T, s *provisionertest.Stack, tenant, sensor string) provisionerwire.UserResponse {
	t.Helper()
	status, body := s.Post("/users", map[string]string{"tenantId": tenant, "sensorId": sensor})
	return decode[provisionerwire.UserResponse](t, status, body, 200, 201)
}

// sensorConn is a sensor connected the way a sensor agent connects (docs/provisioner.md, "Isolation model").
type sensorConn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	u    provisionerwire.UserResponse
	errs chan error
}

func connectSensor(t *testing.T, s *provisionertest.Stack, u provisionerwire.UserResponse) (*sensorConn, error) {
	t.Helper()
	errs := make(chan error, 64)
	nc, err := nats.Connect(s.NATSURL,
		nats.UserJWTAndSeed(mustJWT(t, u.Creds), mustSeed(t, u.Creds)),
		nats.CustomInboxPrefix(u.InboxPrefix),
		nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}),
	)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, u.JSAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return &sensorConn{nc: nc, js: js, u: u, errs: errs}, nil
}

// closedWithin waits until nats-server has closed c, failing the test with
// failure after limit.
func (c *sensorConn) closedWithin(t *testing.T, limit time.Duration, failure string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for c.nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownConsumer connects u's sensor and binds its command consumer (the
// stream and name POST /users gave it) through its JetStream API prefix.
func ownConsumer(t *testing.T, ctx context.Context, s *provisionertest.Stack, u provisionerwire.UserResponse) (*sensorConn, jetstream.Consumer) {
	t.Helper()
	sc, err := connectSensor(t, s, u)
	if err != nil {
		t.Fatalf("sensor connect with creds from POST /users: %v", err)
	}
	cons, err := sc.js.Consumer(ctx, u.Stream, u.Consumer)
	if err != nil {
		t.Fatalf("sensor binds its consumer through %s: %v", u.JSAPIPrefix, err)
	}
	return sc, cons
}

// sensorConnects wants u's credentials to connect to s's nats-server,
// failing the test with what (the moment it names) where they do not.
func sensorConnects(t *testing.T, s *provisionertest.Stack, u provisionerwire.UserResponse, what string) {
	t.Helper()
	if _, err := connectSensor(t, s, u); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func connectCreds(t *testing.T, url, creds string) (*nats.Conn, error) {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(mustJWT(t, creds), mustSeed(t, creds)), nats.MaxReconnects(0))
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

func mustJWT(t *testing.T, creds string) string {
	t.Helper()
	tok, err := jwt.ParseDecoratedJWT([]byte(creds))
	if err != nil {
		t.Fatalf("creds JWT: %v", err)
	}
	return tok
}

func mustSeed(t *testing.T, creds string) string {
	t.Helper()
	kp, err := jwt.ParseDecoratedNKey([]byte(creds))
	if err != nil {
		t.Fatalf("creds seed: %v", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}

func backend(t *testing.T, s *provisionertest.Stack) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	status, body := s.Post("/backend-user", map[string]string{"name": "backend"})
	b := decode[provisionerwire.BackendUserResponse](t, status, body, 200, 201)
	if b.AccountID != s.Operator.ControlAccount {
		t.Fatalf("backend user in account %s, want CONTROL %s", b.AccountID, s.Operator.ControlAccount)
	}
	nc, err := connectCreds(t, s.NATSURL, b.Creds)
	if err != nil {
		t.Fatalf("backend connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func TestSensorJourney(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	want := provisionerwire.UserResponse{
		TenantID: "acme", SensorID: "s1", Stream: "RXC_CMD", Consumer: "cmd-acme-s1", JSAPIPrefix: "ctrl.API",
		InboxPrefix: "_INBOX_acme_s1", CommandSubject: "rxc.acme.s1.cmd", StatusSubject: "rxc.acme.s1.status",
	}
	got := u
	got.AccountID, got.UserPubKey, got.UserJWT, got.Creds = "", "", "", ""
	if got != want {
		t.Fatalf("POST /users names:\n got %+v\nwant %+v", got, want)
	}
	if !nkeys.IsValidPublicUserKey(u.UserPubKey) || !nkeys.IsValidPublicAccountKey(u.AccountID) {
		t.Fatalf("bad keys in response: user %q account %q", u.UserPubKey, u.AccountID)
	}

	bnc, bjs := backend(t, s)
	statuses, err := bnc.SubscribeSync("rxc.*.*.status")
	if err != nil {
		t.Fatal(err)
	}
	if err := bnc.Flush(); err != nil {
		t.Fatal(err)
	}

	// The command is published while the sensor is offline: it waits in the stream.
	ack, err := bjs.Publish(ctx, u.CommandSubject, []byte(`{"action":"start"}`), jetstream.WithMsgID("cmd-1"))
	if err != nil {
		t.Fatalf("backend publish command: %v", err)
	}
	if ack.Stream != "RXC_CMD" {
		t.Fatalf("command stored in stream %q, want RXC_CMD", ack.Stream)
	}

	sc, cons := ownConsumer(t, ctx, s, u)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("sensor pull: %v", err)
	}
	if string(msg.Data()) != `{"action":"start"}` {
		t.Fatalf("sensor got %q", msg.Data())
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatalf("sensor ack across accounts: %v", err)
	}

	if err := sc.nc.Publish(u.StatusSubject, []byte(`{"state":"running","commandId":"cmd-1"}`)); err != nil {
		t.Fatal(err)
	}
	m, err := statuses.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("backend did not receive status: %v", err)
	}
	if m.Subject != "rxc.acme.s1.status" {
		t.Fatalf("status subject %q", m.Subject)
	}

	// Work-queue retention: the acked command is gone.
	adminInfo := waitStreamMsgs(t, ctx, s, 0)
	if adminInfo != 0 {
		t.Fatalf("stream still holds %d messages after ack", adminInfo)
	}
}

// waitStreamMsgs polls the command stream (as the backend cannot use $JS.API,
// it asks through the stack's nats-server monitoring API) until it holds want.
func waitStreamMsgs(t *testing.T, ctx context.Context, s *provisionertest.Stack, want uint64) uint64 {
	t.Helper()
	var n uint64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		streams, err := s.NATS.AccountStreams(s.Operator.ControlAccount)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range streams {
			if st.Name == "RXC_CMD" {
				n = st.State.Msgs
			}
		}
		if n == want {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

func TestIsolation(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	account(t, s, "t1")
	account(t, s, "t2")
	u1 := sensorUser(t, s, "t1", "s1")
	sensorUser(t, s, "t1", "s2")
	sensorUser(t, s, "t2", "s9")
	bnc, bjs := backend(t, s)
	statuses, err := bnc.SubscribeSync("rxc.*.*.status")
	if err != nil {
		t.Fatal(err)
	}
	bnc.Flush()

	// Sibling commands wait in the stream so a successful theft would show.
	for _, subj := range []string{"rxc.t1.s2.cmd", "rxc.t2.s9.cmd"} {
		if _, err := bjs.Publish(ctx, subj, []byte("secret-"+subj)); err != nil {
			t.Fatal(err)
		}
	}

	sc, err := connectSensor(t, s, u1)
	if err != nil {
		t.Fatal(err)
	}

	denied := func(t *testing.T, action func() error) {
		t.Helper()
		drain(sc.errs)
		err := action()
		if err == nil {
			sc.nc.Flush()
			err = waitPermErr(sc.errs)
		}
		if err == nil {
			t.Fatal("action succeeded, want it refused")
		}
		if !sc.nc.IsConnected() {
			t.Fatal("sensor connection dropped")
		}
	}

	// subscribe is the action of subscribing sc to subject.
	subscribe := func(subject string) func() error {
		return func() error {
			sub, err := sc.nc.SubscribeSync(subject)
			if err != nil {
				return err
			}
			defer sub.Unsubscribe()
			return nil
		}
	}
	cases := []struct {
		name   string
		action func() error
	}{
		{"publish a command", func() error { return sc.nc.Publish("rxc.t1.s1.cmd", []byte("x")) }},
		{"publish a sibling's status", func() error { return sc.nc.Publish("rxc.t1.s2.status", []byte("x")) }},
		{"publish another tenant's status", func() error { return sc.nc.Publish("rxc.t2.s9.status", []byte("x")) }},
		{"pull a sibling's consumer", func() error { return pull(ctx, sc, "cmd-t1-s2") }},
		{"pull another tenant's consumer", func() error { return pull(ctx, sc, "cmd-t2-s9") }},
		{"look up a sibling's consumer", func() error {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := sc.js.Consumer(c, "RXC_CMD", "cmd-t1-s2")
			return err
		}},
		{"request the raw JetStream API", func() error {
			_, err := sc.nc.Request("$JS.API.INFO", nil, time.Second)
			return err
		}},
		{"read a sibling's inbox", subscribe("_INBOX_t1_s2.>")},
		{"read the shared inbox", subscribe("_INBOX.>")},
	}
	for _, tc := range cases {
		t.Run("sensor cannot "+tc.name, func(t *testing.T) { denied(t, tc.action) })
	}
	if m, err := statuses.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("backend received a spoofed status on %s", m.Subject)
	}
	if n := waitStreamMsgs(t, ctx, s, 2); n != 2 {
		t.Fatalf("stream holds %d messages, want the 2 sibling commands untouched", n)
	}

	t.Run("backend cannot touch $JS.API", func(t *testing.T) {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := bjs.AccountInfo(c); err == nil {
			t.Fatal("backend read JetStream account info")
		}
		if _, err := bjs.CreateStream(c, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}}); err == nil {
			t.Fatal("backend created a stream")
		}
	})

	t.Run("unknown creds are rejected", func(t *testing.T) {
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		tok, err := uc.Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := ukp.Seed()
		creds, _ := jwt.FormatUserConfig(tok, seed)
		if _, err := connectCreds(t, s.NATSURL, string(creds)); err == nil {
			t.Fatalf("connection with a user of unknown account %s accepted", apub)
		}
	})
}

func pull(ctx context.Context, sc *sensorConn, consumer string) error {
	// Bypass the consumer lookup: send the raw pull request through the import.
	inbox := sc.nc.NewRespInbox()
	sub, err := sc.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	req := []byte(`{"batch":1,"expires":500000000}`)
	if err := sc.nc.PublishRequest(fmt.Sprintf("%s.CONSUMER.MSG.NEXT.RXC_CMD.%s", sc.u.JSAPIPrefix, consumer), inbox, req); err != nil {
		return err
	}
	if err := sc.nc.Flush(); err != nil {
		return err
	}
	m, err := sub.NextMsg(time.Second)
	if err != nil {
		return err
	}
	if len(m.Data) > 0 {
		return nil // a command body: the pull succeeded
	}
	return fmt.Errorf("status %s", m.Header.Get("Status"))
}

func drain(c chan error) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// waitPermErr is the first asynchronous error on c within 2 s (the
// permissions violation a refused subscription or publish reports), or nil.
func waitPermErr(c chan error) error {
	select {
	case err := <-c:
		return err
	case <-time.After(2 * time.Second):
		return nil
	}
}

func TestRevocationDisconnectsAndRefuses(t *testing.T) {
	s := acmeStack(t)
	u1 := sensorUser(t, s, "acme", "s1")
	u2 := sensorUser(t, s, "acme", "s2")
	c1, err := connectSensor(t, s, u1)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := connectSensor(t, s, u2)
	if err != nil {
		t.Fatal(err)
	}

	status, body := s.Post("/revoke", map[string]string{"accountId": u1.AccountID, "userPubKey": u1.UserPubKey})
	first := decode[map[string]any](t, status, body, 200)
	c1.closedWithin(t, 5*time.Second, "revoked sensor still connected 5s after POST /revoke")
	if _, err := connectSensor(t, s, u1); err == nil {
		t.Fatal("revoked creds accepted on reconnect")
	}
	if !c2.nc.IsConnected() {
		t.Fatal("sibling sensor was disconnected")
	}
	if err := c2.nc.Publish(u2.StatusSubject, []byte(`{}`)); err != nil || c2.nc.Flush() != nil {
		t.Fatalf("sibling cannot publish after revocation: %v", err)
	}

	status, body = s.Post("/revoke", map[string]string{"accountId": u1.AccountID, "userPubKey": u1.UserPubKey})
	again := decode[map[string]any](t, status, body, 200)
	if first["revokedAt"] != again["revokedAt"] {
		t.Fatalf("repeated revoke changed revokedAt: %v then %v", first["revokedAt"], again["revokedAt"])
	}

	// A repeated POST /users for the revoked sensor mints a new, working user.
	status, body = s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s1"})
	fresh := decode[provisionerwire.UserResponse](t, status, body, 201)
	if fresh.UserPubKey == u1.UserPubKey {
		t.Fatal("POST /users returned the revoked user")
	}
	sensorConnects(t, s, fresh, "new user for a previously revoked sensor refused")
}

func TestRestartKeepsAccountsAndUsers(t *testing.T) {
	s := acmeStack(t)
	before := sensorUser(t, s, "acme", "s1")
	_, body := s.Post("/backend-user", map[string]string{})
	bBefore := decode[provisionerwire.BackendUserResponse](t, 200, body, 200)
	jwtBefore := getJWT(t, s.URL, before.AccountID)

	s.StopServe()
	s.StartServe()
	s.WaitNATSReady()

	status, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s1"})
	after := decode[provisionerwire.UserResponse](t, status, body, 200)
	if after != before {
		t.Fatalf("user changed across restart:\nbefore %+v\nafter  %+v", before, after)
	}
	status, body = s.Post("/backend-user", map[string]string{})
	if bAfter := decode[provisionerwire.BackendUserResponse](t, status, body, 200); bAfter != bBefore {
		t.Fatalf("backend user changed across restart")
	}
	if got := getJWT(t, s.URL, before.AccountID); got != jwtBefore {
		t.Fatal("account JWT changed across restart")
	}
	sensorConnects(t, s, after, "creds from before the restart no longer work")
}

func TestResolverAnswersBeforeNATSAndUsersWaitForIt(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	// The resolver answers while NATS is down (nats-server needs it to start).
	getJWT(t, s.URL, "")
	account(t, s, "acme")
	status, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s1"})
	if status != 503 || !strings.Contains(string(body), `"nats_unavailable"`) {
		t.Fatalf("POST /users with NATS down: %d %s, want 503 nats_unavailable", status, body)
	}
	s.StartNATS()
	s.WaitNATSReady()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body = s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s1"})
		if status == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	u := decode[provisionerwire.UserResponse](t, status, body, 200)
	sc, err := connectSensor(t, s, u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sc.js.Consumer(ctx, u.Stream, u.Consumer); err != nil {
		t.Fatalf("consumer missing after the retry: %v", err)
	}
}

func TestConcurrentIdenticalRequestsLeaveOneRecord(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	const n = 100
	run := func(path string, body map[string]string) map[string]bool {
		var mu sync.Mutex
		keys := map[string]bool{}
		created := 0
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, out := s.Post(path, body)
				var v map[string]any
				if err := json.Unmarshal(out, &v); err != nil || (status != 200 && status != 201) {
					t.Errorf("%s: %d %s", path, status, out)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if status == 201 {
					created++
				}
				k, _ := v["accountPubKey"].(string)
				if u, ok := v["userPubKey"].(string); ok {
					k = u
				}
				keys[k] = true
			}()
		}
		wg.Wait()
		if created != 1 {
			t.Errorf("%s: %d responses said 201 created, want exactly 1", path, created)
		}
		return keys
	}
	if keys := run("/accounts", map[string]string{"tenantId": "acme", "name": "Acme"}); len(keys) != 1 {
		t.Fatalf("100 parallel POST /accounts gave %d distinct accounts", len(keys))
	}
	if keys := run("/users", map[string]string{"tenantId": "acme", "sensorId": "s1"}); len(keys) != 1 {
		t.Fatalf("100 parallel POST /users gave %d distinct users", len(keys))
	}
}

// Changing CONTROL_JETSTREAM_MAX_DISK takes effect at the next start: serve
// re-signs the CONTROL account (keeping its revocations), nats-server gets
// the new JWT, and accounts whose claims did not change keep their JWT.
func TestRestartAppliesChangedControlLimits(t *testing.T) {
	s := acmeStack(t)
	tenantBefore := getJWT(t, s.URL, sensorUser(t, s, "acme", "s1").AccountID)
	status, body := s.Post("/backend-user", map[string]string{"name": "retired"})
	retired := decode[provisionerwire.BackendUserResponse](t, status, body, 200, 201)
	status, body = s.Post("/revoke", map[string]string{"accountId": retired.AccountID, "userPubKey": retired.UserPubKey})
	decode[map[string]any](t, status, body, 200)
	ctl := s.Operator.ControlAccount
	controlClaims := func() *jwt.AccountClaims {
		t.Helper()
		ac, err := jwt.DecodeAccountClaims(getJWT(t, s.URL, ctl))
		if err != nil {
			t.Fatal(err)
		}
		return ac
	}
	if got := controlClaims().Limits.DiskStorage; got != s.Config.ControlJSMaxDisk {
		t.Fatalf("CONTROL disk limit before = %d, want %d", got, s.Config.ControlJSMaxDisk)
	}

	s.StopServe()
	s.Config.ControlJSMaxDisk *= 2
	s.StartServe()
	s.WaitNATSReady()

	after := controlClaims()
	if after.Limits.DiskStorage != s.Config.ControlJSMaxDisk {
		t.Fatalf("CONTROL disk limit after restart = %d, want the new %d", after.Limits.DiskStorage, s.Config.ControlJSMaxDisk)
	}
	// A revocation covers JWTs issued up to its time: ask about the
	// retired user's own JWT, not about now (seconds later on a slow
	// machine, after the revocation's time).
	uc, err := jwt.DecodeUserClaims(mustJWT(t, retired.Creds))
	if err != nil {
		t.Fatal(err)
	}
	if !after.Revocations.IsRevoked(retired.UserPubKey, time.Unix(uc.IssuedAt, 0)) {
		t.Fatal("re-signing the CONTROL account dropped its revocation")
	}
	if got := getJWT(t, s.URL, sensorUser(t, s, "acme", "s1").AccountID); got != tenantBefore {
		t.Fatal("a tenant account whose claims did not change was re-signed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The claims nats-server holds for the account, from /accountz.
		var az struct {
			Account struct {
				Claim *jwt.AccountClaims `json:"decoded_jwt"`
			} `json:"account_detail"`
		}
		err := s.NATS.Monitor("/accountz?acc="+ctl, &az)
		var limits jwt.JetStreamLimits
		if err == nil && az.Account.Claim != nil {
			limits = az.Account.Claim.Limits.JetStreamLimits
		}
		if limits.DiskStorage == s.Config.ControlJSMaxDisk {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not apply the new CONTROL limit within 10s: %+v, %v", limits, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := connectCreds(t, s.NATSURL, retired.Creds); err == nil {
		t.Fatal("revoked CONTROL user accepted after the re-sign")
	}

	ctlJWT := getJWT(t, s.URL, ctl)
	s.StopServe()
	s.StartServe()
	s.WaitNATSReady()
	if getJWT(t, s.URL, ctl) != ctlJWT {
		t.Fatal("CONTROL JWT re-signed again on a restart with the same configuration")
	}
}
