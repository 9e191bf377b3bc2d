package app

import (
	"context"
	"errors"

	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// connect builds the gRPC and NATS clients from the current state.
func (a *Agent) connect() error {
	cert, err := a.st.TLSCertificate()
	if err != nil {
		return err
	}
	a.grpc, err = sensorclient.NewGRPC(sensorclient.GRPCConfig{
		Address: a.st.GRPCAddress, CAPEM: a.st.CAPEM, Certificate: cert, Backoff: a.cfg.Backoff,
		BatchInterval: a.cfg.EventBatchInterval, IdleTimeout: a.cfg.GRPCIdleTimeout, Logger: a.log.With("component", "grpc"),
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
		Handle: a.apply, Skipped: a.skipped, Connected: a.notify, Confirmed: a.confirmed,
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
