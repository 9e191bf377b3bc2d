package provisionerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/edgetest"
	"github.com/rxc-project/rxc/adapters/httpapi/provisionerapi"
	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

const secret = "fuzz-shared-secret-0123456789"

// natsDown stands in for nats-server, which a fuzzer cannot restart per input.
type natsDown struct{}

func (natsDown) PushAccount(context.Context, string, string) error { return nil }

func (natsDown) EnsureConsumer(context.Context, topology.Sensor) error { return nil }

// newAPI builds the real API over the in-memory store and the real signer.
func newAPI(t testing.TB) http.Handler {
	t.Helper()
	api, _, _ := newAPIWith(t)
	return api
}

func newAPIWith(t testing.TB) (http.Handler, *provisionmem.Store, *jwtauthority.Signer) {
	t.Helper()
	_, opSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: opSeed, Stream: "RXC_CMD", ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := provisionmem.New(provisionmem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	mk := func(kind provisioning.AccountKind, name string) provisioning.Account {
		pub, seed, err := signer.NewAccountKey()
		if err != nil {
			t.Fatal(err)
		}
		return provisioning.Account{PubKey: pub, Kind: kind, Name: name, Seed: seed, CreatedAt: now, UpdatedAt: now}
	}
	sys, ctl := mk(provisioning.KindSystem, "SYS"), mk(provisioning.KindControl, "CONTROL")
	if signer, err = signer.WithControlAccount(ctl.PubKey); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*provisioning.Account{&sys, &ctl} {
		if a.JWT, err = signer.SignAccount(provisioning.AccountSpec{PubKey: a.PubKey, Name: a.Name, Kind: a.Kind}); err != nil {
			t.Fatal(err)
		}
	}
	opPub, _ := jwtauthority.PublicKeyFromSeed(opSeed)
	opJWT, err := jwtauthority.SignOperator(opSeed, "FUZZ", sys.PubKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.InitOperator(context.Background(), provisioning.Operator{PubKey: opPub, Name: "FUZZ", JWT: opJWT, SystemAccount: sys.PubKey, ControlAccount: ctl.PubKey, CreatedAt: now}, sys, ctl); err != nil {
		t.Fatal(err)
	}
	svc, err := provisioning.New(provisioning.Config{Store: store, Signer: signer, Claims: signer, Pusher: natsDown{}, Consumers: natsDown{}, Stream: "RXC_CMD"})
	if err != nil {
		t.Fatal(err)
	}
	api, err := provisionerapi.New(provisionerapi.Config{Service: svc, Health: store, SharedSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return api, store, signer
}

var routes = []string{"/accounts", "/users", "/backend-user", "/revoke"}

// FuzzWriteRoutes feeds arbitrary bodies to every write route: the API must
// never fail with a 5xx or answer an error that is not a problem document.
func FuzzWriteRoutes(f *testing.F) {
	api := newAPI(f)
	seeds := []string{
		`{"tenantId":"acme","name":"Acme"}`, `{"tenantId":"acme","sensorId":"s1"}`, `{"name":"backend"}`,
		`{"accountId":"A","userPubKey":"U"}`, `{`, `[]`, `null`, `{"tenantId":"a.b"}`, `{"tenantId":"\u0000"}`, ``,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := routes[int(route)%len(routes)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Backend-Shared-Secret", secret)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if err := edgetest.CheckAnswer(rec); err != nil {
			t.Fatalf("POST %s %q: %v", path, body, err)
		}
	})
}

func FuzzResolverPath(f *testing.F) {
	api := newAPI(f)
	for _, s := range []string{"", "AABC", "..%2f", "ADQKZ4N6XHDFZLMXN4KUWXCBVIF6F5OIRWDBJXFQX67ZRHH7GDZ6MFPO"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		req, err := http.NewRequest(http.MethodGet, "http://x/jwt/v1/accounts/"+key, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("GET resolver %q: %d %s", key, rec.Code, rec.Body)
		}
	})
}

func TestSharedSecretMustBeLongEnough(t *testing.T) {
	_, err := provisionerapi.New(provisionerapi.Config{Service: &provisioning.Service{}, Health: nil, SharedSecret: "short"})
	if err == nil {
		t.Fatal("New accepted a missing health checker and a short secret")
	}
}

// A backend user minted before the topology gained permissions is replaced:
// the old key is revoked and a user with today's permissions is returned.
func TestOutdatedUserIsReplaced(t *testing.T) {
	api, store, signer := newAPIWith(t)
	ctx := context.Background()
	op, err := store.Operator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := store.Account(ctx, op.ControlAccount)
	if err != nil {
		t.Fatal(err)
	}
	old := topology.Permissions{Publish: []string{"rxc.*.*.cmd"}, Subscribe: []string{"rxc.*.*.status", "_INBOX.>"}}
	m, err := signer.MintUser(provisioning.UserSpec{AccountPubKey: ctl.PubKey, AccountSeed: ctl.Seed, Name: "backend", Permissions: old})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateUser(ctx, provisioning.User{PubKey: m.PubKey, AccountPubKey: ctl.PubKey, Kind: provisioning.UserBackend,
		Name: "backend", Seed: m.Seed, JWT: m.JWT, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}

	req := httptest.NewRequest(http.MethodPost, "/backend-user", bytes.NewReader([]byte(`{"name":"backend"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Backend-Shared-Secret", secret)
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /backend-user: %d %s, want 201 (a replacement)", rec.Code, rec.Body)
	}
	var got struct{ UserPubKey, UserJWT string }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.UserPubKey == m.PubKey {
		t.Fatal("the outdated user was handed out again")
	}
	if ok, err := signer.HasPermissions(got.UserJWT, topology.BackendPermissions()); err != nil || !ok {
		t.Fatalf("replacement lacks today's permissions: %v %v", ok, err)
	}
	ctlAfter, _ := store.Account(ctx, op.ControlAccount)
	if !strings.Contains(ctlAfter.JWT, ".") || ctlAfter.JWT == ctl.JWT {
		t.Fatal("the CONTROL account JWT was not re-signed with the revocation")
	}
}

// The answers of POST /users and POST /backend-user carry the names
// docs/provisioner.md ("HTTP API") lists, spelled out here and not read
// through provisionerwire: a renamed tag there changes this server and its
// Go client together, so only a test that spells the names sees the change
// on the wire. provisionerclient's test pins the fields the control plane
// reads; this pins every field, the ones only the apps' tests read
// (tenantId, sensorId, userJWT; the backend user's accountId, userPubKey)
// included.
func TestWriteAnswersKeepTheirJSONNames(t *testing.T) {
	api, store, _ := newAPIWith(t)
	op, err := store.Operator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string, want int) map[string]any {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Backend-Shared-Secret", secret)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("POST %s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	names := func(path string, got map[string]any, want ...string) {
		t.Helper()
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("POST %s answers the names %v, want %v", path, keys, want)
		}
	}
	str := func(got map[string]any, name string) string {
		t.Helper()
		s, _ := got[name].(string)
		if s == "" {
			t.Errorf("%q is %v, want a non-empty string", name, got[name])
		}
		return s
	}

	account := post("/accounts", `{"tenantId":"acme","name":"Acme"}`, http.StatusCreated)
	u := post("/users", `{"tenantId":"acme","sensorId":"s1"}`, http.StatusCreated)
	names("/users", u, "tenantId", "sensorId", "accountId", "userPubKey", "userJWT", "creds", "stream", "consumer",
		"jsApiPrefix", "inboxPrefix", "commandSubject", "statusSubject")
	if str(u, "tenantId") != "acme" || str(u, "sensorId") != "s1" || str(u, "accountId") != account["accountPubKey"] {
		t.Errorf("POST /users names another sensor or account: %v", u)
	}
	if jwt := str(u, "userJWT"); !strings.Contains(str(u, "creds"), jwt) || !strings.HasPrefix(str(u, "userPubKey"), "U") {
		t.Errorf("POST /users: userJWT %q not in creds, or userPubKey %q not a user key", jwt, u["userPubKey"])
	}
	for _, name := range []string{"stream", "consumer", "jsApiPrefix", "inboxPrefix", "commandSubject", "statusSubject"} {
		str(u, name)
	}

	b := post("/backend-user", `{"name":"backend"}`, http.StatusCreated)
	names("/backend-user", b, "name", "accountId", "userPubKey", "userJWT", "creds")
	if str(b, "name") != "backend" || str(b, "accountId") != op.ControlAccount {
		t.Errorf("POST /backend-user names another user or account: %v", b)
	}
	if jwt := str(b, "userJWT"); !strings.Contains(str(b, "creds"), jwt) || !strings.HasPrefix(str(b, "userPubKey"), "U") {
		t.Errorf("POST /backend-user: userJWT %q not in creds, or userPubKey %q not a user key", jwt, b["userPubKey"])
	}
}
