package grpcmtls_test

// The SDK's gRPC client (sdk/sensorclient) against this server: the two
// ends of the health check and the event stream meet here, in the root
// module, because the SDK's own module links none of the servers' code.

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// sensorServer is the control plane's real gRPC endpoint with the fleet
// replaced by fakes: it accepts only the serials it is told to, and its
// event sink records ids and can fail on demand.
type sensorServer struct {
	ca   *x509ca.CA
	addr string
	srv  *grpcmtls.Server

	mu     sync.Mutex
	active map[string]bool
	events []string
	// failOn makes the sink refuse this event id once.
	failOn string
	beats  int
	// resumed records, per health check, whether its TLS connection
	// resumed an earlier session.
	resumed []bool
}

func (s *sensorServer) AuthorizeSensor(_ context.Context, _, _, serial string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active[serial] {
		return fleet.ErrRevoked
	}
	return nil
}

// CheckIn authorises the serial as the control plane's check-in does, then
// counts the check.
func (s *sensorServer) CheckIn(ctx context.Context, tenantID, sensorID, serial string, _ fleet.Contact) error {
	if err := s.AuthorizeSensor(ctx, tenantID, sensorID, serial); err != nil {
		return err
	}
	p, _ := peer.FromContext(ctx)
	info, _ := p.AuthInfo.(credentials.TLSInfo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beats++
	s.resumed = append(s.resumed, info.State.DidResume)
	return nil
}

// lastResumed tells whether the latest health check came on a resumed TLS
// session.
func (s *sensorServer) lastResumed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.resumed) > 0 && s.resumed[len(s.resumed)-1]
}

func (s *sensorServer) AcceptEvent(_ context.Context, _ grpcmtls.Identity, ev *sensorpb.SensorEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.GetEventId() == s.failOn {
		s.failOn = ""
		return errors.New("store unavailable")
	}
	s.events = append(s.events, ev.GetEventId())
	return nil
}

func (s *sensorServer) allowOnly(serial string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = map[string]bool{serial: true}
}

func (s *sensorServer) received() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[string]int{}
	for _, id := range s.events {
		got[id]++
	}
	return got
}

func startSensorServer(t *testing.T) *sensorServer {
	t.Helper()
	ca, _ := x509catest.New(t, x509ca.InitOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509ca.Config{})
	s := &sensorServer{ca: ca, active: map[string]bool{}}
	srv, err := grpcmtls.New(grpcmtls.Config{TLS: ca.ServerTLSConfig(), Authorizer: s, Heartbeats: s, Events: s})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr, s.srv = lis.Addr().String(), srv
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// issue returns a client certificate for a new key, as enrolment would,
// in the state an enrolled agent keeps.
func (s *sensorServer) issue(t *testing.T) (*sensorclient.State, string) {
	t.Helper()
	key, csr := x509catest.KeyCSR(t)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ca.SignCSR(fleet.CertRequest{CSRPEM: csr, TenantID: "acme", SensorID: "s-1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st := &sensorclient.State{SensorID: "s-1", TenantID: "acme", GRPCAddress: s.addr, Serial: c.Serial, NotAfter: c.NotAfter,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CertPEM: c.CertificatePEM, CAPEM: s.ca.CACertificatePEM()}
	return st, c.Serial
}

// wantStreamRefused waits for StreamEvents, whose end done reports, to end
// with ErrGRPCRefused.
func wantStreamRefused(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, sensorclient.ErrGRPCRefused) {
			t.Fatalf("StreamEvents after revocation: %v, want ErrGRPCRefused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StreamEvents kept going after the certificate was refused")
	}
}

func newTestGRPC(t *testing.T, st *sensorclient.State) *sensorclient.GRPC {
	t.Helper()
	cert, err := st.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert, Timeout: 5 * time.Second,
		BatchSize: 4, BatchInterval: 20 * time.Millisecond, Backoff: sensorclient.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGRPCStreamsConfirmsAndResendsEvents(t *testing.T) {
	t.Parallel()
	s := startSensorServer(t)
	st, serial := s.issue(t)
	s.allowOnly(serial)
	s.failOn = "e-6"
	g := newTestGRPC(t, st)

	if resp, err := g.Check(context.Background(), sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); err != nil || resp.GetStatus() != sensorpb.CheckResponse_SERVING_STATUS_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *sensorpb.SensorEvent)
	done := make(chan error, 1)
	go func() { done <- g.StreamEvents(ctx, events) }()
	const n = 12
	for i := range n {
		events <- &sensorpb.SensorEvent{EventId: fmt.Sprintf("e-%d", i), Time: timestamppb.Now(), Kind: "alert"}
	}
	// e-6 was refused once by the store: its batch broke and was sent again.
	eventually(t, "every event confirmed", func() bool { return g.Stats().Accepted == n })
	got := s.received()
	for i := range n {
		if got[fmt.Sprintf("e-%d", i)] == 0 {
			t.Errorf("event e-%d never stored", i)
		}
	}
	if st := g.Stats(); st.Sent <= n || st.Dropped != 0 {
		t.Errorf("stats %+v: want resends and nothing dropped", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("StreamEvents after cancel: %v", err)
	}
}

func TestGRPCSwitchesToARenewedCertificate(t *testing.T) {
	t.Parallel()
	s := startSensorServer(t)
	st, serial := s.issue(t)
	s.allowOnly(serial)
	g := newTestGRPC(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *sensorpb.SensorEvent)
	done := make(chan error, 1)
	go func() { done <- g.StreamEvents(ctx, events) }()
	events <- &sensorpb.SensorEvent{EventId: "before", Time: timestamppb.Now(), Kind: "alert"}
	eventually(t, "the first event confirmed", func() bool { return g.Stats().Accepted == 1 })

	// Renewal: the server now accepts only the new serial.
	next, nextSerial := s.issue(t)
	s.allowOnly(nextSerial)
	cert, _ := next.TLSCertificate()
	if err := g.SetCertificate(cert); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); err != nil {
		t.Fatalf("Check after the switch: %v", err)
	}
	events <- &sensorpb.SensorEvent{EventId: "after", Time: timestamppb.Now(), Kind: "alert"}
	eventually(t, "the event after renewal confirmed", func() bool { return g.Stats().Accepted == 2 })

	// Revocation: nothing is accepted any more.
	s.allowOnly("")
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); !errors.Is(err, sensorclient.ErrGRPCRefused) {
		t.Fatalf("Check after revocation: %v, want ErrGRPCRefused", err)
	}
	go func() { events <- &sensorpb.SensorEvent{EventId: "refused", Time: timestamppb.Now(), Kind: "alert"} }()
	wantStreamRefused(t, done)
}

// An idle sensor holds neither an event stream nor, after IdleTimeout, a
// connection on the server; an event opens both again and is confirmed;
// a renewed certificate and a revocation are noticed across idle periods.
func TestGRPCIdleSensorHoldsNothingOnTheServer(t *testing.T) {
	t.Parallel()
	s := startSensorServer(t)
	st, serial := s.issue(t)
	s.allowOnly(serial)
	cert, err := st.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert, Timeout: 5 * time.Second,
		BatchSize: 4, BatchInterval: 50 * time.Millisecond, IdleTimeout: 100 * time.Millisecond,
		Backoff: sensorclient.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	open := func() grpcmtls.Stats { return s.srv.Stats() }
	idle := func(what string) {
		t.Helper()
		eventually(t, what, func() bool { st := open(); return st.Connections == 0 && st.EventStreams == 0 })
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *sensorpb.SensorEvent)
	done := make(chan error, 1)
	go func() { done <- g.StreamEvents(ctx, events) }()
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if c := open().Connections; c != 1 {
		t.Fatalf("connections on the server right after a health check: %d, want 1", c)
	}
	if s.lastResumed() {
		t.Fatal("the first health check came on a resumed TLS session; the check below could not fail")
	}
	// StreamEvents is waiting for an event: no stream keeps the connection.
	idle("the idle connection closed")
	// The next call connects again, resuming the TLS session.
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); err != nil {
		t.Fatalf("Check after idle: %v", err)
	}
	if !s.lastResumed() {
		t.Error("the connection after idle did not resume the TLS session")
	}
	idle("the idle connection closed again")

	// An event opens a connection and a stream, is confirmed, and both
	// close again.
	events <- &sensorpb.SensorEvent{EventId: "after-idle", Time: timestamppb.Now(), Kind: "alert"}
	eventually(t, "the event after idle confirmed", func() bool { return g.Stats().Accepted == 1 })
	idle("idle again after the batch")

	// A stream stays open while its batch is (here a second client whose
	// batch waits an hour or 4 events): the server counts it.
	long, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert, Timeout: 5 * time.Second,
		BatchSize: 4, BatchInterval: time.Hour, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()
	longEvents := make(chan *sensorpb.SensorEvent)
	go func() { _ = long.StreamEvents(ctx, longEvents) }()
	longEvents <- &sensorpb.SensorEvent{EventId: "long-batch-1", Time: timestamppb.Now(), Kind: "alert"}
	eventually(t, "the open batch's stream counted", func() bool { st := open(); return st.EventStreams == 1 && st.Connections == 1 })
	for i := 2; i <= 4; i++ {
		longEvents <- &sensorpb.SensorEvent{EventId: fmt.Sprintf("long-batch-%d", i), Time: timestamppb.Now(), Kind: "alert"}
	}
	eventually(t, "the full batch confirmed", func() bool { return long.Stats().Accepted == 4 })
	idle("idle after the full batch")

	// Renewal while idle: the next event goes out on the new certificate,
	// the only one the server still accepts.
	next, nextSerial := s.issue(t)
	s.allowOnly(nextSerial)
	nextCert, _ := next.TLSCertificate()
	if err := g.SetCertificate(nextCert); err != nil {
		t.Fatal(err)
	}
	events <- &sensorpb.SensorEvent{EventId: "after-renewal", Time: timestamppb.Now(), Kind: "alert"}
	eventually(t, "the event after renewal confirmed", func() bool { return g.Stats().Accepted == 2 })
	idle("idle after renewal")

	// Revocation while idle: the health check on a new connection is
	// refused, and so is the next event, which stays unconfirmed.
	s.allowOnly("")
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); !errors.Is(err, sensorclient.ErrGRPCRefused) {
		t.Fatalf("Check after revocation: %v, want ErrGRPCRefused", err)
	}
	events <- &sensorpb.SensorEvent{EventId: "refused", Time: timestamppb.Now(), Kind: "alert"}
	wantStreamRefused(t, done)
	if st := g.Stats(); st.Accepted != 2 || st.Dropped != 0 {
		t.Fatalf("after the refusal: %+v; want 2 accepted and the refused event kept, not dropped", st)
	}
	got := s.received()
	for _, id := range []string{"after-idle", "long-batch-1", "long-batch-4", "after-renewal"} {
		if got[id] != 1 {
			t.Errorf("event %s stored %d times, want 1", id, got[id])
		}
	}
}
