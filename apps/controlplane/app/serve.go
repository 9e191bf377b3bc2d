package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/pgoutage"
	"github.com/rxc-project/rxc/adapters/promtext"
	"github.com/rxc-project/rxc/adapters/provisionerclient"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/apps/internal/buildinfo"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/retention"
)

func serve(ctx context.Context, stderr io.Writer) error {
	return appenv.ServeCommand(ctx, stderr, appenv.Loaded[ServeConfig], ServeConfig.level, NewServer)
}

func (c ServeConfig) level() string { return c.LogLevel }

// Server is a wired control plane.
type Server struct {
	cfg   ServeConfig
	log   *slog.Logger
	close appenv.Closers

	pool        *pgxpool.Pool
	store       *controlplanestore.Store
	fleet       *fleet.Service
	operators   *operators.Service
	provisioner *provisionerclient.Client
	messaging   *sensorbus.Client
	grpc        *grpcmtls.Server
	http        *http.Server
	httpLis     net.Listener
	metricsLis  net.Listener
	metricsHTTP *http.Server
	grpcLis     net.Listener
	status      *fleet.StatusBatcher
	events      *eventPipeline
	retention   *retention.Service // nil: every history kept forever
}

// NewServer checks the configuration, builds every adapter and binds both
// listeners; nothing is served until Run.
func NewServer(ctx context.Context, cfg ServeConfig, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log}
	if err := s.build(ctx); err != nil {
		s.close.Close()
		return nil, err
	}
	return s, nil
}

// build wires the control plane in dependency order: the sensor CA, the
// database and the services on it, the provisioner client, NATS, the fleet
// service, the event pipeline, the gRPC edge and the HTTP edges.
func (s *Server) build(ctx context.Context) error {
	cfg, log := s.cfg, s.log
	if err := s.checkConfig(); err != nil {
		return err
	}
	ca, err := x509ca.Load(x509ca.Config{Dir: cfg.CADir, Logger: log.With("component", "ca")})
	if err != nil {
		return fmt.Errorf("sensor CA (CA_DIR=%s; create it with controlplane init-ca): %w", cfg.CADir, err)
	}
	if err := s.buildStore(ctx); err != nil {
		return err
	}
	if err := s.buildRetention(); err != nil {
		return err
	}
	if err := s.buildProvisioner(); err != nil {
		return err
	}
	publisher, err := s.buildMessaging()
	if err != nil {
		return err
	}
	// The gRPC edge is built on the fleet's status side alone, then the
	// fleet on it: revocation ends streams through a server that exists.
	status, err := fleet.NewStatusService(fleet.StatusConfig{Store: s.store, Logger: log.With("component", "fleet")})
	if err != nil {
		return err
	}
	if s.events, err = s.buildEvents(log); err != nil {
		return err
	}
	if err := s.buildGRPC(ca, status); err != nil {
		return err
	}
	if err := s.buildFleet(ca, publisher, status); err != nil {
		return err
	}
	s.status, err = fleet.NewStatusBatcher(fleet.StatusBatcherConfig{Apply: s.fleet.HandleStatusBatch, Logger: log.With("component", "status")})
	if err != nil {
		return err
	}
	api, err := s.buildAPI(ca)
	if err != nil {
		return err
	}
	return s.buildHTTP(api)
}

// checkConfig refuses combinations of settings that cannot work.
func (s *Server) checkConfig() error {
	cfg := s.cfg
	if cfg.Provisioner.Enabled && len(cfg.Provisioner.SharedSecret) < 16 {
		return errors.New("configuration: NATS_PROVISIONER_SHARED_SECRET must be set (16 characters or more) when NATS_PROVISIONER_ENABLED=true")
	}
	if cfg.Messaging.Enabled && cfg.Messaging.CredsPath == "" && !cfg.Provisioner.Enabled {
		return errors.New("configuration: NATS_MESSAGING_ENABLED=true needs NATS_MESSAGING_CREDS_PATH or an enabled provisioner to fetch backend credentials from")
	}
	if _, err := cfg.retentionPolicy(); err != nil {
		return err
	}
	return nil
}

// buildStore connects to PostgreSQL, applies the migrations when asked to,
// and builds the store and the operators service on it, creating the
// bootstrap operator when one is configured.
func (s *Server) buildStore(ctx context.Context) error {
	cfg, log := s.cfg, s.log
	pool, err := appenv.Connect(ctx, cfg.PGDSN, 60*time.Second, log)
	if err != nil {
		return err
	}
	s.pool = pool
	s.close.Add(pool.Close)
	if cfg.MigrateOnStart {
		applied, err := applyMigrations(ctx, pool)
		if err != nil {
			return err
		}
		for _, v := range applied {
			log.Info("migration applied", "version", v)
		}
	}
	if s.store, err = controlplanestore.New(controlplanestore.Config{Pool: pool}); err != nil {
		return err
	}
	sealer, err := operatorSealer(cfg.OperatorSecretEncryptionKey)
	if err != nil {
		return err
	}
	if s.operators, err = newOperators(s.store, operators.Config{
		SessionTTL: cfg.SessionTTL, Logger: log.With("component", "operators"), Sealer: sealer,
		Throttle: operators.ThrottlePolicy{
			PairFailures: cfg.LoginThrottle.PairFailures, AccountFailures: cfg.LoginThrottle.AccountFailures,
			AddressFailures: cfg.LoginThrottle.AddressFailures,
		},
	}); err != nil {
		return err
	}
	return s.bootstrapOperator(ctx)
}

// buildProvisioner builds the provisioner's client (disabled unless
// NATS_PROVISIONER_ENABLED).
func (s *Server) buildProvisioner() error {
	cfg := s.cfg
	var err error
	s.provisioner, err = provisionerclient.New(provisionerclient.Config{
		Enabled:      cfg.Provisioner.Enabled,
		BaseURL:      cfg.Provisioner.BaseURL,
		SharedSecret: cfg.Provisioner.SharedSecret,
		HeaderName:   cfg.Provisioner.SharedSecretName,
		Timeout:      time.Duration(max(cfg.Provisioner.TimeoutSeconds, 1)) * time.Second,
		Breaker: provisionerclient.BreakerConfig{
			ConsecutiveFailures: cfg.Provisioner.BreakerFailures,
			OpenTimeout:         time.Duration(max(cfg.Provisioner.BreakerOpenSeconds, 1)) * time.Second,
		},
		Logger: s.log.With("component", "provisioner-client"),
	})
	return err
}

// buildMessaging builds the NATS messaging client when messaging is
// enabled and returns what publishes commands: that client, or one that
// answers every command with ErrMessagingDisabled.
func (s *Server) buildMessaging() (fleet.CommandPublisher, error) {
	cfg := s.cfg
	if !cfg.Messaging.Enabled {
		return disabledPublisher{}, nil
	}
	var err error
	s.messaging, err = sensorbus.New(sensorbus.Config{
		URL:    cfg.Messaging.URL,
		Creds:  s.backendCreds,
		Stream: cfg.CommandStreamName,
		Logger: s.log.With("component", "nats"),
	})
	if err != nil {
		return nil, err
	}
	s.close.Add(s.messaging.Close)
	return s.messaging, nil
}

// buildFleet builds the fleet service on the store, the provisioner, the
// sensor CA and the publisher.
func (s *Server) buildFleet(ca *x509ca.CA, publisher fleet.CommandPublisher, status *fleet.StatusService) error {
	cfg := s.cfg
	var err error
	s.fleet, err = fleet.New(fleet.Config{
		Store: s.store, Provisioner: s.provisioner, ProvisioningEnabled: cfg.Provisioner.Enabled,
		CA: ca, Publisher: publisher, Terminator: s.grpc, Status: status, Locker: s.store,
		Stream: cfg.CommandStreamName, SensorCertTTL: cfg.SensorCertTTL, CommandTTL: cfg.CommandTTL, MinRenewInterval: cfg.RenewMinInterval,
		Logger: s.log.With("component", "fleet"),
	})
	return err
}

// buildGRPC builds the sensors' gRPC edge on the fleet's status side (it
// authorises certificates and records health checks); the fleet service,
// built next, ends streams through it.
func (s *Server) buildGRPC(ca *x509ca.CA, status *fleet.StatusService) error {
	var err error
	s.grpc, err = grpcmtls.New(grpcmtls.Config{
		TLS: ca.ServerTLSConfig(), Authorizer: status, Heartbeats: fleet.NewCheckInBatcher(fleet.CheckInBatcherConfig{Apply: status.CheckIns}), Ingest: s.events.grpcIngest(), Logger: s.log.With("component", "grpc"),
		DatabaseUnavailable: pgoutage.Is, RecheckInterval: s.cfg.StreamRecheckInterval,
	})
	return err
}

// buildAPI builds the HTTP API with the analytics chat and the audit trail.
func (s *Server) buildAPI(ca *x509ca.CA) (*controlapi.API, error) {
	cfg, log := s.cfg, s.log
	chat, err := newAnalytics(cfg.Chat, s.pool, s.events != nil, log.With("component", "analytics"))
	if err != nil {
		return nil, err
	}
	trail, err := audit.New(s.store, log.With("component", "audit"), nil)
	if err != nil {
		return nil, err
	}
	proxies, err := trustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	sso, groups, err := oidcProvider(cfg.OIDC)
	if err != nil {
		return nil, err
	}
	return controlapi.New(controlapi.Config{
		TrustedProxies: proxies,
		OIDC:           sso, OIDCDisplayName: cfg.OIDC.DisplayName, OIDCGroups: groups,
		Fleet: s.fleet, Operators: s.operators, Audit: trail, CACertificatePEM: ca.CACertificatePEM,
		PublicNATSURL: cfg.PublicNATSURL, PublicGRPCAddr: cfg.PublicGRPCAddr,
		AllowedOrigins: cfg.CORSAllowedOrigins, LocalMode: cfg.LocalMode, TrustProxy: cfg.TrustProxy,
		Analytics:           chat,
		ChatRate:            controlapi.RateLimit{PerMinute: cfg.Chat.RatePerMinute},
		ProvisioningEnabled: cfg.Provisioner.Enabled, MessagingEnabled: cfg.Messaging.Enabled,
		Readiness:           s.readiness(),
		Metrics:             s.metrics,
		RedeemRate:          controlapi.RateLimit{PerMinute: cfg.RedeemPerMinute, Burst: cfg.RedeemBurst},
		DatabaseUnavailable: pgoutage.Is,
		Logger:              log.With("component", "http"),
	})
}

// buildHTTP binds the HTTP, gRPC and metrics listeners and builds the API's
// and the metrics' HTTP servers.
func (s *Server) buildHTTP(api *controlapi.API) error {
	cfg, log := s.cfg, s.log
	var err error
	if s.httpLis, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
		return fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	s.close.Add(func() { s.httpLis.Close() })
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCListenAddr); err != nil {
		return fmt.Errorf("listen %s: %w", cfg.GRPCListenAddr, err)
	}
	s.close.Add(func() { s.grpcLis.Close() })
	if s.metricsLis, err = net.Listen("tcp", cfg.MetricsListenAddr); err != nil {
		return fmt.Errorf("listen %s (METRICS_LISTEN_ADDR): %w", cfg.MetricsListenAddr, err)
	}
	s.close.Add(func() { s.metricsLis.Close() })
	apiHandler, metricsHandler := observed(api, api.MetricsHandler(), s.store, s.grpc, log.With("component", "access"))
	s.metricsHTTP = &http.Server{
		Handler:           metricsHandler,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	s.http = &http.Server{
		Handler:           apiHandler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return nil
}

// Run serves HTTP and gRPC, connects to NATS in the background and runs the
// periodic workers until ctx ends, then drains everything within
// SHUTDOWN_TIMEOUT.
func (s *Server) Run(ctx context.Context) error {
	defer s.close.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- fmt.Errorf("http: %w", s.http.Serve(s.httpLis)) }()
	go func() { errc <- fmt.Errorf("metrics http: %w", s.metricsHTTP.Serve(s.metricsLis)) }()
	go func() { errc <- fmt.Errorf("grpc: %w", s.grpc.Serve(s.grpcLis)) }()
	s.log.Info("control plane serving", "http", s.HTTPAddr(), "grpc", s.GRPCAddr(), "metrics", s.MetricsAddr(), "version", buildinfo.Version,
		"provisioning", s.cfg.Provisioner.Enabled, "messaging", s.cfg.Messaging.Enabled)

	var wg sync.WaitGroup
	s.startBackground(ctx, &wg)
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	s.drain()
	return err
}

// drain shuts the HTTP, metrics and gRPC servers down within
// SHUTDOWN_TIMEOUT.
func (s *Server) drain() {
	appenv.Drain(s.log, s.cfg.ShutdownTimeout,
		appenv.Drainer{Name: "http", Shutdown: s.http.Shutdown},
		appenv.Drainer{Name: "metrics http", Shutdown: s.metricsHTTP.Shutdown},
		appenv.Drainer{Name: "grpc", Shutdown: func(ctx context.Context) error { s.grpc.Shutdown(ctx); return nil }})
}

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// MetricsAddr is the bound address of GET /metrics.
func (s *Server) MetricsAddr() string { return s.metricsLis.Addr().String() }

// GRPCAddr is the bound gRPC address.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// Ready reports whether every enabled dependency is connected.
func (s *Server) Ready() bool {
	return (s.messaging == nil || s.messaging.Ready()) && s.events.ready()
}

// backendCreds reads the messaging creds file, or asks the provisioner for
// the control plane's backend user.
func (s *Server) backendCreds(ctx context.Context) (string, error) {
	if p := s.cfg.Messaging.CredsPath; p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("NATS_MESSAGING_CREDS_PATH: %w", err)
		}
		return string(data), nil
	}
	return s.provisioner.BackendCreds(ctx, "controlplane")
}

func (s *Server) bootstrapOperator(ctx context.Context) error {
	email, password := s.cfg.BootstrapOperatorEmail, s.cfg.BootstrapOperatorPassword
	if email == "" && password == "" {
		return nil
	}
	if email == "" || password == "" {
		return errors.New("configuration: BOOTSTRAP_OPERATOR_EMAIL and BOOTSTRAP_OPERATOR_PASSWORD go together")
	}
	_, err := s.operators.CreateOperator(ctx, operators.NewOperator{Email: email, Password: password, Role: operators.RoleAdmin})
	switch {
	case err == nil:
		s.log.Info("bootstrap operator created", "email", email)
	case errors.Is(err, operators.ErrConflict):
	default:
		return fmt.Errorf("bootstrap operator: %w", err)
	}
	return nil
}

func (s *Server) readiness() []controlapi.Check {
	checks := []controlapi.Check{{Name: "postgres", Fn: s.pool.Ping}}
	// NATS checks are round trips, not the socket's state: a hung server
	// keeps the socket open and answers nothing.
	if s.messaging != nil {
		checks = append(checks, controlapi.Check{Name: "nats", Fn: s.messaging.Check})
	}
	if s.events != nil {
		checks = append(checks, controlapi.Check{Name: "nats-events", Fn: s.events.check})
	}
	return checks
}

// metrics appends the app's own gauges and counters to /metrics.
func (s *Server) metrics(w io.Writer) {
	p := promtext.NewWriter(w)
	state := map[string]int64{"closed": 0, "half-open": 1, "open": 2}[s.provisioner.BreakerState()]
	p.Family("rxc_controlplane_provisioner_breaker_state", promtext.Gauge, "Circuit breaker nats-provisioner: 0 closed, 1 half-open, 2 open.")
	p.Sample("rxc_controlplane_provisioner_breaker_state", state, "name", "nats-provisioner")
	st := s.status.Stats()
	// A status the NATS adapter could not decode is rejected too, before
	// it reaches the batcher.
	var messaging sensorbus.Stats
	if s.messaging != nil {
		messaging = s.messaging.Stats()
	}
	malformed := messaging.StatusMalformed
	p.Counts("rxc_controlplane_status_messages_total", promtext.Counter, "Sensor status messages by outcome.", "outcome",
		promtext.Count{Value: "applied", N: st.Applied}, promtext.Count{Value: "stale", N: st.Stale},
		promtext.Count{Value: "rejected", N: st.Rejected + malformed}, promtext.Count{Value: "dropped", N: st.Dropped})
	if s.messaging != nil {
		p.Single("rxc_controlplane_commands_published_total", promtext.Counter, "Commands acknowledged by the stream.", int64(messaging.Published))
		p.Single("rxc_controlplane_status_dropped_total", promtext.Counter, "Oversized status messages dropped.", int64(messaging.StatusDropped))
	}
	s.events.metrics(p)
	s.retentionMetrics(p)
}

// disabledPublisher answers every command with ErrMessagingDisabled.
type disabledPublisher struct{}

func (disabledPublisher) PublishCommand(context.Context, fleet.Command) (fleet.PublishAck, error) {
	return fleet.PublishAck{}, fmt.Errorf("%w: %w: set NATS_MESSAGING_ENABLED=true", fleet.ErrMessagingDisabled, fleet.ErrNotPublished)
}
