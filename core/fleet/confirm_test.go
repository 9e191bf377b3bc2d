package fleet_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

func resultsReport(at time.Time, results ...fleet.CommandResult) fleet.StatusReport {
	return fleet.StatusReport{State: fleet.StateRunning, At: at, Results: results}
}

func applied(id string, at time.Time) fleet.CommandResult {
	return fleet.CommandResult{CommandID: id, Outcome: fleet.OutcomeApplied, At: at}
}

// A report that asks for a confirmation gets one after its results are
// stored, naming its own sensor and the results settled; repeats are
// confirmed again without changing the record (the first report wins); a
// result naming another sensor's command is confirmed to its sender only
// and changes nothing; unknown and revoked sensors, invalid reports and
// reports without results get no confirmation.
func TestStatusResultsConfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.provisionedTenant(t, "acme")
	a, _ := f.enrolled(t, "acme")
	b, _ := f.enrolled(t, "acme")
	gone, _ := f.enrolled(t, "acme")
	cmdA, err := issue(f, a.SensorID, fleet.ActionStart, "ops")
	if err != nil {
		t.Fatal(err)
	}
	cmdB, err := issue(f, b.SensorID, fleet.ActionStop, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeSensor(f.ctx, gone.SensorID, "ops"); err != nil {
		t.Fatal(err)
	}
	var got []fleet.ResultsConfirmation
	confirm := func(c fleet.ResultsConfirmation) { got = append(got, c) }
	msg := func(id string, r fleet.StatusReport) fleet.StatusUpdate {
		return fleet.StatusUpdate{Sensor: fleet.SensorRef{TenantID: "acme", SensorID: id}, Report: r, Confirm: confirm}
	}
	t0 := f.clock.Now()
	f.clock.Advance(time.Second)
	errs := f.svc.HandleStatusBatch(f.ctx, []fleet.StatusUpdate{
		msg(a.SensorID, resultsReport(t0, applied(cmdA.ID, t0), applied(cmdA.ID, t0))),
		// a names b's command: a's report is confirmed to a, b's command untouched.
		msg(a.SensorID, resultsReport(t0.Add(time.Millisecond), applied(cmdB.ID, t0))),
		msg(gone.SensorID, resultsReport(t0, applied(cmdA.ID, t0))),
		msg("s-0000000000000000", resultsReport(t0, applied(cmdA.ID, t0))),
		msg(b.SensorID, status(fleet.StateRunning, t0, "")),
		// An invalid report (a state no sensor reports) is not confirmed,
		// even with results.
		msg(b.SensorID, fleet.StatusReport{State: fleet.StateRevoked, At: t0, Results: []fleet.CommandResult{applied(cmdB.ID, t0)}}),
	})
	for i, err := range errs[:2] {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	if !errors.Is(errs[5], fleet.ErrInvalidInput) {
		t.Fatalf("report in a state no sensor reports: %v, want ErrInvalidInput", errs[5])
	}
	want := []fleet.ResultsConfirmation{
		{TenantID: "acme", SensorID: a.SensorID, Recorded: []string{cmdA.ID}},
		{TenantID: "acme", SensorID: a.SensorID, Recorded: []string{cmdB.ID}},
	}
	if !slices.EqualFunc(got, want, func(x, y fleet.ResultsConfirmation) bool {
		return x.TenantID == y.TenantID && x.SensorID == y.SensorID && slices.Equal(x.Recorded, y.Recorded)
	}) {
		t.Fatalf("confirmations %+v, want %+v", got, want)
	}
	if c := f.sensor(t, b.SensorID).LastCommand; c.Outcome != "" || !c.AcknowledgedAt.IsZero() {
		t.Errorf("b's command recorded from a's report: %+v", c)
	}
	first := f.sensor(t, a.SensorID).LastCommand
	if first.Outcome != fleet.OutcomeApplied {
		t.Fatalf("a's command %+v, want applied", first)
	}

	// The repeat (an agent that missed the confirmation) is confirmed
	// again; the record keeps the first report.
	got = nil
	f.clock.Advance(time.Second)
	refused := fleet.CommandResult{CommandID: cmdA.ID, Outcome: fleet.OutcomeRefused, Reason: fleet.ReasonExpired, At: t0}
	if err := f.svc.HandleStatusBatch(f.ctx, []fleet.StatusUpdate{msg(a.SensorID, resultsReport(f.clock.Now(), refused))})[0]; err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0].Recorded, []string{cmdA.ID}) {
		t.Fatalf("repeat confirmations %+v", got)
	}
	if c := f.sensor(t, a.SensorID).LastCommand; c.Outcome != fleet.OutcomeApplied || !c.AcknowledgedAt.Equal(first.AcknowledgedAt) {
		t.Errorf("repeat changed the record: %+v, was %+v", c, first)
	}

	// Without Confirm (an agent before the outbox) nothing is called.
	got = nil
	f.clock.Advance(time.Second)
	if err := f.svc.HandleStatus(f.ctx, "acme", a.SensorID, resultsReport(f.clock.Now(), applied(cmdA.ID, t0))); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("confirmations without Confirm: %+v", got)
	}
}
