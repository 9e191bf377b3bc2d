package app

import (
	"context"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

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
	a.remember(sensorclient.CommandResult{CommandID: c.CommandID, Outcome: sensorclient.OutcomeApplied, Detail: detail, At: time.Now().UTC()}, c.ExpiresAt)
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
	}, c.ExpiresAt)
	state, _ := a.reported()
	a.report(ctx, sensorclient.Status{State: state, CommandID: c.CommandID, Detail: "command not applied: " + err.Error()})
}

// remember keeps r, the result of a command expiring at expiresAt, in the
// outbox (on disk too) until the control plane confirms it recorded it: an
// agent restarted before that still reports it, and does not apply that
// command again when it is delivered again.
func (a *Agent) remember(r sensorclient.CommandResult, expiresAt time.Time) {
	_, lost, err := a.outbox.Add(r, expiresAt)
	for _, id := range lost {
		a.log.Warn("command result forgotten before the control plane recorded it (outbox full or result too old)", logkey.Command, id)
	}
	if err != nil {
		a.log.Warn("save command results", logkey.Error, err)
	}
}

// known reports whether a result for the command is kept.
func (a *Agent) known(id string) bool { return a.outbox.Has(id) }

// confirmed forgets the results the control plane recorded and, when
// others still wait, reports them at once.
func (a *Agent) confirmed(c sensorclient.Confirmation) {
	n, err := a.outbox.Confirm(c.Recorded)
	if err != nil {
		a.log.Warn("save command results", logkey.Error, err)
	}
	if n > 0 {
		a.log.Debug("command results recorded by the control plane", "count", n)
		if a.outbox.Unconfirmed() > 0 {
			a.notify()
		}
	}
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
	a.driveRunner(ctx, a.runner.Start, "start failed: ", "capture engine did not start")
}

func (a *Agent) stopRunner(ctx context.Context) {
	a.driveRunner(ctx, a.runner.Stop, "stop failed: ", "capture engine did not stop")
}

// driveRunner starts or stops the runner within runnerTimeout, even when
// ctx has ended, and keeps a failure as the detail the status reports.
func (a *Agent) driveRunner(ctx context.Context, op func(context.Context) error, failure, logMsg string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runnerTimeout)
	defer cancel()
	err := op(rctx)
	a.mu.Lock()
	a.failure = ""
	if err != nil {
		a.failure = failure + err.Error()
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Error(logMsg, logkey.Error, err)
	}
}
