package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/httpapi/observe"
	"github.com/rxc-project/rxc/adapters/httpapi/provisionerapi"
	"github.com/rxc-project/rxc/adapters/lastknown"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/adapters/postgres/pgoutage"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seedfile"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/apps/internal/buildinfo"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// serve runs the resolver and the API until ctx ends.
func serve(ctx context.Context, stderr io.Writer) error {
	return appenv.ServeCommand(ctx, stderr, LoadServeConfig, ServeConfig.level, NewServer)
}

func (c ServeConfig) level() string { return c.LogLevel }

// Server is a wired provisioner.
type Server struct {
	cfg     ServeConfig
	log     *slog.Logger
	close   appenv.Closers
	http    *http.Server
	lis     net.Listener
	handler atomic.Pointer[http.Handler]
	last    *lastknown.Store
	// opSeed is the key serve signs accounts with: the operator's identity
	// key or one of its signing keys; opPub is its public key.
	opSeed []byte
	opPub  string

	// Set by build, once PostgreSQL answered.
	store *provisionerstore.Store
	nats  *serveradmin.Client
	svc   *provisioning.Service
	api   http.Handler
	built atomic.Bool

	consumersMissing   atomic.Int64
	consumersRecreated atomic.Int64
	metrics            *metrics

	// consumersOffline and natsNodesLost follow the node-loss pass
	// (loops.go).
	consumersOffline atomic.Int64
	natsNodesLost    atomic.Int64
}

// readiness lists what GET /readyz reports: PostgreSQL and NATS.
func (s *Server) readiness() []provisionerapi.Check {
	return []provisionerapi.Check{
		{Name: "postgres", Fn: func(ctx context.Context) error {
			if !s.built.Load() {
				return provisionerapi.ErrStarting
			}
			return s.store.Ping(ctx)
		}},
		{Name: "nats", Fn: func(context.Context) error {
			if !s.NATSReady() {
				return serveradmin.ErrNotConnected
			}
			return nil
		}},
		// Account JWTs NATS refuses (over its maximum payload): their
		// revocations are not in force; retried in the background.
		{Name: "account_jwts", Advisory: true, Fn: func(context.Context) error {
			if !s.built.Load() {
				return nil
			}
			return undeliveredError(s.svc.Undelivered())
		}},
	}
}

// undeliveredError describes the accounts NATS refuses, nil when none.
func undeliveredError(u map[string]string) error {
	if len(u) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(u))
	shown := keys[:min(len(keys), 5)]
	return fmt.Errorf("%d account JWTs undeliverable to NATS, retried in the background: %s (%s)", len(keys), strings.Join(shown, ", "), u[keys[0]])
}

// pgWaitWithSnapshot bounds the wait for PostgreSQL at start when a
// resolver snapshot can answer meanwhile.
const pgWaitWithSnapshot = 5 * time.Second

// NewServer checks every precondition, then builds the adapters. It binds
// the HTTP listener but serves nothing until Run. When PostgreSQL does not
// answer and the resolver snapshot knows accounts, it returns a server that
// serves the resolver from the snapshot (every other route 503) and
// finishes starting in Run once PostgreSQL answers.
func NewServer(ctx context.Context, cfg ServeConfig, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s)
	wait := 60 * time.Second
	if s.last.Len() > 0 {
		wait = pgWaitWithSnapshot
	}
	err := s.build(ctx, wait)
	if err != nil && !(s.last.Len() > 0 && pgoutage.Is(err)) {
		s.close.Close()
		return nil, err
	}
	s.lis, err = net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		s.close.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	s.http = &http.Server{
		// The access log and the latency metric, one wrapper. The
		// resolver's answers (nats-server's hot path) are summarised in
		// one access record a minute; its refusals are logged each.
		Handler: observe.WrapWith(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) }),
			log.With("component", "access"), observe.Options{
				Observe: s.metrics.observe.observe, Summarise: isResolver, SummaryName: "resolver", SummaryEvery: time.Minute,
			}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if s.built.Load() {
		s.handler.Store(&s.api)
		return s, nil
	}
	// PostgreSQL is down: the resolver answers from the snapshot.
	starting, err := provisionerapi.New(provisionerapi.Config{
		Resolver: snapshotResolver{s.last}, SharedSecret: cfg.SharedSecret, Logger: log, DatabaseUnavailable: pgoutage.Is,
		Readiness: s.readiness(), Metrics: s.metrics.handler(),
	})
	if err != nil {
		s.close.Close()
		return nil, err
	}
	var h http.Handler = starting
	s.handler.Store(&h)
	log.Warn("PostgreSQL does not answer: serving the account resolver from the snapshot until it does; other routes answer 503",
		"snapshot", cfg.ResolverSnapshotPath, "accounts", s.last.Len(), "snapshot_written_at", s.last.LoadedFrom(), logkey.Error, err)
	return s, nil
}

// snapshotResolver answers the resolver from the last known copy alone.
type snapshotResolver struct{ last *lastknown.Store }

func (r snapshotResolver) SystemAccountJWT(context.Context) (string, error) {
	if tok, ok := r.last.System(); ok {
		return tok, nil
	}
	return "", provisionerapi.ErrStarting
}

func (r snapshotResolver) AccountJWT(_ context.Context, pk string) (string, error) {
	if tok, ok := r.last.Get(pk); ok {
		return tok, nil
	}
	return "", provisionerapi.ErrStarting
}

// prepare checks what needs no database: the configuration, the operator
// seed file and the resolver snapshot.
func (s *Server) prepare() error {
	cfg := &s.cfg
	if err := cfg.resolveSecret(); err != nil {
		return err
	}
	if _, err := cfg.sealer(); err != nil {
		return err
	}
	if cfg.ResolverSnapshotInterval <= 0 {
		cfg.ResolverSnapshotInterval = 30 * time.Second
	}
	opSeed, err := seedfile.Read(cfg.OperatorSeedPath)
	if err != nil {
		return err
	}
	s.opSeed = opSeed
	s.opPub, err = jwtauthority.PublicKeyFromSeed(opSeed)
	if err != nil {
		return fmt.Errorf("operator seed file %s: %w", cfg.OperatorSeedPath, err)
	}
	s.last, err = lastknown.Open(cfg.ResolverSnapshotPath, s.opPub)
	return err
}

// build connects to PostgreSQL (waiting up to wait) and wires everything
// that needs it: the store, the operator's authority, the NATS admin
// client, the provisioning service (bringing accounts and users up to the
// current configuration) and the API. On failure it closes what it opened
// and may run again.
func (s *Server) build(ctx context.Context, wait time.Duration) (err error) {
	cfg := s.cfg
	defer func() {
		if err != nil {
			s.close.Close()
		}
	}()
	store, err := s.openStore(ctx, wait)
	if err != nil {
		return err
	}
	op, err := s.operator(ctx, store)
	if err != nil {
		return err
	}
	signer, err := jwtauthority.New(jwtauthority.Config{
		OperatorSeed: s.opSeed, Stream: cfg.CommandStreamName, ControlAccount: op.ControlAccount, ControlJetStream: cfg.controlLimits(),
	})
	if err != nil {
		return err
	}
	eventStream := cfg.EventsStreamName
	if eventStream == "" {
		eventStream = topology.DefaultEventStream
	}
	if err := s.buildNATS(ctx, store, op, eventStream); err != nil {
		return err
	}
	s.svc, err = provisioning.New(provisioning.Config{
		Store: store, Signer: signer, Claims: signer, Pusher: s.nats, Consumers: s.nats,
		Stream: cfg.CommandStreamName, EventStream: eventStream, ResolverCacheTTL: cfg.ResolverCacheTTL,
		LastKnown: s.last, SensorUserTTL: cfg.SensorUserJWTTTL, AccountJWTMaxBytes: cfg.AccountJWTMaxBytes,
	})
	if err != nil {
		return err
	}
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	s.api, err = provisionerapi.New(provisionerapi.Config{
		Service: s.svc, Health: store, SharedSecret: cfg.SharedSecret, Logger: s.log, DatabaseUnavailable: pgoutage.Is,
		Readiness: s.readiness(), Metrics: s.metrics.handler(),
	})
	if err != nil {
		return err
	}
	s.store = store
	s.built.Store(true)
	return nil
}

// openStore connects to PostgreSQL (waiting up to wait), applies the
// migrations when asked to and opens the store, sealing seeds with the
// configured key.
func (s *Server) openStore(ctx context.Context, wait time.Duration) (*provisionerstore.Store, error) {
	cfg, log := s.cfg, s.log
	sealer, err := cfg.sealer()
	if err != nil {
		return nil, err
	}
	pool, err := appenv.Connect(ctx, cfg.PGDSN, wait, log)
	if err != nil {
		return nil, err
	}
	s.close.Add(pool.Close)
	if cfg.MigrateOnStart {
		applied, err := applyMigrations(ctx, pool)
		if err != nil {
			return nil, err
		}
		for _, v := range applied {
			log.Info("migration applied", "version", v)
		}
	}
	return provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
}

// operator reads the operator init-operator stored, checks that the seed
// file holds one of its keys, and restricts the resolver's copy to accounts
// it signs.
func (s *Server) operator(ctx context.Context, store *provisionerstore.Store) (provisioning.Operator, error) {
	op, err := store.Operator(ctx)
	if errors.Is(err, provisioning.ErrNoOperator) || errors.Is(err, provisioning.ErrNotFound) {
		return op, errors.New("the store has no operator: run provisioner init-operator first")
	}
	if err != nil {
		return op, fmt.Errorf("read operator: %w", err)
	}
	if err := jwtauthority.HoldsKey(op, s.opPub); err != nil {
		return op, fmt.Errorf("operator seed file %s: %w", s.cfg.OperatorSeedPath, err)
	}
	// The resolver's copy keeps only accounts signed by a key the operator
	// JWT lists now: one signed by a removed signing key is not served.
	return op, s.last.Trust(op.JWT)
}

// buildNATS builds the client that pushes claims to nats-server (as the SYS
// user) and manages the streams and consumers (as the control admin).
func (s *Server) buildNATS(ctx context.Context, store *provisionerstore.Store, op provisioning.Operator, eventStream string) error {
	cfg, log := s.cfg, s.log
	sysAcct, err := store.Account(ctx, op.SystemAccount)
	if err != nil {
		return fmt.Errorf("system account: %w", err)
	}
	ctlAcct, err := store.Account(ctx, op.ControlAccount)
	if err != nil {
		return fmt.Errorf("control account: %w", err)
	}
	adminUser := func() (string, []byte, error) { return jwtauthority.ControlAdminUser(ctlAcct.Seed) }
	if cfg.ControlCredsPath != "" {
		adminUser = func() (string, []byte, error) { return readCreds(cfg.ControlCredsPath) }
	}
	if limit := cfg.ControlJSMaxDisk; limit > 0 && cfg.EventsStreamMaxBytes > limit-limit/10 {
		log.Warn("EVENTS_STREAM_MAX_BYTES leaves less than a tenth of CONTROL_JETSTREAM_MAX_DISK for commands: a full event stream would also stop commands",
			"events_max_bytes", cfg.EventsStreamMaxBytes, "control_max_disk", limit)
	}
	s.nats, err = serveradmin.New(serveradmin.Config{
		URL:        cfg.NATSURL,
		SystemUser: func() (string, []byte, error) { return jwtauthority.SystemUser(sysAcct.Seed) },
		AdminUser:  adminUser,
		Stream: serveradmin.StreamConfig{
			Name: cfg.CommandStreamName, Replicas: cfg.CommandStreamReplicas, MaxAge: cfg.CommandStreamMaxAge, Duplicates: 2 * time.Minute,
			Retention: cfg.CommandStreamRetention, MaxMsgsPerSubject: cfg.CommandStreamMaxPerSensor, ConsumerReplicas: cfg.CommandConsumerReplicas,
			MaxConsumers: cfg.CommandStreamMaxConsumers, WorkQueueWarnConsumers: cfg.CommandStreamWorkQueueWarnConsumers,
		},
		Events: serveradmin.EventStreamConfig{
			Name: eventStream, Replicas: cfg.EventsStreamReplicas, MaxAge: cfg.EventsStreamMaxAge, MaxBytes: cfg.EventsStreamMaxBytes,
		},
		ManageStream: cfg.StartupEnsureCommandStream,
		UpgradeLock: func(ctx context.Context) (func(), error) {
			return store.Lock(ctx, "rxc-command-stream-upgrade")
		},
		ConsumerAckWait: cfg.ConsumerAckWait,
		Logger:          log.With("component", "nats"),
		RequestTimeout:  5 * time.Second,
	})
	if err != nil {
		return err
	}
	s.close.Add(s.nats.Close)
	return nil
}

// catchUp brings what earlier configurations and releases left up to the
// current ones: account JWTs are signed again, users minted under an
// earlier topology revoked.
func (s *Server) catchUp(ctx context.Context) error {
	log := s.log
	// An account JWT signed under an earlier configuration or release (other
	// CONTROL limits, a renamed command stream, changed exports) is re-signed
	// now; PushPending delivers it once NATS is reached.
	resigned, err := s.svc.RefreshAccounts(ctx)
	if err != nil {
		return fmt.Errorf("refresh account JWTs: %w", err)
	}
	if n := len(resigned); n > 0 {
		attrs := []any{"count", n}
		if n <= 10 {
			attrs = append(attrs, "accounts", resigned)
		}
		log.Info("re-signed account JWTs that no longer matched the configuration", attrs...)
	}
	// Users minted under an earlier topology (the first release's ack grants
	// reach other consumers) stop working now, not at their next request.
	revoked, err := s.svc.RevokeOutdatedUsers(ctx)
	if err != nil {
		return fmt.Errorf("revoke users with outdated permissions: %w", err)
	}
	if n := len(revoked); n > 0 {
		log.Warn("revoked users whose permissions the current topology no longer grants; their sensors get new credentials with their next certificate renewal", "count", n)
	}
	return nil
}

// Run serves HTTP first (nats-server will not start until the resolver
// answers), then connects to NATS in the background. A server that started
// without PostgreSQL finishes starting once PostgreSQL answers.
func (s *Server) Run(ctx context.Context) error {
	defer s.close.Close()
	errc := make(chan error, 2)
	go func() { errc <- s.http.Serve(s.lis) }()
	s.log.Info("provisioner serving", "addr", s.lis.Addr().String(), "version", buildinfo.Version, "nats", s.cfg.NATSURL)

	var bg sync.WaitGroup
	defer bg.Wait()
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if s.built.Load() {
		if err := s.activate(bgCtx, &bg); err != nil {
			return err
		}
	} else {
		bg.Add(1)
		go func() {
			defer bg.Done()
			s.finishStarting(bgCtx, &bg, errc)
		}()
	}

	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	stopBG()
	appenv.Drain(s.log, s.cfg.ShutdownTimeout, appenv.Drainer{Name: "http", Shutdown: s.http.Shutdown})
	return nil
}

// finishStarting builds what needs PostgreSQL once it answers, then
// activates the server; an error other than an outage goes to errc.
func (s *Server) finishStarting(ctx context.Context, bg *sync.WaitGroup, errc chan<- error) {
	for ctx.Err() == nil {
		err := s.build(ctx, 2*time.Second)
		if err == nil {
			s.log.Info("PostgreSQL answers: the provisioner finished starting")
			if err := s.activate(ctx, bg); err != nil {
				errc <- err
			}
			return
		}
		if !pgoutage.Is(err) && ctx.Err() == nil {
			errc <- err
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
}

// activate switches HTTP to the full API, connects to NATS and keeps the
// resolver snapshot up to date.
func (s *Server) activate(ctx context.Context, bg *sync.WaitGroup) error {
	s.handler.Store(&s.api)
	s.nats.OnConnect(func(ctx context.Context) {
		if n, err := s.svc.PushPending(ctx); err != nil {
			s.log.Warn("push pending account JWTs", "pushed", n, logkey.Error, err)
		} else if n > 0 {
			s.log.Info("pushed pending account JWTs", "count", n)
		}
		s.repairConsumers(ctx)
		s.removeRetired(ctx)
	})
	if err := s.nats.Start(ctx); err != nil {
		return err
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		s.keepSnapshot(ctx)
	}()
	bg.Add(1)
	go func() {
		defer bg.Done()
		s.retryLoop(ctx, retryInterval)
	}()
	if r := s.cfg.CommandConsumerReplicas; r > 0 && r < s.cfg.CommandStreamReplicas {
		bg.Add(1)
		go func() {
			defer bg.Done()
			s.offlineLoop(ctx, offlineInterval, offlineFullEvery)
		}()
	}
	return nil
}

// readCreds reads a .creds file for the control admin.
func readCreds(path string) (string, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("CONTROL_CREDS_PATH: %w", err)
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return "", nil, fmt.Errorf("CONTROL_CREDS_PATH: %w", err)
	}
	kp, err := jwt.ParseDecoratedNKey(data)
	if err != nil {
		return "", nil, fmt.Errorf("CONTROL_CREDS_PATH: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", nil, fmt.Errorf("CONTROL_CREDS_PATH: %w", err)
	}
	return strings.TrimSpace(tok), seed, nil
}

// Addr is the address the HTTP listener is bound to.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Handler is what serve answers HTTP with: the access log and latency
// metric around the API (benchmarks and tests call it without a socket).
func (s *Server) Handler() http.Handler { return s.http.Handler }

// NATSReady reports whether the provisioner is connected to NATS.
func (s *Server) NATSReady() bool { return s.built.Load() && s.nats.Ready() }
