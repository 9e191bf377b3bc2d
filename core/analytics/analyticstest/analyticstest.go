// Package analyticstest is the contract suite for analytics.EventStore,
// read over events written through events.Store. Every implementation
// (PostgreSQL, in-memory) runs the same Run, so they stay interchangeable:
// every aggregate counts one tenant's events in [from, to) and never
// another's, series buckets and orderings agree, and an indicator's history
// covers the tenant's whole store.
package analyticstest

import (
	"context"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/events"
)

// Run runs the suite; newStores returns, per subtest, an empty store to
// write events to and the analytics store reading the same events.
func Run(t *testing.T, newStores func(t *testing.T) (events.Store, analytics.EventStore)) {
	fresh := func(t *testing.T) stores {
		w, r := newStores(t)
		return stores{w, r}
	}
	contracttest.Run(t, fresh, contracttest.Cases[stores]{
		{"Overview", both(testOverview)},
		{"OverviewOfOneSensorWithALimit", both(testOverviewSensorLimit)},
		{"OverviewOfATenantWithoutEvents", both(testOverviewEmpty)},
		{"History", both(testHistory)},
	})
}

// stores are a case's two views of one set of events: the store written
// to and the analytics store reading it.
type stores struct {
	w events.Store
	r analytics.EventStore
}

// both makes a case of check, which takes the two stores apart.
func both(check func(t *testing.T, w events.Store, r analytics.EventStore)) func(*testing.T, stores) {
	return func(t *testing.T, s stores) { check(t, s.w, s.r) }
}

// Base is the start of the hour the seeded events fall in.
var Base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// E describes one seeded event; Kind defaults to "alert".
type E struct {
	Tenant, Sensor string
	Minute         int
	Kind           string
	Src, Dest      string
	SignatureID    int64
	Signature      string
	Category       string
	Severity       int32
	CVEs           []string
}

// Seed writes evs through w, numbering their ids.
func Seed(t *testing.T, w events.Store, evs ...E) {
	t.Helper()
	out := make([]events.Event, len(evs))
	for i, e := range evs {
		at := Base.Add(time.Duration(e.Minute) * time.Minute)
		ev := events.Event{
			TenantID: e.Tenant, SensorID: e.Sensor, ID: "e" + string(rune('A'+i/26)) + string(rune('a'+i%26)), Time: at, ReceivedAt: at.Add(time.Second),
			Kind: e.Kind, CVEs: e.CVEs,
		}
		if ev.Kind == "" {
			ev.Kind = "alert"
		}
		if e.Src != "" {
			ev.SrcIP = netip.MustParseAddr(e.Src)
		}
		if e.Dest != "" {
			ev.DestIP = netip.MustParseAddr(e.Dest)
		}
		if e.SignatureID != 0 || e.Signature != "" {
			ev.Alert = &events.Alert{SignatureID: e.SignatureID, Signature: e.Signature, Category: e.Category, Severity: e.Severity}
		}
		out[i] = ev
	}
	if res, err := w.Write(context.Background(), out); err != nil || res.Inserted != len(out) {
		t.Fatalf("seed: %+v, %v; want %d inserted", res, err, len(out))
	}
}

// Fleet gives tenant acme seven events in one hour (and two outside it)
// and tenant other events with the same addresses, signatures and CVEs,
// which must never be counted for acme.
func Fleet(t *testing.T, w events.Store) {
	t.Helper()
	evs := []E{
		{Tenant: "acme", Sensor: "s1", Minute: 1, Src: "198.51.100.7", Dest: "10.0.0.5", SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2},
		{Tenant: "acme", Sensor: "s1", Minute: 2, Src: "198.51.100.7", Dest: "10.0.0.5", SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2},
		{Tenant: "acme", Sensor: "s2", Minute: 2, Src: "198.51.100.7", Dest: "10.0.0.6", SignatureID: 3002, Signature: "ET EXPLOIT Log4j", Category: "Attempted Admin", Severity: 1, CVEs: []string{"CVE-2021-44228"}},
		{Tenant: "acme", Sensor: "s2", Minute: 30, Src: "2001:db8::1", Dest: "10.0.0.6", SignatureID: 3002, Signature: "ET EXPLOIT Log4j", Category: "Attempted Admin", Severity: 1, CVEs: []string{"CVE-2021-44228", "cve-2021-45046"}},
		{Tenant: "acme", Sensor: "s1", Minute: 31, Kind: "flow", Src: "10.0.0.5", Dest: "192.0.2.53"},
		{Tenant: "acme", Sensor: "s1", Minute: 59, Kind: "dns", Src: "10.0.0.5", Dest: "192.0.2.53"},
		// Outside the range: before from, and exactly at to.
		{Tenant: "acme", Sensor: "s1", Minute: -1, Src: "198.51.100.7", Dest: "10.0.0.5"},
		{Tenant: "acme", Sensor: "s1", Minute: 60, Src: "198.51.100.7", Dest: "10.0.0.5", CVEs: []string{"CVE-2021-44228"}},
	}
	for i := range 5 {
		evs = append(evs, E{Tenant: "other", Sensor: "s1", Minute: i + 1, Src: "198.51.100.7", Dest: "10.0.0.5",
			SignatureID: 2001, Signature: "ET SCAN Nmap", Severity: 2, CVEs: []string{"CVE-2021-44228"}})
	}
	Seed(t, w, evs...)
}

func overview(t *testing.T, r analytics.EventStore, q analytics.Query) analytics.Overview {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = analytics.DefaultLimit
	}
	ov, err := r.Overview(context.Background(), q, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ov
}

func testOverview(t *testing.T, w events.Store, r analytics.EventStore) {
	Fleet(t, w)
	if ok, err := r.EventsStored(context.Background()); err != nil || !ok {
		t.Fatalf("EventsStored = %v, %v; want true", ok, err)
	}
	ov := overview(t, r, analytics.Query{TenantID: "acme", From: Base, To: Base.Add(time.Hour)})
	if diff := cmp.Diff(analytics.Totals{Events: 6, Alerts: 4, Sensors: 2}, ov.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	m := func(n int) time.Time { return Base.Add(time.Duration(n) * time.Minute) }
	wantSeries := []analytics.Point{
		{T: m(1), Events: 1, Alerts: 1}, {T: m(2), Events: 2, Alerts: 2},
		{T: m(30), Events: 1, Alerts: 1}, {T: m(31), Events: 1}, {T: m(59), Events: 1},
	}
	if diff := cmp.Diff(wantSeries, ov.Series); diff != "" {
		t.Errorf("series, non-empty buckets only (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]analytics.AddressCount{{IP: "198.51.100.7", Count: 3}, {IP: "10.0.0.5", Count: 2}, {IP: "2001:db8::1", Count: 1}}, ov.TopSources); diff != "" {
		t.Errorf("top sources (-want +got):\n%s", diff)
	}
	// Equal counts: ordered by address.
	if diff := cmp.Diff([]analytics.AddressCount{{IP: "10.0.0.5", Count: 2}, {IP: "10.0.0.6", Count: 2}, {IP: "192.0.2.53", Count: 2}}, ov.TopDestinations); diff != "" {
		t.Errorf("top destinations (-want +got):\n%s", diff)
	}
	wantSigs := []analytics.SignatureCount{
		{SignatureID: 3002, Signature: "ET EXPLOIT Log4j", Category: "Attempted Admin", Severity: 1, Count: 2},
		{SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2, Count: 2},
	}
	if diff := cmp.Diff(wantSigs, ov.TopSignatures); diff != "" {
		t.Errorf("top signatures (-want +got):\n%s", diff)
	}
	// CVE ids are counted upper-cased.
	wantCVEs := []analytics.CVECount{{ID: "CVE-2021-44228", Count: 2, LastSeen: m(30)}, {ID: "CVE-2021-45046", Count: 1, LastSeen: m(30)}}
	if diff := cmp.Diff(wantCVEs, ov.CVEs); diff != "" {
		t.Errorf("cves (-want +got):\n%s", diff)
	}
}

func testOverviewSensorLimit(t *testing.T, w events.Store, r analytics.EventStore) {
	Fleet(t, w)
	ov := overview(t, r, analytics.Query{TenantID: "acme", From: Base, To: Base.Add(time.Hour), SensorID: "s2", Limit: 1})
	if diff := cmp.Diff(analytics.Totals{Events: 2, Alerts: 2, Sensors: 1}, ov.Totals); diff != "" {
		t.Errorf("sensor s2 totals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]analytics.AddressCount{{IP: "198.51.100.7", Count: 1}}, ov.TopSources); diff != "" {
		t.Errorf("limit 1, sources (-want +got):\n%s", diff)
	}
	if len(ov.TopDestinations) != 1 || len(ov.TopSignatures) != 1 || len(ov.CVEs) != 1 {
		t.Errorf("limit 1: %d destinations, %d signatures, %d cves", len(ov.TopDestinations), len(ov.TopSignatures), len(ov.CVEs))
	}
	// A sensor id of another tenant's sensor counts nothing of it.
	ov = overview(t, r, analytics.Query{TenantID: "other", From: Base, To: Base.Add(time.Hour), SensorID: "s2"})
	if ov.Totals != (analytics.Totals{}) {
		t.Errorf("other tenant, acme's sensor name: %+v", ov.Totals)
	}
}

func testOverviewEmpty(t *testing.T, w events.Store, r analytics.EventStore) {
	Fleet(t, w)
	ov := overview(t, r, analytics.Query{TenantID: "nobody", From: Base, To: Base.Add(time.Hour)})
	if ov.Totals != (analytics.Totals{}) || len(ov.Series)+len(ov.TopSources)+len(ov.TopDestinations)+len(ov.TopSignatures)+len(ov.CVEs) != 0 {
		t.Errorf("a tenant without events: %+v", ov)
	}
}

func testHistory(t *testing.T, w events.Store, r analytics.EventStore) {
	Fleet(t, w)
	got, err := r.History(context.Background(), "acme",
		[]netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("203.0.113.99")},
		[]string{"CVE-2021-44228", "CVE-1999-0001"})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Indicator < got[j].Indicator })
	want := []analytics.Sighting{
		// 10.0.0.5 is a source twice and a destination four times; an
		// event with it on both sides would count once.
		{Indicator: "10.0.0.5", Count: 6, FirstSeen: Base.Add(-time.Minute), LastSeen: Base.Add(time.Hour)},
		{Indicator: "198.51.100.7", Count: 5, FirstSeen: Base.Add(-time.Minute), LastSeen: Base.Add(time.Hour)},
		{Indicator: "CVE-2021-44228", Count: 3, FirstSeen: Base.Add(2 * time.Minute), LastSeen: Base.Add(time.Hour)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history, never-seen indicators left out (-want +got):\n%s", diff)
	}
	none, err := r.History(context.Background(), "nobody", []netip.Addr{netip.MustParseAddr("198.51.100.7")}, []string{"CVE-2021-44228"})
	if err != nil || len(none) != 0 {
		t.Errorf("history of a tenant without events = %+v, %v", none, err)
	}
}
