package sensorclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// sensorServer is the control plane's real gRPC endpoint with the fleet
// replaced by fakes: it accepts only the serials it is told to, and its
// event sink records ids and can fail on demand.
type sensorServer struct {
	ca   *x509ca.CA
	addr string

	mu     sync.Mutex
	active map[string]bool
	events []string
	// failOn makes the sink refuse this event id once.
	failOn string
	beats  int
}

func (s *sensorServer) AuthorizeSensor(_ context.Context, _, _, serial string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active[serial] {
		return fleet.ErrRevoked
	}
	return nil
}

func (s *sensorServer) SensorSeen(context.Context, string, string, fleet.Contact) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beats++
	return nil
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
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := x509ca.Init(dir, x509ca.InitOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	ca, err := x509ca.Load(x509ca.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := &sensorServer{ca: ca, active: map[string]bool{}}
	srv, err := grpcmtls.New(grpcmtls.Config{TLS: ca.ServerTLSConfig(), Authorizer: s, Heartbeats: s, Events: s})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// issue returns a client certificate for a new key, as enrolment would.
func (s *sensorServer) issue(t *testing.T) (*State, string) {
	t.Helper()
	key, keyPEM, csr, err := newKeyAndCSR("s-1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ca.SignCSR(fleet.CertRequest{CSRPEM: []byte(csr), TenantID: "acme", SensorID: "s-1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st := &State{SensorID: "s-1", TenantID: "acme", GRPCAddress: s.addr}
	if err := st.setCertificate(key, keyPEM, certificateAnswer{Certificate: string(c.CertificatePEM), CACertificate: string(s.ca.CACertificatePEM())}); err != nil {
		t.Fatal(err)
	}
	return st, c.Serial
}

func newTestGRPC(t *testing.T, st *State) *GRPC {
	t.Helper()
	cert, err := st.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGRPC(GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert, Timeout: 5 * time.Second,
		BatchSize: 4, BatchInterval: 20 * time.Millisecond, Backoff: Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
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
	if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test"); !errors.Is(err, ErrGRPCRefused) {
		t.Fatalf("Check after revocation: %v, want ErrGRPCRefused", err)
	}
	go func() { events <- &sensorpb.SensorEvent{EventId: "refused", Time: timestamppb.Now(), Kind: "alert"} }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrGRPCRefused) {
			t.Fatalf("StreamEvents after revocation: %v, want ErrGRPCRefused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StreamEvents kept going after the certificate was refused")
	}
}
