package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/rxc-project/rxc/adapters/sensorclient"
	"github.com/rxc-project/rxc/core/logkey"
	sensorpb "github.com/rxc-project/rxc/proto"
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
	// Heartbeat is the period of status reports and health checks.
	Heartbeat time.Duration
	// EventBatchInterval bounds how long events wait for confirmation.
	EventBatchInterval time.Duration
	Backoff            sensorclient.Backoff
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
	// results are the outcomes of the latest commands, oldest first, at
	// most sensorclient.MaxResults; every status report repeats them.
	results []sensorclient.CommandResult
	// resultsMu orders the writes of results to disk.
	resultsMu sync.Mutex
	grpcDown  bool
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
		BaseURL: cfg.API, RootCAs: cfg.APIRootCAs, UserAgent: "rxc-sensor-agent/" + cfg.Version,
	})
	if err != nil {
		return nil, err
	}
	return &Agent{
		cfg: cfg, log: cfg.Logger, dir: dir, enroller: enroller,
		events: make(chan *sensorpb.SensorEvent, eventQueueSize), changed: make(chan struct{}, 1),
	}, nil
}

// Run enrols or resumes the sensor and serves it until ctx ends (nil, after
// a final "stopped" status) or the control plane revokes it (ErrRevoked).
func (a *Agent) Run(ctx context.Context) error {
	st, err := a.enrolled(ctx)
	if err != nil {
		return err
	}
	a.st = st
	a.log = a.log.With(logkey.Tenant, st.TenantID, logkey.Sensor, st.SensorID)
	if a.results, err = a.dir.LoadResults(); err != nil {
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
	select {
	case <-ctx.Done():
		err = nil
	case err = <-fatal:
	}
	cancel()
	wg.Wait()
	a.shutdown(err)
	return err
}

// enrolled loads the state or enrols with the claim code.
func (a *Agent) enrolled(ctx context.Context) (*sensorclient.State, error) {
	st, err := a.dir.Load()
	switch {
	case err == nil && st.RevokedAt == nil:
		if a.cfg.ClaimCode != "" {
			a.log.Info("state directory already holds an enrolled sensor; the claim code is not used", logkey.Sensor, st.SensorID)
		}
		a.log.Info("resuming sensor from state", logkey.Sensor, st.SensorID, logkey.Tenant, st.TenantID, "state_dir", a.dir.Path())
		return st, nil
	case err == nil && a.cfg.ClaimCode == "":
		return nil, fmt.Errorf("sensor %s in %s was revoked: enrol again with a new claim code: %w", st.SensorID, a.dir.Path(), ErrRevoked)
	case err != nil && !errors.Is(err, sensorclient.ErrNoState):
		return nil, fmt.Errorf("state directory %s: %w", a.dir.Path(), err)
	}

	red, err := a.dir.LoadRedemption()
	switch {
	case err == nil && time.Now().Before(red.ExpiresAt):
		a.log.Info("resuming an interrupted enrolment", logkey.Sensor, red.SensorID)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	default:
		if a.cfg.ClaimCode == "" {
			return nil, fmt.Errorf("no enrolled sensor in %s: pass --claim-code (or RXC_CLAIM_CODE) for the first run", a.dir.Path())
		}
		red, err = retry(ctx, a, "redeem claim code", time.Time{}, func(ctx context.Context) (sensorclient.Redemption, error) {
			return a.enroller.Redeem(ctx, a.cfg.ClaimCode, a.cfg.Hostname)
		})
		if errors.Is(err, sensorclient.ErrInvalidClaimCode) {
			return nil, errors.New("the control plane refused the claim code: it is unknown, expired or already used")
		}
		if err != nil {
			return nil, err
		}
		if err := a.dir.SaveRedemption(red); err != nil {
			return nil, err
		}
		a.log.Info("claim code redeemed", logkey.Sensor, red.SensorID, logkey.Tenant, red.TenantID)
	}

	st, err = retry(ctx, a, "enrol", red.ExpiresAt, func(ctx context.Context) (*sensorclient.State, error) {
		return a.enroller.Enroll(ctx, red)
	})
	if err != nil {
		if errors.Is(err, sensorclient.ErrUnauthorized) {
			_ = a.dir.ClearRedemption()
			return nil, fmt.Errorf("the control plane refused the enrolment token (expired or used): redeem a new claim code: %w", err)
		}
		return nil, err
	}
	if err := a.dir.Save(st); err != nil {
		return nil, err
	}
	if err := a.dir.ClearRedemption(); err != nil {
		a.log.Warn("remove redemption file", logkey.Error, err)
	}
	a.log.Info("sensor enrolled", logkey.Sensor, st.SensorID, logkey.Tenant, st.TenantID, "serial", st.Serial,
		"not_after", st.NotAfter, "nats", st.NATS != nil, "grpc", st.GRPCAddress)
	return st, nil
}

// retry calls fn until it succeeds, fails for good, ctx ends or until
// passes (when set), pausing with backoff after retryable failures.
func retry[T any](ctx context.Context, a *Agent, what string, until time.Time, fn func(context.Context) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := fn(ctx)
		if err == nil || !sensorclient.Retryable(err) || (!until.IsZero() && time.Now().After(until)) {
			return v, err
		}
		if attempt == 0 || attempt%10 == 0 {
			a.log.Warn(what+" failed; retrying", logkey.Error, err, "attempt", attempt+1)
		}
		pause := max(a.cfg.Backoff.Delay(attempt), sensorclient.RetryAfter(err))
		if !sleep(ctx, pause) {
			return v, ctx.Err()
		}
	}
}

// ensureCertificate renews before connecting when the certificate cannot
// be used: it does not match its key (an interrupted renewal) or has
// expired. A certificate that is merely due is renewed by renewLoop, so a
// control plane that is down does not keep the sensor from starting.
func (a *Agent) ensureCertificate(ctx context.Context) error {
	_, err := a.st.TLSCertificate()
	switch {
	case err == nil && time.Now().Before(a.st.NotAfter):
		return nil
	case err != nil && !errors.Is(err, sensorclient.ErrKeyMismatch):
		return fmt.Errorf("state directory %s: %w", a.dir.Path(), err)
	case err == nil:
		err = errors.New("certificate expired")
	}
	a.log.Info("renewing the certificate before connecting", "reason", err.Error())
	if err := a.renew(ctx); err != nil {
		if errors.Is(err, sensorclient.ErrUnauthorized) {
			return a.revoked(err)
		}
		return err
	}
	return nil
}

// connect builds the gRPC and NATS clients from the current state.
func (a *Agent) connect() error {
	cert, err := a.st.TLSCertificate()
	if err != nil {
		return err
	}
	a.grpc, err = sensorclient.NewGRPC(sensorclient.GRPCConfig{
		Address: a.st.GRPCAddress, CAPEM: a.st.CAPEM, Certificate: cert, Backoff: a.cfg.Backoff,
		BatchInterval: a.cfg.EventBatchInterval, Logger: a.log.With("component", "grpc"),
	})
	if err != nil {
		return err
	}
	if a.st.NATS == nil {
		a.log.Warn("enrolment carried no NATS access (provisioning disabled on the control plane): no commands or status")
		return nil
	}
	return a.newCommands()
}

func (a *Agent) newCommands() error {
	a.mu.Lock()
	st := a.st
	a.mu.Unlock()
	cmds, err := sensorclient.NewCommands(sensorclient.CommandsConfig{
		TenantID: st.TenantID, SensorID: st.SensorID, NATS: *st.NATS, Creds: st.Creds,
		Name: "rxc-sensor-" + st.SensorID, Backoff: a.cfg.Backoff,
		Handle: a.apply, Skipped: a.skipped, Connected: a.notify,
		Logger: a.log.With("component", "nats"),
	})
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.cmds = cmds
	a.mu.Unlock()
	return nil
}

func (a *Agent) commands() *sensorclient.Commands {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmds
}

// commandLoop runs the NATS side, replacing the connection when the server
// gave up on it, until ctx ends or the sensor is found revoked.
func (a *Agent) commandLoop(ctx context.Context) error {
	if a.commands() == nil {
		return nil
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := a.commands().Run(ctx)
		if err == nil {
			return nil
		}
		a.log.Warn("nats connection lost for good", logkey.Error, err)
		if errors.Is(err, sensorclient.ErrNATSRefused) {
			if err := a.probe(ctx, err); err != nil {
				return err
			}
		}
		a.commands().Close()
		if !a.cfg.Backoff.Wait(ctx, attempt) {
			return nil
		}
		if err := a.newCommands(); err != nil {
			return err
		}
	}
	return nil
}

// eventLoop streams the runner's events until ctx ends or the sensor is
// found revoked.
func (a *Agent) eventLoop(ctx context.Context) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := a.grpc.StreamEvents(ctx, a.events)
		if err == nil {
			return nil
		}
		a.log.Warn("event stream refused", logkey.Error, err)
		if err := a.probe(ctx, err); err != nil {
			return err
		}
		if !a.cfg.Backoff.Wait(ctx, attempt) {
			return nil
		}
	}
	return nil
}

// statusLoop publishes status on every change and every heartbeat, and
// calls the health check every heartbeat.
func (a *Agent) statusLoop(ctx context.Context) error {
	beat := time.NewTicker(a.cfg.Heartbeat)
	defer beat.Stop()
	watch := time.NewTicker(watchInterval)
	defer watch.Stop()
	a.publish(ctx, "")
	if err := a.check(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.changed:
			a.publish(ctx, "")
		case <-watch.C:
			if a.observe() {
				a.publish(ctx, "")
			}
		case <-beat.C:
			a.publish(ctx, "")
			if err := a.check(ctx); err != nil {
				return err
			}
		}
	}
}

// renewLoop renews the certificate when due until ctx ends or the sensor is
// found revoked.
func (a *Agent) renewLoop(ctx context.Context) error {
	for {
		due := a.current().RenewalDue(time.Now())
		wait := max(time.Until(due), minRenewPause)
		a.log.Debug("certificate renewal scheduled", "at", time.Now().Add(wait).UTC())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		err := a.renew(ctx)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, sensorclient.ErrUnauthorized):
			return a.revoked(err)
		default:
			// Not transient (retry gave up), e.g. a refused CSR: the
			// current certificate still works, so keep trying slowly.
			a.log.Error("certificate renewal failed; trying again later", logkey.Error, err, "not_after", a.current().NotAfter)
			if !a.cfg.Backoff.Wait(ctx, longestPause) {
				return nil
			}
		}
	}
}

func (a *Agent) current() *sensorclient.State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// renew obtains, saves and starts using a new certificate, retrying
// transient failures with backoff.
func (a *Agent) renew(ctx context.Context) error {
	a.credMu.Lock()
	defer a.credMu.Unlock()
	a.mu.Lock()
	cur := a.st
	a.mu.Unlock()
	next, err := retry(ctx, a, "certificate renewal", time.Time{}, func(ctx context.Context) (*sensorclient.State, error) {
		return a.enroller.RenewIn(ctx, a.dir, cur)
	})
	if err != nil {
		return err
	}
	return a.adopt(next)
}

// adopt saves a renewed state, ends the renewal's journal and switches the
// gRPC client to it.
func (a *Agent) adopt(next *sensorclient.State) error {
	if err := a.dir.Save(next); err != nil {
		return err
	}
	if err := a.dir.ClearRenewal(); err != nil {
		a.log.Warn("remove the renewal journal", logkey.Error, err)
	}
	a.mu.Lock()
	a.st = next
	g, cmds := a.grpc, a.cmds
	a.mu.Unlock()
	// A renewal hands out NATS credentials with a later expiry: the next
	// reconnection (at the latest when the server closes the connection
	// of an expired JWT) presents them.
	if cmds != nil && len(next.Creds) > 0 {
		if err := cmds.SetCreds(next.Creds); err != nil {
			return err
		}
	}
	if g != nil {
		cert, err := next.TLSCertificate()
		if err != nil {
			return err
		}
		if err := g.SetCertificate(cert); err != nil {
			return err
		}
	}
	a.log.Info("certificate renewed", "serial", next.Serial, "not_after", next.NotAfter)
	return nil
}

// probe settles whether a refusal (gRPC PermissionDenied, NATS auth error)
// means the sensor was revoked, by asking the control plane for a new
// certificate: refused → revoked (ErrRevoked); granted → the old
// certificate had been replaced and the new one is in use (nil); the
// control plane unreachable → undecided, retry later (nil).
func (a *Agent) probe(ctx context.Context, cause error) error {
	a.credMu.Lock()
	defer a.credMu.Unlock()
	a.mu.Lock()
	cur := a.st
	a.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, sensorclient.DefaultHTTPTimeout)
	defer cancel()
	next, err := a.enroller.RenewIn(pctx, a.dir, cur)
	switch {
	case err == nil:
		a.log.Info("the control plane still accepts the sensor; continuing with a fresh certificate", "refusal", cause.Error())
		return a.adopt(next)
	case errors.Is(err, sensorclient.ErrUnauthorized):
		return a.revoked(fmt.Errorf("%w (renewal: %w)", cause, err))
	default:
		a.log.Warn("could not ask the control plane whether the sensor is revoked; retrying later", logkey.Error, err)
		return nil
	}
}

// revoked records the revocation in the state directory and returns
// ErrRevoked.
func (a *Agent) revoked(cause error) error {
	a.mu.Lock()
	st := a.st.Clone()
	a.mu.Unlock()
	now := time.Now().UTC()
	st.RevokedAt = &now
	if err := a.dir.Save(st); err != nil {
		a.log.Warn("record revocation in state", logkey.Error, err)
	}
	return fmt.Errorf("%w: %w", ErrRevoked, cause)
}

// apply carries out a command and reports the outcome naming it. A
// command it already has a result for (a redelivery) is not applied again:
// its result is reported again.
func (a *Agent) apply(ctx context.Context, c sensorclient.Command) {
	if a.known(c.CommandID) {
		a.log.Info("command delivered again; not applied twice", logkey.Command, c.CommandID)
		a.publish(ctx, c.CommandID)
		return
	}
	switch c.Action {
	case sensorclient.ActionStart:
		a.setDesired(sensorclient.StateRunning)
		a.startRunner(ctx)
	case sensorclient.ActionStop:
		a.setDesired(sensorclient.StateStopped)
		a.stopRunner(ctx)
	}
	a.observe()
	_, detail := a.reported()
	a.remember(sensorclient.CommandResult{CommandID: c.CommandID, Outcome: sensorclient.OutcomeApplied, Detail: detail, At: time.Now().UTC()})
	a.publish(ctx, c.CommandID)
}

// skipped reports a command acknowledged without being applied: refused,
// with the reason and the agent's detail.
func (a *Agent) skipped(ctx context.Context, c sensorclient.Command, err error) {
	if c.CommandID == "" || a.known(c.CommandID) {
		return
	}
	a.remember(sensorclient.CommandResult{
		CommandID: c.CommandID, Outcome: sensorclient.OutcomeRefused, Reason: sensorclient.RefusalReason(err),
		Detail: "command not applied: " + err.Error(), At: time.Now().UTC(),
	})
	state, _ := a.reported()
	a.report(ctx, sensorclient.Status{State: state, CommandID: c.CommandID, Detail: "command not applied: " + err.Error()})
}

// remember keeps r among the latest results, on disk too: an agent
// restarted before the control plane recorded a result still reports it,
// and does not apply that command again when it is delivered again.
func (a *Agent) remember(r sensorclient.CommandResult) {
	a.resultsMu.Lock()
	defer a.resultsMu.Unlock()
	a.mu.Lock()
	a.results = append(a.results, r)
	if len(a.results) > sensorclient.MaxResults {
		a.results = a.results[len(a.results)-sensorclient.MaxResults:]
	}
	kept := slices.Clone(a.results)
	a.mu.Unlock()
	if err := a.dir.SaveResults(kept); err != nil {
		a.log.Warn("save command results", logkey.Error, err)
	}
}

// known reports whether a result for the command is kept.
func (a *Agent) known(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.results {
		if r.CommandID == id {
			return true
		}
	}
	return false
}

func (a *Agent) setDesired(s sensorclient.ReportedState) {
	a.mu.Lock()
	st := a.st.Clone()
	st.Desired = s
	a.st = st
	a.mu.Unlock()
	if err := a.dir.Save(st); err != nil {
		a.log.Warn("save commanded state", logkey.Error, err)
	}
}

func (a *Agent) startRunner(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runnerTimeout)
	defer cancel()
	err := a.runner.Start(rctx)
	a.mu.Lock()
	a.failure = ""
	if err != nil {
		a.failure = "start failed: " + err.Error()
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Error("capture engine did not start", logkey.Error, err)
	}
}

func (a *Agent) stopRunner(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runnerTimeout)
	defer cancel()
	err := a.runner.Stop(rctx)
	a.mu.Lock()
	a.failure = ""
	if err != nil {
		a.failure = "stop failed: " + err.Error()
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Error("capture engine did not stop", logkey.Error, err)
	}
}

// observe records the runner's state and reports whether it changed.
func (a *Agent) observe() bool {
	rs := a.runner.State()
	a.mu.Lock()
	defer a.mu.Unlock()
	if rs == a.last {
		return false
	}
	if rs.Phase == PhaseFailed {
		a.log.Error("capture engine failed", "detail", rs.Detail)
	}
	a.last = rs
	return true
}

// reported maps the runner's state to the status a sensor reports.
func (a *Agent) reported() (sensorclient.ReportedState, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failure != "" {
		return sensorclient.StateError, a.failure
	}
	switch a.last.Phase {
	case PhaseRunning:
		return sensorclient.StateRunning, ""
	case PhaseStopped:
		return sensorclient.StateStopped, ""
	case PhaseFailed:
		return sensorclient.StateError, a.last.Detail
	}
	return sensorclient.StateOnline, ""
}

func (a *Agent) publish(ctx context.Context, commandID string) {
	state, detail := a.reported()
	a.report(ctx, sensorclient.Status{State: state, CommandID: commandID, Detail: detail})
}

func (a *Agent) report(ctx context.Context, s sensorclient.Status) {
	cmds := a.commands()
	if cmds == nil {
		return
	}
	s.At, s.AgentVersion = time.Now().UTC(), a.cfg.Version
	a.mu.Lock()
	s.Results = append([]sensorclient.CommandResult(nil), a.results...)
	a.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if err := cmds.PublishStatus(pctx, s); err != nil {
		a.log.Debug("status not published; reported again later", "state", string(s.State), logkey.Error, err)
		return
	}
	a.log.Debug("status published", "state", string(s.State), logkey.Command, s.CommandID)
}

// notify asks the status loop to publish at once.
func (a *Agent) notify() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// check calls the gRPC health check; a refusal is probed for revocation.
func (a *Agent) check(ctx context.Context) error {
	a.mu.Lock()
	phase := a.last.Phase
	a.mu.Unlock()
	state := map[Phase]sensorpb.SensorState{
		PhaseRunning: sensorpb.SensorState_SENSOR_STATE_RUNNING,
		PhaseFailed:  sensorpb.SensorState_SENSOR_STATE_ERROR,
	}[phase]
	if state == sensorpb.SensorState_SENSOR_STATE_UNSPECIFIED {
		state = sensorpb.SensorState_SENSOR_STATE_STOPPED
	}
	_, err := a.grpc.Check(ctx, state, a.cfg.Version)
	a.mu.Lock()
	wasDown := a.grpcDown
	a.grpcDown = err != nil
	a.mu.Unlock()
	switch {
	case err == nil && wasDown:
		a.log.Info("control plane health check succeeds again")
	case err == nil:
	case errors.Is(err, sensorclient.ErrGRPCRefused):
		a.log.Warn("health check refused", logkey.Error, err)
		return a.probe(ctx, err)
	case ctx.Err() != nil:
	case !wasDown:
		a.log.Warn("health check failed", logkey.Error, err)
	}
	return nil
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

// sleep pauses for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
