// Command events-bench measures the sensor event pipeline on this machine
// with every real part in one process: PostgreSQL (throwaway cluster), the
// provisioner, an operator-mode nats-server with file-backed JetStream and
// the control plane. One enrolled sensor streams events over one mTLS gRPC
// stream; the driver reports how many events per second the control plane
// accepted (acknowledged by the JetStream stream) and how many per second
// its writer loaded into PostgreSQL, which runs at the same time.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/internal/pgtest"
	sensorpb "github.com/rxc-project/rxc/proto"
)

const (
	email    = controlplanetest.OperatorEmail
	password = controlplanetest.OperatorPassword
)

func main() {
	total := flag.Int("events", 200000, "events streamed on one gRPC stream")
	batch := flag.Int("batch", 2000, "EVENTS_WRITER_BATCH")
	out := flag.String("out", "docs/benchmarks-history.md", "append results here (empty: print only)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the streaming phase to this file")
	flag.Parse()
	t := &benchenv.T{}
	defer t.Close()
	if err := run(t, *total, *batch, *out); err != nil {
		t.Fatal(err)
	}
}

var cpuProfile string

type plane struct {
	client *controlplanetest.Client
	base   string
	grpc   string
	caPEM  []byte
	hc     *http.Client
}

func run(t *benchenv.T, total, batch int, out string) error {
	fmt.Println("starting PostgreSQL, provisioner, nats-server and control plane…")
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	t.Cleanup(func() { pg.Stop() })
	pgtest.Use(pg.DSN("postgres"))
	prov := provisionertest.Start(t, provisionertest.Options{LogLevel: "error"})
	p, err := startPlane(t, prov, batch)
	if err != nil {
		return err
	}
	cert, err := p.sensor()
	if err != nil {
		return err
	}
	evs := generate(total)
	cc, err := p.dial(cert)
	if err != nil {
		return err
	}
	defer cc.Close()

	fmt.Printf("streaming %d events on one gRPC stream…\n", total)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	stream, err := sensorpb.NewSensorEventStreamServiceClient(cc).StreamEvents(ctx)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	ingest := time.Since(start)
	writtenAtIngestEnd, err := p.metric("rxc_controlplane_events_written_total")
	if err != nil {
		return err
	}
	var loaded time.Duration
	for {
		n, err := p.metric("rxc_controlplane_events_written_total")
		if err != nil {
			return err
		}
		if n >= int(resp.GetAccepted()) {
			loaded = time.Since(start)
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("only %d of %d events loaded after 10 minutes", n, resp.GetAccepted())
		}
		time.Sleep(100 * time.Millisecond)
	}
	acceptRate := float64(resp.GetAccepted()) / ingest.Seconds()
	loadRate := float64(resp.GetAccepted()) / loaded.Seconds()
	drain := float64(int(resp.GetAccepted())-writtenAtIngestEnd) / (loaded - ingest).Seconds()

	var b strings.Builder
	fmt.Fprintf(&b, "Everything in one process (load generator included): throwaway PostgreSQL (fsync off), provisioner, nats-server with file-backed JetStream, control plane; one sensor, one mTLS gRPC stream, %d events of about %d bytes (Suricata-like alert with its EVE JSON), writer batch %d. The writer loads while the stream is still being filled, so both share the machine.\n\n",
		total, avgSize(evs), batch)
	fmt.Fprintf(&b, "| measurement | result | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| events accepted (acknowledged by JetStream) from one gRPC stream | %d in %s, **%.0f events/s** | ≥ 50,000/s |\n", resp.GetAccepted(), ingest.Round(time.Millisecond), acceptRate)
	fmt.Fprintf(&b, "| events loaded into PostgreSQL, first send to last row | %s, **%.0f events/s** | ≥ 20,000/s |\n", loaded.Round(time.Millisecond), loadRate)
	if loaded > ingest {
		fmt.Fprintf(&b, "| writer backlog drained after the stream ended | %d events, %.0f events/s | |\n", int(resp.GetAccepted())-writtenAtIngestEnd, drain)
	}
	fmt.Print(b.String())
	if out != "" {
		return benchenv.AppendResults(out, "Sensor events: gRPC → JetStream → PostgreSQL", b.String())
	}
	return nil
}

func generate(n int) []*sensorpb.SensorEvent {
	now := time.Now()
	out := make([]*sensorpb.SensorEvent, n)
	for i := range out {
		at := now.Add(-time.Duration(n-i) * time.Microsecond)
		src := fmt.Sprintf("203.0.113.%d", 1+i%254)
		dst := fmt.Sprintf("10.20.%d.%d", i%4, 1+i%253)
		raw, _ := json.Marshal(map[string]any{
			"timestamp": at.Format("2006-01-02T15:04:05.000000-0700"), "event_type": "alert", "flow_id": 1000000 + i,
			"src_ip": src, "src_port": 1024 + i%60000, "dest_ip": dst, "dest_port": 443, "proto": "TCP",
			"alert": map[string]any{"action": "allowed", "gid": 1, "signature_id": 2030358, "rev": 1,
				"signature": "ET EXPLOIT Possible Apache Log4j RCE Attempt (CVE-2021-44228)", "category": "Attempted Administrator Privilege Gain", "severity": 1},
		})
		out[i] = &sensorpb.SensorEvent{
			EventId: "bench-" + strconv.Itoa(i), Time: timestamppb.New(at), Kind: "alert",
			SrcIp: src, SrcPort: uint32(1024 + i%60000), DestIp: dst, DestPort: 443, Protocol: "TCP",
			Alert: &sensorpb.Alert{SignatureId: 2030358, Signature: "ET EXPLOIT Possible Apache Log4j RCE Attempt (CVE-2021-44228)",
				Category: "Attempted Administrator Privilege Gain", Severity: 1},
			RawJson: raw,
		}
	}
	return out
}

func avgSize(evs []*sensorpb.SensorEvent) int {
	total := 0
	for _, ev := range evs[:min(len(evs), 1000)] {
		total += len(ev.GetRawJson()) + 150
	}
	return total / min(len(evs), 1000)
}

func startPlane(t *benchenv.T, prov *provisionertest.Stack, batch int) (*plane, error) {
	cfg := controlplanetest.Config(t, prov)
	cfg.SensorOfflineAfter, cfg.ShutdownTimeout = time.Hour, 10*time.Second
	cfg.Provisioner.TimeoutSeconds = 30
	cfg.Events = app.EventsConfig{Enabled: true, StreamName: "RXC_EVENTS", WriterBatch: batch}
	cp := controlplanetest.Start(t, cfg)
	c := cp.NewClient()
	return &plane{client: c, base: cp.Base, grpc: cp.GRPCAddr, caPEM: cp.CAPEM, hc: c.HTTP}, nil
}

func (p *plane) call(method, path string, body any, bearer string, want int, into any) error {
	return p.client.Call(method, path, body, bearer, want, into)
}

// sensor logs in, creates a provisioned tenant and enrols one sensor.
func (p *plane) sensor() (tls.Certificate, error) {
	if err := p.call("POST", "/api/auth/login", map[string]string{"email": email, "password": password}, "", 204, nil); err != nil {
		return tls.Certificate{}, err
	}
	if err := p.call("POST", "/api/tenants", map[string]string{"id": "bench", "name": "Bench"}, "", 201, nil); err != nil {
		return tls.Certificate{}, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var tn struct{ NatsStatus string }
		if err := p.call("GET", "/api/tenants/bench", nil, "", 200, &tn); err != nil {
			return tls.Certificate{}, err
		}
		if tn.NatsStatus == "provisioned" {
			break
		}
		if time.Now().After(deadline) {
			return tls.Certificate{}, fmt.Errorf("tenant not provisioned")
		}
	}
	var code struct{ Code string }
	if err := p.call("POST", "/api/tenants/bench/claim-codes", map[string]any{"ttlSeconds": 600}, "", 201, &code); err != nil {
		return tls.Certificate{}, err
	}
	var red struct{ SensorID, EnrollmentToken string }
	if err := p.call("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": code.Code}, "", 201, &red); err != nil {
		return tls.Certificate{}, err
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	var enr struct{ Certificate string }
	if err := p.call("POST", "/api/sensors/"+red.SensorID+"/agent/enroll", map[string]string{"csr": string(csr)}, red.EnrollmentToken, 201, &enr); err != nil {
		return tls.Certificate{}, err
	}
	block, _ := pem.Decode([]byte(enr.Certificate))
	if block == nil {
		return tls.Certificate{}, fmt.Errorf("enrolment returned no certificate")
	}
	return tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key}, nil
}

func (p *plane) dial(cert tls.Certificate) (*grpc.ClientConn, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	return grpc.NewClient(p.grpc, grpc.WithTransportCredentials(creds))
}

// metric reads one unlabelled counter from /metrics.
func (p *plane) metric(name string) (int, error) {
	resp, err := p.hc.Get(p.base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("metric %s missing", name)
}
