// Command stop measures how long nats-server takes to stop and to come back
// with one durable consumer per sensor, the figures the shipped manifests'
// grace periods (deploy/: compose stop_grace_period, the pods'
// terminationGracePeriodSeconds) are set from. For each nats-server binary
// and each shape it creates the command stream and N consumers as the
// provisioner does (serveradmin: stream RXC_CMD on topology.CommandWildcard,
// file storage, 168 h, one consumer per sensor filtering its command
// subject, explicit ack, ack wait 30 s, 10 deliveries, 16 pending), puts one
// pending command in front of every sensor, then on the stopped node:
//
//  1. SIGTERM → the process's exit (a plain stop: compose's default signal,
//     the pod's SIGTERM without a preStop);
//  2. restart → /healthz answers, and → every consumer answers its info
//     request again (what a sensor needs to fetch);
//  3. SIGUSR2 (lame-duck mode, `nats-server --signal ldm`, with the shipped
//     lame_duck_duration and lame_duck_grace_period and clients connected to
//     the node) → exit;
//  4. restart → /healthz, → every consumer answering.
//
// Shapes: single (one node, work-queue retention, R1: the provisioner's
// defaults) and cluster (three nodes, limits R3 stream, R1 consumers: what
// deploy/ ships; the third node is the one stopped, the others keep
// running). Each stop waits up to -limit before killing the process, as a
// supervisor with that grace period would (a row says "killed"). The
// servers run as processes, plain (no operator mode), JetStream on the
// same disk. Results are printed and appended to
// docs/benchmarks-history.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
)

const stream = "RXC_CMD"

type shape struct {
	name  string
	nodes int
}

var shapes = map[string]shape{
	"single":  {"1 node, work-queue, R1 (the provisioner's defaults)", 1},
	"cluster": {"3 nodes, limits R3 stream, R1 consumers (deploy/), the third node stopped", 3},
}

type phase struct {
	stop    time.Duration
	exited  bool // within the limit
	healthy time.Duration
	ready   time.Duration // every consumer answering
	err     error
}

type result struct {
	bin, version string
	shape        shape
	n            int
	create       time.Duration
	onNode       int // consumers led by the stopped node
	term, ldm    phase
	err          error
}

func main() {
	n := flag.Int("consumers", 10000, "durable consumers (sensors)")
	list := flag.String("shapes", "single,cluster", "shapes, in order: single, cluster")
	binsFlag := flag.String("bins", "", "comma-separated nats-server binaries (default: $RXC_NATS_SERVER_BIN, else bin/nats-server-v2.15.2 and bin/nats-server-v2.11.17)")
	limit := flag.Duration("limit", 10*time.Minute, "how long a stop may take before the process is killed")
	ldmDuration := flag.Duration("lame-duck-duration", 30*time.Second, "lame_duck_duration (deploy/: 30s)")
	ldmGrace := flag.Duration("lame-duck-grace", 10*time.Second, "lame_duck_grace_period (deploy/: nats-server's default, 10s)")
	clients := flag.Int("clients", 20, "idle client connections on the stopped node (sensors; lame-duck mode closes them over lame_duck_duration)")
	place := flag.Duration("placement", 0, "instead: for this long after one node of three is killed, where new R1 consumers land (placement.go)")
	flag.Parse()
	bins := binaries(*binsFlag)
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "no nats-server binary: set -bins or RXC_NATS_SERVER_BIN (make bench builds bin/nats-server-<version>)")
		os.Exit(2)
	}
	ctx := context.Background()
	if *place > 0 {
		var b strings.Builder
		for _, bin := range bins {
			fmt.Fprintf(os.Stderr, "== %s: placement with a node dead\n", bin)
			out, err := placement(ctx, bin, *place)
			if err != nil {
				fmt.Fprintf(&b, "%s: failed: %s\n\n", bin, oneLine(err))
				continue
			}
			b.WriteString(out + "\n")
		}
		fmt.Print(b.String())
		if err := benchenv.AppendResults("docs/benchmarks-history.md", "Where nats-server places a new R1 consumer while a node is dead (bench/stop -placement)", b.String()); err != nil {
			fmt.Fprintln(os.Stderr, "append results:", err)
		}
		return
	}
	fmt.Printf("machine: %s; %d consumers; load average %s\n", benchenv.Machine(), *n, loadavg())
	var results []result
	for _, bin := range bins {
		for _, name := range strings.Split(*list, ",") {
			sh, ok := shapes[strings.TrimSpace(name)]
			if !ok {
				fmt.Fprintf(os.Stderr, "unknown shape %q (single, cluster)\n", name)
				os.Exit(2)
			}
			fmt.Fprintf(os.Stderr, "== %s: %s\n", bin, sh.name)
			r := measure(ctx, bin, sh, *n, *limit, *ldmDuration, *ldmGrace, *clients)
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "%s %s: %v\n", bin, sh.name, r.err)
			}
			results = append(results, r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d durable consumers as the provisioner creates them (32 at a time), one pending command each; then on the stopped node SIGTERM → exit, restart → /healthz and → every consumer answering its info request, SIGUSR2 (lame-duck mode: lame_duck_duration %s, lame_duck_grace_period %s, %d idle clients on the node) → exit, restart again. A stop longer than %s is killed. Load average at the start %s, at the end %s.\n\n",
		*n, *ldmDuration, *ldmGrace, *clients, *limit, loadavg0, loadavg())
	b.WriteString("| nats-server | shape | consumers created | led by the stopped node | SIGTERM → exit | restart → healthy, all answering | lame duck → exit | restart → healthy, all answering |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.err != nil && r.create == 0 {
			fmt.Fprintf(&b, "| %s | %s | failed: %s | | | | | |\n", r.version, r.shape.name, oneLine(r.err))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s (%.0f/s) | %d | %s | %s | %s | %s |\n", r.version, r.shape.name,
			r.create.Round(time.Millisecond), float64(r.n)/r.create.Seconds(), r.onNode,
			r.term.stopCell(), r.term.readyCell(), r.ldm.stopCell(), r.ldm.readyCell())
		if r.err != nil {
			fmt.Fprintf(&b, "| | (error: %s) | | | | | | |\n", oneLine(r.err))
		}
	}
	fmt.Print(b.String())
	if err := benchenv.AppendResults("docs/benchmarks-history.md", "nats-server stop and restart with many consumers (bench/stop)", b.String()); err != nil {
		fmt.Fprintln(os.Stderr, "append results:", err)
	}
}

var loadavg0 = loadavg()

func (p phase) stopCell() string {
	switch {
	case p.err != nil && p.stop == 0:
		return "failed: " + oneLine(p.err)
	case !p.exited:
		return fmt.Sprintf("killed after %s", p.stop.Round(100*time.Millisecond))
	}
	return p.stop.Round(100 * time.Millisecond).String()
}

func (p phase) readyCell() string {
	if p.err != nil {
		return "failed: " + oneLine(p.err)
	}
	return fmt.Sprintf("%s, %s", p.healthy.Round(100*time.Millisecond), p.ready.Round(100*time.Millisecond))
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "|", "/")), " ")
}

func binaries(flagValue string) []string {
	var out []string
	if flagValue != "" {
		for _, b := range strings.Split(flagValue, ",") {
			if b = strings.TrimSpace(b); b != "" {
				if abs, err := filepath.Abs(b); err == nil {
					b = abs
				}
				out = append(out, b)
			}
		}
		return out
	}
	if b := os.Getenv(natstest.BinEnv); b != "" {
		return []string{b}
	}
	for _, v := range []string{"v2.15.2", "v2.11.17"} {
		p := filepath.Join("bin", "nats-server-"+v, "nats-server")
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func sensor(i int) topology.Sensor {
	return topology.Sensor{Stream: stream, TenantID: fmt.Sprintf("t%d", i%10), SensorID: fmt.Sprintf("s-%06d", i)}
}

// consumerConfig is serveradmin's consumerConfig with the provisioner's
// defaults (CONSUMER_ACK_WAIT 30s, 10 deliveries, 16 pending).
func consumerConfig(s topology.Sensor, replicas int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       s.Consumer(),
		Description:   "commands of sensor " + s.SensorID + " of tenant " + s.TenantID,
		FilterSubject: s.CommandSubject(),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    10,
		MaxAckPending: 16,
		Replicas:      replicas,
	}
}

func measure(ctx context.Context, bin string, sh shape, n int, limit, ldmDuration, ldmGrace time.Duration, clients int) (r result) {
	r.bin, r.shape, r.n = bin, sh, n
	t := &benchenv.T{}
	defer t.Close()
	extra := fmt.Sprintf("lame_duck_duration: %q\nlame_duck_grace_period: %q\n", ldmDuration.String(), ldmGrace.String())
	nodes, err := startNodes(t, bin, sh.nodes, extra)
	if err != nil {
		r.err = err
		return r
	}
	if r.version, err = nodes[0].Version(); err != nil {
		r.version = filepath.Base(filepath.Dir(bin))
	}
	target := nodes[len(nodes)-1]
	// The driver talks to the nodes that stay up (all of them on one node).
	var urls []string
	for _, s := range nodes[:max(1, len(nodes)-1)] {
		urls = append(urls, s.URL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.Timeout(10*time.Second))
	if err != nil {
		r.err = err
		return r
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		r.err = err
		return r
	}
	scfg := jetstream.StreamConfig{
		Name: stream, Description: "RXC sensor commands", Subjects: []string{topology.CommandWildcard},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: sh.nodes,
		MaxAge: 168 * time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: 1000000,
	}
	replicas := 0 // the stream's, as serveradmin for COMMAND_CONSUMER_REPLICAS = COMMAND_STREAM_REPLICAS
	if sh.nodes > 1 {
		scfg.Retention, scfg.MaxMsgsPerSubject = jetstream.LimitsPolicy, 64
		replicas = 1
	}
	if err := retry(ctx, 60*time.Second, func() error { _, err := js.CreateStream(ctx, scfg); return err }); err != nil {
		r.err = fmt.Errorf("stream: %w", err)
		return r
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	_ = benchenv.Parallel(ctx, n, 32, func(i int) error {
		err := retry(ctx, 60*time.Second, func() error {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := js.CreateOrUpdateConsumer(cctx, stream, consumerConfig(sensor(i), replicas))
			return err
		})
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err)
		}
		return nil
	})
	r.create = time.Since(start)
	if f := failed.Load(); f > 0 {
		r.err = fmt.Errorf("%d of %d consumers not created (first: %v)", f, n, firstErr.Load())
		r.create = 0
		return r
	}
	fmt.Fprintf(os.Stderr, "created %d consumers in %s\n", n, r.create.Round(time.Millisecond))
	// One pending command in front of every sensor.
	for i := range n {
		if _, err := js.PublishAsync(sensor(i).CommandSubject(), []byte(`{"action":"start"}`), jetstream.WithMsgID(fmt.Sprintf("c-%d", i))); err != nil {
			r.err = fmt.Errorf("publish: %w", err)
			return r
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		r.err = errors.New("publish: not acknowledged within 2 minutes")
		return r
	}
	if sh.nodes > 1 {
		if r.onNode, err = ledBy(ctx, js, n, fmt.Sprintf("nats-%d", len(nodes))); err != nil {
			r.err = fmt.Errorf("consumer leaders: %w", err)
			return r
		}
	} else {
		r.onNode = n
	}
	fmt.Fprintf(os.Stderr, "%d consumers led by the node to stop\n", r.onNode)

	r.term = cycle(ctx, js, target, n, syscall.SIGTERM, limit, clients)
	fmt.Fprintf(os.Stderr, "SIGTERM: %+v\n", r.term)
	r.ldm = cycle(ctx, js, target, n, syscall.SIGUSR2, limit, clients)
	fmt.Fprintf(os.Stderr, "lame duck: %+v\n", r.ldm)
	return r
}

// cycle stops the node with sig (clients connected to it), restarts it and
// waits until every consumer answers.
func cycle(ctx context.Context, js jetstream.JetStream, node *natstest.Server, n int, sig syscall.Signal, limit time.Duration, clients int) (p phase) {
	var conns []*nats.Conn
	for range clients {
		c, err := nats.Connect(node.URL(), nats.NoReconnect())
		if err != nil {
			p.err = fmt.Errorf("client: %w", err)
			return p
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	p.stop, p.exited, p.err = node.StopWithin(sig, limit)
	if p.err != nil {
		return p
	}
	start := time.Now()
	if err := node.TryStart(); err != nil {
		p.err = fmt.Errorf("restart: %w", err)
		return p
	}
	p.healthy = time.Since(start)
	if err := allAnswering(ctx, js, n, 10*time.Minute); err != nil {
		p.err = err
		return p
	}
	p.ready = time.Since(start)
	return p
}

// allAnswering waits until every sensor's consumer answers its info
// request (its leader is up and has loaded it).
func allAnswering(ctx context.Context, js jetstream.JetStream, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	var missing atomic.Int64
	_ = benchenv.Parallel(ctx, n, 64, func(i int) error {
		for {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.Consumer(ictx, stream, sensor(i).Consumer())
			cancel()
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				missing.Add(1)
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	if m := missing.Load(); m > 0 {
		return fmt.Errorf("%d of %d consumers not answering within %s", m, n, within)
	}
	return nil
}

// ledBy counts the consumers whose leader is the named node.
func ledBy(ctx context.Context, js jetstream.JetStream, n int, name string) (int, error) {
	var count atomic.Int64
	err := benchenv.Parallel(ctx, n, 64, func(i int) error {
		return retry(ctx, 30*time.Second, func() error {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			c, err := js.Consumer(ictx, stream, sensor(i).Consumer())
			if err != nil {
				return err
			}
			if ci := c.CachedInfo(); ci.Cluster != nil && ci.Cluster.Leader == name {
				count.Add(1)
			}
			return nil
		})
	})
	return int(count.Load()), err
}

func startNodes(t *benchenv.T, bin string, n int, extra string) ([]*natstest.Server, error) {
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if clientPorts[i], err = benchenv.FreePort(); err != nil {
			return nil, err
		}
		if routePorts[i], err = benchenv.FreePort(); err != nil {
			return nil, err
		}
	}
	nodes := make([]*natstest.Server, n)
	for i := range n {
		conf := extra
		if n > 1 {
			var routes []string
			for j, p := range routePorts {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
				}
			}
			conf += fmt.Sprintf("cluster {\n  name: rxc\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", routePorts[i], strings.Join(routes, ", "))
		}
		nodes[i] = natstest.New(t, natstest.Options{Dir: t.TempDir(), Name: fmt.Sprintf("nats-%d", i+1), Port: clientPorts[i], Config: conf, Bin: bin, ReadyTimeout: 10 * time.Minute})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nodes[i].TryStart()
		}()
	}
	wg.Wait()
	return nodes, errors.Join(errs...)
}

func retry(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
