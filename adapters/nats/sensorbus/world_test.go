package sensorbus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/waitfor"
)

const stream = topology.DefaultStream

// world is an operator-mode nats-server with a URL account resolver and the
// RXC accounts: SYS, CONTROL (JetStream, topology.ControlExports) and one
// tenant "t1" (topology.TenantImports), all signed with jwt/v2 as the
// provisioner would.
type world struct {
	t         *testing.T
	okp       nkeys.KeyPair
	operator  string // JWT
	ctlClaims *jwt.AccountClaims
	sys       nkeys.KeyPair
	control   nkeys.KeyPair
	tenant    nkeys.KeyPair
	resolver  string
	dir       string

	mu   sync.Mutex
	jwts map[string]string
	srv  *natstest.Server
}

func pubKey(t *testing.T, kp nkeys.KeyPair) string {
	t.Helper()
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, jwts: map[string]string{}, dir: t.TempDir()}
	okp := mustKey(t, nkeys.CreateOperator)
	w.okp = okp
	w.sys = mustKey(t, nkeys.CreateAccount)
	w.control = mustKey(t, nkeys.CreateAccount)
	w.tenant = mustKey(t, nkeys.CreateAccount)

	oc := jwt.NewOperatorClaims(pubKey(t, okp))
	oc.Name = "test-operator"
	oc.SystemAccount = pubKey(t, w.sys)
	var err error
	if w.operator, err = oc.Encode(okp); err != nil {
		t.Fatal(err)
	}

	sc := jwt.NewAccountClaims(pubKey(t, w.sys))
	sc.Name = "SYS"
	w.sign(okp, sc)

	cc := jwt.NewAccountClaims(pubKey(t, w.control))
	cc.Name = "CONTROL"
	cc.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumer: -1}
	for _, e := range topology.ControlExports(stream) {
		exp := &jwt.Export{Name: e.Name, Subject: jwt.Subject(e.Subject), Type: jwt.Service}
		if e.StreamResponse {
			exp.ResponseType = jwt.ResponseTypeStream
		}
		cc.Exports.Add(exp)
	}
	w.sign(okp, cc)
	w.ctlClaims = cc

	tc := jwt.NewAccountClaims(pubKey(t, w.tenant))
	tc.Name = "t1"
	for _, i := range topology.TenantImports(stream, "t1") {
		tc.Imports.Add(&jwt.Import{
			Name: i.Name, Account: pubKey(t, w.control), Type: jwt.Service,
			Subject: jwt.Subject(i.Subject), LocalSubject: jwt.RenamingSubject(i.LocalSubject),
		})
	}
	w.sign(okp, tc)

	rs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/jwt/v1/accounts/")
		if key == "" || key == "/jwt/v1/accounts" {
			return // nats-server checks the base URL answers 200 at start
		}
		w.mu.Lock()
		tok, ok := w.jwts[key]
		w.mu.Unlock()
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/jwt")
		_, _ = rw.Write([]byte(tok))
	}))
	t.Cleanup(rs.Close)
	w.resolver = rs.URL + "/jwt/v1/accounts/"
	return w
}

func mustKey(t *testing.T, create func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func (w *world) sign(okp nkeys.KeyPair, ac *jwt.AccountClaims) {
	w.t.Helper()
	vr := jwt.CreateValidationResults()
	ac.Validate(vr)
	if errs := vr.Errors(); len(errs) > 0 {
		w.t.Fatalf("account %s: %v", ac.Name, errs)
	}
	tok, err := ac.Encode(okp)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.jwts[ac.Subject] = tok
	w.mu.Unlock()
}

// start runs nats-server on port (-1: any free port) and returns its URL.
// A restart keeps the first start's port and JetStream store.
func (w *world) start(port int) string {
	w.t.Helper()
	w.mu.Lock()
	srv := w.srv
	w.mu.Unlock()
	if srv == nil {
		if port < 0 {
			port = 0
		}
		srv = natstest.New(w.t, natstest.Options{Dir: w.dir, Port: port, Operator: &natstest.Operator{
			JWT: w.operator, SystemAccount: pubKey(w.t, w.sys), ResolverURL: w.resolver,
		}})
		w.mu.Lock()
		w.srv = srv
		w.mu.Unlock()
	}
	srv.Start()
	return srv.URL()
}

func (w *world) stop() {
	w.mu.Lock()
	s := w.srv
	w.mu.Unlock()
	s.Stop()
}

// creds mints a user of account acc with the given permissions and returns
// its .creds content.
func (w *world) creds(acc nkeys.KeyPair, name string, p topology.Permissions) string {
	w.t.Helper()
	ukp := mustKey(w.t, nkeys.CreateUser)
	uc := jwt.NewUserClaims(pubKey(w.t, ukp))
	uc.Name = name
	uc.Pub.Allow.Add(p.Publish...)
	uc.Sub.Allow.Add(p.Subscribe...)
	if p.Responses {
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: topology.ResponseWindow}
	}
	tok, err := uc.Encode(acc)
	if err != nil {
		w.t.Fatal(err)
	}
	seed, err := ukp.Seed()
	if err != nil {
		w.t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// revokeControlUser revokes a CONTROL user and pushes the new account JWT
// as the SYS user, as the provisioner does.
func (w *world) revokeControlUser(url, userPub string) {
	w.t.Helper()
	w.ctlClaims.Revoke(userPub)
	w.sign(w.okp, w.ctlClaims)
	w.mu.Lock()
	tok := w.jwts[w.ctlClaims.Subject]
	w.mu.Unlock()
	nc := w.connect(url, w.creds(w.sys, "sys", topology.SystemPermissions()))
	if _, err := nc.Request("$SYS.REQ.ACCOUNT."+w.ctlClaims.Subject+".CLAIMS.UPDATE", []byte(tok), 5*time.Second); err != nil {
		w.t.Fatalf("push CONTROL claims: %v", err)
	}
}

func (w *world) backendCreds() string {
	return w.creds(w.control, "backend", topology.BackendPermissions())
}

func (w *world) connect(url, creds string, opts ...nats.Option) *nats.Conn {
	w.t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserCredentialBytes([]byte(creds))}, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(nc.Close)
	return nc
}

// admin creates the work-queue command stream and the sensors' durable
// consumers as the control admin user, and returns its JetStream handle.
func (w *world) admin(url string, sensors ...topology.Sensor) jetstream.JetStream {
	w.t.Helper()
	nc := w.connect(url, w.creds(w.control, "control-admin", topology.ControlAdminPermissions()))
	js, err := jetstream.New(nc)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{topology.CommandWildcard},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, s := range sensors {
		_, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: s.Consumer(), FilterSubject: s.CommandSubject(), AckPolicy: jetstream.AckExplicitPolicy,
		})
		if err != nil {
			w.t.Fatal(err)
		}
	}
	return js
}

// sensor connects as sensor s of tenant t1, the way a sensor does.
func (w *world) sensor(url string, s topology.Sensor) (*nats.Conn, jetstream.JetStream) {
	w.t.Helper()
	nc := w.connect(url, w.creds(w.tenant, s.SensorID, s.Permissions()), nats.CustomInboxPrefix(s.InboxPrefix()))
	js, err := jetstream.NewWithAPIPrefix(nc, topology.APIPrefix)
	if err != nil {
		w.t.Fatal(err)
	}
	return nc, js
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, limit, what, cond)
}

func sensorT1(id string) topology.Sensor {
	return topology.Sensor{Stream: stream, TenantID: "t1", SensorID: id}
}

func urlFor(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) }

// running is a world whose server is started on port (-1: any free one)
// with the command stream and the consumers of sensors in place: the
// set-up most tests share. It returns the world, the server's URL and the
// CONTROL admin's JetStream.
func running(t *testing.T, port int, sensors ...topology.Sensor) (*world, string, jetstream.JetStream) {
	t.Helper()
	w := newWorld(t)
	url := w.start(port)
	return w, url, w.admin(url, sensors...)
}
