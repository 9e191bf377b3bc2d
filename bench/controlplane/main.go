// Command controlplane-bench measures the control plane on this machine with
// every real part in one process: PostgreSQL (throwaway cluster), the
// provisioner, an operator-mode nats-server and the control plane. It reports
// redeem+enrol throughput with many concurrent sensors, the time for a start
// command to reach and be acknowledged by every sensor, the latency from the
// API accepting a command to a sensor receiving it, and how many status
// messages the control plane applies per second.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/sdk/agentwire"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

type options struct {
	enrolConcurrent int
	fanout          int
	fanoutRounds    int
	latencyRuns     int
	statusTotal     int
	out             string
	retention       string
	enrolProof      bool
}

func main() {
	var o options
	flag.IntVar(&o.enrolConcurrent, "enrol", 1000, "sensors redeeming and enrolling at once")
	flag.IntVar(&o.fanout, "fanout", 10000, "sensors that each receive one start command (includes the enrolled ones)")
	flag.IntVar(&o.fanoutRounds, "fanout-rounds", 1, "times the fan-out is repeated to the same sensors; above 1 the median, spread and process CPU per round are reported too (one round on a shared 2-core machine swings with the load)")
	flag.IntVar(&o.latencyRuns, "latency-runs", 300, "single commands timed from API call to sensor receipt")
	flag.IntVar(&o.statusTotal, "status", 100000, "status messages published for the apply-rate measurement")
	flag.BoolVar(&o.enrolProof, "enrol-proof", true, "enrol as agents do, with a proof of possession by the CSR's key (false: without, as agents before it)")
	flag.StringVar(&o.out, "out", "docs/benchmarks-history.md", "append results here (empty: print only)")
	flag.StringVar(&o.retention, "retention", "workqueue", "command stream retention: workqueue or limits")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the enrolment phase to this file, and one of the fan-out rounds to this file plus .fanout")
	traceOut := flag.String("trace", "", "write an execution trace of the enrolment phase to this file")
	flag.Parse()
	profilePath = *cpuProfile
	tracePath = *traceOut
	t := &benchenv.T{}
	defer t.Close()
	if err := run(t, o); err != nil {
		t.Fatal(err)
	}
}

const (
	email    = controlplanetest.OperatorEmail
	password = controlplanetest.OperatorPassword
)

type plane struct {
	client  *controlplanetest.Client
	base    string
	metrics string
	hc      *http.Client
	// enrolProof: enrolments carry a proof of possession, as agents send.
	enrolProof bool
}

func run(t *benchenv.T, o options) error {
	fmt.Println("starting PostgreSQL, provisioner, nats-server and control plane…")
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	t.Cleanup(func() { pg.Stop() })
	pgtest.Use(pg.DSN("postgres"))
	prov := provisionertest.Start(t, provisionertest.Options{LogLevel: "error", CommandStreamRetention: o.retention})
	natsURL = prov.NATSURL
	p, err := startPlane(t, prov)
	if p != nil {
		p.enrolProof = o.enrolProof
	}
	if err != nil {
		return err
	}
	if err := p.call("POST", "/api/auth/login", map[string]string{"email": email, "password": password}, "", 204, nil); err != nil {
		return err
	}
	if err := p.call("POST", "/api/tenants", map[string]string{"id": "bench", "name": "Bench"}, "", 201, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var tn struct{ NatsStatus string }
		if err := p.call("GET", "/api/tenants/bench", nil, "", 200, &tn); err != nil {
			return err
		}
		if tn.NatsStatus == "provisioned" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tenant not provisioned")
		}
		time.Sleep(100 * time.Millisecond)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Everything in one process (load generator included): throwaway PostgreSQL (fsync off), provisioner, nats-server, control plane; loopback HTTP; command stream retention %s.\n\n", o.retention)
	fmt.Fprintf(&b, "| measurement | result | goal |\n|---|---|---|\n")

	// 1. Redeem + enrol with many sensors at once.
	fmt.Printf("enrolling %d sensors concurrently…\n", o.enrolConcurrent)
	codes, err := p.claimCodes(o.enrolConcurrent)
	if err != nil {
		return err
	}
	stopProfile := startProfile("")
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			return err
		}
		trace.Start(f)
		defer f.Close()
	}
	start := time.Now()
	sensors, lat, err := p.enrolAll(codes, o.enrolConcurrent)
	stopProfile()
	if tracePath != "" {
		trace.Stop()
	}
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(&b, "| redeem + enrol, %d sensors at once | %s, %.0f enrolments/s, p50 %s, p99 %s | ≥ 300/s |\n",
		len(sensors), d.Round(time.Millisecond), float64(len(sensors))/d.Seconds(), pct(lat, 50), pct(lat, 99))

	// 2. One start command to every sensor.
	if more := o.fanout - len(sensors); more > 0 {
		fmt.Printf("enrolling %d more sensors for the fan-out…\n", more)
		codes, err := p.claimCodes(more)
		if err != nil {
			return err
		}
		extra, _, err := p.enrolAll(codes, 64)
		if err != nil {
			return err
		}
		sensors = append(sensors, extra...)
	}
	fmt.Printf("connecting %d sensors to NATS…\n", len(sensors))
	if err := connectAll(sensors); err != nil {
		return err
	}
	defer closeAll(sensors)
	fmt.Printf("start command to %d sensors…\n", len(sensors))
	stopProfile = startProfile(".fanout")
	rounds, err := p.fanoutRounds(sensors, max(o.fanoutRounds, 1))
	stopProfile()
	if err != nil {
		return err
	}
	fan := rounds[0]
	fmt.Fprintf(&b, "| start command to %d sensors, first API call → last ack | %s (API accepted all in %s) | < 10 s |\n",
		len(sensors), fan.allAcked.Round(time.Millisecond), fan.allAccepted.Round(time.Millisecond))
	if len(rounds) > 1 {
		fmt.Fprintf(&b, "| the same, %d rounds to the same sensors | %s | — |\n", len(rounds), summariseRounds(rounds))
	}

	// 3. Single command latency.
	fmt.Printf("timing %d single commands…\n", o.latencyRuns)
	single, err := p.latency(sensors[0], o.latencyRuns)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "| single command, API call → sensor receipt (%d runs) | p50 %s, p99 %s | p99 < 50 ms |\n", len(single), pct(single, 50), pct(single, 99))

	// 4. Status messages applied per second.
	fmt.Printf("publishing %d status messages…\n", o.statusTotal)
	rate, applied, err := p.statusRate(sensors, o.statusTotal)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "| status messages applied | %.0f/s (%d applied) | ≥ 20,000/s |\n", rate, applied)

	fmt.Println()
	fmt.Print(b.String())
	if o.out != "" {
		return benchenv.AppendResults(o.out, "Control plane", b.String())
	}
	return nil
}

var profilePath, tracePath string

func startProfile(suffix string) func() {
	if profilePath == "" {
		return func() {}
	}
	f, err := os.Create(profilePath + suffix)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return benchenv.Percentile(s, p).Round(10 * time.Microsecond)
}

func startPlane(t *benchenv.T, prov *provisionertest.Stack) (*plane, error) {
	cfg := controlplanetest.Config(t, prov)
	cfg.SensorOfflineAfter, cfg.ShutdownTimeout = time.Hour, 10*time.Second
	// One address plays every sensor here: lift the per-address redeem limit.
	cfg.RedeemPerMinute, cfg.RedeemBurst = 1_000_000, 1_000_000
	cfg.Provisioner.TimeoutSeconds, cfg.Provisioner.BreakerFailures, cfg.Provisioner.BreakerOpenSeconds = 30, 1000, 5
	cp := controlplanetest.Start(t, cfg)
	c := cp.NewClient()
	return &plane{client: c, base: cp.Base, metrics: cp.Metrics, hc: c.HTTP}, nil
}

func (p *plane) call(method, path string, body any, bearer string, want int, into any) error {
	return p.client.Call(method, path, body, bearer, want, into)
}

func (p *plane) claimCodes(n int) ([]string, error) {
	codes := make([]string, n)
	err := benchenv.Parallel(context.Background(), n, 32, func(i int) error {
		var c struct{ Code string }
		if err := p.call("POST", "/api/tenants/bench/claim-codes", map[string]any{"ttlSeconds": 3600}, "", 201, &c); err != nil {
			return err
		}
		codes[i] = c.Code
		return nil
	})
	return codes, err
}

type sensor struct {
	id       string
	creds    string
	inbox    string
	stream   string
	consumer string
	status   string
	nc       *nats.Conn
	cons     jetstream.Consumer
}

func (p *plane) enrolAll(codes []string, conc int) ([]*sensor, []time.Duration, error) {
	out := make([]*sensor, len(codes))
	lat := make([]time.Duration, len(codes))
	err := benchenv.Parallel(context.Background(), len(codes), conc, func(i int) error {
		t0 := time.Now()
		var red struct{ SensorID, EnrollmentToken string }
		if err := p.call("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": codes[i]}, "", 201, &red); err != nil {
			return err
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			return err
		}
		csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
		req := agentwire.EnrollRequest{CSR: string(csr)}
		if p.enrolProof {
			// As agents do: a proof by the CSR's key, so that a lost answer
			// can be asked for again (the control plane verifies it).
			now := time.Now().UTC()
			digest := sha256.Sum256(sensorclient.EnrolmentMessage(red.SensorID, csr, now))
			sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
			if err != nil {
				return err
			}
			req.Proof = &agentwire.EnrolProof{SignedAt: now, Signature: base64.StdEncoding.EncodeToString(sig)}
		}
		var enr struct {
			NATS struct{ Creds, InboxPrefix, Stream, Consumer, StatusSubject string }
		}
		if err := p.call("POST", "/api/sensors/"+red.SensorID+"/agent/enroll", req, red.EnrollmentToken, 201, &enr); err != nil {
			return err
		}
		lat[i] = time.Since(t0)
		out[i] = &sensor{id: red.SensorID, creds: enr.NATS.Creds, inbox: enr.NATS.InboxPrefix, stream: enr.NATS.Stream, consumer: enr.NATS.Consumer, status: enr.NATS.StatusSubject}
		return nil
	})
	return out, lat, err
}

var natsURL string

func connectAll(sensors []*sensor) error {
	return benchenv.Parallel(context.Background(), len(sensors), 32, func(i int) error {
		s := sensors[i]
		tok, err := jwt.ParseDecoratedJWT([]byte(s.creds))
		if err != nil {
			return err
		}
		kp, err := jwt.ParseDecoratedNKey([]byte(s.creds))
		if err != nil {
			return err
		}
		seed, _ := kp.Seed()
		s.nc, err = nats.Connect(natsURL, nats.UserJWTAndSeed(tok, string(seed)), nats.CustomInboxPrefix(s.inbox))
		if err != nil {
			return err
		}
		js, err := jetstream.NewWithAPIPrefix(s.nc, "ctrl.API")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.cons, err = js.Consumer(ctx, s.stream, s.consumer)
		return err
	})
}

func closeAll(sensors []*sensor) {
	for _, s := range sensors {
		if s.nc != nil {
			s.nc.Close()
		}
	}
}

type fanoutResult struct {
	allAccepted, allAcked time.Duration
	// cpu is the CPU time this process (driver, provisioner, nats-server
	// and control plane; not PostgreSQL) used during the round.
	cpu time.Duration
}

// fanoutRounds runs the fan-out n times to the same sensors, one after the
// other, and measures each round's process CPU time too.
func (p *plane) fanoutRounds(sensors []*sensor, n int) ([]fanoutResult, error) {
	out := make([]fanoutResult, 0, n)
	for i := 0; i < n; i++ {
		if n > 1 {
			fmt.Printf("fan-out round %d of %d…\n", i+1, n)
		}
		cpu0 := processCPU()
		r, err := p.fanout(sensors)
		if err != nil {
			return nil, fmt.Errorf("fan-out round %d: %w", i+1, err)
		}
		r.cpu = processCPU() - cpu0
		out = append(out, r)
	}
	return out, nil
}

// summariseRounds is the rounds' median, spread and process CPU, in words.
func summariseRounds(rounds []fanoutResult) string {
	acked := make([]time.Duration, len(rounds))
	cpu := make([]time.Duration, len(rounds))
	var all []string
	for i, r := range rounds {
		acked[i], cpu[i] = r.allAcked, r.cpu
		all = append(all, r.allAcked.Round(10*time.Millisecond).String())
	}
	slices.Sort(acked)
	slices.Sort(cpu)
	return fmt.Sprintf("median %s to the last ack (min %s, max %s; rounds %s); process CPU per round median %s (min %s)",
		median(acked).Round(time.Millisecond), acked[0].Round(time.Millisecond), acked[len(acked)-1].Round(time.Millisecond),
		strings.Join(all, ", "), median(cpu).Round(time.Millisecond), cpu[0].Round(time.Millisecond))
}

// median of sorted durations (the mean of the middle two for an even count).
func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (p *plane) fanout(sensors []*sensor) (fanoutResult, error) {
	var acked atomic.Int64
	errc := make(chan error, len(sensors))
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var lastAck atomic.Int64
	// Every sensor waits on its consumer the way an agent does.
	for _, s := range sensors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, err := s.cons.Next(jetstream.FetchMaxWait(2 * time.Minute))
			if err != nil {
				errc <- fmt.Errorf("sensor %s: %w", s.id, err)
				return
			}
			if err := msg.Ack(); err != nil {
				errc <- err
				return
			}
			acked.Add(1)
			lastAck.Store(int64(time.Since(start)))
		}()
	}
	err := benchenv.Parallel(context.Background(), len(sensors), 64, func(i int) error {
		return p.call("POST", "/api/sensors/"+sensors[i].id+"/commands", map[string]string{"action": "start"}, "", 202, nil)
	})
	accepted := time.Since(start)
	if err != nil {
		return fanoutResult{}, err
	}
	go func() { wg.Wait(); cancel() }()
	select {
	case err := <-errc:
		return fanoutResult{}, err
	case <-ctx.Done():
	}
	if n := acked.Load(); n != int64(len(sensors)) {
		return fanoutResult{}, fmt.Errorf("only %d of %d sensors acked", n, len(sensors))
	}
	return fanoutResult{allAccepted: accepted, allAcked: time.Duration(lastAck.Load())}, nil
}

func (p *plane) latency(s *sensor, runs int) ([]time.Duration, error) {
	got := make(chan time.Time, 1)
	cc, err := s.cons.Consume(func(m jetstream.Msg) {
		got <- time.Now()
		m.Ack()
	})
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	out := make([]time.Duration, 0, runs)
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		if err := p.call("POST", "/api/sensors/"+s.id+"/commands", map[string]string{"action": []string{"start", "stop"}[i%2]}, "", 202, nil); err != nil {
			return nil, err
		}
		select {
		case at := <-got:
			out = append(out, at.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("command %d not received", i)
		}
	}
	return out, nil
}

func (p *plane) appliedStatus() (int64, error) {
	resp, err := p.hc.Get(p.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, `rxc_controlplane_status_messages_total{outcome="applied"} `); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no applied-status metric")
}

func (p *plane) statusRate(sensors []*sensor, total int) (float64, int64, error) {
	before, err := p.appliedStatus()
	if err != nil {
		return 0, 0, err
	}
	per := total / len(sensors)
	if per == 0 {
		per = 1
	}
	base := time.Now().UTC()
	start := time.Now()
	err = benchenv.Parallel(context.Background(), len(sensors), 32, func(i int) error {
		s := sensors[i]
		for j := 0; j < per; j++ {
			msg, _ := json.Marshal(map[string]any{"state": []string{"running", "stopped"}[j%2], "at": base.Add(time.Duration(j) * time.Millisecond)})
			if err := s.nc.Publish(s.status, msg); err != nil {
				return err
			}
		}
		return s.nc.Flush()
	})
	if err != nil {
		return 0, 0, err
	}
	want := before + int64(per*len(sensors))
	var last int64
	for stall := time.Now(); ; {
		n, err := p.appliedStatus()
		if err != nil {
			return 0, 0, err
		}
		if n != last {
			last, stall = n, time.Now()
		}
		if n >= want || time.Since(stall) > 5*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := time.Since(start)
	return float64(last-before) / d.Seconds(), last - before, nil
}
