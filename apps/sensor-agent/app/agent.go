package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// ErrRevoked means the control plane refuses this sensor for good; only a
// new claim code brings it back.
var ErrRevoked = errors.New("sensor revoked by the control plane")

// Bounds used by the agent.
const (
	runnerTimeout  = 30 * time.Second
	statusTimeout  = 5 * time.Second
	watchInterval  = time.Second
	minRenewPause  = time.Second
	eventQueueSize = 1024
	// longestPause is a retry attempt number far enough out that
	// Backoff.Wait pauses for about Backoff.Max.
	longestPause = 64
)

// AgentConfig configures one sensor.
type AgentConfig struct {
	// API is the control plane's base URL.
	API string
	// APIRootCAs verifies an https API (nil: system roots).
	APIRootCAs *x509.CertPool
	StateDir   string
	// ClaimCode enrols a directory without state; ignored otherwise.
	ClaimCode string
	Hostname  string
	// Labels are declared for the sensor at enrolment (nil: none).
	Labels map[string]string
	// Heartbeat is the period of status reports and health checks.
	Heartbeat time.Duration
	// EventBatchInterval bounds how long events wait for confirmation.
	EventBatchInterval time.Duration
	// GRPCIdleTimeout closes the gRPC connection after that long without a
	// call (0: sensorclient.DefaultIdleTimeout; negative: never).
	GRPCIdleTimeout time.Duration
	Backoff         sensorclient.Backoff
	// NewRunner builds the capture engine; events is where it sends what
	// it detects. Nil uses the simulated engine.
	NewRunner func(sensorID string, events chan<- *sensorpb.SensorEvent) (Runner, error)
	Version   string
	Logger    *slog.Logger
}

// Agent runs one sensor: enrolment or resumption from its state directory,
// commands and status over NATS, health checks and events over gRPC, and
// certificate renewal.
type Agent struct {
	cfg      AgentConfig
	log      *slog.Logger
	dir      *sensorclient.StateDir
	enroller *sensorclient.Enroller
	events   chan *sensorpb.SensorEvent
	changed  chan struct{}

	// credMu serialises renewals and revocation probes.
	credMu sync.Mutex

	mu      sync.Mutex
	st      *sensorclient.State
	runner  Runner
	grpc    *sensorclient.GRPC
	cmds    *sensorclient.Commands
	last    RunnerState
	failure string // detail of a failed start or stop
	// outbox keeps every command result until the control plane confirms
	// it recorded it; status reports carry them in turn.
	outbox   *sensorclient.Outbox
	grpcDown bool
}

// NewAgent checks cfg; nothing is contacted until Run.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if cfg.Heartbeat < time.Second {
		return nil, fmt.Errorf("heartbeat %s: must be at least 1s", cfg.Heartbeat)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewRunner == nil {
		return nil, errors.New("a runner factory is required")
	}
	dir, err := sensorclient.OpenStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	enroller, err := sensorclient.NewEnroller(sensorclient.EnrollerConfig{
		BaseURL: cfg.API, RootCAs: cfg.APIRootCAs, UserAgent: "rxc-sensor-agent/" + cfg.Version, Labels: cfg.Labels,
	})
	if err != nil {
		return nil, err
	}
	// Read again, with a warning when unreadable, once the sensor starts.
	outbox, _ := dir.OpenOutbox(nil)
	return &Agent{
		cfg: cfg, log: cfg.Logger, dir: dir, enroller: enroller, outbox: outbox,
		events: make(chan *sensorpb.SensorEvent, eventQueueSize), changed: make(chan struct{}, 1),
	}, nil
}

// Run enrols or resumes the sensor and serves it until ctx ends (nil, after
// a final "stopped" status) or the control plane revokes it (ErrRevoked).
func (a *Agent) Run(ctx context.Context) error {
	if err := a.start(ctx); err != nil {
		return err
	}
	err := a.serve(ctx)
	a.shutdown(err)
	return err
}

// start brings the sensor up: its state (enrolling when needed), a usable
// certificate, the capture engine, the connections, and capture resumed as
// last commanded.
func (a *Agent) start(ctx context.Context) error {
	st, err := a.enrolled(ctx)
	if err != nil {
		return err
	}
	a.st = st
	a.log = a.log.With(logkey.Tenant, st.TenantID, logkey.Sensor, st.SensorID)
	if a.outbox, err = a.dir.OpenOutbox(nil); err != nil {
		a.log.Warn("command results kept before the restart are unreadable; starting without them", logkey.Error, err)
	}
	if err := a.ensureCertificate(ctx); err != nil {
		return err
	}
	if a.runner, err = a.cfg.NewRunner(st.SensorID, a.events); err != nil {
		return fmt.Errorf("capture engine: %w", err)
	}
	if err := a.connect(); err != nil {
		return err
	}
	a.last = a.runner.State()
	if st.Desired == sensorclient.StateRunning {
		a.log.Info("resuming capture as last commanded")
		a.startRunner(ctx)
	}
	return nil
}

// serve runs the command, event, status and renewal loops until ctx ends
// (nil) or one of them fails for good (its error).
func (a *Agent) serve(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fatal := make(chan error, 4)
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context) error{a.commandLoop, a.eventLoop, a.statusLoop, a.renewLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop(runCtx); err != nil {
				fatal <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-fatal:
	}
	cancel()
	wg.Wait()
	return err
}

func (a *Agent) current() *sensorclient.State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// shutdown stops the runner, reports a final status unless revoked, and
// closes the connections.
func (a *Agent) shutdown(cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), runnerTimeout)
	defer cancel()
	if a.runner != nil {
		a.stopRunner(ctx)
		a.observe()
	}
	if cause == nil {
		a.report(ctx, sensorclient.Status{State: sensorclient.StateStopped, Detail: "sensor agent shutting down"})
	}
	if c := a.commands(); c != nil {
		c.Close()
	}
	if a.grpc != nil {
		_ = a.grpc.Close()
	}
	switch {
	case errors.Is(cause, ErrRevoked):
		a.log.Error("sensor revoked: the control plane refuses its certificate and NATS credentials; the agent stops. Enrol it again with a new claim code.", logkey.Error, cause)
	case cause != nil:
		a.log.Error("sensor agent stopped", logkey.Error, cause)
	default:
		a.log.Info("sensor agent stopped")
	}
}
