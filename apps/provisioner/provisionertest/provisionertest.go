// Package provisionertest runs the real provisioner in-process for
// integration tests: a fresh PostgreSQL database from pgtest, init-operator,
// `serve` on a loopback port, and an in-process nats-server started from the
// configuration fragment init-operator wrote, resolving accounts through the
// provisioner. Packages that use it call pgtest.Main from TestMain.
package provisionertest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// Stack is a running provisioner with its nats-server.
type Stack struct {
	t        pgtest.TB
	Dir      string
	URL      string
	Secret   string
	NATSURL  string
	Operator provisioning.Operator
	Config   app.ServeConfig
	// NATS is the nats-server, in-process or (RXC_NATS_SERVER_BIN) an
	// external binary; StartNATS and StopNATS start and stop it. With
	// Options.ClusterNodes it is the first node of Nodes.
	NATS *natstest.Server
	// Nodes are the nats-servers of a cluster (Options.ClusterNodes), routed
	// to each other; NATSURL lists them all. Nil without a cluster.
	Nodes []*natstest.Server
	// IdentitySeedPath holds the operator's identity seed with
	// Options.SigningKey; NATSConfigPath is init-operator's fragment.
	IdentitySeedPath string
	NATSConfigPath   string

	srv    *app.Server
	cancel context.CancelFunc
	done   chan error
}

// Options tune Start.
type Options struct {
	// NoNATS leaves nats-server stopped; call StartNATS later.
	NoNATS bool
	// LogLevel of the provisioner (default "error" to keep test output short).
	LogLevel string
	// CommandStreamRetention is COMMAND_STREAM_RETENTION (default workqueue).
	CommandStreamRetention string
	// CommandStreamMaxConsumers is COMMAND_STREAM_MAX_CONSUMERS (0: the
	// provisioner's default).
	CommandStreamMaxConsumers int
	// SigningKey makes init-operator create a signing key at
	// OPERATOR_SEED_PATH, which serve signs with, and put the identity
	// seed at Stack.IdentitySeedPath.
	SigningKey bool
	// ConsumerAckWait is CONSUMER_ACK_WAIT (0: 5s, short for tests that
	// wait for redeliveries).
	ConsumerAckWait time.Duration
	// PGDSN is the database to use instead of a fresh one of the shared
	// pgtest cluster: a database of a cluster of the test's own, which it
	// may stop (pgtest.Start, Halt, Resume).
	PGDSN string
	// ResolverSnapshotInterval is RESOLVER_SNAPSHOT_INTERVAL (0: 1s, so
	// tests see the snapshot soon; a benchmark wants the default, 30s).
	ResolverSnapshotInterval time.Duration
	// AccountJWTMaxBytes is ACCOUNT_JWT_MAX_BYTES (0: the provisioner's
	// default; negative: no bound).
	AccountJWTMaxBytes int
	// NATSProfiling opens nats-server's profiling port
	// (natstest.Options.Profiling).
	NATSProfiling bool
	// ClusterNodes runs that many nats-servers routed as one cluster (the
	// shape deploy/ ships with 3), the command stream at that many
	// replicas; 0 or 1: one server.
	ClusterNodes int
	// ConsumerReplicas is COMMAND_CONSUMER_REPLICAS (0: the stream's).
	ConsumerReplicas int
}

// Start brings up PostgreSQL database, provisioner and nats-server.
func Start(t pgtest.TB, opts Options) *Stack {
	t.Helper()
	dir := t.TempDir()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if opts.LogLevel == "" {
		opts.LogLevel = os.Getenv("RXC_TEST_LOG_LEVEL")
		if opts.LogLevel == "" {
			opts.LogLevel = "error"
		}
	}
	s := &Stack{t: t, Dir: dir, Secret: "test-shared-secret-0123456789"}
	if opts.ClusterNodes > 1 {
		s.Nodes = clusterNodes(t, dir, opts.ClusterNodes, opts.NATSProfiling)
		s.NATS = s.Nodes[0]
		var urls []string
		for _, n := range s.Nodes {
			urls = append(urls, n.URL())
		}
		s.NATSURL = strings.Join(urls, ",")
	} else {
		s.NATS = natstest.New(t, natstest.Options{Dir: dir, Config: "include \"nats-operator.conf\"\n", Profiling: opts.NATSProfiling})
		s.NATSURL = s.NATS.URL()
	}
	httpPort := FreePort(t)
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	if opts.PGDSN == "" {
		opts.PGDSN = pgtest.DSN(t)
	}
	store := app.StoreConfig{
		PGDSN:                    opts.PGDSN,
		OperatorSeedPath:         filepath.Join(dir, "keys", "operator.nk"),
		AccountSeedEncryptionKey: base64.StdEncoding.EncodeToString(key),
		ControlAccountName:       "CONTROL",
		CommandStreamName:        "RXC_CMD",
		ControlJSMaxDisk:         1 << 30,
		ControlJSMaxMemory:       64 << 20,
		LogLevel:                 opts.LogLevel,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.NATSConfigPath = filepath.Join(dir, "nats-operator.conf")
	if opts.SigningKey {
		s.IdentitySeedPath = filepath.Join(dir, "offline", "identity.nk")
	}
	op, err := app.InitOperator(ctx, store, app.InitOptions{
		Name:             "TEST",
		ResolverURL:      s.URL + "/jwt/v1/accounts/",
		NATSConfigPath:   s.NATSConfigPath,
		IdentitySeedPath: s.IdentitySeedPath,
	}, io.Discard)
	if err != nil {
		t.Fatalf("init-operator: %v", err)
	}
	s.Operator = op
	s.Config = app.ServeConfig{
		StoreConfig:                store,
		ListenAddr:                 fmt.Sprintf("127.0.0.1:%d", httpPort),
		SharedSecret:               s.Secret,
		NATSURL:                    s.NATSURL,
		StartupEnsureCommandStream: true,
		CommandStreamReplicas:      max(opts.ClusterNodes, 1),
		CommandConsumerReplicas:    opts.ConsumerReplicas,
		CommandStreamMaxAge:        time.Hour,
		CommandStreamRetention:     opts.CommandStreamRetention,
		CommandStreamMaxConsumers:  opts.CommandStreamMaxConsumers,
		ConsumerAckWait:            cmp.Or(opts.ConsumerAckWait, 5*time.Second),
		ResolverCacheTTL:           time.Second,
		ResolverSnapshotPath:       filepath.Join(dir, "state", "resolver-snapshot.json"),
		ResolverSnapshotInterval:   cmp.Or(opts.ResolverSnapshotInterval, time.Second),
		MigrateOnStart:             true,
		ShutdownTimeout:            5 * time.Second,
		AccountJWTMaxBytes:         opts.AccountJWTMaxBytes,
	}
	s.StartServe()
	t.Cleanup(s.StopServe)
	if !opts.NoNATS {
		s.StartNATS()
		s.WaitNATSReady()
	}
	return s
}

// StartServe starts `provisioner serve` and waits until its resolver
// answers (with PostgreSQL down, from the snapshot).
func (s *Stack) StartServe() {
	s.t.Helper()
	lvl := slog.LevelError
	_ = lvl.UnmarshalText([]byte(s.Config.LogLevel))
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.NewServer(ctx, s.Config, log)
	if err != nil {
		cancel()
		s.t.Fatalf("provisioner serve: %v", err)
	}
	s.srv, s.cancel, s.done = srv, cancel, make(chan error, 1)
	go func() { s.done <- srv.Run(ctx) }()
	s.waitFor("provisioner resolver", func() bool {
		resp, err := http.Get(s.URL + "/jwt/v1/accounts/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Handler is the running serve's HTTP handler (app.Server.Handler).
func (s *Stack) Handler() http.Handler { return s.srv.Handler() }

// StopServe stops `serve` gracefully; it is safe to call twice.
func (s *Stack) StopServe() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("provisioner serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		s.t.Errorf("provisioner serve did not stop within 20s")
	}
	s.cancel = nil
}

// StartNATS starts nats-server from a config that includes the fragment
// init-operator wrote. It reuses the port and JetStream store across restarts.
func (s *Stack) StartNATS() {
	s.t.Helper()
	if s.Nodes == nil {
		s.NATS.Start()
		return
	}
	// A node's JetStream is healthy only once the cluster has a meta
	// leader: start every node before waiting on any.
	var wg sync.WaitGroup
	errs := make([]error, len(s.Nodes))
	for i, n := range s.Nodes {
		wg.Go(func() { errs[i] = n.TryStart() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.t.Fatalf("nats cluster: %v", err)
	}
}

// StopNATS shuts nats-server (every node of a cluster) down.
func (s *Stack) StopNATS() {
	if s.Nodes == nil {
		s.NATS.Stop()
		return
	}
	for _, n := range s.Nodes {
		n.Stop()
	}
}

// RestartNATS stops nats-server (every node), starts it again and waits
// until the provisioner is connected to it.
func (s *Stack) RestartNATS() {
	s.t.Helper()
	s.StopNATS()
	s.StartNATS()
	s.WaitNATSReady()
}

// clusterNodes configures n nats-servers sharing dir (each its own
// configuration file and store by name), every one including
// init-operator's fragment and routed to the others.
func clusterNodes(t pgtest.TB, dir string, n int, profiling bool) []*natstest.Server {
	routes := make([]int, n)
	for i := range routes {
		routes[i] = FreePort(t)
	}
	nodes := make([]*natstest.Server, n)
	for i := range nodes {
		var others []string
		for j, p := range routes {
			if j != i {
				others = append(others, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		conf := fmt.Sprintf("include \"nats-operator.conf\"\ncluster {\n  name: rxc\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", routes[i], strings.Join(others, ", "))
		nodes[i] = natstest.New(t, natstest.Options{Dir: dir, Name: fmt.Sprintf("nats-%d", i+1), Config: conf, ReadyTimeout: time.Minute, Profiling: profiling})
	}
	return nodes
}

// NATSReady reports whether the provisioner is connected to NATS now.
func (s *Stack) NATSReady() bool { return s.srv.NATSReady() }

// WaitNATSReady waits until the provisioner is connected to NATS.
func (s *Stack) WaitNATSReady() {
	s.t.Helper()
	s.waitFor("provisioner connected to NATS", s.srv.NATSReady)
}

func (s *Stack) waitFor(what string, ok func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Post sends body as JSON with the shared secret and returns status and body.
func (s *Stack) Post(path string, body any) (int, []byte) {
	s.t.Helper()
	status, _, out := s.Request(http.MethodPost, path, body)
	return status, out
}

// BackendUser asks POST /backend-user for the backend user name (made
// now or made before) and returns the answer, its .creds included.
func (s *Stack) BackendUser(name string) provisionerwire.BackendUserResponse {
	s.t.Helper()
	status, body := s.Post("/backend-user", provisionerwire.BackendUserRequest{Name: name})
	if status != http.StatusOK && status != http.StatusCreated {
		s.t.Fatalf("POST /backend-user: %d %s", status, body)
	}
	var u provisionerwire.BackendUserResponse
	if err := json.Unmarshal(body, &u); err != nil {
		s.t.Fatalf("POST /backend-user: %v", err)
	}
	return u
}

// Request sends a request to the provisioner, with the shared secret and
// body as JSON unless body is nil, and returns status, header and body.
func (s *Stack) Request(method, path string, body any) (int, http.Header, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Backend-Shared-Secret", s.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

// Pool opens a pool on the stack's database, closed when the test ends.
func (s *Stack) Pool() *pgxpool.Pool { return pgtest.Pool(s.t, s.Config.PGDSN) }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t pgtest.TB) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// UserClaims decodes the user JWT of a .creds file's content.
func UserClaims(t pgtest.TB, creds []byte) *jwt.UserClaims {
	t.Helper()
	tok, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	return uc
}

// UserAccount is the account a user belongs to: the issuer account when a
// signing key signed the user, else the issuer.
func UserAccount(uc *jwt.UserClaims) string {
	if uc.IssuerAccount != "" {
		return uc.IssuerAccount
	}
	return uc.Issuer
}
