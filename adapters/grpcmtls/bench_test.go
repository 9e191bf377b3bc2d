package grpcmtls_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
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

// BenchmarkHealthCheck makes health checks through the real TLS server (the
// check-in answered by the test's fake, no database): on a new connection
// each, as an agent whose idle connection closed, with the TLS session
// resumed (the agent's way) or a full handshake, and all on one open
// connection; "x25519" offers only X25519 instead of Go's default hybrid
// post-quantum key exchange (X25519MLKEM768), to show what that costs.
// cpu-ms/op is the process's CPU a check, client and server together.
func BenchmarkHealthCheck(b *testing.B) {
	for _, tc := range []struct {
		name       string
		reconnect  bool
		resumption bool
		x25519     bool
	}{{"reconnect-resumed", true, true, false}, {"reconnect-resumed-x25519", true, true, true}, {"reconnect-full-handshake", true, false, false}, {"one-connection", false, false, false}} {
		b.Run(tc.name, func(b *testing.B) {
			f := start(b)
			cert, _ := f.enrol(b, "acme", "s1", true)
			cfg := f.ca.ClientTLSConfig(cert, "localhost")
			if tc.resumption {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			if tc.x25519 {
				cfg.CurvePreferences = []tls.CurveID{tls.X25519}
			}
			dial := func() *grpc.ClientConn {
				conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
				if err != nil {
					b.Fatal(err)
				}
				return conn
			}
			conn := dial()
			if _, err := check(b.Context(), conn); err != nil { // warm: the first session ticket
				b.Fatal(err)
			}
			resumed := 0
			cpu0 := processCPU()
			b.ResetTimer()
			for range b.N {
				if tc.reconnect {
					conn.Close()
					conn = dial()
				}
				var p peer.Peer
				if _, err := sensorpb.NewSensorHealthcheckServiceClient(conn).Check(b.Context(), &sensorpb.CheckRequest{AgentVersion: "1.2.3"}, grpc.Peer(&p)); err != nil {
					b.Fatal(err)
				}
				if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && info.State.DidResume {
					resumed++
				}
			}
			b.StopTimer()
			conn.Close()
			b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
			if tc.reconnect && tc.resumption && resumed < b.N {
				b.Fatalf("%d of %d checks resumed their TLS session", resumed, b.N)
			}
		})
	}
}

// processCPU is the CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
