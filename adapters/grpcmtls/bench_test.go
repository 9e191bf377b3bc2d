package grpcmtls_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	sensorpb "github.com/rxc-project/rxc/proto"
)

type discardSink struct{}

func (discardSink) AcceptEvent(context.Context, grpcmtls.Identity, *sensorpb.SensorEvent) error {
	return nil
}

// BenchmarkStreamEvents streams events with a 1 KiB raw record on one
// stream through the real TLS server (events validated, then discarded):
// the gRPC edge's own throughput with this package's per-connection
// settings and with grpc-go's defaults (a 32 KiB read buffer a connection,
// windows the BDP estimator grows).
func BenchmarkStreamEvents(b *testing.B) {
	raw := []byte(`{"event_type":"alert","payload":"` + string(bytes.Repeat([]byte("x"), 1000)) + `"}`)
	for _, tc := range []struct {
		name  string
		tuned bool
	}{{"tuned", true}, {"grpc-defaults", false}} {
		b.Run(tc.name, func(b *testing.B) {
			grpcmtls.SetTransportTuned(tc.tuned)
			defer grpcmtls.SetTransportTuned(true)
			f := start(b, withSink(discardSink{}))
			cert, _ := f.enrol(b, "acme", "s1", true)
			stream, err := sensorpb.NewSensorEventStreamServiceClient(f.sensor(b, cert)).StreamEvents(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			ev := event("e")
			ev.RawJson = raw
			b.SetBytes(int64(proto.Size(ev)))
			b.ResetTimer()
			for i := range b.N {
				ev.EventId = fmt.Sprintf("e-%d", i)
				if err := stream.Send(ev); err != nil {
					b.Fatal(err)
				}
			}
			resp, err := stream.CloseAndRecv()
			if err != nil || resp.GetAccepted() != uint64(b.N) {
				b.Fatalf("accepted %d of %d: %v", resp.GetAccepted(), b.N, err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
