package app

import (
	"context"
	"errors"
	"time"

	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

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
	s.Results = a.outbox.Due(sensorclient.MaxResults)
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
