package controlapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/passwords"
	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/clocktest"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const (
	operatorEmail    = "ops@example.com"
	operatorPassword = "correct horse battery"
	allowedOrigin    = "http://console.example"
	publicNATS       = "nats://nats.example:4222"
	publicGRPC       = "cp.example:5010"
)

// options change the environment newEnv builds.
type options struct {
	provisioning bool
	api          func(*controlapi.Config)
}

type env struct {
	t     testing.TB
	srv   *httptest.Server
	api   *controlapi.API
	fleet *fleet.Service
	ops   *operators.Service
	ca    *x509ca.CA
	clock *clocktest.Clock
	prov  *fleettest.Provisioner
	pub   *fleettest.Publisher
	// cfg is the API's configuration, for variants.
	cfg controlapi.Config
	// session is the logged-in operator's cookie value.
	session string
	store   *controlplanestore.Store
	pool    *pgxpool.Pool
	// metricsSrv serves the metrics listener's handler.
	metricsSrv *httptest.Server
}

// metrics fetches GET /metrics from the metrics listener.
func (e *env) metrics() response {
	e.t.Helper()
	res, err := e.metricsSrv.Client().Get(e.metricsSrv.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

// newEnv builds the real API over PostgreSQL, the real CA and operators
// with argon2id, with the provisioner and NATS faked, and logs in.
func newEnv(t testing.TB, opt options) *env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.ControlPlanePool(t)
	store, err := controlplanestore.New(controlplanestore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(time.Now().UTC().Truncate(time.Second))
	ca, _ := x509catest.New(t, x509ca.InitOptions{DNSNames: []string{"cp.example"}}, x509ca.Config{Now: clk.Now})
	// The provisioner and NATS are the fleet's shared fakes (core/fleet/fleettest).
	prov, pub := &fleettest.Provisioner{}, &fleettest.Publisher{}
	// As the control plane builds them: the gRPC server on the fleet's
	// status side, then the fleet with the server as its terminator.
	status, err := fleet.NewStatusService(fleet.StatusConfig{Store: store, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	grpcSrv, err := grpcmtls.New(grpcmtls.Config{TLS: ca.ServerTLSConfig(), Authorizer: status, Heartbeats: status})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := fleet.New(fleet.Config{
		Store: store, Provisioner: prov, ProvisioningEnabled: opt.provisioning, CA: ca,
		Publisher: pub, Terminator: grpcSrv, Status: status, Locker: store, Clock: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	hasher := fastHasher(t)
	ops, err := operators.New(operators.Config{Store: store, Hasher: hasher, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.CreateOperator(ctx, operators.NewOperator{Email: operatorEmail, Password: operatorPassword, Role: operators.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	trail, err := audit.New(store, slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlapi.Config{
		Fleet: svc, Operators: ops, Audit: trail, CACertificatePEM: ca.CACertificatePEM,
		PublicNATSURL: publicNATS, PublicGRPCAddr: publicGRPC,
		AllowedOrigins: []string{allowedOrigin}, ProvisioningEnabled: opt.provisioning, MessagingEnabled: true,
		RedeemRate: controlapi.RateLimit{PerMinute: 600, Burst: 100},
		Clock:      clk.Now,
	}
	if opt.api != nil {
		opt.api(&cfg)
	}
	e := &env{t: t, fleet: svc, ops: ops, ca: ca, clock: clk, prov: prov, pub: pub, store: store, pool: pool}
	return e.serve(t, cfg)
}

// variant serves another API, configured by change, over the same
// services, database and fakes, and logs in to it. It saves a database
// for tests that compare configurations.
// fastHasher hashes passwords with the cheapest Argon2id parameters, so
// that tests log in quickly.
func fastHasher(t testing.TB) *passwords.Hasher {
	t.Helper()
	hasher, err := passwords.New(passwords.Config{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return hasher
}

// newSealer seals second-factor secrets under a fresh random key.
func newSealer(t testing.TB) *seal.Sealer {
	t.Helper()
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

// withOperators is a variant of e whose operators service is built from
// cfg on e's store and clock.
func (e *env) withOperators(t testing.TB, cfg operators.Config) *env {
	t.Helper()
	cfg.Store, cfg.Clock = e.store, e.clock.Now
	ops, err := operators.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := e.variant(t, func(c *controlapi.Config) { c.Operators = ops })
	v.ops = ops
	return v
}

func (e *env) variant(t testing.TB, change func(*controlapi.Config)) *env {
	t.Helper()
	cfg := e.cfg
	change(&cfg)
	v := *e
	return v.serve(t, cfg)
}

func (e *env) serve(t testing.TB, cfg controlapi.Config) *env {
	t.Helper()
	api, err := controlapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.t, e.api, e.cfg = t, api, cfg
	e.srv = httptest.NewServer(api)
	t.Cleanup(e.srv.Close)
	e.metricsSrv = httptest.NewServer(api.MetricsHandler())
	t.Cleanup(e.metricsSrv.Close)
	e.session = e.login()
	return e
}

func (e *env) login() string {
	e.t.Helper()
	return e.loginAs(operatorEmail, operatorPassword)
}

// loginAs signs in and returns the session cookie's value.
func (e *env) loginAs(email, password string) string {
	e.t.Helper()
	res := e.do(request{method: "POST", path: "/api/auth/login", body: fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)})
	if res.status != http.StatusNoContent {
		e.t.Fatalf("login: %d %s", res.status, res.body)
	}
	for _, c := range res.cookies {
		if c.Name == controlapi.SessionCookie {
			return c.Value
		}
	}
	e.t.Fatal("login set no session cookie")
	return ""
}

type request struct {
	method, path, body string
	// operator sends the session cookie.
	operator bool
	// session sends this session cookie instead (another operator's).
	session string
	header  map[string]string
}

type response struct {
	status  int
	header  http.Header
	body    []byte
	cookies []*http.Cookie
}

// do sends a request over real HTTP. Every answer must carry the security
// headers, and every error must be a problem document with a code.
func (e *env) do(rq request) response {
	e.t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, e.srv.URL+rq.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if rq.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case rq.session != "":
		req.AddCookie(&http.Cookie{Name: controlapi.SessionCookie, Value: rq.session})
	case rq.operator:
		req.AddCookie(&http.Cookie{Name: controlapi.SessionCookie, Value: e.session})
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	got := response{status: res.StatusCode, header: res.Header, body: raw, cookies: res.Cookies()}
	if cc, nosniff := res.Header.Get("Cache-Control"), res.Header.Get("X-Content-Type-Options"); cc != "no-store" || nosniff != "nosniff" {
		e.t.Errorf("%s %s: Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", rq.method, rq.path, cc, nosniff)
	}
	if res.StatusCode >= 400 {
		var p struct{ Code string }
		if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(raw, &p) != nil || p.Code == "" {
			e.t.Errorf("%s %s: error %d is not a problem document: %s %s", rq.method, rq.path, res.StatusCode, ct, raw)
		}
	}
	return got
}

// problemCode returns the code of a problem answer.
func (r response) problemCode() string {
	var p struct{ Code string }
	_ = json.Unmarshal(r.body, &p)
	return p.Code
}

// object decodes a JSON object answer.
func (r response) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// expect fails unless the answer has the status (and, for errors, the code).
func (r response) expect(t testing.TB, what string, status int, code string) {
	t.Helper()
	if r.status != status || r.problemCode() != code {
		t.Fatalf("%s: got %d %q, want %d %q: %s", what, r.status, r.problemCode(), status, code, r.body)
	}
}

// newCSR returns a PEM CSR for a fresh ECDSA P-256 key.
func newCSR(t testing.TB) string {
	t.Helper()
	_, csr := newKeyCSR(t)
	return csr
}

// enrolBody is an enrolment request for csr with a proof by its key,
// signed at at.
func enrolBody(t testing.TB, key *ecdsa.PrivateKey, sensorID, csr string, at time.Time) string {
	t.Helper()
	return provenBody(t, key, fleet.EnrolmentMessage(sensorID, []byte(csr), at), csr, at, map[string]any{})
}

// renewBody is a renewal request for csr proven with key, the key of
// certPEM, signed at at.
func renewBody(t testing.TB, key *ecdsa.PrivateKey, certPEM, sensorID, csr string, at time.Time) string {
	t.Helper()
	return provenBody(t, key, fleet.RenewalMessage(sensorID, []byte(csr), at), csr, at, map[string]any{"certificate": certPEM})
}

// provenBody is a request body for csr with a proof: message signed by
// key at at, beside the other members of proof.
func provenBody(t testing.TB, key *ecdsa.PrivateKey, message []byte, csr string, at time.Time, proof map[string]any) string {
	t.Helper()
	digest := sha256.Sum256(message)
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	proof["signedAt"], proof["signature"] = at, base64.StdEncoding.EncodeToString(sig)
	return jsonString(t, map[string]any{"csr": csr, "proof": proof})
}

// enrolRequest is sensorID's enrolment with the bearer token.
func enrolRequest(sensorID, token, body string) request {
	return request{method: "POST", path: "/api/sensors/" + sensorID + "/agent/enroll", body: body,
		header: map[string]string{"Authorization": "Bearer " + token}}
}

// newKeyCSR is x509catest.KeyCSR with the request as a string, as the
// API's JSON carries it.
func newKeyCSR(t testing.TB) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, csr := x509catest.KeyCSR(t)
	return key, string(csr)
}

func jsonString(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// createTenant creates a tenant and, with provisioning, gives it its NATS
// account the way the app's reconcile loop does.
func (e *env) createTenant(id string) {
	e.t.Helper()
	res := e.do(request{method: "POST", path: "/api/tenants", body: fmt.Sprintf(`{"id":%q,"name":%q}`, id, id+" Inc"), operator: true})
	if res.status != http.StatusCreated {
		e.t.Fatalf("create tenant: %d %s", res.status, res.body)
	}
	if _, err := e.fleet.ReconcileTenants(context.Background()); err != nil && !errors.Is(err, fleet.ErrProvisionerDisabled) {
		e.t.Fatal(err)
	}
}

// claimCode issues a claim code for the tenant and returns id and code.
func (e *env) claimCode(tenantID, body string) (id, code string) {
	e.t.Helper()
	var out struct{ ID, Code string }
	e.created("issue claim code", request{method: "POST", path: "/api/tenants/" + tenantID + "/claim-codes", body: body, operator: true}, &out)
	return out.ID, out.Code
}

// redeem redeems a fresh claim code and returns the sensor id and
// enrolment token.
func (e *env) redeem(tenantID string) (sensorID, token string) {
	e.t.Helper()
	_, code := e.claimCode(tenantID, "")
	var out struct{ SensorID, EnrollmentToken string }
	e.created("redeem", request{method: "POST", path: "/api/sensors/claim/redeem", body: fmt.Sprintf(`{"claimCode":%q}`, code)}, &out)
	return out.SensorID, out.EnrollmentToken
}

// enroll redeems and enrols a sensor, returning its id and sensor token.
func (e *env) enroll(tenantID string) (sensorID, sensorToken string) {
	e.t.Helper()
	id, token := e.redeem(tenantID)
	var out struct{ SensorToken string }
	e.created("enroll", enrolRequest(id, token, jsonString(e.t, map[string]string{"csr": newCSR(e.t)})), &out)
	return id, out.SensorToken
}

// created sends rq, expects 201 Created and decodes the body into out.
func (e *env) created(what string, rq request, out any) {
	e.t.Helper()
	res := e.do(rq)
	if res.status != http.StatusCreated || json.Unmarshal(res.body, out) != nil {
		e.t.Fatalf("%s: %d %s", what, res.status, res.body)
	}
}

// atOnce runs f(0) … f(n-1) concurrently and returns their results in
// order, once all have returned.
func atOnce[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = f(i) })
	}
	wg.Wait()
	return out
}

// bodyOf builds a JSON body of exactly n bytes.
func bodyOf(n int) string {
	var b bytes.Buffer
	b.WriteString(`{"x":"`)
	b.WriteString(strings.Repeat("a", n-len(`{"x":""}`)))
	b.WriteString(`"}`)
	return b.String()
}

func (r response) expectStatus(t testing.TB, what string, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: got %d, want %d: %s", what, r.status, status, r.body)
	}
}
