// Package devstack runs the whole RXC system on one machine for development
// and demos: a PostgreSQL cluster, the real provisioner, an in-process
// nats-server in operator mode resolving accounts through it, the real
// control plane with NATS provisioning and messaging, the operator console
// (Debian's nginx with the production config, or a small Go server that
// mimics it), and simulated sensors run by the reference sensor agent.
//
// Everything lives in one state folder and every listener is on loopback.
// A later Start on the same folder resumes: same PostgreSQL data, operator
// seed, sensor CA, JetStream store, operator password and sensors.
package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
	cpapp "github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// Web modes of Config.Web.
const (
	WebAuto  = "auto"  // nginx when it is installed, else the Go server
	WebNginx = "nginx" // Debian's nginx with web/nginx's configuration
	WebGo    = "go"    // the Go server in this package
	WebNone  = "none"  // no console (the API alone)
)

// OperatorEmail is the operator created on the first start.
const OperatorEmail = "admin@rxc.local"

// Config describes a stack. Addresses must be loopback; port 0 picks a free
// port at each start.
type Config struct {
	// StateDir holds everything the stack keeps between runs.
	StateDir string

	ProvisionerAddr string
	NATSAddr        string
	APIAddr         string
	GRPCAddr        string
	WebAddr         string
	// PGPort is PostgreSQL's loopback port; 0 picks a free one.
	PGPort int

	// Web is one of WebAuto, WebNginx, WebGo, WebNone. WebDir is the
	// repository's web/ folder: dist/ (the SPA build), nginx/ and the
	// entrypoint hook in docker-entrypoint.d/.
	Web    string
	WebDir string

	// Tenant is created on start when not empty (the demo tenant).
	Tenant string
	// Sensors simulated sensors are enrolled in Tenant by SensorAgent (the
	// sensor-agent binary); none when the binary is missing.
	Sensors     int
	SensorAgent string
	// StartSensors sends start to each simulated sensor that no operator
	// has commanded yet, so they stream events at once.
	StartSensors bool
	// SeedSensors fake sensors are written straight into the control
	// plane's database, in SeedTenant (created like Tenant), for a large
	// fleet in the console without enrolling it (see package fleetseed).
	// Their live ones are kept live while the stack runs.
	SeedSensors int
	SeedTenant  string

	// Chat is the control plane's analytics chat (the ANALYTICS_CHAT_
	// group); the zero value leaves it off. When it is enabled the
	// console's config.js turns the chat launcher on as well.
	Chat cpapp.ChatConfig

	// LogLevel of the services' JSON logs, written to STATE/logs.
	LogLevel string
	// Progress receives short human-readable lines about what is starting.
	Progress io.Writer
	// ShutdownTimeout bounds Stop as a whole (default 30 s).
	ShutdownTimeout time.Duration
}

// Info is what a user or a test needs to reach the running stack.
type Info struct {
	WebURL         string `json:"webUrl,omitempty"`
	APIBaseURL     string `json:"apiBaseUrl"`
	Email          string `json:"email"`
	Password       string `json:"password"`
	ProvisionerURL string `json:"provisionerUrl"`
	NATSURL        string `json:"natsUrl"`
	GRPCAddr       string `json:"grpcAddr"`
	MetricsURL     string `json:"metricsUrl"`
	PGDSN          string `json:"pgDsn"`
	StateDir       string `json:"stateDir"`
	Tenant         string `json:"tenant,omitempty"`
	Sensors        int    `json:"sensors"`
	SensorAgent    string `json:"sensorAgent,omitempty"`
	SeedTenant     string `json:"seedTenant,omitempty"`
	SeededSensors  int    `json:"seededSensors,omitempty"`
	Web            string `json:"web"`
}

// Stack is a running (or startable) local system.
type Stack struct {
	cfg      Config
	progress io.Writer

	mu      sync.Mutex
	started bool
	stops   []stopFunc
	info    Info
	// provisionerReady reports the provisioner's NATS connection.
	provisionerReady func() bool
}

type stopFunc struct {
	name string
	fn   func(ctx context.Context) error
}

// New checks cfg and fills in defaults; nothing starts until Start.
func New(cfg Config) (*Stack, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("devstack: a state folder is required")
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("devstack: state folder: %w", err)
	}
	cfg.StateDir = abs
	for _, a := range []struct {
		name string
		addr *string
	}{
		{"provisioner", &cfg.ProvisionerAddr}, {"NATS", &cfg.NATSAddr}, {"API", &cfg.APIAddr},
		{"gRPC", &cfg.GRPCAddr}, {"web", &cfg.WebAddr},
	} {
		if *a.addr == "" {
			*a.addr = "127.0.0.1:0"
		}
		if err := checkLoopback(*a.addr); err != nil {
			return nil, fmt.Errorf("devstack: %s address: %w", a.name, err)
		}
	}
	if cfg.PGPort < 0 || cfg.PGPort > 65535 {
		return nil, fmt.Errorf("devstack: PostgreSQL port %d out of range", cfg.PGPort)
	}
	switch cfg.Web {
	case "":
		cfg.Web = WebAuto
	case WebAuto, WebNginx, WebGo, WebNone:
	default:
		return nil, fmt.Errorf("devstack: web mode %q: use auto, nginx, go or none", cfg.Web)
	}
	if cfg.Web != WebNone && cfg.WebDir == "" {
		return nil, errors.New("devstack: the web folder is required to serve the console")
	}
	if cfg.Sensors < 0 {
		return nil, errors.New("devstack: negative sensor count")
	}
	if cfg.Sensors > 0 && cfg.Tenant == "" {
		return nil, errors.New("devstack: simulated sensors need a tenant")
	}
	if cfg.SeedSensors < 0 || cfg.SeedSensors > fleetseed.MaxCount {
		return nil, fmt.Errorf("devstack: seeded sensors must lie between 0 and %d", fleetseed.MaxCount)
	}
	if cfg.SeedSensors > 0 {
		if cfg.SeedTenant == "" {
			return nil, errors.New("devstack: seeded sensors need a tenant")
		}
		if err := ids.Validate(cfg.SeedTenant); err != nil {
			return nil, fmt.Errorf("devstack: seed tenant: %w", err)
		}
	}
	if cfg.Chat.RatePerMinute == 0 {
		cfg.Chat.RatePerMinute = 10
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("devstack: log level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	return &Stack{cfg: cfg, progress: progress}, nil
}

// Start brings the stack up and returns once every part answers. ctx bounds
// start-up only: the services run until Stop. On an error everything that
// had started is stopped again.
func (s *Stack) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("devstack: already started")
	}
	if err := s.start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if serr := s.stopAll(sctx); serr != nil {
			err = fmt.Errorf("%w (and while stopping: %v)", err, serr)
		}
		return err
	}
	s.started = true
	return nil
}

// Stop stops everything in reverse start order within ctx and the
// configured shutdown timeout, whichever ends first.
func (s *Stack) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	s.started = false
	return s.stopAll(ctx)
}

// Info describes the running stack.
func (s *Stack) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *Stack) onStop(name string, fn func(ctx context.Context) error) {
	s.stops = append(s.stops, stopFunc{name: name, fn: fn})
}

func (s *Stack) stopAll(ctx context.Context) error {
	var errs []error
	for i := len(s.stops) - 1; i >= 0; i-- {
		st := s.stops[i]
		if err := st.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", st.name, err))
		}
	}
	s.stops = nil
	return errors.Join(errs...)
}

func (s *Stack) say(format string, args ...any) {
	fmt.Fprintf(s.progress, format+"\n", args...)
}

func (s *Stack) start(ctx context.Context) error {
	st, err := openState(s.cfg.StateDir)
	if err != nil {
		return err
	}
	s.onStop("state lock", func(context.Context) error { return st.close() })
	s.say("state folder: %s", st.dir)

	pg, err := preparePostgres(st, s.say)
	if err != nil {
		return err
	}
	p, err := resolvePorts(s.cfg, st)
	if err != nil {
		return err
	}
	// Before anything starts: a busy port found later would leave the
	// start half done, and its cause in a log file.
	if err := checkPortsFree(s.cfg, p); err != nil {
		return err
	}
	s.info = Info{
		APIBaseURL:     "http://localhost:" + strconv.Itoa(p.API),
		Email:          OperatorEmail,
		Password:       st.password,
		ProvisionerURL: "http://127.0.0.1:" + strconv.Itoa(p.Provisioner),
		NATSURL:        "nats://127.0.0.1:" + strconv.Itoa(p.NATS),
		GRPCAddr:       "127.0.0.1:" + strconv.Itoa(p.GRPC),
		StateDir:       st.dir,
		Tenant:         s.cfg.Tenant,
		Web:            WebNone,
	}

	logs, err := newLogs(st.path("logs"), s.cfg.LogLevel)
	if err != nil {
		return err
	}
	s.onStop("logs", func(context.Context) error { return logs.close() })

	if err := pg.start(ctx, p.Postgres, s.cfg.PGPort == 0, s.say); err != nil {
		return err
	}
	s.onStop("postgres", pg.stop)
	s.info.PGDSN = pg.dsn("postgres")
	if err := pg.ensureDatabases(ctx, "provisioner", "controlplane"); err != nil {
		return err
	}

	if err := s.startProvisioner(ctx, st, pg, p, logs); err != nil {
		return err
	}
	if err := s.startNATS(ctx, st, p, logs); err != nil {
		return err
	}
	if err := s.startControlPlane(ctx, st, pg, p, logs); err != nil {
		return err
	}
	if err := s.startWeb(ctx, st, p); err != nil {
		return err
	}
	if s.cfg.Tenant != "" {
		if err := s.startSensors(ctx, st, logs); err != nil {
			return err
		}
	}
	if s.cfg.SeedSensors > 0 {
		if err := s.seedSensors(ctx, st, pg); err != nil {
			return err
		}
	}
	return nil
}

// ports are the resolved (non-zero) ports of one start.
type ports struct {
	Provisioner int `json:"provisioner"`
	NATS        int `json:"nats"`
	API         int `json:"api"`
	GRPC        int `json:"grpc"`
	Web         int `json:"web"`
	Postgres    int `json:"postgres"`
}

// resolvePorts turns each port 0 into the port the previous start used,
// when it is still free, or else any free port; the result is remembered in
// STATE/ports.json. Enrolled sensors keep dialling the NATS and gRPC
// addresses they were given, and the browser keeps the console's origin, so
// a resumed stack should come back where it was.
func resolvePorts(cfg Config, st *state) (ports, error) {
	var prev, p ports
	file := st.path("ports.json")
	if data, err := os.ReadFile(file); err == nil {
		_ = json.Unmarshal(data, &prev)
	}
	for _, a := range []struct {
		addr       string
		port, last *int
	}{
		{cfg.ProvisionerAddr, &p.Provisioner, &prev.Provisioner}, {cfg.NATSAddr, &p.NATS, &prev.NATS},
		{cfg.APIAddr, &p.API, &prev.API}, {cfg.GRPCAddr, &p.GRPC, &prev.GRPC}, {cfg.WebAddr, &p.Web, &prev.Web},
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.PGPort)), &p.Postgres, &prev.Postgres},
	} {
		var err error
		if *a.port, err = portOf(a.addr, *a.last); err != nil {
			return p, err
		}
	}
	data, _ := json.Marshal(p)
	if err := atomicfile.Write(file, append(data, '\n'), 0o644); err != nil {
		return p, err
	}
	return p, nil
}

// portOf returns addr's port; for port 0 the last one when it is free, or
// else any free loopback port.
func portOf(addr string, last int) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("bad port in %q", addr)
	}
	if n != 0 {
		return n, nil
	}
	if last > 0 && last <= 65535 {
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(last))); err == nil {
			l.Close()
			return last, nil
		}
	}
	return freePort()
}

func freePort() (int, error) { return loopback.FreePort() }

// checkPortsFree refuses to start when one of the stack's listening ports is
// taken, naming the rxc-dev flag that moves it and a port that is free now.
func checkPortsFree(cfg Config, p ports) error {
	for _, a := range []struct {
		what, flag, addr string
		port             int
	}{
		{"provisioner", "-provisioner-addr", cfg.ProvisionerAddr, p.Provisioner},
		{"nats-server", "-nats-addr", cfg.NATSAddr, p.NATS},
		{"control plane API", "-api-addr", cfg.APIAddr, p.API},
		{"control plane gRPC", "-grpc-addr", cfg.GRPCAddr, p.GRPC},
		{"console", "-web-addr", cfg.WebAddr, p.Web},
	} {
		if a.what == "console" && cfg.Web == WebNone {
			continue
		}
		addr := hostPort(a.addr, a.port)
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			continue
		}
		hint := ""
		if free, ferr := freePort(); ferr == nil {
			hint = fmt.Sprintf(" (%s 127.0.0.1:%d is free now)", a.flag, free)
		}
		return fmt.Errorf("port %d for the %s is in use by another program: stop it, or move the %s with %s 127.0.0.1:PORT%s; nothing was started",
			a.port, a.what, a.what, a.flag, hint)
	}
	return nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the local stack listens on loopback only", addr)
	}
	return nil
}

// hostPort joins the host of addr with port.
func hostPort(addr string, port int) string {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// waitFor polls ok until it holds or limit passes.
func waitFor(ctx context.Context, limit time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// ensureDir creates dir with mode, and sets mode on an existing one.
func ensureDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
