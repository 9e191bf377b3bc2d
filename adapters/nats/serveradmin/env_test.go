package serveradmin_test

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

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/waitfor"
)

const stream = "RXC_CMD"

// env is an operator-mode nats-server whose URL resolver is an httptest
// server serving JWTs signed by jwtauthority, as the provisioner serves them.
type env struct {
	t        *testing.T
	signer   *jwtauthority.Signer
	opClaims *jwt.OperatorClaims
	opJWT    string
	sysPub   string
	sysSeed  []byte
	ctlPub   string
	ctlSeed  []byte
	resolver string
	storeDir string

	mu   sync.Mutex
	jwts map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, jwts: map[string]string{}, storeDir: t.TempDir()}
	_, opSeed, err := jwtauthority.NewOperatorKey()
	must(t, err)
	e.signer, err = jwtauthority.New(jwtauthority.Config{OperatorSeed: opSeed, Stream: stream,
		ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	must(t, err)
	e.sysPub, e.sysSeed, err = e.signer.NewAccountKey()
	must(t, err)
	e.ctlPub, e.ctlSeed, err = e.signer.NewAccountKey()
	must(t, err)
	e.signer, err = e.signer.WithControlAccount(e.ctlPub)
	must(t, err)
	e.sign(provisioning.AccountSpec{PubKey: e.sysPub, Name: "SYS", Kind: provisioning.KindSystem})
	e.sign(provisioning.AccountSpec{PubKey: e.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl})
	e.opJWT, err = jwtauthority.SignOperator(opSeed, "rxc-test", e.sysPub, "")
	must(t, err)
	e.opClaims, err = jwt.DecodeOperatorClaims(e.opJWT)
	must(t, err)

	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/jwt/v1/accounts/")
		if key == "" {
			w.WriteHeader(http.StatusOK)
			return
		}
		e.mu.Lock()
		tok, ok := e.jwts[key]
		e.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fmt.Fprint(w, tok)
	}))
	t.Cleanup(hs.Close)
	e.resolver = hs.URL + "/jwt/v1/accounts/"
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sign signs an account and publishes it on the resolver.
func (e *env) sign(spec provisioning.AccountSpec) string {
	e.t.Helper()
	tok, err := e.signer.SignAccount(spec)
	must(e.t, err)
	e.mu.Lock()
	e.jwts[spec.PubKey] = tok
	e.mu.Unlock()
	return tok
}

// operatorConfig is the nats-server configuration of operator mode with the
// env's URL resolver, as init-operator writes it.
func (e *env) operatorConfig() string {
	return fmt.Sprintf("operator: %s\nsystem_account: %s\nresolver: URL(%q)\n", e.opJWT, e.sysPub, e.resolver)
}

// start runs the server on port (0 for any) with the env's JetStream store
// and stops it at cleanup: in-process, or the binary RXC_NATS_SERVER_BIN
// names (natstest).
func (e *env) start(port int) *natstest.Server {
	e.t.Helper()
	return natstest.Start(e.t, natstest.Options{Dir: e.storeDir, Port: port, Config: e.operatorConfig()})
}

func (e *env) config(url string) serveradmin.Config {
	return serveradmin.Config{
		URL:             url,
		SystemUser:      func() (string, []byte, error) { return jwtauthority.SystemUser(e.sysSeed) },
		AdminUser:       func() (string, []byte, error) { return jwtauthority.ControlAdminUser(e.ctlSeed) },
		Stream:          serveradmin.StreamConfig{Name: stream, MaxAge: time.Hour, Duplicates: 2 * time.Minute},
		ManageStream:    true,
		ConsumerAckWait: 5 * time.Second,
		RequestTimeout:  5 * time.Second,
	}
}

// client starts a client and waits until both connections are up.
func (e *env) client(cfg serveradmin.Config) *serveradmin.Client {
	e.t.Helper()
	c, err := serveradmin.New(cfg)
	must(e.t, err)
	e.t.Cleanup(c.Close)
	must(e.t, c.Start(context.Background()))
	eventually(e.t, 10*time.Second, "client ready", c.Ready)
	return c
}

// tenant creates a tenant account and publishes its JWT.
func (e *env) tenant(id string) (pub string, seed []byte) {
	e.t.Helper()
	pub, seed, err := e.signer.NewAccountKey()
	must(e.t, err)
	e.sign(provisioning.AccountSpec{PubKey: pub, Name: id, Kind: provisioning.KindTenant, TenantID: id})
	return pub, seed
}

func (e *env) user(acctPub string, acctSeed []byte, name string, p topology.Permissions) provisioning.MintedUser {
	e.t.Helper()
	m, err := e.signer.MintUser(provisioning.UserSpec{AccountPubKey: acctPub, AccountSeed: acctSeed, Name: name, Permissions: p})
	must(e.t, err)
	return m
}

func connect(url string, u provisioning.MintedUser, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.UserJWTAndSeed(u.JWT, string(u.Seed)), nats.MaxReconnects(0),
		// Revocations and permission checks are what the tests provoke.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}, extra...)
	return nats.Connect(url, opts...)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, within, what, cond)
}

// freePort finds a port nothing listens on, for a server started later.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := loopback.FreePort()
	must(t, err)
	return port
}

// logBuffer collects log output for assertions; safe for concurrent use.
type logBuffer = logbuf.Buffer

// running is an env with one server started and a CONTROL admin connected
// to it: the set-up most single-server tests share.
func running(t *testing.T) (*env, *natstest.Server, jetstream.JetStream) {
	t.Helper()
	e := newEnv(t)
	srv := e.start(0)
	return e, srv, e.admin(srv.URL())
}
