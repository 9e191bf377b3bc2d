package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/eventpb"
	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
	sensorpb "github.com/rxc-project/rxc/proto"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.ControlPlanePool(t)
	s, err := eventstore.New(eventstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var day = time.Date(2026, 11, 20, 23, 59, 59, 123456000, time.UTC)

func alert(tenant, id string, at time.Time) events.Event {
	return events.Event{
		TenantID: tenant, SensorID: "s1", ID: id, Time: at, ReceivedAt: at.Add(time.Second), Kind: "alert",
		SrcIP: netip.MustParseAddr("203.0.113.7"), SrcPort: 51000, DestIP: netip.MustParseAddr("2001:db8::1"), DestPort: 443, Protocol: "TCP",
		Alert:   &events.Alert{SignatureID: 2030358, Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain", Severity: 1},
		CVEs:    []string{"CVE-2021-44228"},
		RawJSON: []byte(`{"event_type":"alert","alert":{"signature_id":2030358}}`),
	}
}

type row struct {
	Tenant, Sensor, ID, Kind, Protocol, Signature, Category string
	Time, Received                                          time.Time
	SrcIP, DestIP                                           *string
	SrcPort, DestPort, Severity                             *int32
	SignatureID                                             *int64
	CVEs                                                    []string
	Raw                                                     *string
}

func rowsOf(t *testing.T, pool *pgxpool.Pool, tenant string) []row {
	t.Helper()
	rs, err := pool.Query(testCtx(t), `SELECT tenant_id, sensor_id, event_id, kind, protocol, signature, category, event_time, received_at,
		host(src_ip), host(dest_ip), src_port, dest_port, severity, signature_id, cves, raw::text FROM events WHERE tenant_id = $1 ORDER BY event_time, event_id`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.Tenant, &r.Sensor, &r.ID, &r.Kind, &r.Protocol, &r.Signature, &r.Category, &r.Time, &r.Received,
			&r.SrcIP, &r.DestIP, &r.SrcPort, &r.DestPort, &r.Severity, &r.SignatureID, &r.CVEs, &r.Raw); err != nil {
			t.Fatal(err)
		}
		r.Time, r.Received = r.Time.UTC(), r.Received.UTC()
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestWriteStoresColumnsOnce(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	bare := events.Event{TenantID: "acme", SensorID: "s2", ID: "flow-1", Time: day.Add(time.Second), ReceivedAt: day.Add(2 * time.Second), Kind: "flow"}
	batch := []events.Event{alert("acme", "a-1", day), bare, alert("acme", "a-1", day)}
	res, err := s.Write(testCtx(t), batch)
	n := res.Inserted
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n != 2 {
		t.Errorf("Write inserted %d, want 2 (the repeat inside the batch skipped)", n)
	}
	// A redelivery of the whole batch inserts nothing.
	if res, err := s.Write(testCtx(t), batch); err != nil || res != (events.WriteResult{}) {
		t.Errorf("second Write = %+v, %v; want nothing inserted, nil", res, err)
	}
	want := []row{
		{Tenant: "acme", Sensor: "s1", ID: "a-1", Kind: "alert", Protocol: "TCP", Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain",
			Time: day, Received: day.Add(time.Second), SrcIP: ptr("203.0.113.7"), DestIP: ptr("2001:db8::1"),
			SrcPort: ptr[int32](51000), DestPort: ptr[int32](443), Severity: ptr[int32](1), SignatureID: ptr[int64](2030358),
			CVEs: []string{"CVE-2021-44228"}, Raw: ptr(`{"alert": {"signature_id": 2030358}, "event_type": "alert"}`)},
		{Tenant: "acme", Sensor: "s2", ID: "flow-1", Kind: "flow", Time: day.Add(time.Second), Received: day.Add(2 * time.Second), CVEs: []string{}},
	}
	if diff := cmp.Diff(want, rowsOf(t, pool, "acme")); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	// The two events fell on two UTC days: two partitions.
	var parts []string
	rs, _ := pool.Query(testCtx(t), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass ORDER BY 1`)
	for rs.Next() {
		var p string
		_ = rs.Scan(&p)
		parts = append(parts, p)
	}
	rs.Close()
	if diff := cmp.Diff([]string{"events_20261120", "events_20261121"}, parts); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
}

// Writers of several replicas race to create the same day's partition.
func TestConcurrentWritersShareNewPartitions(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := eventstore.New(eventstore.Config{Pool: pool})
			var batch []events.Event
			for d := range 3 {
				batch = append(batch, alert("acme", fmt.Sprintf("w%d-d%d", w, d), day.AddDate(0, 0, -d)))
			}
			if _, err := s.Write(testCtx(t), batch); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Write: %v", err)
	}
	if got := len(rowsOf(t, pool, "acme")); got != 12 {
		t.Errorf("%d rows, want 12", got)
	}
}

func BenchmarkWrite(b *testing.B) {
	pool, err := pgxpool.New(context.Background(), pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := migrate.Apply(context.Background(), pool, "controlplane", migrations.ControlPlane); err != nil {
		b.Fatal(err)
	}
	s, _ := eventstore.New(eventstore.Config{Pool: pool})
	now := time.Now().UTC()
	batch := make([]events.Event, 2000)
	b.ResetTimer()
	for i := range b.N {
		for j := range batch {
			batch[j] = alert("acme", fmt.Sprintf("b%d-%d", i, j), now)
		}
		if _, err := s.Write(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}

// Expiring a day drops its partition; a later event of that day recreates it.
func TestDroppedPartitionIsRecreated(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	if _, err := s.Write(testCtx(t), []events.Event{alert("acme", "a", day)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(testCtx(t), `DROP TABLE events_20261120`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(testCtx(t), []events.Event{alert("acme", "b", day)}); err == nil || errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("Write into a dropped partition: %v, want a retryable error", err)
	}
	if res, err := s.Write(testCtx(t), []events.Event{alert("acme", "b", day)}); err != nil || res.Inserted != 1 {
		t.Fatalf("retried Write = %+v, %v; want 1, nil", res, err)
	}
}

// TestWireEventStoredAsSent pins what PostgreSQL holds for an event as a
// sensor sent it, through every representation on the way: the gRPC
// message read at the edge (eventpb.ToEvent), written to the event log and
// read back (eventpb.FromEvent, proto bytes, eventpb.ToEvent again), then
// stored. The raw record is stored as PostgreSQL's jsonb of the bytes sent
// (keys ordered, the last of a repeated key kept, escapes decoded, numbers
// as written).
func TestWireEventStoredAsSent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	raw := `{"b":[1, 2.50, 12345678901234567890.5],"a":"caf\u00e9 \ud83d\ude00","a":"é","n":null, "cve":"CVE-2021-44228"}`
	sent := &sensorpb.SensorEvent{
		EventId: "wire-1", Time: timestamppb.New(day), Kind: "alert",
		SrcIp: "2001:DB8::7", SrcPort: 51000, DestIp: "10.0.0.5", DestPort: 443, Protocol: "TCP",
		Alert:   &sensorpb.Alert{SignatureId: 2030358, Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain", Severity: 1},
		RawJson: []byte(raw),
	}
	atEdge, err := eventpb.ToEvent(sent)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := proto.Marshal(eventpb.FromEvent(atEdge))
	if err != nil {
		t.Fatal(err)
	}
	var pb sensorpb.SensorEvent
	if err := proto.Unmarshal(logged, &pb); err != nil {
		t.Fatal(err)
	}
	ev, err := eventpb.ToEvent(&pb)
	if err != nil {
		t.Fatal(err)
	}
	ev.TenantID, ev.SensorID, ev.ReceivedAt = "wire", "s1", day.Add(time.Second)
	ev.CVEs = events.ExtractCVEs(ev.Alert.Signature, string(ev.RawJSON))
	if _, err := s.Write(testCtx(t), []events.Event{ev}); err != nil {
		t.Fatal(err)
	}
	want := []row{{Tenant: "wire", Sensor: "s1", ID: "wire-1", Kind: "alert", Protocol: "TCP", Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain",
		Time: day, Received: day.Add(time.Second), SrcIP: ptr("2001:db8::7"), DestIP: ptr("10.0.0.5"),
		SrcPort: ptr[int32](51000), DestPort: ptr[int32](443), Severity: ptr[int32](1), SignatureID: ptr[int64](2030358),
		CVEs: []string{"CVE-2021-44228"}, Raw: ptr(`{"a": "é", "b": [1, 2.50, 12345678901234567890.5], "n": null, "cve": "CVE-2021-44228"}`)}}
	if diff := cmp.Diff(want, rowsOf(t, pool, "wire")); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var asJSONB string
	if err := pool.QueryRow(testCtx(t), `SELECT $1::jsonb::text`, raw).Scan(&asJSONB); err != nil || asJSONB != *want[0].Raw {
		t.Errorf("PostgreSQL's jsonb of the record sent: %q (%v), want the row's", asJSONB, err)
	}
}
