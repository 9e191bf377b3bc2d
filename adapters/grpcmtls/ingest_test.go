package grpcmtls_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/core/events"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// fakeLog stores events in memory and refuses every one after capacity
// with ErrLogFull, like a stream at its MaxBytes with discard new.
type fakeLog struct {
	mu       sync.Mutex
	capacity int
	got      []events.Event
}

func (l *fakeLog) Appender(string, string) events.Appender { return &fakeAppender{l: l} }

type fakeAppender struct {
	l   *fakeLog
	res events.AppendResult
	err error
}

func (a *fakeAppender) Append(_ context.Context, ev events.Event) error {
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	if len(a.l.got) >= a.l.capacity {
		a.res.Failed++
		a.err = events.ErrLogFull
		return a.err
	}
	a.l.got = append(a.l.got, ev)
	a.res.Acked++
	return nil
}

func (a *fakeAppender) Close(context.Context) (events.AppendResult, error) { return a.res, a.err }

func withIngest(l events.Log) option {
	return func(c *grpcmtls.Config) {
		in, err := events.NewIngest(events.IngestConfig{Log: l})
		if err != nil {
			panic(err)
		}
		c.Ingest = in
	}
}

func timed(id string) *sensorpb.SensorEvent {
	ev := event(id)
	ev.Time = timestamppb.Now()
	return ev
}

func TestIngestStampsCertificateIdentity(t *testing.T) {
	t.Parallel()
	log := &fakeLog{capacity: 100}
	f := start(t, withIngest(log))
	cert, _ := f.enrol(t, "acme", "s1", true)
	accepted, err := sendEvents(testCtx(t), f.sensor(t, cert), timed("e1"), timed("e2"))
	if err != nil || accepted != 2 {
		t.Fatalf("StreamEvents = %d, %v; want 2, nil", accepted, err)
	}
	for _, ev := range log.got {
		if ev.TenantID != "acme" || ev.SensorID != "s1" {
			t.Errorf("event %s logged as %s/%s", ev.ID, ev.TenantID, ev.SensorID)
		}
	}
}

func TestIngestFullLogIsResourceExhausted(t *testing.T) {
	t.Parallel()
	log := &fakeLog{capacity: 2}
	f := start(t, withIngest(log))
	cert, _ := f.enrol(t, "acme", "s1", true)
	stream, err := sensorpb.NewSensorEventStreamServiceClient(f.sensor(t, cert)).StreamEvents(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e1", "e2", "e3"} {
		_ = stream.Send(timed(id))
	}
	_, err = stream.CloseAndRecv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("StreamEvents into a full log: %v, want ResourceExhausted", err)
	}
	if got := stream.Trailer().Get("rxc-accepted"); len(got) != 1 || got[0] != "2" {
		t.Errorf("trailer rxc-accepted = %q, want [2]", got)
	}
}

func TestIngestRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	f := start(t, withIngest(&fakeLog{capacity: 100}))
	cert, _ := f.enrol(t, "acme", "s1", true)
	conn := f.sensor(t, cert)
	tests := []struct {
		name   string
		change func(*sensorpb.SensorEvent)
	}{
		{"raw_json not JSON", func(e *sensorpb.SensorEvent) { e.RawJson = []byte("{") }},
		{"time a year ago", func(e *sensorpb.SensorEvent) { e.Time = timestamppb.New(time.Now().AddDate(-1, 0, 0)) }},
		{"event_id with a space", func(e *sensorpb.SensorEvent) { e.EventId = "a b" }},
		{"severity 300", func(e *sensorpb.SensorEvent) { e.Alert.Severity = 300 }},
		{"kind of 33", func(e *sensorpb.SensorEvent) { e.Kind = "abcdefghijklmnopqrstuvwxyz0123456" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := timed("e1")
			tt.change(ev)
			if _, err := sendEvents(testCtx(t), conn, ev); status.Code(err) != codes.InvalidArgument {
				t.Errorf("StreamEvents: %v, want InvalidArgument", err)
			}
		})
	}
}
