package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/internal/waitfor"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/agentwire"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const (
	opEmail    = controlplanetest.OperatorEmail
	opPassword = controlplanetest.OperatorPassword
)

// plane is a running control plane wired to a running provisioner, with an
// operator client whose failures end the test.
type plane struct {
	*controlplanetest.Plane
	t      *testing.T
	prov   *provisionertest.Stack
	client *controlplanetest.Client
	base   string
	grpc   string
	caPEM  []byte
}

func startPlane(t *testing.T, prov *provisionertest.Stack, mutate ...func(*app.ServeConfig)) *plane {
	t.Helper()
	cfg := controlplanetest.Config(t, prov)
	for _, m := range mutate {
		m(&cfg)
	}
	cp := controlplanetest.Start(t, cfg)
	return &plane{Plane: cp, t: t, prov: prov, client: cp.NewClient(), base: cp.Base, grpc: cp.GRPCAddr, caPEM: cp.CAPEM}
}

func (p *plane) stop() { p.Stop() }

// do sends a JSON request with the operator's cookies; bearer is optional.
func (p *plane) do(method, path string, body any, bearer string) (int, []byte) {
	p.t.Helper()
	return p.client.Checked(p.t).Status(method, path, body, bearer)
}

func (p *plane) must(method, path string, body any, bearer string, want int, into any) {
	p.t.Helper()
	p.client.Checked(p.t).Must(method, path, body, bearer, want, into)
}

// login signs the seeded operator in.
func (p *plane) login() {
	p.t.Helper()
	p.must("POST", "/api/auth/login", map[string]string{"email": opEmail, "password": opPassword}, "", 204, nil)
}

// provisionedTenant creates tenant id and waits until the provisioner has
// made its NATS account.
func (p *plane) provisionedTenant(id, name string) {
	p.t.Helper()
	p.must("POST", "/api/tenants", map[string]string{"id": id, "name": name}, "", 201, nil)
	waitUntil(p.t, 30*time.Second, "tenant "+id+" provisioned", func() bool {
		var v struct{ NatsStatus string }
		p.must("GET", "/api/tenants/"+id, nil, "", 200, &v)
		return v.NatsStatus == "provisioned"
	})
}

// enroller is the reference sensor client's enroller, aimed at this plane.
func (p *plane) enroller() *sensorclient.Enroller {
	p.t.Helper()
	e, err := sensorclient.NewEnroller(sensorclient.EnrollerConfig{BaseURL: p.base})
	if err != nil {
		p.t.Fatal(err)
	}
	return e
}

// setSensorJWTTTL restarts the provisioner's service so that the sensor
// user JWTs it signs from now on expire after ttl.
func setSensorJWTTTL(prov *provisionertest.Stack, ttl time.Duration) {
	prov.StopServe()
	prov.Config.SensorUserJWTTTL = ttl
	prov.StartServe()
	prov.WaitNATSReady()
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	waitfor.Until(t, limit, what, ok)
}

// testSensor is what a sensor holds after enrolment.
type testSensor struct {
	key  *ecdsa.PrivateKey
	enr  agentwire.EnrollResponse
	cert tls.Certificate
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newCSR(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "ignored"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func (p *plane) enrol(tenant string) *testSensor {
	p.t.Helper()
	var code struct{ Code string }
	p.must("POST", "/api/tenants/"+tenant+"/claim-codes", map[string]any{"ttlSeconds": 600, "sensorName": "edge-1"}, "", 201, &code)
	var red struct {
		SensorID, TenantID, EnrollmentToken string
	}
	p.must("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": code.Code, "hostname": "edge-1.local"}, "", 201, &red)
	key := mustKey(p.t)
	s := &testSensor{key: key}
	p.must("POST", "/api/sensors/"+red.SensorID+"/agent/enroll", map[string]string{"csr": newCSR(p.t, key)}, red.EnrollmentToken, 201, &s.enr)
	block, _ := pem.Decode([]byte(s.enr.Certificate))
	if block == nil {
		p.t.Fatal("enrol returned no certificate PEM")
	}
	s.cert = tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key}
	return s
}

func (p *plane) grpcConn(s *testSensor) *grpc.ClientConn {
	p.t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{s.cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	cc, err := grpc.NewClient(s.enr.GRPC.Address, grpc.WithTransportCredentials(creds))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { cc.Close() })
	return cc
}

func natsConnect(s *testSensor, opts ...nats.Option) (*nats.Conn, error) {
	tok, err := jwt.ParseDecoratedJWT([]byte(s.enr.NATS.Creds))
	if err != nil {
		return nil, err
	}
	kp, err := jwt.ParseDecoratedNKey([]byte(s.enr.NATS.Creds))
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	return nats.Connect(s.enr.NATS.URL, append([]nats.Option{
		nats.UserJWTAndSeed(tok, string(seed)), nats.CustomInboxPrefix(s.enr.NATS.InboxPrefix), nats.MaxReconnects(0),
	}, opts...)...)
}

// commandConsumer connects s to NATS with its enrolment's creds and
// returns the connection (closed when the test ends) and s's command
// consumer.
func commandConsumer(t *testing.T, ctx context.Context, s *testSensor) (*nats.Conn, jetstream.Consumer) {
	t.Helper()
	nc, err := natsConnect(s)
	if err != nil {
		t.Fatalf("sensor NATS connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, s.enr.NATS.JSAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, s.enr.NATS.Stream, s.enr.NATS.Consumer)
	if err != nil {
		t.Fatalf("sensor consumer: %v", err)
	}
	return nc, cons
}

func TestSensorJourney(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	p := startPlane(t, prov)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The operator logs in, creates a tenant, and the worker provisions it.
	p.must("POST", "/api/auth/login", map[string]string{"email": opEmail, "password": opPassword}, "", 204, nil)
	var me struct{ Email string }
	p.must("GET", "/api/auth/me", nil, "", 200, &me)
	if me.Email != opEmail {
		t.Fatalf("me = %q", me.Email)
	}
	var tenant struct{ ID, NatsStatus, NatsAccountPubKey string }
	p.must("POST", "/api/tenants", map[string]string{"id": "acme", "name": "Acme Corp"}, "", 201, &tenant)
	if tenant.NatsStatus != "pending" {
		t.Fatalf("new tenant natsStatus %q, want pending", tenant.NatsStatus)
	}
	waitUntil(t, 15*time.Second, "tenant provisioned by the reconcile worker", func() bool {
		p.must("GET", "/api/tenants/acme", nil, "", 200, &tenant)
		return tenant.NatsStatus == "provisioned" && tenant.NatsAccountPubKey != ""
	})

	// A sensor redeems a claim code and enrols with a CSR.
	s := p.enrol("acme")
	if s.enr.TenantID != "acme" || s.enr.NATS.Consumer != "cmd-acme-"+s.enr.SensorID || s.enr.NATS.URL != prov.NATSURL {
		t.Fatalf("enrolment response: %+v", s.enr)
	}
	leaf, _ := x509.ParseCertificate(s.cert.Certificate[0])
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "urn:rxc:sensor:acme:"+s.enr.SensorID {
		t.Fatalf("certificate URI SANs %v", leaf.URIs)
	}

	// It connects to NATS with the returned creds.
	nc, cons := commandConsumer(t, ctx, s)

	// It calls Check over mTLS and streams events.
	cc := p.grpcConn(s)
	hc := sensorpb.NewSensorHealthcheckServiceClient(cc)
	if resp, err := hc.Check(ctx, &sensorpb.CheckRequest{AgentVersion: "test"}); err != nil || resp.GetStatus() != sensorpb.CheckResponse_SERVING_STATUS_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}
	stream, err := sensorpb.NewSensorEventStreamServiceClient(cc).StreamEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := stream.Send(&sensorpb.SensorEvent{EventId: fmt.Sprintf("e-%d", i), Time: timestamppb.Now(), Kind: "alert"}); err != nil {
			t.Fatalf("send event %d: %v", i, err)
		}
	}

	// The operator sends start; the sensor receives it and reports running.
	var cmd struct{ CommandID string }
	p.must("POST", "/api/sensors/"+s.enr.SensorID+"/commands", map[string]string{"action": "start"}, "", 202, &cmd)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("sensor did not receive the command: %v", err)
	}
	var wire struct {
		CommandID, TenantID, SensorID, Action, IssuedBy string
		IssuedAt, ExpiresAt                             time.Time
	}
	if err := json.Unmarshal(msg.Data(), &wire); err != nil {
		t.Fatal(err)
	}
	if wire.CommandID != cmd.CommandID || wire.Action != "start" || wire.TenantID != "acme" || wire.SensorID != s.enr.SensorID || wire.IssuedBy != opEmail || !wire.ExpiresAt.After(wire.IssuedAt) {
		t.Fatalf("command on the wire: %+v (want id %s)", wire, cmd.CommandID)
	}
	if got := msg.Headers().Get("Nats-Msg-Id"); got != cmd.CommandID {
		t.Fatalf("Nats-Msg-Id %q, want %q", got, cmd.CommandID)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	report, _ := json.Marshal(map[string]any{"state": "running", "commandId": cmd.CommandID, "at": time.Now().UTC(), "agentVersion": "test"})
	if err := nc.Publish(s.enr.NATS.StatusSubject, report); err != nil {
		t.Fatal(err)
	}
	var view controlplanetest.SensorView
	waitUntil(t, 10*time.Second, "API shows the sensor running", func() bool {
		p.must("GET", "/api/sensors/"+s.enr.SensorID, nil, "", 200, &view)
		return view.State == "running" && view.LastCommand != nil && view.LastCommand.AcknowledgedAt != nil
	})
	if view.LastCommand.CommandID != cmd.CommandID || view.Certificate == nil || view.Certificate.Serial != s.enr.Serial {
		t.Fatalf("sensor view %+v", view)
	}

	// The operator revokes: the stream ends, NATS closes, the certificate is refused.
	p.must("POST", "/api/sensors/"+s.enr.SensorID+"/revoke", nil, "", 200, &view)
	if view.State != "revoked" {
		t.Fatalf("state after revoke %q", view.State)
	}
	streamEnded := make(chan error, 1)
	go func() {
		_, err := stream.CloseAndRecv()
		streamEnded <- err
	}()
	select {
	case err := <-streamEnded:
		if c := status.Code(err); c != codes.PermissionDenied && c != codes.Canceled && c != codes.Unavailable {
			t.Fatalf("event stream ended with %v, want PermissionDenied", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event stream still open 5s after revoke")
	}
	waitUntil(t, 3*time.Second, "sensor NATS connection closed", func() bool { return !nc.IsConnected() })
	if _, err := natsConnect(s); err == nil {
		t.Fatal("revoked NATS creds accepted")
	}
	if _, err := hc.Check(ctx, &sensorpb.CheckRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Check with a revoked certificate: %v, want PermissionDenied", err)
	}
	if st, _ := p.do("POST", "/api/sensors/"+s.enr.SensorID+"/agent/renew", map[string]string{"csr": newCSR(t, s.key)}, s.enr.SensorToken); st != 403 && st != 401 {
		t.Fatalf("renew after revoke: status %d", st)
	}
}
