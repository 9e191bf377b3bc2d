package fleettest

import (
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// testCommandOutcomes: a command accepted by the stream that its sensor
// never reported on is shown expired once past its expiry (distinct from
// applied, refused and failed); a report recorded later — an agent's
// outbox delivering it after an outage — records the real outcome and
// makes it accepted again; the first report wins, repeats change nothing,
// another sensor's report on it changes nothing, and a command with an
// outcome never expires.
func testCommandOutcomes(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "s1", "aa01"}, sensorIn{"acme", "s2", "bb01"})
	for i, id := range []string{"late", "reported"} {
		c := fleet.Command{ID: id, TenantID: "acme", SensorID: "s1", Action: fleet.ActionStop, IssuedAt: t0.Add(time.Duration(i) * time.Second), IssuedBy: "ops", ExpiresAt: t0.Add(10 * time.Minute)}
		if _, _, err := s.CreateCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
		is(t, "accept "+id, s.AcceptCommand(ctx, id, uint64(i+1), t0.Add(time.Second)), nil)
	}
	report := func(sensorID string, at time.Time, results ...fleet.CommandResult) {
		t.Helper()
		if _, err := update(s, "acme", sensorID, func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
			cur.Results, cur.AcknowledgedAt = results, at
			return cur, true
		}); err != nil {
			t.Fatal(err)
		}
	}
	command := func(id string) fleet.Command {
		t.Helper()
		page, err := s.SensorCommands(ctx, "s1", fleet.CommandCursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			if c.ID == id {
				return c
			}
		}
		t.Fatalf("command %s not listed", id)
		return fleet.Command{}
	}
	report("s1", t0.Add(2*time.Second), fleet.CommandResult{CommandID: "reported", Outcome: fleet.OutcomeApplied, Detail: "ok"})

	if n, err := s.ExpireCommands(ctx, t0.Add(10*time.Minute)); err != nil || n != 0 {
		t.Fatalf("expire before the expiry = %d, %v; want 0", n, err)
	}
	if n, err := s.ExpireCommands(ctx, t0.Add(11*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire = %d, %v; want 1 (the accepted command never reported on)", n, err)
	}
	if c := command("late"); c.Status != fleet.CommandExpired || c.Outcome != "" || !c.AcknowledgedAt.IsZero() || c.AcceptedAt.IsZero() {
		t.Errorf("accepted, unreported, past its expiry: %+v; want expired, no outcome, accepted time kept", c)
	}
	if c := command("reported"); c.Status != fleet.CommandAccepted || c.Outcome != fleet.OutcomeApplied {
		t.Errorf("reported command after the sweep: %+v; want accepted and applied", c)
	}

	// Another sensor naming it changes nothing.
	report("s2", t0.Add(12*time.Minute), fleet.CommandResult{CommandID: "late", Outcome: fleet.OutcomeApplied})
	if c := command("late"); c.Status != fleet.CommandExpired || c.Outcome != "" {
		t.Errorf("after another sensor's report: %+v; want still expired", c)
	}
	// Its own sensor's late report records the real outcome.
	late := t0.Add(13 * time.Minute)
	report("s1", late, fleet.CommandResult{CommandID: "late", Outcome: fleet.OutcomeApplied, Detail: "applied during the outage"})
	c := command("late")
	if c.Status != fleet.CommandAccepted || c.Outcome != fleet.OutcomeApplied || c.OutcomeDetail != "applied during the outage" || !c.AcknowledgedAt.Equal(late) {
		t.Errorf("after the late report: %+v; want accepted and applied at %s", c, late)
	}
	// A repeat (the agent missed the confirmation) changes nothing.
	report("s1", late.Add(time.Minute), fleet.CommandResult{CommandID: "late", Outcome: fleet.OutcomeRefused, Reason: fleet.ReasonExpired})
	if again := command("late"); again.Outcome != fleet.OutcomeApplied || !again.AcknowledgedAt.Equal(late) {
		t.Errorf("after a repeat: %+v; want the first report kept", again)
	}
	if n, err := s.ExpireCommands(ctx, t0.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("expire after the reports = %d, %v; want 0", n, err)
	}
}
