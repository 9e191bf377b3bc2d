package analyticsstore_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore"
	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore/eventstest"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) (*analyticsstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := analyticsstore.New(analyticsstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

var base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// seed gives tenant acme seven events in one hour and tenant other events
// with the same addresses, signatures and CVEs that must never be counted.
func seed(t *testing.T, pool *pgxpool.Pool) {
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	eventstest.Seed(t, pool,
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(1), Src: "198.51.100.7", Dest: "10.0.0.5", SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2},
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(2), Src: "198.51.100.7", Dest: "10.0.0.5", SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2},
		eventstest.Event{Tenant: "acme", Sensor: "s2", Time: at(2), Src: "198.51.100.7", Dest: "10.0.0.6", SignatureID: 3002, Signature: "ET EXPLOIT Log4j", Category: "Attempted Admin", Severity: 1, CVEs: []string{"CVE-2021-44228"}},
		eventstest.Event{Tenant: "acme", Sensor: "s2", Time: at(30), Src: "2001:db8::1", Dest: "10.0.0.6", SignatureID: 3002, Signature: "ET EXPLOIT Log4j", Category: "Attempted Admin", Severity: 1, CVEs: []string{"CVE-2021-44228", "CVE-2021-45046"}},
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(31), Kind: "flow", Src: "10.0.0.5", Dest: "192.0.2.53"},
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(59), Kind: "dns", Src: "10.0.0.5", Dest: "192.0.2.53"},
		// Outside the range: before from, and exactly at to.
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(-1), Src: "198.51.100.7", Dest: "10.0.0.5"},
		eventstest.Event{Tenant: "acme", Sensor: "s1", Time: at(60), Src: "198.51.100.7", Dest: "10.0.0.5", CVEs: []string{"CVE-2021-44228"}},
	)
	for i := range 5 {
		eventstest.Seed(t, pool, eventstest.Event{Tenant: "other", Sensor: "s1", Time: at(i + 1), Src: "198.51.100.7", Dest: "10.0.0.5",
			SignatureID: 2001, Signature: "ET SCAN Nmap", Severity: 2, CVEs: []string{"CVE-2021-44228"}})
	}
}

func TestOverviewCountsOneTenantsEvents(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	eventstest.EnsureTable(t, pool)
	seed(t, pool)
	svc, err := analytics.New(analytics.Config{Events: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	ov, err := svc.Overview(ctx, analytics.Query{TenantID: "acme", From: base, To: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(analytics.Totals{Events: 6, Alerts: 4, Sensors: 2}, ov.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if ov.Bucket != time.Minute || len(ov.Series) != 60 {
		t.Fatalf("series: bucket %s, %d points; want 1m and 60 (empty buckets included)", ov.Bucket, len(ov.Series))
	}
	nonEmpty := map[int]analytics.Point{}
	for i, p := range ov.Series {
		if !p.T.Equal(base.Add(time.Duration(i) * time.Minute)) {
			t.Fatalf("point %d at %s", i, p.T)
		}
		if p.Events > 0 {
			nonEmpty[i] = analytics.Point{T: p.T, Events: p.Events, Alerts: p.Alerts}
		}
	}
	wantSeries := map[int]analytics.Point{
		1: {T: base.Add(time.Minute), Events: 1, Alerts: 1}, 2: {T: base.Add(2 * time.Minute), Events: 2, Alerts: 2},
		30: {T: base.Add(30 * time.Minute), Events: 1, Alerts: 1}, 31: {T: base.Add(31 * time.Minute), Events: 1},
		59: {T: base.Add(59 * time.Minute), Events: 1},
	}
	if diff := cmp.Diff(wantSeries, nonEmpty); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]analytics.AddressCount{{IP: "198.51.100.7", Count: 3}, {IP: "10.0.0.5", Count: 2}, {IP: "2001:db8::1", Count: 1}}, ov.TopSources); diff != "" {
		t.Errorf("top sources (-want +got):\n%s", diff)
	}
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
	wantCVEs := []analytics.CVECount{{ID: "CVE-2021-44228", Count: 2, LastSeen: base.Add(30 * time.Minute)}, {ID: "CVE-2021-45046", Count: 1, LastSeen: base.Add(30 * time.Minute)}}
	if diff := cmp.Diff(wantCVEs, ov.CVEs); diff != "" {
		t.Errorf("cves (-want +got):\n%s", diff)
	}

	// One sensor, and a limit.
	ov, err = svc.Overview(ctx, analytics.Query{TenantID: "acme", From: base, To: base.Add(time.Hour), SensorID: "s2", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(analytics.Totals{Events: 2, Alerts: 2, Sensors: 1}, ov.Totals); diff != "" {
		t.Errorf("sensor s2 totals (-want +got):\n%s", diff)
	}
	if len(ov.TopSources) != 1 || len(ov.CVEs) != 1 {
		t.Errorf("limit 1: %d sources, %d cves", len(ov.TopSources), len(ov.CVEs))
	}

	// A tenant without events sees zeros, not the other tenants' events.
	ov, err = svc.Overview(ctx, analytics.Query{TenantID: "nobody", From: base, To: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if ov.Totals != (analytics.Totals{}) || len(ov.TopSources)+len(ov.TopSignatures)+len(ov.CVEs) != 0 {
		t.Errorf("empty tenant: %+v", ov)
	}
}

func TestHistoryIsTenantScoped(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	eventstest.EnsureTable(t, pool)
	seed(t, pool)
	if ok, err := store.EventsStored(context.Background()); err != nil || !ok {
		t.Fatalf("EventsStored with the table: %v, %v; want true", ok, err)
	}
	got, err := store.History(context.Background(), "acme",
		[]netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.99")}, []string{"CVE-2021-44228"})
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.Sighting{
		{Indicator: "198.51.100.7", Count: 5, FirstSeen: base.Add(-time.Minute), LastSeen: base.Add(time.Hour)},
		{Indicator: "CVE-2021-44228", Count: 3, FirstSeen: base.Add(2 * time.Minute), LastSeen: base.Add(time.Hour)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// TestWithoutEventsTable: a database without the table (ingestion's
// migration not applied) reports it rather than failing obscurely.
func TestWithoutEventsTable(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := context.Background()
	if ok, err := store.EventsStored(ctx); err != nil || ok {
		t.Fatalf("EventsStored on an empty database: %v, %v; want false", ok, err)
	}
	_, err := store.Overview(ctx, analytics.Query{TenantID: "acme", From: base, To: base.Add(time.Hour), Limit: 10}, time.Minute)
	if !errors.Is(err, analytics.ErrEventsUnavailable) {
		t.Fatalf("overview without a table: %v; want ErrEventsUnavailable", err)
	}
}
