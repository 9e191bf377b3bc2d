package fleettest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// testLabels: labels declared at enrolment, edited under the row lock,
// matched by the listing, batch targets and counts (all given labels).
func testLabels(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "beta"})
	pending(t, s, "acme", "s1")
	if err := s.CompleteEnrollment(ctx, fleet.EnrollmentRecord{
		SensorID: "s1", EnrollmentTokenHash: hash("enrol s1"), Certificate: certificate("e1"),
		SensorTokenHash: hash("sensor s1"), State: fleet.StateOffline, At: t0.Add(time.Minute),
		Labels: map[string]string{"site": "ams", "role": "edge"},
	}); err != nil {
		t.Fatal(err)
	}
	enrolled(t, s, "acme", "s2", "e2") // no labels declared
	enrolled(t, s, "beta", "b1", "e3")
	sn, err := s.Sensor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"site": "ams", "role": "edge"}, sn.Labels); diff != "" {
		t.Errorf("labels declared at enrolment (-want +got):\n%s", diff)
	}
	if sn2, _ := s.Sensor(ctx, "s2"); len(sn2.Labels) != 0 {
		t.Errorf("s2 has labels %v, want none", sn2.Labels)
	}

	// An edit that fails writes nothing; one that succeeds is read back.
	boom := errors.New("refused")
	if _, err := s.EditSensor(ctx, "s1", func(fleet.Sensor) (fleet.SensorEdit, error) {
		return fleet.SensorEdit{Name: "x", Labels: map[string]string{}}, boom
	}); !errors.Is(err, boom) {
		t.Errorf("refused edit: %v, want the edit's error", err)
	}
	if after, _ := s.Sensor(ctx, "s1"); after.Name != sn.Name || len(after.Labels) != 2 {
		t.Errorf("a refused edit changed the sensor: %+v", after)
	}
	got, err := s.EditSensor(ctx, "s2", func(cur fleet.Sensor) (fleet.SensorEdit, error) {
		if cur.ID != "s2" {
			t.Errorf("edit saw %s", cur.ID)
		}
		return fleet.SensorEdit{Name: "renamed", Labels: map[string]string{"site": "ams", "role": "core"}}, nil
	})
	if err != nil || got.Name != "renamed" || got.Labels["role"] != "core" {
		t.Fatalf("edit: %+v, %v", got, err)
	}
	if again, _ := s.Sensor(ctx, "s2"); again.Name != "renamed" || !cmp.Equal(again.Labels, got.Labels) {
		t.Errorf("read back %+v", again)
	}
	_, err = s.EditSensor(ctx, "ghost", func(fleet.Sensor) (fleet.SensorEdit, error) { return fleet.SensorEdit{}, nil })
	is(t, "edit of an unknown sensor", err, fleet.ErrNotFound)
	if _, err := s.EditSensor(ctx, "b1", func(fleet.Sensor) (fleet.SensorEdit, error) {
		return fleet.SensorEdit{Name: "b1", Labels: map[string]string{"site": "ams", "role": "edge"}}, nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		m    fleet.SensorMatch
		want []string
	}{
		{"one label", fleet.SensorMatch{Labels: map[string]string{"site": "ams"}}, []string{"b1", "s1", "s2"}},
		{"every label must match", fleet.SensorMatch{Labels: map[string]string{"site": "ams", "role": "edge"}}, []string{"b1", "s1"}},
		{"within a tenant", fleet.SensorMatch{Tenants: []string{"acme"}, Labels: map[string]string{"role": "edge"}}, []string{"s1"}},
		{"a value is matched exactly", fleet.SensorMatch{Labels: map[string]string{"site": "AMS"}}, []string{}},
		{"an empty value is a value", fleet.SensorMatch{Labels: map[string]string{"site": ""}}, []string{}},
		{"with a search", fleet.SensorMatch{Q: "renamed", Labels: map[string]string{"site": "ams"}}, []string{"s2"}},
	} {
		page, err := s.ListSensors(ctx, fleet.SensorQuery{SensorMatch: tc.m, Sort: fleet.SortName, Limit: 10})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, sortedIDs(page, sensorID)); diff != "" {
			t.Errorf("list %s (-want +got):\n%s", tc.name, diff)
		}
		targets, err := s.MatchSensors(ctx, tc.m, 10)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, sortedIDs(targets, targetID)); diff != "" {
			t.Errorf("batch targets %s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// testDecommission: revoked and retired in one step, kept on record, out
// of lists, targets and counts unless asked for; a second call changes
// nothing and says so.
func testDecommission(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "s1", "d1"}, sensorIn{"acme", "s2", "d2"})
	pending(t, s, "acme", "p1")
	cmd := fleet.Command{ID: "c1", TenantID: "acme", SensorID: "s1", Action: fleet.ActionStop, IssuedAt: t0, IssuedBy: "ops",
		ExpiresAt: t0.Add(10 * time.Minute), Status: fleet.CommandPending, FirstSentAt: t0}
	if _, _, err := s.CreateCommand(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Hour)
	sn, already, err := s.DecommissionSensor(ctx, "s1", "ops@example.com", at)
	if err != nil || already {
		t.Fatalf("decommission: %v, already %v", err, already)
	}
	if sn.State != fleet.StateRevoked || !sn.DecommissionedAt.Equal(at) || sn.DecommissionedBy != "ops@example.com" || sn.Certificate.Serial != "" {
		t.Errorf("decommissioned sensor %+v", sn)
	}
	if _, err := s.LiveToken(ctx, "s1", fleet.TokenSensor); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("the decommissioned sensor's token: %v, want none live", err)
	}
	if cmds, err := s.SensorCommands(ctx, "s1", fleet.CommandCursor{}, 10); err != nil || len(cmds) != 1 || cmds[0].Status != fleet.CommandExpired {
		t.Errorf("its commands: %+v, %v; want c1, expired, kept", cmds, err)
	}
	again, already, err := s.DecommissionSensor(ctx, "s1", "someone-else", at.Add(time.Hour))
	if err != nil || !already || !again.DecommissionedAt.Equal(at) || again.DecommissionedBy != "ops@example.com" {
		t.Errorf("second decommission: %+v, already %v, %v; want the first kept", again, already, err)
	}
	if _, _, err := s.DecommissionSensor(ctx, "p1", "ops", at); err != nil {
		t.Errorf("decommission a pending sensor: %v", err)
	}
	_, _, err = s.DecommissionSensor(ctx, "ghost", "ops", at)
	is(t, "decommission of an unknown sensor", err, fleet.ErrNotFound)

	list := func(m fleet.SensorMatch) []string {
		page, err := s.ListSensors(ctx, fleet.SensorQuery{SensorMatch: m, Sort: fleet.SortName, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return sortedIDs(page, sensorID)
	}
	if diff := cmp.Diff([]string{"s2"}, list(fleet.SensorMatch{})); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p1", "s1", "s2"}, list(fleet.SensorMatch{IncludeDecommissioned: true})); diff != "" {
		t.Errorf("list with decommissioned (-want +got):\n%s", diff)
	}
	if targets, _ := s.MatchSensors(ctx, fleet.SensorMatch{}, 10); len(targets) != 1 || targets[0].ID != "s2" {
		t.Errorf("batch targets %+v, want s2 only", targets)
	}
	counts, err := s.CountSensors(ctx, nil)
	if err != nil || counts[fleet.StateRevoked] != 0 || counts[fleet.StateOffline] != 1 {
		t.Errorf("counts %v, %v; want the decommissioned left out", counts, err)
	}
	if kept, err := s.Sensor(ctx, "s1"); err != nil || kept.DecommissionedAt.IsZero() {
		t.Errorf("the decommissioned sensor is still on record: %+v, %v", kept, err)
	}
}

// testDeleteTenant: refused while a sensor is not decommissioned (nothing
// changes), then hidden, its unused codes revoked, its id never reused.
func testDeleteTenant(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "beta"}, sensorIn{"acme", "s1", "a7"})
	pending(t, s, "acme", "p1")
	code(t, s, "acme", "unused", "")
	err := s.DeleteTenant(ctx, "acme", "ops", t0)
	var has *fleet.TenantHasSensorsError
	if !errors.As(err, &has) || has.Live != 2 || !errors.Is(err, fleet.ErrTenantHasSensors) {
		t.Fatalf("delete with live sensors: %v, want 2 live", err)
	}
	if _, err := s.Tenant(ctx, "acme"); err != nil {
		t.Fatalf("a refused deletion hid the tenant: %v", err)
	}
	for _, id := range []string{"s1", "p1"} {
		if _, _, err := s.DecommissionSensor(ctx, id, "ops", t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTenant(ctx, "acme", "ops", t0.Add(time.Minute)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.Tenant(ctx, "acme")
	is(t, "a deleted tenant", err, fleet.ErrNotFound)
	all, _ := s.ListTenants(ctx)
	if len(all) != 1 || all[0].ID != "beta" {
		t.Errorf("tenants %+v, want beta only", all)
	}
	pend, _ := s.PendingTenants(ctx)
	for _, p := range pend {
		if p.ID == "acme" {
			t.Error("the deleted tenant is still reconciled")
		}
	}
	codes, err := s.ClaimCodes(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if c.UsedAt.IsZero() && c.RevokedAt.IsZero() {
			t.Errorf("claim code %s still usable", c.ID)
		}
	}
	_, _, err = s.CreateTenant(ctx, fleet.Tenant{ID: "acme", Name: "acme", NATSStatus: fleet.NATSPending, CreatedAt: t0})
	is(t, "reuse a deleted tenant's id", err, fleet.ErrConflict)
	// A claim code issued while the tenant was being deleted (the service
	// read it live a moment before) must not land in it: it would enrol a
	// live sensor into a deleted tenant that DeleteTenant never counted.
	late := fleet.ClaimCode{ID: "late", TenantID: "acme", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), CreatedBy: "ops"}
	is(t, "a claim code for a deleted tenant", s.CreateClaimCode(ctx, late, hash("code late")), fleet.ErrNotFound)
	is(t, "delete twice", s.DeleteTenant(ctx, "acme", "ops", t0), fleet.ErrNotFound)
	is(t, "delete an unknown tenant", s.DeleteTenant(ctx, "ghost", "ops", t0), fleet.ErrNotFound)
	if kept, err := s.Sensor(ctx, "s1"); err != nil || kept.TenantID != "acme" {
		t.Errorf("the deleted tenant's sensor is kept on record: %+v, %v", kept, err)
	}
}
