package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// replicas are two control planes on one database and one sensor CA, as
// the documented deployment runs them, with events stored, beside a
// provisioner of their own; tenants are provisioned (named as their ids).
func replicas(t *testing.T, tenants ...string) (a, b *plane) {
	t.Helper()
	prov := provisionertest.Start(t, provisionertest.Options{})
	a = startPlane(t, prov, func(c *app.ServeConfig) {
		c.Events = app.EventsConfig{Enabled: true, StreamName: "RXC_EVENTS", WriterBatch: 500}
		c.RenewMinInterval = time.Millisecond
	})
	cfg := a.Config
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.GRPCListenAddr = fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	cfg.PublicGRPCAddr = cfg.GRPCListenAddr
	cp := controlplanetest.Start(t, cfg)
	b = &plane{Plane: cp, t: t, prov: prov, client: cp.NewClient(), base: cp.Base, grpc: cp.GRPCAddr, caPEM: cp.CAPEM}
	a.login()
	b.login()
	for _, id := range tenants {
		a.provisionedTenant(id, id)
	}
	return a, b
}

// dial connects a sensor certificate to a replica's gRPC address.
func (p *plane) dial(cert tls.Certificate) *grpc.ClientConn {
	p.t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(creds))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { cc.Close() })
	return cc
}

// liveStream opens an event stream and waits until its first event is
// stored, which proves the replica holds the stream.
func liveStream(t *testing.T, ctx context.Context, cc *grpc.ClientConn, db *pgxpool.Pool, sensorID, eventID string) sensorpb.SensorEventStreamService_StreamEventsClient {
	t.Helper()
	stream, err := sensorpb.NewSensorEventStreamServiceClient(cc).StreamEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := &sensorpb.SensorEvent{EventId: eventID, Time: timestamppb.Now(), Kind: "alert"}
	if err := stream.Send(ev); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "event "+eventID+" stored", func() bool {
		return count(t, db, "sensor_id = $1 AND event_id = $2", sensorID, eventID) == 1
	})
	return stream
}

// endsWithin waits for the server to end stream and returns how long after
// since that was, and the status.
func endsWithin(stream sensorpb.SensorEventStreamService_StreamEventsClient, since time.Time) (time.Duration, *status.Status) {
	err := stream.RecvMsg(new(sensorpb.StreamEventsResponse))
	return time.Since(since), status.Convert(err)
}

// TestRevocationAndRenewalReachEveryReplica: a sensor streams to replica
// B; revoking it through replica A ends B's stream within 2 s (B's own
// periodic re-check is 30 s, so only the broadcast can do that), and a
// renewal through A ends B's stream on the replaced certificate while a
// stream on the new one works.
func TestRevocationAndRenewalReachEveryReplica(t *testing.T) {
	a, b := replicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := a.Pool()
	a.provisionedTenant("acme", "Acme")

	// Revocation.
	victim := a.enrol("acme")
	stream := liveStream(t, ctx, b.dial(victim.cert), db, victim.enr.SensorID, "before-revoke")
	start := time.Now()
	code, body := a.do("POST", "/api/sensors/"+victim.enr.SensorID+"/revoke", nil, "")
	if code != 200 && code != 204 {
		t.Fatalf("revoke through A: %d %s", code, body)
	}
	took, st := endsWithin(stream, start)
	if st.Code() != codes.PermissionDenied {
		t.Errorf("B's stream of the revoked sensor ended with %v, want PermissionDenied", st)
	}
	if took > 2*time.Second {
		t.Errorf("B ended the revoked sensor's stream %s after the revocation through A, want within 2s", took)
	}
	if _, err := sensorpb.NewSensorHealthcheckServiceClient(b.dial(victim.cert)).Check(ctx, &sensorpb.CheckRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("B's health check of the revoked sensor: %v, want PermissionDenied", err)
	}
	if n := count(t, db, "sensor_id = $1", victim.enr.SensorID); n != 1 {
		t.Errorf("revoked sensor has %d stored events, want 1 (the one before the revocation)", n)
	}

	// Renewal.
	renewed := a.enrol("acme")
	old := liveStream(t, ctx, b.dial(renewed.cert), db, renewed.enr.SensorID, "before-renew")
	key := mustKey(t)
	var cert struct{ Certificate string }
	start = time.Now()
	a.must("POST", "/api/sensors/"+renewed.enr.SensorID+"/agent/renew", renewal(t, renewed, newCSR(t, key)), renewed.enr.SensorToken, 200, &cert)
	took, st = endsWithin(old, start)
	if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "superseded") {
		t.Errorf("B's stream on the replaced certificate ended with %v, want PermissionDenied saying superseded", st)
	}
	if took > 2*time.Second {
		t.Errorf("B ended the stream on the replaced certificate %s after the renewal through A, want within 2s", took)
	}
	block, _ := pem.Decode([]byte(cert.Certificate))
	if block == nil {
		t.Fatal("renewal returned no certificate")
	}
	fresh := liveStream(t, ctx, b.dial(tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key}), db, renewed.enr.SensorID, "after-renew")
	if resp, err := fresh.CloseAndRecv(); err != nil || resp.GetAccepted() != 1 {
		t.Errorf("stream on the renewed certificate: accepted %d, %v; want 1, nil", resp.GetAccepted(), err)
	}
}

// renewal is a renewal request for csr proven with the sensor's current key.
func renewal(t *testing.T, s *testSensor, csr string) map[string]any {
	t.Helper()
	at := time.Now().UTC()
	digest := sha256.Sum256(fleet.RenewalMessage(s.enr.SensorID, []byte(csr), at))
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"csr": csr, "proof": map[string]any{
		"certificate": s.enr.Certificate, "signedAt": at, "signature": base64.StdEncoding.EncodeToString(sig)}}
}

// A health check is authorised by the statement that records it, on every
// replica alike: a sensor revoked through A is refused on B at its very
// next check, though its TLS session with B resumes; a certificate
// replaced by a renewal through A is refused on B, the new one let in;
// another tenant's bystander is untouched.
func TestHealthChecksFollowRevocationAndRenewalOnEveryReplica(t *testing.T) {
	a, b := replicas(t, "acme", "beta")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.caPEM)
	// check makes one health check on a new connection to B, resuming the
	// TLS session cached for that certificate, as an agent whose idle
	// connection closed; it reports whether the session resumed.
	caches := map[*tls.Certificate]tls.ClientSessionCache{}
	check := func(cert *tls.Certificate) (bool, error) {
		if caches[cert] == nil {
			caches[cert] = tls.NewLRUClientSessionCache(1)
		}
		creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, RootCAs: pool, ServerName: "127.0.0.1",
			MinVersion: tls.VersionTLS13, ClientSessionCache: caches[cert]})
		cc, err := grpc.NewClient(b.grpc, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		var p peer.Peer
		_, err = sensorpb.NewSensorHealthcheckServiceClient(cc).Check(ctx, &sensorpb.CheckRequest{AgentVersion: "9.9.9"}, grpc.Peer(&p))
		info, _ := p.AuthInfo.(credentials.TLSInfo)
		return info.State.DidResume, err
	}
	twice := func(name string, cert *tls.Certificate) {
		t.Helper()
		if _, err := check(cert); err != nil {
			t.Fatalf("%s: first check on B: %v", name, err)
		}
		if resumed, err := check(cert); err != nil || !resumed {
			t.Fatalf("%s: second check on B: resumed %v, %v; want a resumed session", name, resumed, err)
		}
	}
	victim, bystander, renewed := a.enrol("acme"), a.enrol("beta"), a.enrol("acme")
	twice("victim", &victim.cert)
	twice("bystander", &bystander.cert)
	twice("renewed", &renewed.cert)
	var seen struct {
		State, Address, AgentVersion string
		LastSeenAt                   *time.Time
	}
	a.must("GET", "/api/sensors/"+victim.enr.SensorID, nil, "", 200, &seen)
	if seen.State != "online" || seen.Address != "127.0.0.1" || seen.AgentVersion != "9.9.9" || seen.LastSeenAt == nil {
		t.Errorf("victim after its checks on B, read through A: %+v; want online, from 127.0.0.1, 9.9.9, seen", seen)
	}

	if code, body := a.do("POST", "/api/sensors/"+victim.enr.SensorID+"/revoke", nil, ""); code != 200 && code != 204 {
		t.Fatalf("revoke through A: %d %s", code, body)
	}
	resumed, err := check(&victim.cert)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("B's next check of the sensor revoked through A: %v, want PermissionDenied", err)
	}
	if !resumed {
		t.Error("the refused check did not resume its TLS session: the test must show a resumed session refused")
	}
	if resumed, err := check(&bystander.cert); err != nil || !resumed {
		t.Errorf("control: the other tenant's sensor on B: resumed %v, %v", resumed, err)
	}

	key := mustKey(t)
	var cert struct{ Certificate string }
	a.must("POST", "/api/sensors/"+renewed.enr.SensorID+"/agent/renew", renewal(t, renewed, newCSR(t, key)), renewed.enr.SensorToken, 200, &cert)
	if _, err := check(&renewed.cert); status.Code(err) != codes.PermissionDenied {
		t.Errorf("B's check on the certificate replaced through A: %v, want PermissionDenied", err)
	}
	block, _ := pem.Decode([]byte(cert.Certificate))
	if block == nil {
		t.Fatal("renewal returned no certificate")
	}
	fresh := tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key}
	if _, err := check(&fresh); err != nil {
		t.Errorf("B's check on the renewed certificate: %v", err)
	}
}

// Attack: a sensor keeps its gRPC connection to replica B open while it is
// revoked, or its certificate replaced, through replica A. Its very next
// health check on that same connection (same TCP connection, within
// CheckInRefresh of its last check, when a check changing nothing is not
// written) is refused and records nothing. Then checks of the revoked
// sensor, of the replaced certificate, of the renewed one and of another
// tenant's bystander arrive at B at once (B's batcher puts the checks that
// arrive within 10 ms into one statement): each caller gets its own answer.
func TestHealthChecksOnAnOpenConnectionFollowRevocationAndRenewal(t *testing.T) {
	a, b := replicas(t, "acme", "beta")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	victim, bystander, renewed := a.enrol("acme"), a.enrol("beta"), a.enrol("acme")
	conns := map[string]*grpc.ClientConn{"victim": b.dial(victim.cert), "bystander": b.dial(bystander.cert), "renewed": b.dial(renewed.cert)}
	local := map[string]string{}
	// check makes a health check on the named open connection and requires
	// it to be the connection the first check made.
	check := func(name, version string) error {
		var p peer.Peer
		_, err := sensorpb.NewSensorHealthcheckServiceClient(conns[name]).Check(ctx, &sensorpb.CheckRequest{AgentVersion: version}, grpc.Peer(&p))
		if p.LocalAddr == nil {
			t.Fatalf("%s: the check reached no connection: %v", name, err)
		}
		if was, ok := local[name]; ok && was != p.LocalAddr.String() {
			t.Fatalf("%s: the check went over a new connection (%s, was %s): the test must reuse the open one", name, p.LocalAddr, was)
		}
		local[name] = p.LocalAddr.String()
		return err
	}
	for _, name := range []string{"victim", "bystander", "renewed"} {
		for range 2 {
			if err := check(name, "1.0.0"); err != nil {
				t.Fatalf("%s: check on the open connection: %v", name, err)
			}
		}
	}

	if code, body := a.do("POST", "/api/sensors/"+victim.enr.SensorID+"/revoke", nil, ""); code != 200 && code != 204 {
		t.Fatalf("revoke through A: %d %s", code, body)
	}
	if err := check("victim", "evil"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("BROKEN: the revoked sensor's next check on its open connection to B: %v, want PermissionDenied", err)
	}
	if err := check("bystander", "1.0.0"); err != nil {
		t.Errorf("control: the bystander's check on its open connection: %v", err)
	}
	key := mustKey(t)
	var cert struct{ Certificate string }
	a.must("POST", "/api/sensors/"+renewed.enr.SensorID+"/agent/renew", renewal(t, renewed, newCSR(t, key)), renewed.enr.SensorToken, 200, &cert)
	if err := check("renewed", "evil"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("BROKEN: a check on the open connection with the replaced certificate: %v, want PermissionDenied", err)
	}
	block, _ := pem.Decode([]byte(cert.Certificate))
	if block == nil {
		t.Fatal("renewal returned no certificate")
	}
	conns["fresh"] = b.dial(tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key})

	want := map[string]codes.Code{"victim": codes.PermissionDenied, "renewed": codes.PermissionDenied, "bystander": codes.OK, "fresh": codes.OK}
	type answer struct {
		name string
		code codes.Code
	}
	answers := make(chan answer, 64)
	var wg sync.WaitGroup
	for name := range want {
		cc := conns[name]
		version := "2.0.0"
		if want[name] != codes.OK {
			version = "evil"
		}
		for range 8 {
			wg.Go(func() {
				_, err := sensorpb.NewSensorHealthcheckServiceClient(cc).Check(ctx, &sensorpb.CheckRequest{AgentVersion: version})
				answers <- answer{name, status.Code(err)}
			})
		}
	}
	wg.Wait()
	close(answers)
	for ans := range answers {
		if ans.code != want[ans.name] {
			t.Errorf("BROKEN: a %s check among others answered %v, want %v", ans.name, ans.code, want[ans.name])
		}
	}
	for _, s := range []*testSensor{victim, renewed} {
		var seen struct{ State, AgentVersion string }
		a.must("GET", "/api/sensors/"+s.enr.SensorID, nil, "", 200, &seen)
		if seen.AgentVersion == "evil" {
			t.Errorf("BROKEN: a refused check was recorded for %s: %+v", s.enr.SensorID, seen)
		}
	}
	var seen struct{ State, AgentVersion string }
	a.must("GET", "/api/sensors/"+renewed.enr.SensorID, nil, "", 200, &seen)
	if seen.AgentVersion != "2.0.0" || seen.State != "online" {
		t.Errorf("the renewed sensor after its new certificate's checks: %+v, want online with 2.0.0", seen)
	}
}
