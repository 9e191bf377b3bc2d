// Command fleet-bench measures RXC at fleet scale next to what bare
// nats-server does on the same machine in the same run:
//
//   - enrolment (CSR → certificate, sensor token and NATS credentials, the
//     provisioner creating the sensor's user and durable consumer) against
//     a bare nats-server creating the same durable consumers, alternating in
//     chunks so the machine's load hits both alike;
//   - one start command to every sensor, first API call to last ack,
//     against a bare nats-server publishing one message per sensor to the
//     same number of consumers on as many connections, for each command
//     stream retention (workqueue, interest, limits);
//   - the control plane's resident memory, the control plane running as a
//     process of its own: (a) with every sensor behaving as the agent does
//     (NATS connected, a status report and a health check every heartbeat,
//     no event to send: its event stream and, once idle, its gRPC
//     connection closed) and (b) with every sensor holding an open event
//     stream at once (the worst case).
//
// Every part but that control plane runs in this process (the nats-servers
// as external processes when RXC_NATS_SERVER_BIN names a binary), all on
// loopback, with a throwaway PostgreSQL cluster.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/sdk/agentwire"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

type options struct {
	sensors    int
	chunks     int
	enrolConc  int
	bareConc   int
	fanoutConc int
	rounds     int
	retentions []string
	rss        bool
	out        string
	cpuProfile string
	fanoutProf string
	rssProf    string
	agentProcs int
	natsProf   string
	natsProfS  int
	broadcast  bool
	phases     phases
	phaseFlag  string
	single     bool
	heartbeat  time.Duration
	grpcIdle   time.Duration
	rssFleets  string
	statements bool
	planeLog   string
}

// phases says which measurements a run makes. Sensors are enrolled in
// every run (the other phases need them); without the enrol phase they are
// enrolled as fast as possible, with no bare comparison and no figure.
type phases struct{ enrol, fanout, rss bool }

func parsePhases(s string) (phases, error) {
	var p phases
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "enrol":
			p.enrol = true
		case "fanout":
			p.fanout = true
		case "rss":
			p.rss = true
		default:
			return p, fmt.Errorf("-phases: unknown phase %q (want enrol, fanout, rss)", name)
		}
	}
	return p, nil
}

func main() {
	var o options
	var retentions, child, ph string
	flag.IntVar(&o.sensors, "sensors", 10000, "sensors per retention (each enrolled, commanded and, for the memory figure, connected)")
	flag.IntVar(&o.chunks, "chunks", 4, "enrolment alternates with bare consumer creation in this many chunks")
	flag.IntVar(&o.enrolConc, "enrol-concurrency", 64, "enrolments in flight at once")
	flag.IntVar(&o.bareConc, "bare-concurrency", 16, "bare consumer creations in flight at once")
	flag.IntVar(&o.fanoutConc, "command-concurrency", 64, "start commands in flight at once through the API")
	flag.StringVar(&o.planeLog, "controlplane-log-level", "error", "log level of the control plane in the driver process (its log goes to stderr)")
	flag.IntVar(&o.rounds, "fanout-rounds", 3, "fan-outs per retention, product and bare alternating; the table gives each round and the medians (the host's file system's speed drifts between runs minutes apart)")
	flag.StringVar(&retentions, "retentions", "workqueue,interest,limits", "command stream retentions to measure, in order")
	flag.DurationVar(&o.heartbeat, "heartbeat", 15*time.Second, "rss phase: how often each sensor reports its status and calls the health check (the agent's --heartbeat default)")
	flag.DurationVar(&o.grpcIdle, "grpc-idle-timeout", sensorclient.DefaultIdleTimeout, "rss phase (a): the sensors' gRPC idle timeout (the agent's --grpc-idle-timeout; negative keeps the connection open, as agents before it did)")
	flag.StringVar(&o.rssFleets, "rss-fleets", "a,b", "rss phase: which fleets to measure: a (as the agent behaves), b (every sensor holding an event stream)")
	flag.BoolVar(&o.rss, "rss", true, "measure the control plane's memory with every sensor connected (after the last retention); same as leaving rss out of -phases when false")
	flag.StringVar(&ph, "phases", "enrol,fanout,rss", "measurements to make, comma-separated: enrol (against bare consumer creation), fanout (one batch command to every sensor against bare publishing), rss (control-plane memory, after the last retention)")
	flag.BoolVar(&o.single, "single-commands", false, "fan out with one POST /api/sensors/{id}/commands per sensor instead of one POST /api/commands for the tenant")
	flag.StringVar(&o.out, "out", "docs/benchmarks-history.md", "append results here (empty: print only)")
	flag.BoolVar(&o.statements, "pg-statements", false, "list every PostgreSQL statement of the first enrolment chunk, calls per enrolment, and of the product fan-out (restarts the throwaway cluster with pg_stat_statements)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the first enrolment chunk to this file")
	flag.StringVar(&o.fanoutProf, "fanout-cpuprofile", "", "write a CPU profile of the product fan-out to this file (the last retention's)")
	flag.IntVar(&o.agentProcs, "agent-procs", 0, "rss phase (a): play the agents in this many processes of their own (0: in the driver process, which also runs the primary control plane and the provisioner)")
	flag.StringVar(&o.rssProf, "rss-cpuprofile", "", "write a CPU profile of the driver (the sensors' side) over the rss phase (a)'s sampling window to this file")
	flag.StringVar(&o.natsProf, "nats-cpuprofile", "", "write CPU profiles of the product's and the bare nats-server during their fan-outs to this path with -round<N>-product.pprof and -round<N>-bare.pprof appended (the last retention's; each the first -nats-profile-seconds of its fan-out, through nats-server's profiling port)")
	flag.IntVar(&o.natsProfS, "nats-profile-seconds", 10, "with -nats-cpuprofile: how long each nats-server profile runs from the start of its fan-out")
	flag.BoolVar(&o.broadcast, "broadcast-experiment", false, "instead of the benchmarks: bare nats-server, one stored message delivered to every consumer (each also filtering a fleet-wide subject) against one message per consumer, for each retention")
	flag.StringVar(&child, "serve-controlplane", "", "internal: run a control plane from this JSON configuration file")
	var agentsPath string
	flag.StringVar(&agentsPath, "serve-agents", "", "internal: play the agents of this JSON file (removed once read), reporting on stdout")
	flag.Parse()
	if child != "" {
		os.Exit(serveChild(child))
	}
	if agentsPath != "" {
		os.Exit(serveAgents(agentsPath))
	}
	o.retentions = strings.Split(retentions, ",")
	var err error
	o.phaseFlag = ph
	if o.phases, err = parsePhases(ph); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o.phases.rss = o.phases.rss && o.rss
	t := &benchenv.T{}
	defer t.Close()
	if o.broadcast {
		if err := broadcastExperiment(t, o); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := run(t, o); err != nil {
		t.Fatal(err)
	}
}

// result is one retention's figures.
type result struct {
	retention         string
	redeem            time.Duration
	enrol, bare       time.Duration
	enrolCPU, bareCPU time.Duration
	enrolPGCPU        time.Duration
	fanouts           []fanoutRound
	cmdBytes          int64 // a delivered command's size, headers and payload
	mem               *memResult
}

// fanoutRound is one product fan-out and the bare one right after it.
type fanoutRound struct {
	all, api   time.Duration
	stored     time.Duration // batch: until no command was pending
	bare       time.Duration
	bareStored time.Duration // bare: until every publication was acknowledged
	// CPU used during the product's fan-out by its nats-server, the
	// driver (control plane and provisioner, sensors' clients) and
	// PostgreSQL; during the bare one by the bare nats-server and the
	// driver (its clients).
	cpu, bareCPU fanoutCPU
}

func (f fanoutRound) ratio() float64 { return f.all.Seconds() / f.bare.Seconds() }

// median is the middle value of xs by less (the lower middle of an even
// count).
func median[T any](xs []T, less func(a, b T) bool) T {
	s := slices.Clone(xs)
	slices.SortFunc(s, func(a, b T) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}

func run(t *benchenv.T, o options) error {
	if err := checkDescriptors(o.sensors); err != nil {
		return err
	}
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	t.Cleanup(func() { pg.Stop() })
	if o.statements {
		if stmts, err = enableStatements(pg); err != nil {
			return fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	pgtest.Use(pg.DSN("postgres"))
	roots := []int{os.Getpid(), pg.PID()}
	natsKind := server.VERSION + " in-process"
	if natstest.External() {
		natsKind = "external binary ($RXC_NATS_SERVER_BIN)"
	}
	started := time.Now()
	var results []result
	for i, r := range o.retentions {
		fmt.Printf("== retention %s, %d sensors\n", r, o.sensors)
		res, err := measure(o, r, roots, o.phases.rss && i == len(o.retentions)-1)
		if err != nil {
			return fmt.Errorf("retention %s: %w", r, err)
		}
		results = append(results, res)
	}
	body := report(o, results, natsKind, time.Since(started))
	fmt.Println()
	fmt.Print(body)
	if o.out != "" {
		return benchenv.AppendResults(o.out, "Fleet scale", body)
	}
	return nil
}

// checkDescriptors refuses a fleet the process cannot hold: every sensor's
// NATS connection costs a descriptor here, and a second one when the
// nats-server runs in this process.
func checkDescriptors(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil
	}
	per := uint64(2)
	if natstest.External() {
		per = 1
	}
	if need := per*uint64(n) + 2000; lim.Cur < need {
		return fmt.Errorf("%d sensors need about %d file descriptors here, the limit is %d: set RXC_NATS_SERVER_BIN to a nats-server binary (one descriptor a sensor) or lower -sensors", n, need, lim.Cur)
	}
	return nil
}

func report(o options, rs []result, natsKind string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`go run ./bench/fleet -sensors %d -phases %s` (%s in all). One tenant of %d sensors per retention; PostgreSQL 15 throwaway cluster (fsync off), provisioner and control plane in the driver process, nats-server %s; every server's files in the temporary directory (%s; TMPDIR moves them); the bare nats-server is the same kind, same disk, no operator mode and no PostgreSQL, with the provisioner's stream and consumer settings. Enrolment alternates with bare consumer creation in %d chunks; CPU is what every process of the run (driver, nats-servers, PostgreSQL) used in that phase, so it does not depend on what else ran on the machine.\n\n",
		o.sensors, o.phaseFlag, took.Round(time.Second), o.sensors, natsKind, fileSystem(os.TempDir()), o.chunks)
	if o.phases.enrol {
		enrolTable(&b, o, rs)
	}
	if o.phases.fanout {
		fanoutTable(&b, o, rs)
	}
	for _, r := range rs {
		if r.mem != nil {
			reportMemory(&b, o, r.retention, r.mem)
		}
	}
	return b.String()
}

// fileSystem names the file system dir is on: the nats-servers' consumer
// state is one small file rewritten (created, written, renamed) per ack, so
// its metadata speed is part of every fan-out figure.
func fileSystem(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "file system unknown"
	}
	names := map[int64]string{0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "XFS", 0x9123683E: "Btrfs", 0x794C7630: "overlayfs", 0x2FC12FC1: "ZFS"}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("file system 0x%X", st.Type)
}

func enrolTable(b *strings.Builder, o options, rs []result) {
	fmt.Fprintf(b, "| retention | enrolment (%d at once) | bare consumer creation (%d at once) | enrolment / bare | CPU per enrolment (PostgreSQL's share) / per bare consumer | redeem (not in enrolment) |\n|---|---|---|---|---|---|\n", o.enrolConc, o.bareConc)
	n := float64(o.sensors)
	for _, r := range rs {
		fmt.Fprintf(b, "| %s | %.0f/s | %.0f/s | **%.2f** | %.2f ms (%.2f ms) / %.2f ms | %.0f/s |\n",
			r.retention, n/r.enrol.Seconds(), n/r.bare.Seconds(), r.bare.Seconds()/r.enrol.Seconds(),
			ms(r.enrolCPU)/n, ms(r.enrolPGCPU)/n, ms(r.bareCPU)/n, n/r.redeem.Seconds())
	}
	b.WriteString("\n")
}

func fanoutTable(b *strings.Builder, o options, rs []result) {
	how, api := "one `POST /api/commands` for the tenant", "API answered 202"
	if o.single {
		how, api = fmt.Sprintf("one `POST /api/sensors/{id}/commands` per sensor, %d at once", o.fanoutConc), "API accepted all"
	}
	size := int64(0)
	for _, r := range rs {
		size = max(size, r.cmdBytes)
	}
	fmt.Fprintf(b, "Start command to every sensor (%s), first API call → last sensor ack, next to bare nats-server publishing one message per consumer (async, 256 in flight, as large as a delivered command: %d bytes with headers) to as many consumers on as many connections; %d rounds, product then bare in each:\n\n", how, size, max(o.rounds, 1))
	fmt.Fprintf(b, "| retention | product: first API call → last ack | %s | every command in the stream (batch: none pending) | bare: publish → last ack | bare: every publication acknowledged | product / bare |\n|---|---|---|---|---|---|---|\n", api)
	r10 := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	for _, r := range rs {
		for i, f := range r.fanouts {
			stored := "—"
			if f.stored > 0 {
				stored = r10(f.stored).String()
			}
			fmt.Fprintf(b, "| %s, round %d | %s | %s | %s | %s | %s | %.2f× |\n", r.retention, i+1,
				r10(f.all), r10(f.api), stored, r10(f.bare), r10(f.bareStored), f.ratio())
		}
		if len(r.fanouts) > 1 {
			by := func(d func(fanoutRound) time.Duration) time.Duration {
				return d(median(r.fanouts, func(a, b fanoutRound) bool { return d(a) < d(b) }))
			}
			all, bare := by(func(f fanoutRound) time.Duration { return f.all }), by(func(f fanoutRound) time.Duration { return f.bare })
			fmt.Fprintf(b, "| **%s, median of %d** | **%s** | %s | | **%s** | | **%.2f×** (rounds: median %.2f×) |\n", r.retention, len(r.fanouts),
				r10(all), r10(by(func(f fanoutRound) time.Duration { return f.api })), r10(bare), all.Seconds()/bare.Seconds(),
				median(r.fanouts, func(a, b fanoutRound) bool { return a.ratio() < b.ratio() }).ratio())
		}
	}
	b.WriteString("\nCPU used during each fan-out (from the first API call or publish to the last ack; the driver is the control plane, the provisioner and the sensors' clients, or the bare publisher and clients):\n\n| retention | product: its nats-server | product: driver | product: PostgreSQL | bare: nats-server | bare: driver |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		for i, f := range r.fanouts {
			fmt.Fprintf(b, "| %s, round %d | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s |\n", r.retention, i+1,
				f.cpu.nats.Seconds(), f.cpu.driver.Seconds(), f.cpu.postgres.Seconds(),
				f.bareCPU.nats.Seconds(), f.bareCPU.driver.Seconds())
		}
	}
	b.WriteString("\n")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// stack is one retention's system: provisioner, nats-server, control plane
// and a bare nats-server beside them.
type stack struct {
	t     *benchenv.T
	prov  *provisionertest.Stack
	plane *controlplanetest.Plane
	api   *controlplanetest.Client
	bare  *natstest.Server
	bjs   jetstream.JetStream
	// pgPID is PostgreSQL's postmaster (its CPU is its process tree's).
	pgPID int
	// cmdBytes is the size of a command the product delivered, headers
	// and payload; the bare fan-out publishes messages as large.
	cmdBytes atomic.Int64
}

const ackWait = 30 * time.Second // CONSUMER_ACK_WAIT's default

func measure(o options, retention string, roots []int, rss bool) (result, error) {
	res := result{retention: retention}
	t := &benchenv.T{}
	defer t.Close()
	s, err := startStack(t, retention, o.sensors, o.natsProf != "", o.planeLog)
	if err != nil {
		return res, err
	}
	s.pgPID = roots[1]
	fmt.Printf("claim codes and redemptions for %d sensors…\n", o.sensors)
	sensors, err := s.redeemAll(o.sensors, &res)
	if err != nil {
		return res, err
	}
	if o.phases.enrol {
		if err := s.measureEnrol(o, sensors, roots, &res); err != nil {
			return res, err
		}
	} else {
		fmt.Printf("enrolling %d sensors (not measured)…\n", o.sensors)
		if err := s.enrol(sensors, o.enrolConc); err != nil {
			return res, err
		}
	}
	if o.phases.fanout {
		if err := s.measureFanout(o, sensors, roots, &res); err != nil {
			return res, err
		}
	}
	if rss {
		fmt.Printf("control plane memory with %d sensors connected…\n", o.sensors)
		if err := s.memory(o, sensors, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// measureEnrol enrols the sensors alternating in chunks with bare
// nats-server creating as many consumers.
func (s *stack) measureEnrol(o options, sensors []*sensor, roots []int, res *result) error {
	per := (o.sensors + o.chunks - 1) / o.chunks
	for c := 0; c*per < o.sensors; c++ {
		lo, hi := c*per, min((c+1)*per, o.sensors)
		fmt.Printf("chunk %d: bare consumers %d–%d, then enrolments %d–%d…\n", c+1, lo, hi-1, lo, hi-1)
		cpu0, t0 := benchenv.TreeCPU(roots...), time.Now()
		if err := s.bareConsumers(lo, hi, o.bareConc); err != nil {
			return err
		}
		res.bare += time.Since(t0)
		res.bareCPU += benchenv.TreeCPU(roots...) - cpu0
		stop := func() {}
		if c == 0 && o.cpuProfile != "" {
			stop = startProfile(o.cpuProfile)
		}
		if c == 0 && stmts != nil {
			if err := stmts.reset(); err != nil {
				return err
			}
		}
		cpu0, pg0, t0 := benchenv.TreeCPU(roots...), benchenv.TreeCPU(roots[1]), time.Now()
		err := s.enrol(sensors[lo:hi], o.enrolConc)
		stop()
		res.enrolPGCPU += benchenv.TreeCPU(roots[1]) - pg0
		if err != nil {
			return err
		}
		res.enrol += time.Since(t0)
		res.enrolCPU += benchenv.TreeCPU(roots...) - cpu0
		if c == 0 && stmts != nil {
			list, err := stmts.report(hi-lo, "enrolment")
			if err != nil {
				return err
			}
			fmt.Printf("PostgreSQL statements of the first chunk's %d enrolments:\n\n%s\n", hi-lo, list)
		}
	}
	fmt.Printf("  enrolment %s (bare %s)\n", res.enrol.Round(time.Millisecond), res.bare.Round(time.Millisecond))
	return nil
}

// measureFanout sends one start command to every sensor through the API
// and, on the bare nats-server, one message to every consumer, o.rounds
// times alternating: the host's file-system metadata operations, which
// both servers make one of per ack, drift in speed over minutes, so one
// pair taken minutes apart compares the disk more than the servers.
func (s *stack) measureFanout(o options, sensors []*sensor, roots []int, res *result) error {
	if !o.phases.enrol {
		fmt.Printf("bare: %d consumers (not measured)…\n", o.sensors)
		if err := s.bareConsumers(0, o.sensors, o.bareConc); err != nil {
			return err
		}
	}
	for round := range max(o.rounds, 1) {
		f, err := s.measureRound(o, sensors, roots, round, round == 0)
		if err != nil {
			return err
		}
		res.fanouts = append(res.fanouts, f)
		res.cmdBytes = s.cmdBytes.Load()
		fmt.Printf("  round %d: fan-out %s (bare %s); CPU product: %s; bare: %s\n", round+1, f.all.Round(time.Millisecond), f.bare.Round(time.Millisecond), f.cpu, f.bareCPU)
	}
	return nil
}

// measureRound is one product fan-out then one bare; the driver's profile
// and the statement list are taken in the first (profile), the
// nats-servers' profiles in each.
func (s *stack) measureRound(o options, sensors []*sensor, roots []int, round int, profile bool) (fanoutRound, error) {
	var f fanoutRound
	var err error
	fmt.Printf("round %d: start command to %d sensors…\n", round+1, o.sensors)
	// Profiles and CPU count from the first API call: the sensors'
	// connections and consumer lookups before it are not the fan-out.
	stop, natsStop := func() {}, func() {}
	var cpu0 cpuSample
	f.all, f.api, f.stored, err = s.fanout(sensors, o.fanoutConc, o.single, hooks{
		start: func() {
			if profile {
				if o.fanoutProf != "" {
					stop = startProfile(o.fanoutProf)
				}
				if stmts != nil {
					if err := stmts.reset(); err != nil {
						fmt.Fprintln(os.Stderr, "pg_stat_statements:", err)
					}
				}
			}
			natsStop = s.natsProfile(s.prov.NATS, o, fmt.Sprintf("round%d-product", round+1))
			cpu0 = s.cpuSample(roots)
		},
		end: func() { f.cpu = s.cpuSample(roots).since(cpu0) },
	})
	stop()
	natsStop()
	if err != nil {
		return f, err
	}
	if profile && stmts != nil {
		list, err := stmts.report(1, "fan-out")
		if err != nil {
			return f, err
		}
		fmt.Printf("PostgreSQL statements of the product fan-out (first API call to last ack):\n\n%s\n", list)
	}
	if stmts != nil {
		list, err := stmts.maintenance()
		if err != nil {
			return f, err
		}
		fmt.Printf("Tables autovacuum has vacuumed or analysed so far (after round %d's product fan-out):\n\n%s\n", round+1, list)
	}
	fmt.Printf("round %d: bare, one message to each of %d consumers…\n", round+1, o.sensors)
	natsStop = func() {}
	f.bare, f.bareStored, err = s.bareFanoutStored(o.sensors, round, hooks{
		start: func() {
			natsStop = s.natsProfile(s.bare, o, fmt.Sprintf("round%d-bare", round+1))
			cpu0 = s.cpuSample(roots)
		},
		end: func() { f.bareCPU = s.cpuSample(roots).since(cpu0) },
	})
	natsStop()
	return f, err
}

// cpuSample is the CPU used so far by the run's processes.
type cpuSample struct{ all, nats, bare, postgres time.Duration }

// fanoutCPU is what a fan-out cost each process.
type fanoutCPU struct{ nats, driver, postgres time.Duration }

func (c fanoutCPU) String() string {
	return fmt.Sprintf("nats-server %.2f s, driver %.2f s, PostgreSQL %.2f s", c.nats.Seconds(), c.driver.Seconds(), c.postgres.Seconds())
}

func (s *stack) cpuSample(roots []int) cpuSample {
	return cpuSample{
		all: benchenv.TreeCPU(roots...), nats: benchenv.TreeCPU(s.prov.NATS.PID()),
		bare: benchenv.TreeCPU(s.bare.PID()), postgres: benchenv.TreeCPU(roots[1]),
	}
}

// since is the CPU each part used from c0 to c: the product's or the bare
// server's (whichever used more: only one runs a fan-out), the driver
// (everything else in the process tree) and PostgreSQL.
func (c cpuSample) since(c0 cpuSample) fanoutCPU {
	nats, bare := c.nats-c0.nats, c.bare-c0.bare
	all, pg := c.all-c0.all, c.postgres-c0.postgres
	return fanoutCPU{nats: max(nats, bare), driver: all - nats - bare - pg, postgres: pg}
}

// natsProfile profiles srv's CPU for -nats-profile-seconds through its
// profiling port into -nats-cpuprofile's path with kind appended; the
// returned func waits for the profile.
func (s *stack) natsProfile(srv *natstest.Server, o options, kind string) func() {
	if o.natsProf == "" || srv.ProfileURL() == "" {
		return func() {}
	}
	path := o.natsProf + "-" + kind + ".pprof"
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", srv.ProfileURL(), o.natsProfS))
		if err != nil {
			fmt.Fprintln(os.Stderr, "nats-server profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "nats-server profile:", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			fmt.Fprintln(os.Stderr, "nats-server profile:", err)
		}
	}()
	return func() { <-done }
}

func startStack(t *benchenv.T, retention string, n int, profiling bool, planeLog string) (*stack, error) {
	prov := provisionertest.Start(t, provisionertest.Options{LogLevel: "error", CommandStreamRetention: retention, ConsumerAckWait: ackWait, NATSProfiling: profiling,
		// The provisioner's default: provisionertest's 1s (for tests) reads
		// every user and the stream's consumer count each second, load a
		// deployment does not have.
		ResolverSnapshotInterval: 30 * time.Second})
	cfg := controlplanetest.Config(t, prov)
	cfg.SensorOfflineAfter, cfg.ShutdownTimeout, cfg.LogLevel = time.Hour, 10*time.Second, planeLog
	// One address plays every sensor here: lift the per-address redeem limit.
	cfg.RedeemPerMinute, cfg.RedeemBurst = 1_000_000, 1_000_000
	cfg.Provisioner.TimeoutSeconds, cfg.Provisioner.BreakerFailures, cfg.Provisioner.BreakerOpenSeconds = 30, 1000, 5
	plane := controlplanetest.Start(t, cfg)
	s := &stack{t: t, prov: prov, plane: plane, api: plane.NewClient()}
	if err := s.api.Call("POST", "/api/auth/login", map[string]string{"email": controlplanetest.OperatorEmail, "password": controlplanetest.OperatorPassword}, "", 204, nil); err != nil {
		return nil, err
	}
	if err := s.api.Call("POST", "/api/tenants", map[string]string{"id": "fleet", "name": "Fleet"}, "", 201, nil); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		var tn struct{ NatsStatus string }
		if err := s.api.Call("GET", "/api/tenants/fleet", nil, "", 200, &tn); err != nil {
			return nil, err
		}
		if tn.NatsStatus == "provisioned" {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("tenant not provisioned within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.bare = natstest.Start(t, natstest.Options{Dir: t.TempDir(), Name: "bare", Profiling: profiling})
	nc, err := nats.Connect(s.bare.URL())
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	if s.bjs, err = jetstream.New(nc); err != nil {
		return nil, err
	}
	// The stream serveradmin makes, as provisionertest configures it.
	scfg := jetstream.StreamConfig{
		Name: "BARE", Subjects: []string{"bare.*.*.cmd"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		MaxAge: time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: n + 100,
	}
	switch retention {
	case "limits":
		scfg.Retention, scfg.MaxMsgsPerSubject = jetstream.LimitsPolicy, 64
	case "interest":
		scfg.Retention = jetstream.InterestPolicy
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = s.bjs.CreateStream(ctx, scfg)
	return s, err
}

type sensor struct {
	id, token                string
	key                      *ecdsa.PrivateKey
	csr                      string
	certDER                  []byte
	creds, inbox, statusSubj string
	stream, consumer         string
	nats                     sensorclient.NATSInfo
}

func (s *stack) redeemAll(n int, res *result) ([]*sensor, error) {
	codes := make([]string, n)
	err := benchenv.Parallel(context.Background(), n, 32, func(i int) error {
		var c struct{ Code string }
		if err := s.api.Call("POST", "/api/tenants/fleet/claim-codes", map[string]any{"ttlSeconds": 7200}, "", 201, &c); err != nil {
			return err
		}
		codes[i] = c.Code
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*sensor, n)
	t0 := time.Now()
	err = benchenv.Parallel(context.Background(), n, 64, func(i int) error {
		var red struct{ SensorID, EnrollmentToken string }
		if err := s.api.Call("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": codes[i]}, "", 201, &red); err != nil {
			return err
		}
		out[i] = &sensor{id: red.SensorID, token: red.EnrollmentToken}
		return nil
	})
	res.redeem = time.Since(t0)
	if err != nil {
		return nil, err
	}
	// Each sensor makes its key and CSR before it enrols, on its own
	// machine: not part of what the enrolment measures.
	err = benchenv.Parallel(context.Background(), n, 4, func(i int) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			return err
		}
		out[i].key, out[i].csr = key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
		return nil
	})
	return out, err
}

func (s *stack) enrol(sensors []*sensor, conc int) error {
	return benchenv.Parallel(context.Background(), len(sensors), conc, func(i int) error {
		sn := sensors[i]
		var enr struct {
			Certificate string
			NATS        agentwire.NATS
		}
		if err := s.api.Call("POST", "/api/sensors/"+sn.id+"/agent/enroll", map[string]string{"csr": sn.csr}, sn.token, 201, &enr); err != nil {
			return err
		}
		block, _ := pem.Decode([]byte(enr.Certificate))
		if block == nil {
			return fmt.Errorf("sensor %s: enrolment returned no certificate", sn.id)
		}
		sn.certDER = block.Bytes
		sn.creds, sn.inbox, sn.statusSubj = enr.NATS.Creds, enr.NATS.InboxPrefix, enr.NATS.StatusSubject
		sn.stream, sn.consumer = enr.NATS.Stream, enr.NATS.Consumer
		sn.nats = enr.NATS.NATSAddress
		return nil
	})
}

func bareName(i int) string    { return fmt.Sprintf("cmd-fleet-s-%06d", i) }
func bareSubject(i int) string { return fmt.Sprintf("bare.fleet.s-%06d.cmd", i) }

// bareConsumers creates consumers lo…hi-1 with the settings serveradmin gives
// a sensor's consumer.
func (s *stack) bareConsumers(lo, hi, conc int) error {
	return benchenv.Parallel(context.Background(), hi-lo, conc, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := s.bjs.CreateConsumer(ctx, "BARE", jetstream.ConsumerConfig{
			Durable: bareName(lo + i), FilterSubject: bareSubject(lo + i),
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: ackWait, MaxDeliver: 10, MaxAckPending: 16,
		})
		return err
	})
}

// waiter is one connection pulling one command and acking it.
type waiter struct {
	nc   *nats.Conn
	cons jetstream.Consumer
}

// await has every waiter pull its next message and ack it; it returns when
// all acked (the time of the last ack after start) or one failed.
// When size is not nil, the size of a message received (headers and
// payload) is stored in it.
func await(ws []waiter, start, size *atomic.Int64) (func() (time.Duration, error), error) {
	var lastAck atomic.Int64
	errc := make(chan error, len(ws))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			// An agent pulls again after a missed heartbeat or an empty
			// wait (a busy server delays heartbeats), and so does this.
			var msg jetstream.Msg
			var err error
			for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
				msg, err = w.cons.Next(jetstream.FetchMaxWait(time.Minute))
				if !errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, nats.ErrTimeout) {
					break
				}
			}
			if err == nil {
				if size != nil {
					size.Store(int64(len(msg.Data()) + headerBytes(msg.Headers())))
				}
				err = ack(msg)
			}
			if err != nil {
				errc <- err
				return
			}
			at := time.Now().UnixNano()
			for {
				old := lastAck.Load()
				if at <= old || lastAck.CompareAndSwap(old, at) {
					break
				}
			}
		})
	}
	return func() (time.Duration, error) {
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return 0, err
		}
		return time.Duration(lastAck.Load() - start.Load()), nil
	}, nil
}

// ack acks msg and waits for the server to confirm it, asking again when
// no confirmation comes within 5 s, as an agent whose ack went unconfirmed
// acks the redelivery (an ack is idempotent). A work-queue stream with
// thousands of consumers can take longer than that to confirm.
func ack(msg jetstream.Msg) error {
	for deadline := time.Now().Add(5 * time.Minute); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := msg.DoubleAck(ctx)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Now().After(deadline) {
			return err
		}
	}
}

func closeAll(ws []waiter) {
	for _, w := range ws {
		if w.nc != nil {
			w.nc.Close()
		}
	}
}

// fanout sends one start command to every sensor, first API call to last
// ack: one batch for the tenant (POST /api/commands), or with single one
// request per sensor; accepted is when the API answered the last request.
func (s *stack) fanout(sensors []*sensor, conc int, single bool, h hooks) (all, accepted, stored time.Duration, err error) {
	ws := make([]waiter, len(sensors))
	defer closeAll(ws)
	err = benchenv.Parallel(context.Background(), len(sensors), 32, func(i int) error {
		sn := sensors[i]
		tok, err := jwt.ParseDecoratedJWT([]byte(sn.creds))
		if err != nil {
			return err
		}
		kp, err := jwt.ParseDecoratedNKey([]byte(sn.creds))
		if err != nil {
			return err
		}
		seed, _ := kp.Seed()
		nc, err := nats.Connect(s.prov.NATSURL, nats.UserJWTAndSeed(tok, string(seed)), nats.CustomInboxPrefix(sn.inbox))
		if err != nil {
			return err
		}
		ws[i].nc = nc
		js, err := jetstream.NewWithAPIPrefix(nc, "ctrl.API")
		if err != nil {
			return err
		}
		ws[i].cons, err = lookup(js, sn.stream, sn.consumer)
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	h.start()
	var start atomic.Int64
	start.Store(time.Now().UnixNano())
	wait, err := await(ws, &start, &s.cmdBytes)
	if err != nil {
		return 0, 0, 0, err
	}
	done := make(chan struct{})
	if single {
		close(done)
		err = benchenv.Parallel(context.Background(), len(sensors), conc, func(i int) error {
			return s.api.Call("POST", "/api/sensors/"+sensors[i].id+"/commands", map[string]string{"action": "start"}, "", 202, nil)
		})
	} else {
		var b struct {
			BatchID string
			Total   int
		}
		err = s.api.Call("POST", "/api/commands", map[string]any{"action": "start", "filter": map[string]string{"tenantId": "fleet"}}, "", 202, &b)
		if err == nil && b.Total != len(sensors) {
			err = fmt.Errorf("the batch has %d commands for %d sensors", b.Total, len(sensors))
		}
		if err == nil {
			// When the stream holds every command, as the operator's
			// progress bar sees it (polled 5 times a second).
			go func() {
				defer close(done)
				for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
					var st struct{ Pending int }
					if s.api.Call("GET", "/api/commands/batches/"+b.BatchID, nil, "", 200, &st) == nil && st.Pending == 0 {
						stored = time.Since(time.Unix(0, start.Load()))
						return
					}
				}
			}()
		}
	}
	accepted = time.Since(time.Unix(0, start.Load()))
	if err != nil {
		return 0, 0, 0, err
	}
	all, err = wait()
	h.end()
	<-done
	return all, accepted, stored, err
}

// hooks run when a fan-out starts (first API call or publish) and ends
// (last ack, before the sensors disconnect).
type hooks struct{ start, end func() }

// lookup finds a consumer the way an agent does, retrying while the
// server is too busy to answer (an agent retries forever).
func lookup(js jetstream.JetStream, stream, name string) (jetstream.Consumer, error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cons, err := js.Consumer(ctx, stream, name)
		cancel()
		if err == nil || attempt == 10 || errors.Is(err, jetstream.ErrConsumerNotFound) {
			return cons, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *stack) bareFanout(n int, h hooks) (time.Duration, error) {
	d, _, err := s.bareFanoutStored(n, 0, h)
	return d, err
}

// bareFanoutStored is bareFanout, also saying when the stream had
// acknowledged every publication; round makes the messages' ids unique
// across rounds.
func (s *stack) bareFanoutStored(n, round int, h hooks) (all, stored time.Duration, err error) {
	ws := make([]waiter, n)
	defer closeAll(ws)
	err = benchenv.Parallel(context.Background(), n, 32, func(i int) error {
		nc, err := nats.Connect(s.bare.URL())
		if err != nil {
			return err
		}
		ws[i].nc = nc
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ws[i].cons, err = lookup(js, "BARE", bareName(i))
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	pub, err := nats.Connect(s.bare.URL())
	if err != nil {
		return 0, 0, err
	}
	defer pub.Close()
	pjs, err := jetstream.New(pub, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return 0, 0, err
	}
	h.start()
	var start atomic.Int64
	start.Store(time.Now().UnixNano())
	wait, err := await(ws, &start, nil)
	if err != nil {
		return 0, 0, err
	}
	payload := barePayload(int(s.cmdBytes.Load()))
	for i := range n {
		if _, err := pjs.PublishAsync(bareSubject(i), payload, jetstream.WithMsgID(fmt.Sprintf("bare-%d-%d", round, i)), jetstream.WithExpectStream("BARE"), jetstream.WithStallWait(time.Minute)); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-pjs.PublishAsyncComplete():
		stored = time.Since(time.Unix(0, start.Load()))
	case <-time.After(5 * time.Minute):
		return 0, 0, errors.New("bare publishes not acknowledged within 5 minutes")
	}
	all, err = wait()
	h.end()
	return all, stored, err
}

// headerBytes is about what h takes on the wire.
func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// barePayload is a start command padded to size bytes (at least the bare
// command): the bare fan-out stores and delivers messages as large as the
// product's. Small messages pack more to a message block, and a consumer
// looking for its next message in a block that holds its subject reads the
// block's messages one by one, so tiny bare messages would make a later
// round of the bare fan-out slower than the product's, not a ceiling.
func barePayload(size int) []byte {
	const head, tail = `{"action":"start","pad":"`, `"}`
	pad := max(size-len(head)-len(tail)-len("Nats-Msg-Id")-len("bare-0-000000")-len("Nats-Expected-Stream")-len("BARE")-8, 0)
	return []byte(head + strings.Repeat("x", pad) + tail)
}

func startProfile(path string) func() {
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func waitStatus(url string, want int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %d within %s", url, want, within)
}

// serveChild runs a control plane from a JSON ServeConfig until SIGTERM.
func serveChild(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var cfg app.ServeConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	servePprof()
	lvl := slog.LevelWarn
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	srv, err := app.NewServer(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	return 0
}

// broadcastExperiment measures, on bare nats-server, a fleet-wide command
// stored once and delivered to every sensor's consumer (each consumer
// filters its own subject and the fleet's; each sensor still acks on its
// own consumer) against one message per sensor. Work-queue streams refuse
// overlapping consumers, so only interest and limits are tried.
func broadcastExperiment(t *benchenv.T, o options) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| retention | %d messages, one per consumer: publish → last ack | 1 message on a fleet subject every consumer also filters: publish → last ack | stream messages after |\n|---|---|---|---|\n", o.sensors)
	for _, r := range o.retentions {
		if r == "workqueue" {
			continue
		}
		per, one, left, err := broadcastOnce(t, r, o.sensors)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", r, per.Round(10*time.Millisecond), one.Round(10*time.Millisecond), left)
	}
	fmt.Print(b.String())
	if o.out != "" {
		return benchenv.AppendResults(o.out, "Fleet-wide command stored once (experiment)", b.String())
	}
	return nil
}

func broadcastOnce(parent *benchenv.T, retention string, n int) (perSensor, once time.Duration, left uint64, err error) {
	t := &benchenv.T{}
	defer t.Close()
	srv := natstest.Start(t, natstest.Options{Dir: parent.TempDir(), Name: "bare"})
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return 0, 0, 0, err
	}
	ctx := context.Background()
	scfg := jetstream.StreamConfig{Name: "BARE", Subjects: []string{"bare.*.*.cmd"}, Retention: jetstream.InterestPolicy,
		Storage: jetstream.FileStorage, MaxAge: time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: n + 100}
	if retention == "limits" {
		scfg.Retention, scfg.MaxMsgsPerSubject = jetstream.LimitsPolicy, 64
	}
	st, err := js.CreateStream(ctx, scfg)
	if err != nil {
		return 0, 0, 0, err
	}
	const fleetSubject = "bare.fleet.all.cmd"
	err = benchenv.Parallel(ctx, n, 16, func(i int) error {
		_, err := js.CreateConsumer(ctx, "BARE", jetstream.ConsumerConfig{
			Durable: bareName(i), FilterSubjects: []string{bareSubject(i), fleetSubject},
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: ackWait, MaxDeliver: 10, MaxAckPending: 16,
		})
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	s := &stack{bare: srv, bjs: js}
	if perSensor, err = s.bareFanout(n, hooks{func() {}, func() {}}); err != nil {
		return 0, 0, 0, err
	}
	ws := make([]waiter, n)
	defer closeAll(ws)
	err = benchenv.Parallel(ctx, n, 32, func(i int) error {
		c, err := nats.Connect(srv.URL())
		if err != nil {
			return err
		}
		ws[i].nc = c
		cjs, err := jetstream.New(c)
		if err != nil {
			return err
		}
		ws[i].cons, err = lookup(cjs, "BARE", bareName(i))
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	var start atomic.Int64
	start.Store(time.Now().UnixNano())
	wait, err := await(ws, &start, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := js.Publish(ctx, fleetSubject, []byte(`{"action":"start"}`), jetstream.WithMsgID("fleet-1")); err != nil {
		return 0, 0, 0, err
	}
	if once, err = wait(); err != nil {
		return 0, 0, 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	return perSensor, once, info.State.Msgs, nil
}
