package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/nats/eventlog"
	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/internal/pgtest"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// sendAll streams evs on one call and returns the response's accepted count,
// or the trailer's when the call fails.
func sendAll(ctx context.Context, cc *grpc.ClientConn, evs []*sensorpb.SensorEvent) (uint64, error) {
	stream, err := sensorpb.NewSensorEventStreamServiceClient(cc).StreamEvents(ctx)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			break // the server ended the call; CloseAndRecv says why
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		n := uint64(0)
		if v := stream.Trailer().Get("rxc-accepted"); len(v) == 1 {
			n, _ = strconv.ParseUint(v[0], 10, 64)
		}
		return n, err
	}
	return resp.GetAccepted(), nil
}

func alerts(prefix string, n int, raw func(i int) string) []*sensorpb.SensorEvent {
	at := time.Now().Add(-time.Minute)
	out := make([]*sensorpb.SensorEvent, n)
	for i := range out {
		out[i] = &sensorpb.SensorEvent{
			EventId: fmt.Sprintf("%s-%d", prefix, i), Time: timestamppb.New(at.Add(time.Duration(i) * time.Millisecond)), Kind: "alert",
			SrcIp: "203.0.113.9", SrcPort: 40000, DestIp: "10.0.0.5", DestPort: 8080, Protocol: "TCP",
			Alert: &sensorpb.Alert{SignatureId: 2034647, Signature: "ET EXPLOIT Apache Log4j RCE Attempt (CVE-2021-44228)", Category: "Attempted Administrator Privilege Gain", Severity: 1},
		}
		if raw != nil {
			out[i].RawJson = []byte(raw(i))
		}
	}
	return out
}

func count(t *testing.T, db *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM events WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count events where %s: %v", where, err)
	}
	return n
}

func metric(t *testing.T, p *plane, name string) int {
	t.Helper()
	resp, err := http.Get(p.Metrics + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("metric %s missing from /metrics", name)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// failAfterCommit stores a batch and then reports a failure, as a writer
// that dies between the commit and the ack.
type failAfterCommit struct{ store *eventstore.Store }

func (f failAfterCommit) Write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	if _, err := f.store.Write(ctx, evs); err != nil {
		return events.WriteResult{}, err
	}
	return events.WriteResult{}, errors.New("writer lost after commit")
}

// TestEventsReachPostgresOnce streams events over mTLS through JetStream
// into PostgreSQL and checks each lands exactly once, under the tenant and
// sensor of the certificate: across resends, a control-plane restart and a
// redelivery after a commit that was never acknowledged; and that a full
// stream refuses with ResourceExhausted without losing what it accepted.
func TestEventsReachPostgresOnce(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	dsn := pgtest.DSN(t)
	// Both control planes share database and sensor CA, as replicas do.
	caDir := filepath.Join(t.TempDir(), "ca")
	if _, err := x509ca.Init(caDir, x509ca.InitOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(caDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	withEvents := func(c *app.ServeConfig) {
		c.PGDSN, c.CADir = dsn, caDir
		c.Events = app.EventsConfig{Enabled: true, StreamName: "RXC_EVENTS", WriterBatch: 500}
	}
	a := startPlane(t, prov, withEvents)
	a.caPEM = caPEM
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := pgtest.Pool(t, dsn)

	a.login()
	for _, id := range []string{"acme", "globex"} {
		a.provisionedTenant(id, id)
	}
	acme, globex := a.enrol("acme"), a.enrol("globex")
	acmeConn, globexConn := a.grpcConn(acme), a.grpcConn(globex)

	// An acme sensor streams 300 events; a globex sensor streams events
	// with the same ids whose payload claims to be acme's sensor.
	batch1 := alerts("e", 300, func(i int) string { return fmt.Sprintf(`{"event_type":"alert","n":%d,"cve":"cve_2017_0144"}`, i) })
	if n, err := sendAll(ctx, acmeConn, batch1); err != nil || n != 300 {
		t.Fatalf("acme stream: accepted %d, %v; want 300, nil", n, err)
	}
	claim := fmt.Sprintf(`{"tenant_id":"acme","sensor_id":%q}`, acme.enr.SensorID)
	if n, err := sendAll(ctx, globexConn, alerts("e", 50, func(int) string { return claim })); err != nil || n != 50 {
		t.Fatalf("globex stream: accepted %d, %v; want 50, nil", n, err)
	}
	waitUntil(t, 60*time.Second, "350 events in PostgreSQL", func() bool { return count(t, db, "true") == 350 })
	if n := count(t, db, "tenant_id = 'acme' AND sensor_id = $1", acme.enr.SensorID); n != 300 {
		t.Errorf("acme rows of the acme sensor: %d, want 300", n)
	}
	if n := count(t, db, "tenant_id = 'globex' AND sensor_id = $1 AND raw->>'tenant_id' = 'acme'", globex.enr.SensorID); n != 50 {
		t.Errorf("globex rows stamped from the globex certificate: %d, want 50", n)
	}
	if n := count(t, db, "tenant_id = 'acme' AND sensor_id <> $1", acme.enr.SensorID); n != 0 {
		t.Errorf("acme holds %d rows of another sensor", n)
	}
	if n := count(t, db, "cves = ARRAY['CVE-2017-0144','CVE-2021-44228'] AND tenant_id = 'acme'"); n != 300 {
		t.Errorf("acme rows with both CVEs extracted: %d, want 300", n)
	}

	// A resend of the whole first batch is acknowledged as duplicates by
	// the stream: nothing new reaches PostgreSQL.
	if n, err := sendAll(ctx, acmeConn, batch1); err != nil || n != 300 {
		t.Fatalf("resend: accepted %d, %v; want 300, nil", n, err)
	}
	if got := metric(t, a, `rxc_controlplane_events_received_total{outcome="duplicate"}`); got != 300 {
		t.Errorf("duplicates acknowledged by the stream: %d, want 300", got)
	}
	a.stop()

	// While no control plane runs, 100 more events sit in the stream and a
	// writer commits them but dies before its ack (it naks instead).
	backend := prov.BackendUser("controlplane")
	nc, err := eventlog.New(eventlog.Config{URL: prov.NATSURL, Creds: func(context.Context) (string, error) { return backend.Creds, nil }})
	if err != nil {
		t.Fatal(err)
	}
	nc.Start(ctx)
	defer nc.Close()
	waitUntil(t, 20*time.Second, "test writer connected", nc.Ready)
	app1 := nc.Appender("acme", acme.enr.SensorID)
	for i := range 100 {
		ev := events.Event{ID: fmt.Sprintf("late-%d", i), Time: time.Now(), Kind: "alert"}
		if err := app1.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := app1.Close(ctx); err != nil || res.Acked != 100 {
		t.Fatalf("direct append: %+v, %v", res, err)
	}
	store, _ := eventstore.New(eventstore.Config{Pool: db})
	doomed, _ := events.NewWriter(events.WriterConfig{Source: nc, Store: failAfterCommit{store}, BatchSize: 1000})
	if n, err := doomed.Step(ctx); err == nil || n != 100 {
		t.Fatalf("doomed writer step: %d, %v; want 100 and an error", n, err)
	}
	if n := count(t, db, "event_id LIKE 'late-%'"); n != 100 {
		t.Fatalf("late rows committed by the doomed writer: %d, want 100", n)
	}

	// A restarted control plane gets the redelivery and skips every row.
	b := startPlane(t, prov, withEvents)
	b.caPEM = caPEM
	acme.enr.GRPC.Address = b.grpc
	waitUntil(t, 60*time.Second, "redelivered events skipped", func() bool {
		return metric(t, b, "rxc_controlplane_events_duplicates_skipped_total") == 100
	})
	if n, err := sendAll(ctx, b.grpcConn(acme), alerts("after-restart", 100, nil)); err != nil || n != 100 {
		t.Fatalf("stream after restart: accepted %d, %v; want 100, nil", n, err)
	}
	waitUntil(t, 60*time.Second, "550 events in PostgreSQL", func() bool { return count(t, db, "true") == 550 })
	var dup int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM events GROUP BY tenant_id, sensor_id, event_id HAVING count(*) > 1) d`).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("events stored more than once: %d (%v)", dup, err)
	}

	// The stream fills up: the call fails with ResourceExhausted and every
	// event it acknowledged still reaches PostgreSQL.
	shrinkEventStream(t, prov, 64<<10)
	big := alerts("full", 2000, func(i int) string { return fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 512)) })
	n, err := sendAll(ctx, b.grpcConn(acme), big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream into a full event stream: %v (accepted %d), want ResourceExhausted", err, n)
	}
	if n >= 2000 {
		t.Fatalf("accepted %d of 2000 events into a 64 KiB stream", n)
	}
	waitUntil(t, 60*time.Second, "accepted events of the refused call in PostgreSQL", func() bool {
		return count(t, db, "event_id LIKE 'full-%'") == int(n)
	})
	if got := metric(t, b, `rxc_controlplane_events_received_total{outcome="refused"}`); got == 0 {
		t.Error("refused events not counted")
	}
}

// shrinkEventStream restarts the provisioner with a smaller event stream
// and waits until nats-server applied it.
func shrinkEventStream(t *testing.T, prov *provisionertest.Stack, maxBytes int64) {
	t.Helper()
	prov.StopServe()
	prov.Config.EventsStreamMaxBytes = maxBytes
	prov.StartServe()
	prov.WaitNATSReady()
	waitUntil(t, 30*time.Second, "event stream shrunk", func() bool {
		streams, err := prov.NATS.AccountStreams(prov.Operator.ControlAccount)
		if err != nil {
			return false
		}
		for _, s := range streams {
			if s.Name == "RXC_EVENTS" && s.Config != nil && s.Config.MaxBytes == maxBytes {
				return true
			}
		}
		return false
	})
}
