package fleet_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

func TestIssueCommand(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, _ := f.enrolled(t, "acme")
	c, err := issue(f, r.SensorID, fleet.ActionStart, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.pub.Messages()) != 1 {
		t.Fatalf("%d messages published, want 1", len(f.pub.Messages()))
	}
	msg := f.pub.Messages()[0]
	// What goes on the wire is the publisher's (sensorbus tests it).
	now := f.clock.Now()
	type sent struct {
		ID, TenantID, SensorID, IssuedBy string
		Action                           fleet.Action
		IssuedAt, ExpiresAt              time.Time
	}
	want := sent{c.ID, "acme", r.SensorID, "ops@example.com", fleet.ActionStart, now, now.Add(10 * time.Minute)}
	got := sent{msg.ID, msg.TenantID, msg.SensorID, msg.IssuedBy, msg.Action, msg.IssuedAt, msg.ExpiresAt}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published command (-want +got):\n%s", diff)
	}
	if got := f.sensor(t, r.SensorID).LastCommand; got == nil || *got != c {
		t.Errorf("last command %+v, want %+v", got, c)
	}

	if c.Status != fleet.CommandAccepted || c.StreamSeq != 1 {
		t.Errorf("published command %+v, want accepted with sequence 1", c)
	}

	t.Run("a command provably not stored is failed", func(t *testing.T) {
		f.pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrNotPublished))
		defer func() { f.pub.Fail(nil) }()
		c, err := issue(f, r.SensorID, fleet.ActionStop, "ops")
		wantErr(t, err, fleet.ErrMessagingUnavailable)
		last := f.sensor(t, r.SensorID).LastCommand
		if last == nil || last.ID != c.ID || last.FailedAt.IsZero() || last.Status != fleet.CommandFailed {
			t.Errorf("last command %+v, want %s marked failed", last, c.ID)
		}
	})
	t.Run("an unconfirmed publication is pending, never failed", func(t *testing.T) {
		f.pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
		defer func() { f.pub.Fail(nil) }()
		c, err := issue(f, r.SensorID, fleet.ActionStop, "ops")
		if err != nil {
			t.Fatalf("unconfirmed publication: %v, want no error (the status says it)", err)
		}
		last := f.sensor(t, r.SensorID).LastCommand
		if c.Status != fleet.CommandPending || last == nil || last.Status != fleet.CommandPending || !last.FailedAt.IsZero() {
			t.Errorf("command %+v, recorded %+v; want pending", c, last)
		}
	})

	pending := f.redeemed(t, "acme")
	tests := []struct {
		name     string
		sensorID string
		action   fleet.Action
		want     error
	}{
		{"unknown action", r.SensorID, "reboot", fleet.ErrInvalidInput},
		{"unknown sensor", "s-0000000000000000", fleet.ActionStart, fleet.ErrNotFound},
		{"not enrolled", pending.SensorID, fleet.ActionStart, fleet.ErrNotEnrolled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := issue(f, tt.sensorID, tt.action, "ops")
			wantErr(t, err, tt.want)
		})
	}
	f.revoke(t, r.SensorID)
	_, err = issue(f, r.SensorID, fleet.ActionStart, "ops")
	wantErr(t, err, fleet.ErrRevoked)
	if len(f.pub.Messages()) != 1 {
		t.Errorf("%d messages published, want still 1", len(f.pub.Messages()))
	}
}

func status(state fleet.State, at time.Time, commandID string) fleet.StatusReport {
	return fleet.StatusReport{State: state, At: at, CommandID: commandID}
}

func TestHandleStatus(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "other")
	r, cmd := f.commanded(t, fleet.ActionStart)
	t0 := f.clock.Now()

	steps := []struct {
		name           string
		tenant, sensor string
		report         fleet.StatusReport
		wantErr        error
		wantState      fleet.State
		wantSeen       time.Time
	}{
		{name: "running acknowledges the command", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateRunning, t0, cmd.ID), wantState: fleet.StateRunning, wantSeen: t0},
		{name: "older report is stale", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateStopped, t0.Add(-time.Second), ""), wantErr: fleet.ErrStale, wantState: fleet.StateRunning, wantSeen: t0},
		{name: "same time is applied", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateError, t0, ""), wantState: fleet.StateError, wantSeen: t0},
		{name: "newer report", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateStopped, t0.Add(time.Second), ""), wantState: fleet.StateStopped, wantSeen: t0},
		{name: "report from the future", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateRunning, t0.Add(time.Hour), ""), wantErr: fleet.ErrInvalidInput, wantState: fleet.StateStopped, wantSeen: t0},
		{name: "unreportable state", tenant: "acme", sensor: r.SensorID, report: status(fleet.StateRevoked, t0.Add(2*time.Second), ""), wantErr: fleet.ErrInvalidInput, wantState: fleet.StateStopped, wantSeen: t0},
		{name: "other tenant's name", tenant: "other", sensor: r.SensorID, report: status(fleet.StateRunning, t0.Add(3*time.Second), ""), wantErr: fleet.ErrNotFound, wantState: fleet.StateStopped, wantSeen: t0},
		{name: "wildcard as sensor id", tenant: "acme", sensor: "*", report: status(fleet.StateRunning, t0.Add(3*time.Second), ""), wantErr: fleet.ErrInvalidInput, wantState: fleet.StateStopped, wantSeen: t0},
		{name: "empty tenant id", tenant: "", sensor: r.SensorID, report: status(fleet.StateRunning, t0.Add(3*time.Second), ""), wantErr: fleet.ErrInvalidInput, wantState: fleet.StateStopped, wantSeen: t0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := f.svc.HandleStatus(f.ctx, st.tenant, st.sensor, st.report)
			if st.wantErr == nil && err != nil || st.wantErr != nil && !errors.Is(err, st.wantErr) {
				t.Fatalf("HandleStatus error = %v, want %v", err, st.wantErr)
			}
			s := f.sensor(t, r.SensorID)
			if s.State != st.wantState || !s.LastSeenAt.Equal(st.wantSeen) {
				t.Errorf("sensor state %s seen %s; want %s seen %s", s.State, s.LastSeenAt, st.wantState, st.wantSeen)
			}
		})
	}
	last := f.sensor(t, r.SensorID).LastCommand
	if last == nil || !last.AcknowledgedAt.Equal(t0) {
		t.Errorf("last command %+v, want acknowledged at %s", last, t0)
	}
	wantErr(t, f.svc.HandleStatus(f.ctx, "acme", "s-0000000000000000", status(fleet.StateRunning, t0, "")), fleet.ErrNotFound)

	f.revoke(t, r.SensorID)
	wantErr(t, f.svc.HandleStatus(f.ctx, "acme", r.SensorID, status(fleet.StateRunning, t0.Add(time.Minute), "")), fleet.ErrRevoked)
	if s := f.sensor(t, r.SensorID); s.State != fleet.StateRevoked {
		t.Errorf("revoked sensor moved to %s", s.State)
	}
}

func TestStatusDoesNotAcknowledgeAnotherSensorsCommand(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	a, cmd := f.commanded(t, fleet.ActionStop)
	b, _ := f.enrolled(t, "acme")
	if err := f.svc.HandleStatus(f.ctx, "acme", b.SensorID, status(fleet.StateStopped, f.clock.Now(), cmd.ID)); err != nil {
		t.Fatal(err)
	}
	if last := f.sensor(t, a.SensorID).LastCommand; !last.AcknowledgedAt.IsZero() {
		t.Errorf("sensor %s acknowledged sensor %s's command", b.SensorID, a.SensorID)
	}
}

func TestMarkSilentOfflineAndCheckIn(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	quiet, qe := f.enrolled(t, "acme")
	chatty, ce := f.enrolled(t, "acme")
	revoked, re := f.enrolled(t, "acme")
	pending := f.redeemed(t, "acme")
	for _, id := range []string{quiet.SensorID, chatty.SensorID, revoked.SensorID} {
		if err := f.svc.HandleStatus(f.ctx, "acme", id, status(fleet.StateRunning, f.clock.Now(), "")); err != nil {
			t.Fatal(err)
		}
	}
	f.revoke(t, revoked.SensorID)
	f.clock.Advance(90 * time.Second)
	if err := f.svc.CheckIn(f.ctx, "acme", chatty.SensorID, ce.Certificate.Serial, fleet.Contact{}); err != nil {
		t.Fatal(err)
	}
	n, err := f.svc.MarkSilentOffline(f.ctx, time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("MarkSilentOffline = %d, %v; want 1", n, err)
	}
	want := map[string]fleet.State{
		quiet.SensorID: fleet.StateOffline, chatty.SensorID: fleet.StateRunning,
		revoked.SensorID: fleet.StateRevoked, pending.SensorID: fleet.StatePending,
	}
	got := map[string]fleet.State{}
	all, err := f.svc.Sensors(f.ctx, fleet.SensorFilter{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		got[s.ID] = s.State
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}

	// A sign of life wakes an offline sensor; revoked ones stay revoked.
	// It also records where the sensor called from and its agent version;
	// an empty or unprintable value keeps what is known.
	if err := f.svc.CheckIn(f.ctx, "acme", quiet.SensorID, qe.Certificate.Serial, fleet.Contact{Address: "192.0.2.7", AgentVersion: "2.0.1"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, quiet.SensorID); s.State != fleet.StateOnline || !s.LastSeenAt.Equal(f.clock.Now()) ||
		s.Address != "192.0.2.7" || s.AgentVersion != "2.0.1" {
		t.Errorf("after a health check: %s seen %s from %q version %q", s.State, s.LastSeenAt, s.Address, s.AgentVersion)
	}
	if err := f.svc.CheckIn(f.ctx, "acme", quiet.SensorID, qe.Certificate.Serial, fleet.Contact{AgentVersion: "bad\x01version"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, quiet.SensorID); s.Address != "192.0.2.7" || s.AgentVersion != "2.0.1" {
		t.Errorf("after an empty contact: from %q version %q, want the earlier ones kept", s.Address, s.AgentVersion)
	}
	// A status report's agent version is recorded too.
	f.clock.Advance(time.Second)
	if err := f.svc.HandleStatus(f.ctx, "acme", quiet.SensorID, fleet.StatusReport{State: fleet.StateRunning, At: f.clock.Now(), AgentVersion: "2.1.0"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, quiet.SensorID); s.AgentVersion != "2.1.0" || s.Address != "192.0.2.7" {
		t.Errorf("after a status report: version %q from %q, want 2.1.0 from 192.0.2.7", s.AgentVersion, s.Address)
	}
	wantErr(t, f.svc.CheckIn(f.ctx, "acme", revoked.SensorID, re.Certificate.Serial, fleet.Contact{}), fleet.ErrRevoked)
	wantErr(t, f.svc.CheckIn(f.ctx, "other", quiet.SensorID, qe.Certificate.Serial, fleet.Contact{}), fleet.ErrNotFound)

	offline, err := f.svc.Sensors(f.ctx, fleet.SensorFilter{State: fleet.StateRevoked})
	if err != nil || len(offline) != 1 || offline[0].ID != revoked.SensorID {
		t.Errorf("Sensors(state=revoked) = %v, %v", offline, err)
	}
	_, err = f.svc.Sensors(f.ctx, fleet.SensorFilter{State: "sleeping"})
	wantErr(t, err, fleet.ErrInvalidInput)
}

func TestRevokeSensor(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, e := f.enrolled(t, "acme")
	f.prov.RevokeErr = fmt.Errorf("provisioner: %w", fleet.ErrProvisionerUnavailable)

	err := f.svc.RevokeSensor(f.ctx, r.SensorID, "ops@example.com")
	wantErr(t, err, fleet.ErrProvisionerUnavailable)
	s := f.sensor(t, r.SensorID)
	if s.State != fleet.StateRevoked || s.Certificate.Serial != "" {
		t.Errorf("after revoke with provisioner down: %+v; want revoked without active certificate", s)
	}
	wantErr(t, f.svc.AuthorizeSensor(f.ctx, "acme", r.SensorID, e.Certificate.Serial), fleet.ErrRevoked)
	if n := f.store.ActiveCertificateCount(r.SensorID); n != 0 {
		t.Errorf("%d active certificates after revoke", n)
	}
	if n := len(f.liveTokenHash(t, r.SensorID, fleet.TokenSensor)) + len(f.liveTokenHash(t, r.SensorID, fleet.TokenEnrollment)); n != 0 {
		t.Errorf("%d live tokens after revoke", n)
	}

	// The repeat retries the NATS part.
	f.prov.RevokeErr = nil
	if err := f.svc.RevokeSensor(f.ctx, r.SensorID, "ops@example.com"); err != nil {
		t.Fatalf("repeat RevokeSensor: %v", err)
	}
	if diff := cmp.Diff([][2]string{{"A-acme", "U-" + r.SensorID}}, f.prov.Revocations()); diff != "" {
		t.Errorf("NATS revocations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"acme/" + r.SensorID, "acme/" + r.SensorID}, f.term.Calls()); diff != "" {
		t.Errorf("terminated sessions (-want +got):\n%s", diff)
	}
	wantErr(t, f.svc.RevokeSensor(f.ctx, "s-0000000000000000", "ops"), fleet.ErrNotFound)
}

func FuzzHandleStatus(f *testing.F) {
	fx := newFixture(f)
	fx.provisionedTenant(f, "acme")
	r, _ := fx.enrolled(f, "acme")
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC).Unix()
	f.Add("acme", r.SensorID, "running", at, "", "")
	f.Add("acme", r.SensorID, "stopped", at-3600, "x", "1")
	f.Add("acme", r.SensorID, "revoked", at, "", "")
	f.Add("acme", "s-0000000000000000", "online", at, "", "")
	f.Add("", "x.y", "", int64(0), "", "")
	f.Fuzz(func(t *testing.T, tenantID, sensorID, state string, at int64, commandID, version string) {
		report := fleet.StatusReport{State: fleet.State(state), At: time.Unix(at, 0), CommandID: commandID, AgentVersion: version}
		err := fx.svc.HandleStatus(fx.ctx, tenantID, sensorID, report)
		known := []error{fleet.ErrInvalidInput, fleet.ErrStale, fleet.ErrNotFound, fleet.ErrRevoked}
		if err != nil {
			for _, k := range known {
				if errors.Is(err, k) {
					return
				}
			}
			t.Fatalf("HandleStatus(%q, %q, %+v): unexpected error %v", tenantID, sensorID, report, err)
		}
		if s := fx.sensor(t, r.SensorID); !fleet.Reportable(s.State) {
			t.Fatalf("accepted report left the sensor in state %s", s.State)
		}
	})
}

func TestHandleStatusBatch(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	a, cmdA := f.commanded(t, fleet.ActionStart)
	b, cmdB := f.commanded(t, fleet.ActionStop)
	t0 := f.clock.Now()
	msg := func(id string, r fleet.StatusReport) fleet.StatusUpdate {
		return fleet.StatusUpdate{Sensor: fleet.SensorRef{TenantID: "acme", SensorID: id}, Report: r}
	}
	msgs := []fleet.StatusUpdate{
		// a's reports arrive out of order: they are applied by "at".
		msg(a.SensorID, status(fleet.StateStopped, t0.Add(2*time.Second), "")),
		msg(a.SensorID, status(fleet.StateRunning, t0, cmdA.ID)),
		msg(b.SensorID, status(fleet.StateStopped, t0, cmdB.ID)),
		msg("s-0000000000000000", status(fleet.StateRunning, t0, "")),
		msg(b.SensorID, fleet.StatusReport{State: fleet.StateRunning}),
		msg("x.y", status(fleet.StateRunning, t0, "")),
	}
	errs := f.svc.HandleStatusBatch(f.ctx, msgs)
	want := []error{nil, nil, nil, fleet.ErrNotFound, fleet.ErrInvalidInput, fleet.ErrInvalidInput}
	for i := range want {
		if want[i] == nil && errs[i] != nil || want[i] != nil && !errors.Is(errs[i], want[i]) {
			t.Errorf("message %d: error %v, want %v", i, errs[i], want[i])
		}
	}
	sa, sb := f.sensor(t, a.SensorID), f.sensor(t, b.SensorID)
	if sa.State != fleet.StateStopped || sb.State != fleet.StateStopped {
		t.Errorf("states after the batch: a=%s b=%s, want stopped and stopped", sa.State, sb.State)
	}
	if sa.LastCommand.AcknowledgedAt.IsZero() || sb.LastCommand.AcknowledgedAt.IsZero() {
		t.Errorf("commands not acknowledged by the batch: a=%+v b=%+v", sa.LastCommand, sb.LastCommand)
	}
	// A report older than what the batch applied is stale afterwards.
	wantErr(t, f.svc.HandleStatus(f.ctx, "acme", a.SensorID, status(fleet.StateRunning, t0.Add(time.Second), "")), fleet.ErrStale)
}

// CheckIns authorises and records many health checks at once: each gets
// its own answer (AuthorizeSensor's refusals), several of one certificate
// apply in order, refusals touch nothing.
func TestCheckInsBatch(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t, "other")
	a, ae := f.enrolled(t, "acme")
	b, be := f.enrolled(t, "acme")
	revoked, re := f.enrolled(t, "acme")
	renewed, rne := f.enrolled(t, "acme")
	f.clock.Advance(fleet.DefaultMinRenewInterval + time.Second)
	for _, id := range []string{a.SensorID, b.SensorID, renewed.SensorID} {
		if err := f.svc.HandleStatus(f.ctx, "acme", id, status(fleet.StateRunning, f.clock.Now(), "")); err != nil {
			t.Fatal(err)
		}
	}
	f.revoke(t, revoked.SensorID)
	csr := []byte("csr")
	rn, err := f.svc.Renew(f.ctx, renewed.SensorID, rne.SensorToken, csr, f.proof(rne.Certificate.CertificatePEM, renewed.SensorID, csr))
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second)
	if n, err := f.svc.MarkSilentOffline(f.ctx, time.Minute); err != nil || n != 3 {
		t.Fatalf("MarkSilentOffline = %d, %v; want 3", n, err)
	}
	f.clock.Advance(time.Second)
	ref := func(tenant, id string) fleet.SensorRef { return fleet.SensorRef{TenantID: tenant, SensorID: id} }
	errs := f.svc.CheckIns(f.ctx, []fleet.CheckIn{
		{Ref: ref("acme", a.SensorID), Serial: ae.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.1", AgentVersion: "1.0.0"}},
		{Ref: ref("acme", revoked.SensorID), Serial: re.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.9"}},
		{Ref: ref("other", b.SensorID), Serial: be.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.9"}},
		{Ref: ref("acme", "bad id*"), Serial: ae.Certificate.Serial},
		{Ref: ref("acme", a.SensorID), Serial: ae.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.2"}},
		// b presenting a's certificate: the URI SAN and the serial disagree.
		{Ref: ref("acme", b.SensorID), Serial: ae.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.9"}},
		// The renewed sensor's old certificate is refused, its new one
		// in the same batch recorded.
		{Ref: ref("acme", renewed.SensorID), Serial: rne.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.9"}},
		{Ref: ref("acme", renewed.SensorID), Serial: rn.Certificate.Serial, Contact: fleet.Contact{Address: "192.0.2.3"}},
	})
	want := []error{nil, fleet.ErrRevoked, fleet.ErrNotFound, fleet.ErrNotFound, nil, fleet.ErrInvalidToken, fleet.ErrInvalidToken, nil}
	for i, err := range errs {
		if !errors.Is(err, want[i]) || (want[i] == nil) != (err == nil) {
			t.Errorf("check-in %d: %v, want %v", i, err, want[i])
		}
	}
	if s := f.sensor(t, a.SensorID); s.State != fleet.StateOnline || !s.LastSeenAt.Equal(f.clock.Now()) || s.Address != "192.0.2.2" || s.AgentVersion != "1.0.0" {
		t.Errorf("sensor a: %s seen %s from %q version %q; want online, now, the later address, the version kept", s.State, s.LastSeenAt, s.Address, s.AgentVersion)
	}
	if s := f.sensor(t, b.SensorID); s.State != fleet.StateOffline || s.Address == "192.0.2.9" {
		t.Errorf("sensor b, checked in under another tenant or certificate only: %s from %q, want offline, nothing recorded", s.State, s.Address)
	}
	if s := f.sensor(t, revoked.SensorID); s.State != fleet.StateRevoked || s.Address == "192.0.2.9" {
		t.Errorf("revoked sensor: %s from %q, want revoked and nothing recorded", s.State, s.Address)
	}
	if s := f.sensor(t, renewed.SensorID); s.State != fleet.StateOnline || s.Address != "192.0.2.3" {
		t.Errorf("renewed sensor: %s from %q, want online from its new certificate's address", s.State, s.Address)
	}

	// Revoked between two checks (through any replica: the store is the
	// one place asked): the next check is refused.
	f.clock.Advance(time.Second)
	if err := f.svc.CheckIn(f.ctx, "acme", a.SensorID, ae.Certificate.Serial, fleet.Contact{}); err != nil {
		t.Fatalf("control: a's next check: %v", err)
	}
	f.revoke(t, a.SensorID)
	wantErr(t, f.svc.CheckIn(f.ctx, "acme", a.SensorID, ae.Certificate.Serial, fleet.Contact{}), fleet.ErrRevoked)
	// Expired certificate: refused even though active.
	f.clock.Advance(fleet.DefaultSensorCertTTL)
	wantErr(t, f.svc.CheckIn(f.ctx, "acme", renewed.SensorID, rn.Certificate.Serial, fleet.Contact{}), fleet.ErrInvalidToken)
}

// A health check right after the sensor's status report (within
// CheckInRefresh) that changes nothing is authorised without a write; one
// that changes the address, or comes later, is written.
func TestCheckInSkipsARedundantWrite(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	a, ae := f.enrolled(t, "acme")
	serial := ae.Certificate.Serial
	if err := f.svc.CheckIn(f.ctx, "acme", a.SensorID, serial, fleet.Contact{Address: "192.0.2.1", AgentVersion: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	first := f.sensor(t, a.SensorID).LastSeenAt
	f.clock.Advance(fleet.CheckInRefresh - time.Second)
	if err := f.svc.CheckIn(f.ctx, "acme", a.SensorID, serial, fleet.Contact{Address: "192.0.2.1", AgentVersion: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, a.SensorID); !s.LastSeenAt.Equal(first) {
		t.Errorf("a check %s after the last changing nothing moved lastSeenAt %s → %s", fleet.CheckInRefresh-time.Second, first, s.LastSeenAt)
	}
	if err := f.svc.CheckIn(f.ctx, "acme", a.SensorID, serial, fleet.Contact{Address: "192.0.2.2"}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, a.SensorID); s.Address != "192.0.2.2" || !s.LastSeenAt.Equal(f.clock.Now()) {
		t.Errorf("a check from a new address: from %q seen %s, want 192.0.2.2 now", s.Address, s.LastSeenAt)
	}
	f.clock.Advance(fleet.CheckInRefresh + time.Second)
	if err := f.svc.CheckIn(f.ctx, "acme", a.SensorID, serial, fleet.Contact{}); err != nil {
		t.Fatal(err)
	}
	if s := f.sensor(t, a.SensorID); !s.LastSeenAt.Equal(f.clock.Now()) {
		t.Errorf("a check %s after the last: seen %s, want now", fleet.CheckInRefresh+time.Second, s.LastSeenAt)
	}
	// Still authorised every time: a revocation refuses the very next.
	f.revoke(t, a.SensorID)
	wantErr(t, f.svc.CheckIn(f.ctx, "acme", a.SensorID, serial, fleet.Contact{}), fleet.ErrRevoked)
}

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
	f := acmeFixture(t)
	a, cmdA := f.commanded(t, fleet.ActionStart)
	b, cmdB := f.commanded(t, fleet.ActionStop)
	gone, _ := f.enrolled(t, "acme")
	f.revoke(t, gone.SensorID)
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
