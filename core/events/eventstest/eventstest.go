// Package eventstest is the contract suite for events.Store. Every
// implementation (PostgreSQL, in-memory) runs the same Run, so they stay
// interchangeable: an event is stored once by tenant, sensor, id and time
// however often it is written, a write is all or nothing, what the store
// cannot hold is refused as ErrInvalidEvent, and events received at or
// after their sensor's revocation are never stored.
package eventstest

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/events"
)

// Harness is a store under test and the way to revoke a sensor in the
// world it reads revocations from.
type Harness struct {
	Store Store
	// Revoke records that tenantID's sensor sensorID was revoked at at.
	Revoke func(t *testing.T, tenantID, sensorID string, at time.Time)
}

// Store is what the suite exercises: the store and its retention.
type Store interface {
	events.Store
	events.Pruner
}

// Run runs the suite; newHarness returns a fresh, empty store per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	contracttest.Run(t, newHarness, contracttest.Cases[Harness]{
		{"WriteOnce", testWriteOnce},
		{"SameIDOtherTenantOrTimeIsAnotherEvent", testIdentity},
		{"RefusesWhatItCannotHold", testRefuses},
		{"EventsAfterRevocationAreNotStored", testRevocation},
		{"DropDays", testDropDays},
	})
}

// Day is the day the suite's events happen, just before midnight so a
// millisecond later is another day.
var Day = time.Date(2026, 11, 20, 23, 59, 59, 123456000, time.UTC)

// Alert is a complete alert event of tenant's sensor s1 at at.
func Alert(tenant, id string, at time.Time) events.Event {
	return events.Event{
		TenantID: tenant, SensorID: "s1", ID: id, Time: at, ReceivedAt: at.Add(time.Second), Kind: "alert",
		SrcIP: netip.MustParseAddr("203.0.113.7"), SrcPort: 51000, DestIP: netip.MustParseAddr("2001:db8::1"), DestPort: 443, Protocol: "TCP",
		Alert:   &events.Alert{SignatureID: 2030358, Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain", Severity: 1},
		CVEs:    []string{"CVE-2021-44228"},
		RawJSON: []byte(`{"event_type":"alert","alert":{"signature_id":2030358}}`),
	}
}

func write(t *testing.T, s events.Store, evs ...events.Event) events.WriteResult {
	t.Helper()
	res, err := s.Write(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func testWriteOnce(t *testing.T, h Harness) {
	if res := write(t, h.Store); res != (events.WriteResult{}) {
		t.Errorf("empty Write = %+v", res)
	}
	a, b, c := Alert("acme", "a", Day), Alert("acme", "b", Day), Alert("acme", "c", Day)
	if res := write(t, h.Store, a, b); res.Inserted != 2 {
		t.Errorf("first Write = %+v, want 2 inserted", res)
	}
	// A redelivery with a new event: only the new one is stored.
	resent := a
	resent.ReceivedAt = a.ReceivedAt.Add(time.Minute) // received again later: the same event
	if res := write(t, h.Store, resent, b, c); res != (events.WriteResult{Inserted: 1}) {
		t.Errorf("redelivery Write = %+v, want 1 inserted", res)
	}
	// The same event twice in one batch is stored once.
	d := Alert("acme", "d", Day)
	if res := write(t, h.Store, d, d); res.Inserted != 1 {
		t.Errorf("Write of a repeated event = %+v, want 1 inserted", res)
	}
}

func testIdentity(t *testing.T, h Harness) {
	res := write(t, h.Store, Alert("acme", "e", Day), Alert("globex", "e", Day), Alert("acme", "e", Day.Add(time.Millisecond)))
	if res.Inserted != 3 {
		t.Fatalf("Write = %+v, want 3 inserted", res)
	}
	other := Alert("acme", "e", Day)
	other.SensorID = "s2"
	if res := write(t, h.Store, other); res.Inserted != 1 {
		t.Errorf("same id of another sensor = %+v, want inserted", res)
	}
}

func testRefuses(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		change func(*events.Event)
	}{
		{"NUL byte in text", func(e *events.Event) { e.Kind = "al\x00ert" }},
		{"raw not JSON", func(e *events.Event) { e.RawJSON = []byte("{") }},
		{"raw with an escaped NUL", func(e *events.Event) { e.RawJSON = []byte(`{"a":"\u0000"}`) }},
	}
	for _, tt := range tests {
		bad := Alert("acme", "bad", Day)
		tt.change(&bad)
		if _, err := h.Store.Write(context.Background(), []events.Event{Alert("acme", "ok", Day), bad}); !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("%s: Write = %v, want ErrInvalidEvent", tt.name, err)
		}
	}
	// Nothing of the refused batches was kept.
	if res := write(t, h.Store, Alert("acme", "ok", Day)); res.Inserted != 1 {
		t.Errorf("the good event of a refused batch was kept: %+v", res)
	}
}

func testRevocation(t *testing.T, h Harness) {
	revokedAt := Day.Add(time.Minute)
	h.Revoke(t, "acme", "s1", revokedAt)
	at := func(tenant, sensor, id string, received time.Time) events.Event {
		ev := Alert(tenant, id, Day)
		ev.SensorID, ev.ReceivedAt = sensor, received
		return ev
	}
	res := write(t, h.Store,
		at("acme", "s1", "before", revokedAt.Add(-time.Microsecond)),
		at("acme", "s1", "at", revokedAt),
		at("acme", "s1", "after", revokedAt.Add(time.Second)),
		at("acme", "s2", "other-sensor", revokedAt.Add(time.Second)),
		at("globex", "s1", "same-id-other-tenant", revokedAt.Add(time.Second)),
	)
	if res != (events.WriteResult{Inserted: 3, Revoked: 2}) {
		t.Errorf("Write = %+v, want 3 inserted (before, other sensor, other tenant) and 2 skipped as revoked", res)
	}
	// The skipped ones stay skipped; the stored one is a duplicate.
	res = write(t, h.Store, at("acme", "s1", "before", revokedAt.Add(-time.Microsecond)), at("acme", "s1", "after", revokedAt.Add(time.Second)))
	if res != (events.WriteResult{Revoked: 1}) {
		t.Errorf("rewrite = %+v, want the revoked one skipped again and no insert", res)
	}
}

// testDropDays drives the table past its bound: the days that ended at or
// before the cut-off go whole (writing their events again stores them
// anew), later days keep every event (writing them again is a no-op), and
// a second pass drops nothing.
func testDropDays(t *testing.T, h Harness) {
	ctx := context.Background()
	cut := Day.Add(30 * 24 * time.Hour).Truncate(24 * time.Hour) // a midnight
	old := []events.Event{
		Alert("acme", "e-old-1", cut.Add(-71*time.Hour)),
		Alert("acme", "e-old-2", cut.Add(-47*time.Hour)),
		Alert("beta", "e-last-of-old-day", cut.Add(-time.Microsecond)), // the day ending at the cut-off
	}
	kept := []events.Event{
		Alert("acme", "e-first-of-cut-day", cut), // its day ends a day after the cut-off
		Alert("acme", "e-new", cut.Add(30*time.Hour)),
	}
	if res := write(t, h.Store, append(append([]events.Event{}, old...), kept...)...); res.Inserted != 5 {
		t.Fatalf("stored %d of 5", res.Inserted)
	}
	if n, err := h.Store.DropDaysBefore(ctx, cut); err != nil || n != 3 {
		t.Fatalf("drop = %d, %v; want the 3 days before the cut-off", n, err)
	}
	if n, err := h.Store.DropDaysBefore(ctx, cut); err != nil || n != 0 {
		t.Errorf("second drop = %d, %v; want none", n, err)
	}
	if res := write(t, h.Store, kept...); res.Inserted != 0 {
		t.Errorf("events of kept days stored again: %d new, want 0 (they stayed)", res.Inserted)
	}
	if res := write(t, h.Store, old...); res.Inserted != 3 {
		t.Errorf("events of dropped days stored again: %d new, want 3 (they were gone)", res.Inserted)
	}
	if n, err := h.Store.DropDaysBefore(ctx, cut.Add(-time.Hour)); err != nil || n != 2 {
		t.Errorf("drop before an hour to midnight = %d, %v; want the 2 days that ended by then", n, err)
	}
}
