package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/adapters/nats/embedded"
	"github.com/rxc-project/rxc/adapters/x509ca"
	cpapp "github.com/rxc-project/rxc/apps/controlplane/app"
	provapp "github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

const (
	commandStream = "RXC_CMD"
	eventStream   = "RXC_EVENTS"
)

// runner runs a service's Run in the background and stops it by cancelling
// its context, waiting at most until the stop context ends.
type runner struct {
	cancel context.CancelFunc
	done   chan error
}

func run(fn func(ctx context.Context) error) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- fn(ctx) }()
	return r
}

func (r *runner) stop(ctx context.Context) error {
	r.cancel()
	select {
	case err := <-r.done:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("still running when the shutdown time ran out: %w", ctx.Err())
	}
}

// exited reports a service that stopped on its own (a crash or a listener
// error) without waiting.
func (r *runner) exited() (error, bool) {
	select {
	case err := <-r.done:
		r.done <- err
		return err, true
	default:
		return nil, false
	}
}

func (s *Stack) startProvisioner(ctx context.Context, st *state, pg *postgres, p ports, logs *logs) error {
	log, err := logs.logger("provisioner")
	if err != nil {
		return err
	}
	if err := ensureDir(st.path("provisioner"), 0o700); err != nil {
		return err
	}
	if err := ensureDir(st.path("nats"), 0o700); err != nil {
		return err
	}
	addr := hostPort(s.cfg.ProvisionerAddr, p.Provisioner)
	store := provapp.StoreConfig{
		PGDSN:                    pg.dsn("provisioner"),
		OperatorSeedPath:         st.path("provisioner", "operator.nk"),
		AccountSeedEncryptionKey: st.secrets.AccountSeedEncryptionKey,
		ControlAccountName:       "CONTROL",
		CommandStreamName:        commandStream,
		ControlJSMaxDisk:         1 << 30,
		ControlJSMaxMemory:       256 << 20,
		LogLevel:                 s.cfg.LogLevel,
	}
	out, err := logs.file("provisioner-init")
	if err != nil {
		return err
	}
	// Safe on every start: it creates the operator once and afterwards only
	// rewrites the fragment (the resolver's port may have changed).
	op, err := provapp.InitOperator(ctx, store, provapp.InitOptions{
		Name:           "RXC-DEV",
		ResolverURL:    "http://" + addr + "/jwt/v1/accounts/",
		NATSConfigPath: st.path("nats", "operator.conf"),
	}, out)
	if err != nil {
		return fmt.Errorf("provisioner init-operator: %w", err)
	}
	s.say("provisioner: operator %s", op.PubKey)
	cfg := provapp.ServeConfig{
		StoreConfig:                store,
		ListenAddr:                 addr,
		SharedSecret:               st.secrets.ProvisionerSharedSecret,
		NATSURL:                    s.info.NATSURL,
		StartupEnsureCommandStream: true,
		CommandStreamReplicas:      1,
		CommandStreamMaxAge:        168 * time.Hour,
		ConsumerAckWait:            30 * time.Second,
		EventsStreamName:           eventStream,
		EventsStreamMaxAge:         72 * time.Hour,
		EventsStreamMaxBytes:       1 << 30,
		EventsStreamReplicas:       1,
		ResolverCacheTTL:           5 * time.Second,
		MigrateOnStart:             true,
		ShutdownTimeout:            10 * time.Second,
	}
	srv, err := provapp.NewServer(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("provisioner: %w", err)
	}
	r := run(srv.Run)
	s.onStop("provisioner", r.stop)
	s.provisionerReady = srv.NATSReady
	err = waitFor(ctx, 30*time.Second, "provisioner /healthz", func() bool {
		return httpStatus(s.info.ProvisionerURL+"/healthz") == http.StatusNoContent
	})
	if err != nil {
		return failed(r, "provisioner", err, logs)
	}
	s.say("provisioner: %s", s.info.ProvisionerURL)
	return nil
}

func (s *Stack) startNATS(ctx context.Context, st *state, p ports, logs *logs) error {
	if err := ensureDir(st.path("jetstream"), 0o700); err != nil {
		return err
	}
	conf := st.path("nats", "nats.conf")
	body := fmt.Sprintf("# Written by the local stack at each start.\nlisten: %q\nserver_name: rxc-dev\njetstream {\n  store_dir: %q\n}\ninclude \"operator.conf\"\n",
		hostPort(s.cfg.NATSAddr, p.NATS), st.path("jetstream"))
	if err := atomicfile.Write(conf, []byte(body), 0o600); err != nil {
		return err
	}
	ns, err := embedded.Start(conf, embedded.Options{LogFile: logs.path("nats")})
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, logs.path("nats"))
	}
	s.onStop("nats-server", func(ctx context.Context) error {
		ns.Shutdown()
		done := make(chan struct{})
		go func() { ns.WaitForShutdown(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("still running when the shutdown time ran out: %w", ctx.Err())
		}
	})
	if err := waitFor(ctx, 30*time.Second, "the provisioner to connect to NATS", s.provisionerReady); err != nil {
		return fmt.Errorf("%w (see %s)", err, logs.path("provisioner"))
	}
	s.say("nats-server: %s (JetStream in %s)", s.info.NATSURL, st.path("jetstream"))
	return nil
}

func (s *Stack) startControlPlane(ctx context.Context, st *state, pg *postgres, p ports, logs *logs) error {
	log, err := logs.logger("controlplane")
	if err != nil {
		return err
	}
	caDir := st.path("ca")
	res, err := x509ca.Init(caDir, x509ca.InitOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Organization: "RXC dev", ReplaceServerCert: true})
	if err != nil {
		return fmt.Errorf("sensor CA: %w", err)
	}
	if res.CACreated {
		s.say("control plane: sensor CA created in %s", caDir)
	}
	webPort := strconv.Itoa(p.Web)
	cfg := cpapp.ServeConfig{
		PGDSN:          pg.dsn("controlplane"),
		ListenAddr:     hostPort(s.cfg.APIAddr, p.API),
		GRPCListenAddr: hostPort(s.cfg.GRPCAddr, p.GRPC),
		// Prometheus's endpoint, on loopback like every listener of the stack.
		MetricsListenAddr:  "127.0.0.1:0",
		CADir:              caDir,
		SensorCertTTL:      168 * time.Hour,
		CORSAllowedOrigins: []string{"http://localhost:" + webPort, "http://127.0.0.1:" + webPort},
		LocalMode:          true,
		PublicGRPCAddr:     s.info.GRPCAddr,
		PublicNATSURL:      s.info.NATSURL,
		CommandStreamName:  commandStream,
		CommandTTL:         10 * time.Minute,
		SensorOfflineAfter: 90 * time.Second,
		SessionTTL:         12 * time.Hour,
		// Every simulated sensor redeems from 127.0.0.1 at once.
		RedeemPerMinute: 120,
		RedeemBurst:     max(20, s.cfg.Sensors+5),
		MigrateOnStart:  true,
		ShutdownTimeout: 10 * time.Second,
		LogLevel:        s.cfg.LogLevel,
		// Created when missing; the password stays the one in operator.txt.
		BootstrapOperatorEmail:    OperatorEmail,
		BootstrapOperatorPassword: st.password,
		// Second factors work in the dev stack (the console's TOTP screens).
		OperatorSecretEncryptionKey: st.secrets.OperatorSecretEncryptionKey,
		Provisioner: cpapp.ProvisionerConfig{
			Enabled: true, BaseURL: s.info.ProvisionerURL, SharedSecret: st.secrets.ProvisionerSharedSecret,
			SharedSecretName: "X-Backend-Shared-Secret", IntervalSeconds: 5, TimeoutSeconds: 5,
		},
		Messaging: cpapp.MessagingConfig{Enabled: true, URL: s.info.NATSURL},
		// The sensors' alerts go through JetStream into PostgreSQL, for the
		// console's Analytics screen.
		Events: cpapp.EventsConfig{Enabled: true, StreamName: eventStream, WriterBatch: 2000},
		Chat:   s.cfg.Chat,
	}
	srv, err := cpapp.NewServer(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	r := run(srv.Run)
	s.onStop("control plane", r.stop)
	err = waitFor(ctx, 60*time.Second, "control plane /healthz and NATS", func() bool {
		return httpStatus("http://"+srv.HTTPAddr()+"/healthz") == http.StatusNoContent && srv.Ready()
	})
	if err != nil {
		return failed(r, "control plane", err, logs)
	}
	s.info.MetricsURL = "http://" + srv.MetricsAddr() + "/metrics"
	s.say("control plane: API %s, gRPC %s, metrics %s", s.info.APIBaseURL, s.info.GRPCAddr, s.info.MetricsURL)
	if c := s.cfg.Chat; c.Enabled {
		s.say("control plane: analytics chat on (model %q, threat-intel enrichment %t)", c.Model, c.Enrichment.Enabled)
	}
	return nil
}

// failed adds why a service stopped, when it did, to a start-up error.
func failed(r *runner, name string, err error, logs *logs) error {
	if rerr, ok := r.exited(); ok && rerr != nil {
		return fmt.Errorf("%s stopped: %w", name, rerr)
	}
	return fmt.Errorf("%s: %w (see %s)", name, err, logs.dir)
}

// httpStatus GETs url with a short timeout; 0 when it does not answer.
func httpStatus(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// executable reports whether p is a regular file with an execute bit.
func executable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// absPath resolves p against the working directory.
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
