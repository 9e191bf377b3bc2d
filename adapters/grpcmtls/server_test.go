package grpcmtls_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/internal/logbuf"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// fakeAuthorizer knows which serial is active for which sensor, as the
// control plane's store would.
type fakeAuthorizer struct {
	mu         sync.Mutex
	active     map[string]grpcmtls.Identity // by serial
	revoked    map[string]bool
	superseded map[string]bool
	failWith   error
	calls      int
}

// supersede makes serial a replaced certificate, as a renewal does.
func (a *fakeAuthorizer) supersede(serial string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.superseded == nil {
		a.superseded = map[string]bool{}
	}
	a.superseded[serial] = true
}

func (a *fakeAuthorizer) allow(id grpcmtls.Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active[id.Serial] = id
}

func (a *fakeAuthorizer) revoke(serial string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revoked[serial] = true
}

// fail makes every authorization answer err from now on; nil ends that.
func (a *fakeAuthorizer) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failWith = err
}

func (a *fakeAuthorizer) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

func (a *fakeAuthorizer) AuthorizeSensor(_ context.Context, tenantID, sensorID, serial string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	id, ok := a.active[serial]
	switch {
	case a.failWith != nil:
		return a.failWith
	case !ok:
		return fmt.Errorf("serial %s: %w", serial, fleet.ErrNotFound)
	case id.TenantID != tenantID || id.SensorID != sensorID:
		return fmt.Errorf("serial %s belongs to another sensor: %w", serial, fleet.ErrNotFound)
	case a.revoked[serial]:
		return fmt.Errorf("serial %s: %w", serial, fleet.ErrRevoked)
	case a.superseded[serial]:
		return fmt.Errorf("serial %s: not active: %w", serial, fleet.ErrInvalidToken)
	}
	return nil
}

// fakeHeartbeats authorises each check-in against the fake authorizer, as
// the control plane's one statement does, and records the good ones.
type fakeHeartbeats struct {
	auth     *fakeAuthorizer
	mu       sync.Mutex
	seen     []string
	contacts []fleet.Contact
	err      error
}

func (h *fakeHeartbeats) CheckIn(ctx context.Context, tenantID, sensorID, serial string, c fleet.Contact) error {
	if err := h.auth.AuthorizeSensor(ctx, tenantID, sensorID, serial); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	h.seen = append(h.seen, tenantID+"/"+sensorID)
	h.contacts = append(h.contacts, c)
	return nil
}

func (h *fakeHeartbeats) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

type sunk struct {
	From    grpcmtls.Identity
	EventID string
}

// chanSink hands events to the test as they arrive, so the test knows a
// stream is live without guessing at timing.
type chanSink chan sunk

func (c chanSink) AcceptEvent(_ context.Context, from grpcmtls.Identity, ev *sensorpb.SensorEvent) error {
	c <- sunk{From: from, EventID: ev.GetEventId()}
	return nil
}

type lockedBuffer = logbuf.Buffer

type fixture struct {
	ca    *x509ca.CA
	caDir string
	srv   *grpcmtls.Server
	addr  string
	auth  *fakeAuthorizer
	beats *fakeHeartbeats
	logs  *lockedBuffer
}

type option func(*grpcmtls.Config)

func withSink(s grpcmtls.EventSink) option { return func(c *grpcmtls.Config) { c.Events = s } }

// startSinking is start with opts whose accepted events go to the returned
// sink.
func startSinking(t testing.TB, opts ...option) (*fixture, chanSink) {
	t.Helper()
	sink := make(chanSink, 16)
	return start(t, append([]option{withSink(sink)}, opts...)...), sink
}

func start(t testing.TB, opts ...option) *fixture {
	t.Helper()
	ca, dir := x509catest.New(t, x509ca.InitOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509ca.Config{})
	f := &fixture{
		ca: ca, caDir: dir,
		auth: &fakeAuthorizer{active: map[string]grpcmtls.Identity{}, revoked: map[string]bool{}},
		logs: &lockedBuffer{},
	}
	f.beats = &fakeHeartbeats{auth: f.auth}
	cfg := grpcmtls.Config{
		TLS:        ca.ServerTLSConfig(),
		Authorizer: f.auth,
		Heartbeats: f.beats,
		Logger:     slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	f.srv, err = grpcmtls.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	})
	return f
}

// enrol issues a certificate the way the control plane does and, when
// active, tells the authorizer its serial.
func (f *fixture) enrol(t testing.TB, tenantID, sensorID string, active bool) (tls.Certificate, grpcmtls.Identity) {
	t.Helper()
	key, csr := x509catest.KeyCSR(t)
	issued, err := f.ca.SignCSR(fleet.CertRequest{CSRPEM: csr, TenantID: tenantID, SensorID: sensorID})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(issued.CertificatePEM, mustPKCS8(t, key))
	if err != nil {
		t.Fatal(err)
	}
	id := grpcmtls.Identity{TenantID: tenantID, SensorID: sensorID, Serial: issued.Serial}
	if active {
		f.auth.allow(id)
	}
	return cert, id
}

// forge signs an arbitrary template with the CA's own key: certificates the
// CA would never issue through SignCSR but that pass the TLS chain check.
func (f *fixture) forge(t *testing.T, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(f.caDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(f.caDir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPair, err := tls.X509KeyPair(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caPair.Leaf, &key.PublicKey, caPair.PrivateKey.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func mustPKCS8(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func (f *fixture) dial(t testing.TB, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (f *fixture) sensor(t testing.TB, cert tls.Certificate) *grpc.ClientConn {
	return f.dial(t, f.ca.ClientTLSConfig(cert, "localhost"))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var errDatabaseDown = errors.New("database down")

// jsonString is a JSON string value of n bytes.
func jsonString(n int) []byte {
	return append(append([]byte{'"'}, bytes.Repeat([]byte("x"), n-2)...), '"')
}

func event(id string) *sensorpb.SensorEvent {
	return &sensorpb.SensorEvent{
		EventId: id, Time: timestamppb.New(time.Now().Add(-time.Second)), Kind: "alert", SrcIp: "192.0.2.10", SrcPort: 51000, DestIp: "198.51.100.7", DestPort: 443, Protocol: "TCP",
		Alert:   &sensorpb.Alert{SignatureId: 2100498, Signature: "GPL ATTACK_RESPONSE id check returned root", Category: "Potentially Bad Traffic", Severity: 2},
		RawJson: []byte(`{"event_type":"alert","secret_marker":"raw-payload"}`),
	}
}

// sendEvents streams evs and closes; Send errors are left to CloseAndRecv,
// which reports the status the server ended the call with.
func sendEvents(ctx context.Context, conn *grpc.ClientConn, evs ...*sensorpb.SensorEvent) (uint64, error) {
	stream, err := sensorpb.NewSensorEventStreamServiceClient(conn).StreamEvents(ctx)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	return resp.GetAccepted(), err
}

func check(ctx context.Context, conn *grpc.ClientConn) (*sensorpb.CheckResponse, error) {
	return sensorpb.NewSensorHealthcheckServiceClient(conn).Check(ctx, &sensorpb.CheckRequest{AgentVersion: "1.2.3", State: sensorpb.SensorState_SENSOR_STATE_RUNNING})
}

func TestSensorChecksAndStreams(t *testing.T) {
	t.Parallel()
	f, sink := startSinking(t)
	cert, id := f.enrol(t, "acme", "s1", true)
	conn := f.sensor(t, cert)
	ctx := testCtx(t)

	before := time.Now()
	resp, err := check(ctx, conn)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got, want := resp.GetStatus(), sensorpb.CheckResponse_SERVING_STATUS_SERVING; got != want {
		t.Errorf("Check status = %v, want %v", got, want)
	}
	if st := resp.GetServerTime().AsTime(); st.Before(before.Add(-time.Second)) || st.After(time.Now().Add(time.Second)) {
		t.Errorf("server_time %v is not now", st)
	}
	if diff := cmp.Diff([]string{"acme/s1"}, f.beats.list()); diff != "" {
		t.Errorf("heartbeats (-want +got):\n%s", diff)
	}
	f.beats.mu.Lock()
	// The address the call came from and the version the agent sent.
	if diff := cmp.Diff([]fleet.Contact{{Address: "127.0.0.1", AgentVersion: "1.2.3"}}, f.beats.contacts); diff != "" {
		t.Errorf("heartbeat contacts (-want +got):\n%s", diff)
	}
	f.beats.mu.Unlock()

	accepted, err := sendEvents(ctx, conn, event("e1"), event("e2"), event("e3"))
	if err != nil {
		t.Fatalf("StreamEvents: %v", err)
	}
	if accepted != 3 {
		t.Errorf("accepted = %d, want 3", accepted)
	}
	close(sink)
	var got []sunk
	for s := range sink {
		got = append(got, s)
	}
	want := []sunk{{id, "e1"}, {id, "e2"}, {id, "e3"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events reaching the sink (-want +got):\n%s", diff)
	}
}

func TestDefaultSinkLogsEnvelopeOnly(t *testing.T) {
	t.Parallel()
	f := start(t)
	cert, _ := f.enrol(t, "acme", "s1", true)
	if _, err := sendEvents(testCtx(t), f.sensor(t, cert), event("e1")); err != nil {
		t.Fatalf("StreamEvents: %v", err)
	}
	logs := f.logs.String()
	for _, want := range []string{`"msg":"sensor event"`, `"tenant_id":"acme"`, `"sensor_id":"s1"`, `"kind":"alert"`, `"event_id":"e1"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "raw-payload") {
		t.Errorf("log contains the raw event record:\n%s", logs)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	t.Parallel()
	f := start(t)
	other := start(t)
	otherCert, _ := other.enrol(t, "acme", "s1", true)
	expired := f.forge(t, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "s1"},
		URIs:      []*url.URL{x509ca.SensorURI("acme", "s1")},
		NotBefore: time.Now().Add(-48 * time.Hour),
		NotAfter:  time.Now().Add(-24 * time.Hour),
	})
	f.auth.allow(grpcmtls.Identity{TenantID: "acme", SensorID: "s1", Serial: x509ca.SerialHex(expired.Leaf.SerialNumber)})
	valid, _ := f.enrol(t, "acme", "s1", true)
	noCert := f.ca.ClientTLSConfig(valid, "localhost")
	noCert.Certificates = nil

	tests := []struct {
		name string
		tls  *tls.Config
		// wantAlert is the alert the server sends when the handshake fails.
		wantAlert string
	}{
		{"no client certificate", noCert, "tls: certificate required"},
		{"certificate from another CA", f.ca.ClientTLSConfig(otherCert, "localhost"), "tls: unknown certificate authority"},
		{"expired certificate", f.ca.ClientTLSConfig(expired, "localhost"), "tls: expired certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(testCtx(t), f.dial(t, tt.tls))
			if got := status.Code(err); got != codes.Unavailable {
				t.Errorf("Check code = %v (%v), want %v: the handshake must fail", got, err, codes.Unavailable)
			}
			// gRPC's first write may race the alert, so the alert itself is
			// read on a plain TLS connection that never writes.
			if got := tlsAlert(t, f.addr, tt.tls); !strings.Contains(got, tt.wantAlert) {
				t.Errorf("TLS connection error %q, want the alert %q", got, tt.wantAlert)
			}
		})
	}
	if n := f.auth.callCount(); n != 0 {
		t.Errorf("authorizer called %d times, want 0: refused handshakes must not reach it", n)
	}
	if _, err := check(testCtx(t), f.sensor(t, valid)); err != nil {
		t.Errorf("control: Check with a valid certificate: %v", err)
	}
}

// tlsAlert completes a client handshake (in TLS 1.3 the server verifies the
// client afterwards) and returns the error of the first read.
func tlsAlert(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Read(make([]byte, 1))
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestCallRefusals(t *testing.T) {
	t.Parallel()
	f := start(t)
	revokedCert, revokedID := f.enrol(t, "acme", "s1", true)
	f.auth.revoke(revokedID.Serial)
	unknownCert, _ := f.enrol(t, "acme", "s2", false)
	// The authorizer holds this serial for tenant "other": the URI SAN names
	// the wrong tenant.
	mismatchCert, mismatchID := f.enrol(t, "acme", "s3", false)
	f.auth.allow(grpcmtls.Identity{TenantID: "other", SensorID: "s3", Serial: mismatchID.Serial})
	cnMismatch := f.forge(t, &x509.Certificate{Subject: pkix.Name{CommonName: "s9"}, URIs: []*url.URL{x509ca.SensorURI("acme", "s4")}})
	noURI := f.forge(t, &x509.Certificate{Subject: pkix.Name{CommonName: "s5"}})
	// Active serial, so only the identity check can refuse it.
	f.auth.allow(grpcmtls.Identity{TenantID: "acme", SensorID: "s4", Serial: x509ca.SerialHex(cnMismatch.Leaf.SerialNumber)})

	tests := []struct {
		name string
		cert tls.Certificate
		want codes.Code
	}{
		{"revoked serial", revokedCert, codes.PermissionDenied},
		{"unknown serial", unknownCert, codes.PermissionDenied},
		{"URI SAN names another tenant", mismatchCert, codes.PermissionDenied},
		{"common name differs from URI SAN", cnMismatch, codes.Unauthenticated},
		{"no URI SAN", noURI, codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := f.sensor(t, tt.cert)
			ctx := testCtx(t)
			if _, err := check(ctx, conn); status.Code(err) != tt.want {
				t.Errorf("Check: code %v (%v), want %v", status.Code(err), err, tt.want)
			}
			if _, err := sendEvents(ctx, conn, event("e1")); status.Code(err) != tt.want {
				t.Errorf("StreamEvents: code %v (%v), want %v", status.Code(err), err, tt.want)
			}
		})
	}
	t.Cleanup(func() {
		if seen := f.beats.list(); len(seen) != 0 {
			t.Errorf("heartbeats recorded for refused sensors: %v", seen)
		}
	})
}

// The health check is authorised by its check-in alone, once a call, on a
// resumed TLS session as on a full handshake: a sensor revoked between two
// checks (through any replica: only the store is asked) is refused on the
// next one even though its session resumes, and nothing is recorded;
// another sensor resuming beside it stays in.
func TestResumedSessionAfterRevocationIsRefused(t *testing.T) {
	t.Parallel()
	f := start(t)
	victimCert, victim := f.enrol(t, "acme", "s1", true)
	bystanderCert, _ := f.enrol(t, "acme", "s2", true)
	caches := map[string]tls.ClientSessionCache{"s1": tls.NewLRUClientSessionCache(1), "s2": tls.NewLRUClientSessionCache(1)}
	// One new connection a check, as an agent whose connection went idle.
	checkOnce := func(name string, cert tls.Certificate) (resumed bool, err error) {
		cfg := f.ca.ClientTLSConfig(cert, "localhost")
		cfg.ClientSessionCache = caches[name]
		conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var p peer.Peer
		_, err = sensorpb.NewSensorHealthcheckServiceClient(conn).Check(testCtx(t), &sensorpb.CheckRequest{AgentVersion: "1.2.3"}, grpc.Peer(&p))
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			resumed = info.State.DidResume
		}
		return resumed, err
	}
	for _, name := range []string{"s1", "s2"} {
		cert := map[string]tls.Certificate{"s1": victimCert, "s2": bystanderCert}[name]
		if _, err := checkOnce(name, cert); err != nil {
			t.Fatalf("%s first check: %v", name, err)
		}
		// The session ticket arrives after the handshake: the second check
		// resumes.
		if resumed, err := checkOnce(name, cert); err != nil || !resumed {
			t.Fatalf("%s second check: resumed %v, %v; want a resumed session", name, resumed, err)
		}
	}
	calls := f.auth.callCount()
	if calls != 4 {
		t.Errorf("authorizer called %d times for 4 checks, want 4: each check authorised once, by its check-in", calls)
	}
	f.auth.revoke(victim.Serial)
	before := len(f.beats.list())
	resumed, err := checkOnce("s1", victimCert)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("check after the revocation: %v, want PermissionDenied", err)
	}
	if !resumed {
		t.Errorf("the check after the revocation did not resume its session: the test must show a resumed session refused")
	}
	if resumed, err := checkOnce("s2", bystanderCert); err != nil || !resumed {
		t.Errorf("control: the bystander's resumed check: resumed %v, %v", resumed, err)
	}
	if got := f.beats.list()[before:]; !slices.Equal(got, []string{"acme/s2"}) {
		t.Errorf("checks recorded after the revocation %v, want only acme/s2", got)
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"msg":"sensor call refused"`) || !strings.Contains(logs, victim.Serial) {
		t.Errorf("the refusal is not logged as a refused call with the serial:\n%s", logs)
	}
}

func TestTerminateEndsLiveStreams(t *testing.T) {
	t.Parallel()
	f, sink := startSinking(t)
	victim, _ := f.openSensor(t, sink, "acme", "s1", "v1")
	bystander, _ := f.openSensor(t, sink, "acme", "s2", "b1")
	if st := f.srv.Stats(); st.EventStreams != 2 || st.Connections != 2 {
		t.Fatalf("stats with two open streams: %+v, want 2 streams on 2 connections", st)
	}

	f.srv.Terminate("acme", "s1")
	if st := f.srv.Stats(); st.EventStreams != 1 {
		t.Errorf("stats after Terminate: %+v, want 1 stream", st)
	}

	// The victim has not closed its side: only Terminate can end the call
	// before ctx's deadline.
	err := victim.RecvMsg(new(sensorpb.StreamEventsResponse))
	if got := status.Code(err); got != codes.PermissionDenied {
		t.Fatalf("terminated stream ended with %v (%v), want %v", got, err, codes.PermissionDenied)
	}

	if err := bystander.Send(event("b2")); err != nil {
		t.Fatalf("bystander Send after Terminate: %v", err)
	}
	<-sink
	resp, err := bystander.CloseAndRecv()
	if err != nil {
		t.Fatalf("bystander stream: %v", err)
	}
	if resp.GetAccepted() != 2 {
		t.Errorf("bystander accepted = %d, want 2", resp.GetAccepted())
	}
	// The streams' ends are counted (the victim's once only).
	deadline := time.Now().Add(10 * time.Second)
	for f.srv.Stats().EventStreams != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stats after both streams ended: %+v, want 0 streams", f.srv.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEventValidation(t *testing.T) {
	t.Parallel()
	f := start(t)
	cert, _ := f.enrol(t, "acme", "s1", true)
	conn := f.sensor(t, cert)
	with := func(change func(*sensorpb.SensorEvent)) *sensorpb.SensorEvent {
		ev := event("e1")
		change(ev)
		return ev
	}
	tests := []struct {
		name string
		ev   *sensorpb.SensorEvent
		want codes.Code
	}{
		{"raw_json at the limit", with(func(e *sensorpb.SensorEvent) { e.RawJson = jsonString(events.MaxRawJSON) }), codes.OK},
		{"raw_json over the limit", with(func(e *sensorpb.SensorEvent) { e.RawJson = jsonString(events.MaxRawJSON + 1) }), codes.InvalidArgument},
		{"raw_json not JSON", with(func(e *sensorpb.SensorEvent) { e.RawJson = []byte("x") }), codes.InvalidArgument},
		// The limits are core/events' (one rule set for every edge), not
		// the gRPC edge's own.
		{"kind at the limit", with(func(e *sensorpb.SensorEvent) { e.Kind = strings.Repeat("k", events.MaxKind) }), codes.OK},
		{"kind over the limit", with(func(e *sensorpb.SensorEvent) { e.Kind = strings.Repeat("k", events.MaxKind+1) }), codes.InvalidArgument},
		{"protocol over the limit", with(func(e *sensorpb.SensorEvent) { e.Protocol = strings.Repeat("p", events.MaxProtocol+1) }), codes.InvalidArgument},
		{"severity over the limit", with(func(e *sensorpb.SensorEvent) { e.Alert.Severity = events.MaxSeverity + 1 }), codes.InvalidArgument},
		{"time a year ago", with(func(e *sensorpb.SensorEvent) { e.Time = timestamppb.New(time.Now().AddDate(-1, 0, 0)) }), codes.InvalidArgument},
		{"no event_id", with(func(e *sensorpb.SensorEvent) { e.EventId = "" }), codes.InvalidArgument},
		{"long event_id", with(func(e *sensorpb.SensorEvent) { e.EventId = strings.Repeat("e", 129) }), codes.InvalidArgument},
		{"no kind", with(func(e *sensorpb.SensorEvent) { e.Kind = "" }), codes.InvalidArgument},
		{"no time", with(func(e *sensorpb.SensorEvent) { e.Time = nil }), codes.InvalidArgument},
		{"bad address", with(func(e *sensorpb.SensorEvent) { e.SrcIp = "300.1.1.1" }), codes.InvalidArgument},
		{"port out of range", with(func(e *sensorpb.SensorEvent) { e.DestPort = 70000 }), codes.InvalidArgument},
		{"message over the gRPC limit", with(func(e *sensorpb.SensorEvent) { e.RawJson = make([]byte, grpcmtls.DefaultMaxRecvMsgSize+1) }), codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := sendEvents(testCtx(t), conn, tt.ev)
			if got := status.Code(err); got != tt.want {
				t.Errorf("StreamEvents code = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

func TestHeartbeatFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"sensor gone", fmt.Errorf("sensor: %w", fleet.ErrNotFound), codes.PermissionDenied},
		{"store failure", errors.New("query failed at 10.0.0.5"), codes.Internal},
		{"database down", fmt.Errorf("dial 10.0.0.5: %w", errDatabaseDown), codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := start(t, func(c *grpcmtls.Config) {
				c.DatabaseUnavailable = func(err error) bool { return errors.Is(err, errDatabaseDown) }
			})
			f.beats.err = tt.err
			cert, _ := f.enrol(t, "acme", "s1", true)
			_, err := check(testCtx(t), f.sensor(t, cert))
			if got := status.Code(err); got != tt.want {
				t.Errorf("Check code = %v (%v), want %v", got, err, tt.want)
			}
			if tt.want == codes.Unavailable && grpcmtls.Reason(err) != "database_unavailable" {
				t.Errorf("Check reason = %q, want database_unavailable", grpcmtls.Reason(err))
			}
			if strings.Contains(status.Convert(err).Message(), "10.0.0.5") {
				t.Errorf("status message leaks the internal error: %q", status.Convert(err).Message())
			}
		})
	}
}

func TestShutdownIsBounded(t *testing.T) {
	t.Parallel()
	sink := make(chanSink, 1)
	f := start(t, withSink(sink))
	cert, _ := f.enrol(t, "acme", "s1", true)
	ctx := testCtx(t)
	stream, err := sensorpb.NewSensorEventStreamServiceClient(f.sensor(t, cert)).StreamEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(event("e1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sink:
	case <-ctx.Done():
		t.Fatal("the event never reached the sink")
	}

	// The stream never ends by itself, so a graceful stop alone would wait
	// forever; an expired context must make Shutdown close it.
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	f.srv.Shutdown(expired)

	if err := stream.RecvMsg(new(sensorpb.StreamEventsResponse)); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("stream after Shutdown: err = %v, want a failure status", err)
	} else if status.Code(err) == codes.DeadlineExceeded {
		t.Errorf("stream outlived Shutdown until the test deadline")
	}
}

func TestNewRefusesWeakConfig(t *testing.T) {
	t.Parallel()
	ca := x509catest.Localhost(t)
	good := grpcmtls.Config{TLS: ca.ServerTLSConfig(), Authorizer: &fakeAuthorizer{}, Heartbeats: &fakeHeartbeats{}}
	tests := []struct {
		name   string
		change func(*grpcmtls.Config)
	}{
		{"no TLS", func(c *grpcmtls.Config) { c.TLS = nil }},
		{"client certificate optional", func(c *grpcmtls.Config) { c.TLS.ClientAuth = tls.VerifyClientCertIfGiven }},
		{"TLS 1.2 allowed", func(c *grpcmtls.Config) { c.TLS.MinVersion = tls.VersionTLS12 }},
		{"no client CAs", func(c *grpcmtls.Config) { c.TLS.ClientCAs = nil }},
		{"no authorizer", func(c *grpcmtls.Config) { c.Authorizer = nil }},
		{"no heartbeats", func(c *grpcmtls.Config) { c.Heartbeats = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			cfg.TLS = ca.ServerTLSConfig()
			tt.change(&cfg)
			if _, err := grpcmtls.New(cfg); err == nil {
				t.Errorf("New accepted the config, want an error")
			}
		})
	}
	if _, err := grpcmtls.New(good); err != nil {
		t.Errorf("control: New with a good config: %v", err)
	}
}

// openStream opens an event stream with cert and waits until its first
// event reached the sink, which proves the stream is registered.
func openStream(t *testing.T, f *fixture, sink chanSink, cert tls.Certificate, id string) sensorpb.SensorEventStreamService_StreamEventsClient {
	t.Helper()
	ctx := testCtx(t)
	stream, err := sensorpb.NewSensorEventStreamServiceClient(f.sensor(t, cert)).StreamEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(event(id)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sink:
	case <-ctx.Done():
		t.Fatalf("event %s never arrived", id)
	}
	return stream
}

// oneStream starts a server with opts whose events go to the returned
// sink, enrols sensor acme/s1 and opens its event stream (event "e1").
func oneStream(t *testing.T, opts ...option) (*fixture, chanSink, sensorpb.SensorEventStreamService_StreamEventsClient, grpcmtls.Identity) {
	t.Helper()
	f, sink := startSinking(t, opts...)
	stream, id := f.openSensor(t, sink, "acme", "s1", "e1")
	return f, sink, stream, id
}

// openSensor enrols tenantID/sensorID with an active certificate and opens
// its event stream (openStream, first event first).
func (f *fixture) openSensor(t *testing.T, sink chanSink, tenantID, sensorID, first string) (sensorpb.SensorEventStreamService_StreamEventsClient, grpcmtls.Identity) {
	t.Helper()
	cert, id := f.enrol(t, tenantID, sensorID, true)
	return openStream(t, f, sink, cert, first), id
}

// revokedEnds revokes id's certificate and wants the server to end its
// stream with PermissionDenied.
func revokedEnds(t *testing.T, f *fixture, id grpcmtls.Identity, stream sensorpb.SensorEventStreamService_StreamEventsClient) {
	t.Helper()
	f.auth.revoke(id.Serial)
	if st := ended(t, stream); st.Code() != codes.PermissionDenied {
		t.Errorf("stream of a revoked sensor ended with %v, want PermissionDenied", st)
	}
}

// ended waits for the server to end stream and returns its status.
func ended(t *testing.T, stream sensorpb.SensorEventStreamService_StreamEventsClient) *status.Status {
	t.Helper()
	return status.Convert(stream.RecvMsg(new(sensorpb.StreamEventsResponse)))
}

// TestRecheckEndsRevokedAndSupersededStreams: a broadcast revocation or
// renewal ends the streams whose certificate is no longer active; a stream
// on the sensor's new certificate and other sensors' streams go on.
func TestRecheckEndsRevokedAndSupersededStreams(t *testing.T) {
	t.Parallel()
	f, sink := startSinking(t)
	onOld, oldID := f.openSensor(t, sink, "acme", "s1", "o1")
	onNew, _ := f.openSensor(t, sink, "acme", "s1", "n1") // a second certificate of s1
	revoked, revokedID := f.openSensor(t, sink, "acme", "s2", "r1")
	bystander, _ := f.openSensor(t, sink, "acme", "s3", "b1")

	f.auth.supersede(oldID.Serial)
	f.auth.revoke(revokedID.Serial)
	f.srv.Recheck(testCtx(t), "acme", "s1")
	f.srv.Recheck(testCtx(t), "acme", "s2")

	if st := ended(t, onOld); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "superseded") {
		t.Errorf("stream on the superseded certificate ended with %v, want PermissionDenied saying superseded", st)
	}
	if st := ended(t, revoked); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "terminated") {
		t.Errorf("stream of the revoked sensor ended with %v, want PermissionDenied saying terminated", st)
	}
	for name, stream := range map[string]sensorpb.SensorEventStreamService_StreamEventsClient{"new-certificate": onNew, "bystander": bystander} {
		if err := stream.Send(event(name + "-2")); err != nil {
			t.Fatalf("%s: Send after Recheck: %v", name, err)
		}
		select {
		case <-sink:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: event after Recheck never arrived", name)
		}
		resp, err := stream.CloseAndRecv()
		if err != nil || resp.GetAccepted() != 2 {
			t.Errorf("%s stream after Recheck: accepted %d, %v; want 2, nil", name, resp.GetAccepted(), err)
		}
	}
}

// TestStreamsRecheckOnTheirOwn: without any broadcast, a stream finds out
// within its re-check interval that its sensor was revoked.
func TestStreamsRecheckOnTheirOwn(t *testing.T) {
	t.Parallel()
	f, _, stream, id := oneStream(t, func(c *grpcmtls.Config) { c.RecheckInterval = 200 * time.Millisecond })
	// The test context (a minute) bounds the wait; the interval is 200 ms.
	revokedEnds(t, f, id, stream)
}

// A stream re-checks again and again (a timer re-armed after each check),
// not just once: a revocation after several passed checks still ends it.
func TestStreamsRecheckRepeatedly(t *testing.T) {
	t.Parallel()
	f, _, stream, id := oneStream(t, func(c *grpcmtls.Config) { c.RecheckInterval = 50 * time.Millisecond })
	base := f.auth.callCount()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := f.auth.callCount() - base
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d re-checks of the open stream in 30 s at a 50 ms interval", n)
		}
	}
	revokedEnds(t, f, id, stream)
}

// TestRecheckKeepsStreamsWhenTheCheckFails: a database outage during the
// re-check is no reason to end a stream.
func TestRecheckKeepsStreamsWhenTheCheckFails(t *testing.T) {
	t.Parallel()
	f, sink, stream, _ := oneStream(t)
	f.auth.fail(errDatabaseDown)
	f.srv.RecheckAll(testCtx(t))
	f.auth.fail(nil)
	if err := stream.Send(event("e2")); err != nil {
		t.Fatal(err)
	}
	<-sink
	if resp, err := stream.CloseAndRecv(); err != nil || resp.GetAccepted() != 2 {
		t.Errorf("stream after a failed re-check: accepted %d, %v; want 2, nil", resp.GetAccepted(), err)
	}
}
