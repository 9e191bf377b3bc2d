package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/bench/benchenv"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// memResult is the control plane replica's memory in the two shapes of a
// connected fleet.
type memResult struct {
	base int64
	// agents: every sensor as the agent behaves, idle (no events).
	agents memSample
	// natsConnect is how long connecting every sensor to NATS took;
	// checks and checksWanted count the health checks in the sampling
	// window against one per sensor and heartbeat.
	natsConnect          time.Duration
	checks, checksWanted int
	checkErrors          int64
	window               time.Duration
	// cpu is what the replica used in the window; driverCPU what the
	// driver process itself used (the sensors' side, the primary control
	// plane and the provisioner, or only the primary and the provisioner
	// when the agents play in processes of their own, agentsCPU), pgCPU
	// PostgreSQL's.
	cpu, driverCPU, agentsCPU, pgCPU time.Duration
	// why counts failed health checks by gRPC code.
	why map[string]int
	// streams: every sensor holding an open event stream at once.
	streams     memSample
	streamsOpen time.Duration
	peak        int64
}

// memSample is what the replica held over a sampling window.
type memSample struct {
	rssMax, rssMean     int64
	connsMax, connsMean float64
	streamsMax          float64
}

func reportMemory(b *strings.Builder, o options, retention string, m *memResult) {
	n := float64(o.sensors)
	per := func(rss int64) string { return fmt.Sprintf("%.1f KiB", float64(rss-m.base)/1024/n) }
	fmt.Fprintf(b, "\nControl plane memory (`-heartbeat %s`): a second replica as its own process (%s retention), %d sensors connecting to it through `sensorclient` as the agent does.\n\n", o.heartbeat, retention, o.sensors)
	fmt.Fprintf(b, "| fleet | RSS (max over the window) | mean | a sensor above the base | gRPC connections open (max / mean) | event streams open | goal |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| none (base) | %.0f MiB | | | | | |\n", mib(m.base))
	if m.checksWanted > 0 {
		reportAgents(b, o, m, per)
	}
	if m.streams.streamsMax > 0 {
		fmt.Fprintf(b, "| (b) worst case: every sensor holding an open event stream (all open after %s) | **%.0f MiB** | %.0f MiB | %s | %.0f / %.0f | %.0f | |\n",
			m.streamsOpen.Round(time.Second), mib(m.streams.rssMax), mib(m.streams.rssMean), per(m.streams.rssMax), m.streams.connsMax, m.streams.connsMean, m.streams.streamsMax)
	}
	fmt.Fprintf(b, "| peak RSS of the run (VmHWM) | %.0f MiB | | | | | |\n", mib(m.peak))
}

func reportAgents(b *strings.Builder, o options, m *memResult, per func(int64) string) {
	idle := "gRPC connection closed after " + o.grpcIdle.String() + " idle"
	if o.grpcIdle < 0 {
		idle = "gRPC connection kept open"
	}
	perCheck := func(d time.Duration) float64 { return ms(d) / float64(max(m.checks, 1)) }
	agents := ""
	if o.agentProcs > 0 {
		agents = fmt.Sprintf(", agent processes %.2f", perCheck(m.agentsCPU))
	}
	fmt.Fprintf(b, "| (a) as the agent behaves, %s: NATS connected, status report and health check every %s, no events, %s (all on NATS after %s; %d of %d health checks in the %s window, %d failed in all; CPU a completed check, in ms: replica %.2f, driver %.2f%s, PostgreSQL %.2f) | **%.0f MiB** | %.0f MiB | %s | %.0f / %.0f | %.0f | < 200 MB |\n",
		agentsWhere(o), o.heartbeat, idle, m.natsConnect.Round(time.Second), m.checks, m.checksWanted, m.window.Round(time.Second), m.checkErrors,
		perCheck(m.cpu), perCheck(m.driverCPU), agents, perCheck(m.pgCPU),
		mib(m.agents.rssMax), mib(m.agents.rssMean), per(m.agents.rssMax), m.agents.connsMax, m.agents.connsMean, m.agents.streamsMax)
}

// replica is a control plane replica running as a process of its own.
type replica struct {
	cmd               *exec.Cmd
	grpcAddr, metrics string
	stop              func()
}

func (s *stack) startReplica() (*replica, error) {
	cfg := s.plane.Config
	ports := make([]int, 3)
	for i := range ports {
		p, err := benchenv.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	cfg.ListenAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	cfg.GRPCListenAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfg.PublicGRPCAddr = cfg.GRPCListenAddr
	cfg.MetricsListenAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	cfg.LogLevel = cmp.Or(os.Getenv("RXC_BENCH_CHILD_LOG_LEVEL"), "warn")
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.t.TempDir(), "controlplane.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-controlplane", path)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{cmd: cmd, grpcAddr: cfg.GRPCListenAddr, metrics: "http://" + cfg.MetricsListenAddr + "/metrics"}
	r.stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	}
	if err := waitStatus("http://"+cfg.ListenAddr+"/readyz", 204, 60*time.Second); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// gauges reads the replica's open gRPC connections and event streams.
func (r *replica) gauges() (conns, streams float64) {
	resp, err := http.Get(r.metrics)
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch name {
		case "rxc_controlplane_grpc_connections":
			conns = v
		case "rxc_controlplane_grpc_event_streams":
			streams = v
		}
	}
	return conns, streams
}

// sample reads the replica's RSS and gauges every second for d.
func (r *replica) sample(d time.Duration) memSample {
	var m memSample
	var rssSum int64
	var connSum float64
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		rss, _ := benchenv.RSS(r.cmd.Process.Pid)
		conns, streams := r.gauges()
		m.rssMax, m.connsMax, m.streamsMax = max(m.rssMax, rss), max(m.connsMax, conns), max(m.streamsMax, streams)
		rssSum += rss
		connSum += conns
		n++
	}
	if n > 0 {
		m.rssMean, m.connsMean = rssSum/int64(n), connSum/float64(n)
	}
	return m
}

// memory starts a second control plane replica as a process of its own
// and measures its resident memory with the fleet connected to it: (a) as
// the agent behaves, (b) with every sensor holding an open event stream.
func (s *stack) memory(o options, sensors []*sensor, res *result) error {
	r, err := s.startReplica()
	if err != nil {
		return err
	}
	defer r.stop()
	m := &memResult{}
	res.mem = m
	// The base is the least RSS over the replica's first idle seconds: the
	// garbage of its start-up goes back to the system meanwhile.
	for range 8 {
		time.Sleep(time.Second)
		if rss, _ := benchenv.RSS(r.cmd.Process.Pid); m.base == 0 || rss < m.base {
			m.base = rss
		}
	}
	if strings.Contains(o.rssFleets, "a") {
		fmt.Printf("(a) %d sensors as the agent behaves, heartbeat %s…\n", len(sensors), o.heartbeat)
		if err := s.memoryAgents(o, r, sensors, m); err != nil {
			return err
		}
	}
	if strings.Contains(o.rssFleets, "b") {
		fmt.Printf("(b) %d sensors each holding an open event stream…\n", len(sensors))
		if err := s.memoryStreams(r, sensors, m); err != nil {
			return err
		}
	}
	_, m.peak = benchenv.RSS(r.cmd.Process.Pid)
	return nil
}

// memoryAgents plays every sensor as the agent behaves when it has no
// event to send (playAgents), in this process or, with -agent-procs, in
// processes of their own, and samples the replica over two heartbeats.
// The sensors start spread over one heartbeat, as a fleet's agents start
// at different times.
func (s *stack) memoryAgents(o options, r *replica, sensors []*sensor, m *memResult) error {
	var (
		counts func() (checks, errs int64, why map[string]int)
		pids   []int
	)
	fmt.Printf("  connecting %d sensors to NATS (%s)…\n", len(sensors), agentsWhere(o))
	t0 := time.Now()
	if o.agentProcs > 0 {
		procs, err := s.spawnAgents(o, r, sensors, o.agentProcs)
		if err != nil {
			return err
		}
		defer procs.stop()
		counts, pids = procs.counts, procs.pids()
	} else {
		plan := agentsPlan{GRPCAddr: r.grpcAddr, CAPEM: s.plane.CAPEM, Heartbeat: o.heartbeat, GRPCIdle: o.grpcIdle, Total: len(sensors)}
		for i, sn := range sensors {
			plan.Agents = append(plan.Agents, agentSpec{ID: sn.id, key: sn.key, Cert: sn.certDER, Creds: sn.creds, NATS: sn.nats, Index: i})
		}
		c := &agentCounts{why: map[string]int{}}
		stop, err := playAgents(context.Background(), plan, c)
		if err != nil {
			return err
		}
		defer stop()
		counts = func() (int64, int64, map[string]int) { return c.checks.Load(), c.errs.Load(), c.whyCopy() }
	}
	m.natsConnect = time.Since(t0)
	// Every sensor has started after one heartbeat; one more lets the
	// replica settle, then the window covers two heartbeats.
	time.Sleep(2 * o.heartbeat)
	m.window = 2 * o.heartbeat
	before, _, _ := counts()
	upd0 := s.sensorRowWrites()
	cpu0, self0, pg0, agents0 := benchenv.TreeCPU(r.cmd.Process.Pid), selfCPU(), benchenv.TreeCPU(s.pgPID), benchenv.TreeCPU(pids...)
	stop := func() {}
	if o.rssProf != "" {
		stop = startProfile(o.rssProf)
	}
	m.agents = r.sample(m.window)
	stop()
	m.cpu, m.driverCPU, m.pgCPU = benchenv.TreeCPU(r.cmd.Process.Pid)-cpu0, selfCPU()-self0, benchenv.TreeCPU(s.pgPID)-pg0
	if len(pids) > 0 {
		m.agentsCPU = benchenv.TreeCPU(pids...) - agents0
	}
	upd := s.sensorRowWrites() - upd0
	after, errs, why := counts()
	m.checks, m.checksWanted = int(after-before), int(float64(len(sensors))*m.window.Seconds()/o.heartbeat.Seconds())
	m.checkErrors, m.why = errs, why
	fmt.Printf("  failed health checks by code: %v\n", m.why)
	fmt.Printf("  RSS %.0f MiB (max), connections %.0f max, %d of %d checks\n", mib(m.agents.rssMax), m.agents.connsMax, m.checks, m.checksWanted)
	per := func(d time.Duration) float64 { return ms(d) / float64(max(m.checks, 1)) }
	fmt.Printf("  sensor rows written in the window: %d (%.2f a completed check; status reports and checks together)\n", upd, float64(upd)/float64(max(m.checks, 1)))
	fmt.Printf("  CPU a completed check: replica %.2f ms, driver %.2f ms, agent processes %.2f ms, PostgreSQL %.2f ms (window %s)\n", per(m.cpu), per(m.driverCPU), per(m.agentsCPU), per(m.pgCPU), m.window)
	hold(context.Background())
	return nil
}

// sensorRowWrites is how many sensor rows PostgreSQL has updated so far
// (its statistics, which lag by up to a second), or -1.
func (s *stack) sensorRowWrites() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.plane.Config.PGDSN)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'sensors'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// agentsWhere says how the rss phase plays the agents.
func agentsWhere(o options) string {
	if o.agentProcs > 0 {
		return fmt.Sprintf("the agents played by %d processes of their own", o.agentProcs)
	}
	return "the agents played in the driver process"
}

// memoryStreams has every sensor send one event on a stream it keeps open
// (its batch neither full nor due), so every sensor holds a connection and
// an event stream on the replica at once.
func (s *stack) memoryStreams(r *replica, sensors []*sensor, m *memResult) error {
	ctx, cancel := context.WithCancel(context.Background())
	var streams sync.WaitGroup
	grpcs := make([]*sensorclient.GRPC, len(sensors))
	defer func() {
		cancel()
		streams.Wait()
		for _, g := range grpcs {
			if g != nil {
				g.Close()
			}
		}
	}()
	quiet := slog.New(slog.DiscardHandler)
	t0 := time.Now()
	err := benchenv.Parallel(ctx, len(sensors), 64, func(i int) error {
		sn := sensors[i]
		g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{
			Address: r.grpcAddr, CAPEM: s.plane.CAPEM,
			Certificate:   tls.Certificate{Certificate: [][]byte{sn.certDER}, PrivateKey: sn.key},
			BatchInterval: time.Hour, Logger: quiet,
		})
		if err != nil {
			return err
		}
		grpcs[i] = g
		events := make(chan *sensorpb.SensorEvent, 1)
		events <- &sensorpb.SensorEvent{EventId: "fleet-bench-" + sn.id, Time: timestamppb.Now(), Kind: "alert"}
		streams.Go(func() { _ = g.StreamEvents(ctx, events) })
		return nil
	})
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		_, open := r.gauges()
		if int(open) >= len(sensors) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %.0f of %d event streams open after 10 minutes", open, len(sensors))
		}
	}
	m.streamsOpen = time.Since(t0)
	sleepCtx(ctx, 5*time.Second)
	m.streams = r.sample(15 * time.Second)
	fmt.Printf("  RSS %.0f MiB (max), streams %.0f\n", mib(m.streams.rssMax), m.streams.streamsMax)
	hold(ctx)
	return nil
}

// selfCPU is the CPU time this process used so far (not its children).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// servePprof serves net/http/pprof on $RXC_BENCH_CHILD_PPROF (host:port),
// when set, so the control plane replica can be profiled during the run.
func servePprof() {
	addr := os.Getenv("RXC_BENCH_CHILD_PPROF")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() {
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintln(os.Stderr, "pprof:", srv.ListenAndServe())
	}()
}

// hold keeps the fleet connected for $RXC_BENCH_HOLD (a duration) after
// the measurement, e.g. to take profiles.
func hold(ctx context.Context) {
	d, err := time.ParseDuration(os.Getenv("RXC_BENCH_HOLD"))
	if err != nil || d <= 0 {
		return
	}
	fmt.Printf("holding the fleet connected for %s…\n", d)
	sleepCtx(ctx, d)
}
