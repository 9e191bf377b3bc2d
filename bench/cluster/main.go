// Command cluster measures the NATS cluster shapes a command stream with one
// durable consumer per sensor can take, each on its own fresh servers in the
// same run: enrolment (durable consumers created, 32 at a time) and one
// command to every sensor (published, then fetched and acked by every
// sensor's consumer, timed to the last ack). The shapes:
//
//   - single: one node, the stream and its consumers at one replica (the
//     baseline the done-when figures of issue 21 are relative to), with
//     work-queue and with limits retention;
//   - the three-node shapes: work-queue + R3 consumers (what deploy/ shipped
//     before), work-queue + R3 consumers with their state in memory, limits +
//     R3 consumers, and limits + R1 consumers (what deploy/ ships now:
//     COMMAND_STREAM_RETENTION=limits, COMMAND_CONSUMER_REPLICAS=1).
//
// With -kill it also SIGKILLs one node of the chosen shape after the
// fan-out, does what the provisioner's node-loss pass does (-recover
// recorded: the consumers whose create answer named the node the stream
// reports lost; -recover list: the consumer list's missing names, the
// fallback and the earlier way) and reports when every consumer answers
// again from a live node, from the kill. The servers run as processes ($RXC_NATS_SERVER_BIN, else in
// this process), plain (no operator mode), JetStream on the same disk.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

type shape struct {
	name      string
	nodes     int
	retention jetstream.RetentionPolicy
	consumerR int
	memState  bool
}

var shapes = map[string]shape{
	"single-wq":     {"1 node, work-queue, R1", 1, jetstream.WorkQueuePolicy, 1, false},
	"single-limits": {"1 node, limits, R1", 1, jetstream.LimitsPolicy, 1, false},
	"wq-r3":         {"3 nodes, work-queue R3 stream, R3 consumers (shipped before)", 3, jetstream.WorkQueuePolicy, 3, false},
	"wq-r3-mem":     {"3 nodes, work-queue R3 stream, R3 consumers, consumer state in memory", 3, jetstream.WorkQueuePolicy, 3, true},
	"limits-r3":     {"3 nodes, limits R3 stream, R3 consumers", 3, jetstream.LimitsPolicy, 3, false},
	"limits-r1":     {"3 nodes, limits R3 stream, R1 consumers (shipped now)", 3, jetstream.LimitsPolicy, 1, false},
	"limits-r1-mem": {"3 nodes, limits R3 stream, R1 consumers, consumer state in memory", 3, jetstream.LimitsPolicy, 1, true},
}

type result struct {
	shape            shape
	create, fanout   time.Duration
	createdPerSecond float64
	missing          int
	// rss and disk are the largest node's resident memory (peak) and
	// directory (JetStream store, configuration, log) after the fan-out;
	// rss is 0 when unknown (in process).
	rss, disk int64
	// createCPU is the CPU time the machine spent on the creation: this
	// process and its children (the nats-servers when they run as
	// processes).
	createCPU time.Duration
	consumers int // created (the sensors of the shape)
	listed    time.Duration
	recreate  time.Duration
	// The node loss (nodeLoss): how the provisioner found the consumers
	// to recreate, when it knew, how many of the lost node's consumers
	// answered when asked (not recreated), and when every consumer
	// answered again from a live node, from the kill.
	recovery  string
	sensors   string // -pull: what the sensors' pullers saw
	detected  time.Duration
	answered  int
	answering time.Duration
	err       error
}

func main() {
	sensors := flag.Int("sensors", 2000, "sensors (durable consumers) per shape")
	list := flag.String("shapes", "single-wq,single-limits,limits-r1,wq-r3", "shapes to measure, in order: "+names())
	kill := flag.String("kill", "limits-r1", "shape whose node is stopped after the fan-out (empty: none)")
	flag.BoolVar(&pullSensors, "pull", false, "with -kill: every sensor pulls its consumer throughout (one puller a sensor, as the agent) and gets a command, half sent before the kill and half after; reports commands lost, delivered twice, and when the last was applied")
	flag.IntVar(&recoverWorkers, "recover-workers", 256, "consumers re-checked and recreated at once with -recover recorded (the provisioner's nodeLossWorkers)")
	flag.StringVar(&recovery, "recover", "recorded", "how the killed node's consumers are found: recorded (each consumer's node recorded at creation, the lost node named by the stream: what the provisioner does) or list (every consumer listed, nats-server names the missing ones: the fallback, and what the provisioner did before)")
	shipped := flag.Bool("shipped", true, "also enrol the sensors through the provisioner on the shipped shape (three nodes, COMMAND_STREAM_RETENTION=limits, COMMAND_CONSUMER_REPLICAS=1, PostgreSQL)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the provisioner runs in it) during the shipped enrolment to this file")
	pgPool := flag.Int("pgpool", 0, "the shipped shape's provisioner PostgreSQL pool size (pool_max_conns in PG_DSN; 0: the provisioner's default)")
	blockProfile := flag.String("blockprofile", "", "write a block profile of this process during the shipped enrolment to this file (where the provisioner's requests wait)")
	natsProfile := flag.String("natsprofile", "", "write CPU profiles of the shipped shape's nats-servers (the first 10 s of the enrolment) to this prefix, one file a node")
	flag.Parse()
	ctx := context.Background()
	fmt.Printf("machine: %s; %d sensors per shape; nats-server %s\n", benchenv.Machine(), *sensors, serverKind())
	var results []result
	for _, n := range strings.Split(*list, ",") {
		sh, ok := shapes[strings.TrimSpace(n)]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown shape %q (%s)\n", n, names())
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "== %s\n", sh.name)
		r := measure(ctx, sh, *sensors, strings.TrimSpace(n) == *kill)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", sh.name, r.err)
		}
		results = append(results, r)
	}
	var prov provResult
	if *shipped {
		fmt.Fprintln(os.Stderr, "== the shipped shape through the provisioner")
		prov = provisioned(ctx, *sensors, *pgPool, *cpuProfile, *blockProfile, *natsProfile)
		if prov.err != nil {
			fmt.Fprintln(os.Stderr, "shipped:", prov.err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d sensors, one durable pull consumer each (32 created at a time), then one command to every sensor (each consumer fetches and acks; time to the last ack). Fresh servers per shape, same disk, load average at the start %s.\n\n", *sensors, loadavg())
	b.WriteString("| shape | consumers created | /s | one command to every sensor | largest node: peak RSS, its directory (store, log) | one node killed after the fan-out (SIGKILL), then what the provisioner does |\n|---|---|---|---|---|---|\n")
	var base *result
	for i := range results {
		r := &results[i]
		if r.shape.nodes == 1 && r.shape.retention == jetstream.LimitsPolicy {
			base = r
		}
	}
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(&b, "| %s | failed: %v | | | | |\n", r.shape.name, r.err)
			continue
		}
		kill := ""
		if r.recreate > 0 || r.missing > 0 {
			kill = killText(r)
			if r.sensors != "" {
				kill += "; sensors pulling: " + r.sensors
			}
		}
		rel := ""
		if base != nil && base.err == nil {
			rel = fmt.Sprintf(" (%.2f of single limits)", r.createdPerSecond/base.createdPerSecond)
		}
		frel := ""
		if base != nil && base.err == nil {
			frel = fmt.Sprintf(" (%.2f× single limits)", r.fanout.Seconds()/base.fanout.Seconds())
		}
		mem := fmt.Sprintf("%d MiB, %d MiB", r.rss>>20, r.disk>>20)
		if r.rss == 0 {
			mem = fmt.Sprintf("(in process), %d MiB", r.disk>>20)
		}
		cpu := ""
		if r.createCPU > 0 {
			cpu = fmt.Sprintf(" (CPU %s, %.2f ms a consumer)", r.createCPU.Round(10*time.Millisecond), r.createCPU.Seconds()*1000/float64(r.consumers))
		}
		fmt.Fprintf(&b, "| %s | %s%s | %.0f%s | %s%s | %s | %s |\n", r.shape.name, r.create.Round(time.Millisecond), cpu, r.createdPerSecond, rel, r.fanout.Round(time.Millisecond), frel, mem, kill)
	}
	if *shipped {
		switch {
		case prov.err != nil:
			fmt.Fprintf(&b, "| the shipped shape through the provisioner (POST /users) | failed: %v | | | | |\n", prov.err)
		default:
			rel := ""
			if base != nil && base.err == nil {
				rel = fmt.Sprintf(" (%.2f of single limits consumer creation)", prov.rate/base.createdPerSecond)
			}
			fmt.Fprintf(&b, "| the shipped shape through the provisioner: POST /users (user JWT, PostgreSQL, consumer; 32 at a time) | %s (CPU %s, %.2f ms a sensor: provisioner and its client %s, nats-servers %s, PostgreSQL %s) | %.0f%s | (bare row above) | | |\n",
				prov.total.Round(time.Millisecond), prov.cpu.Round(10*time.Millisecond), prov.cpu.Seconds()*1000/float64(*sensors),
				prov.self.Round(10*time.Millisecond), prov.nats.Round(10*time.Millisecond), prov.pg.Round(10*time.Millisecond), prov.rate, rel)
		}
	}
	fmt.Print(b.String())
	if err := benchenv.AppendResults("docs/benchmarks-history.md", "NATS cluster shapes (bench/cluster)", b.String()); err != nil {
		fmt.Fprintln(os.Stderr, "append results:", err)
	}
}

func names() string {
	var ns []string
	for n := range shapes {
		ns = append(ns, n)
	}
	return strings.Join(ns, ", ")
}

func serverKind() string {
	if bin := os.Getenv(natstest.BinEnv); bin != "" {
		return "process " + bin
	}
	return "in process (" + runtime.Version() + ")"
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

func measure(ctx context.Context, sh shape, n int, kill bool) (r result) {
	r.shape, r.consumers = sh, n
	t := &benchenv.T{}
	defer t.Close()
	nodes, err := startNodes(t, sh.nodes)
	if err != nil {
		r.err = err
		return r
	}
	var urls []string
	for _, s := range nodes {
		urls = append(urls, s.URL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
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
		Name: "RXC_CMD", Subjects: []string{"cmd.*.*"}, Retention: sh.retention, Storage: jetstream.FileStorage,
		Replicas: sh.nodes, MaxAge: 168 * time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: n + 10,
	}
	if sh.retention == jetstream.LimitsPolicy {
		scfg.MaxMsgsPerSubject = 64
	}
	if err := retry(ctx, 30*time.Second, func() error { _, err := js.CreateStream(ctx, scfg); return err }); err != nil {
		r.err = fmt.Errorf("stream: %w", err)
		return r
	}
	consumer := func(i int) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("s-%06d", i), FilterSubject: fmt.Sprintf("cmd.t%d.s-%06d", i%10, i),
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 16, Replicas: sh.consumerR, MemoryStorage: sh.memState,
		}
	}
	cpu0 := benchenv.TreeCPU(os.Getpid())
	var failed atomic.Int64
	placed := make([]string, n) // the node each create answer named
	start := time.Now()
	_ = benchenv.Parallel(ctx, n, 32, func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cons, err := js.CreateOrUpdateConsumer(cctx, "RXC_CMD", consumer(i))
		if err != nil {
			failed.Add(1)
		} else if ci := cons.CachedInfo(); ci.Cluster != nil {
			placed[i] = ci.Cluster.Leader
		}
		return nil
	})
	r.create = time.Since(start)
	r.createdPerSecond = float64(n) / r.create.Seconds()
	r.createCPU = benchenv.TreeCPU(os.Getpid()) - cpu0
	if f := failed.Load(); f > 0 {
		r.err = fmt.Errorf("%d of %d consumers not created", f, n)
		return r
	}
	fmt.Fprintf(os.Stderr, "created %d consumers in %s\n", n, r.create.Round(time.Millisecond))

	// One command to every sensor, then every sensor fetches and acks.
	start = time.Now()
	var futs []jetstream.PubAckFuture
	for i := range n {
		f, err := js.PublishAsync(fmt.Sprintf("cmd.t%d.s-%06d", i%10, i), []byte(`{"action":"start"}`), jetstream.WithMsgID(fmt.Sprintf("c-%d", i)))
		if err != nil {
			r.err = fmt.Errorf("publish: %w", err)
			return r
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			r.err = fmt.Errorf("publish: %w", err)
			return r
		case <-time.After(60 * time.Second):
			r.err = errors.New("publish: no acknowledgement in 60s")
			return r
		}
	}
	var unacked atomic.Int64
	_ = benchenv.Parallel(ctx, n, 64, func(i int) error {
		err := retry(ctx, 60*time.Second, func() error {
			cons, err := js.Consumer(ctx, "RXC_CMD", fmt.Sprintf("s-%06d", i))
			if err != nil {
				return err
			}
			b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			got := false
			for m := range b.Messages() {
				if err := m.DoubleAck(ctx); err != nil {
					return err
				}
				got = true
			}
			if !got {
				return errors.New("no message")
			}
			return nil
		})
		if err != nil {
			unacked.Add(1)
		}
		return nil
	})
	r.fanout = time.Since(start)
	if u := unacked.Load(); u > 0 {
		r.err = fmt.Errorf("%d of %d sensors did not get their command", u, n)
		return r
	}
	fmt.Fprintf(os.Stderr, "fan-out to %d sensors in %s\n", n, r.fanout.Round(time.Millisecond))
	for _, node := range nodes {
		if node.External() {
			_, peak := benchenv.RSS(node.PID())
			r.rss = max(r.rss, peak)
		}
		r.disk = max(r.disk, dirSize(filepath.Dir(node.StoreDir())))
	}
	if !kill || sh.nodes < 3 {
		return r
	}
	nodeLoss(ctx, &r, nodes[2], js, nc, n, placed, consumer)
	return r
}

// recovery is the -recover flag: "recorded" or "list"; recoverWorkers
// is -recover-workers.
var (
	recovery       = "recorded"
	recoverWorkers = 256
)

// killText is the node-loss column of the results table.
func killText(r result) string {
	if r.recovery == "list" {
		return fmt.Sprintf("list: %d listed missing in %s, recreated by %s; every consumer answering again **%s** after the kill", r.missing, r.listed.Round(time.Millisecond), r.recreate.Round(time.Millisecond), r.answering.Round(time.Millisecond))
	}
	return fmt.Sprintf("recorded nodes: lost node named %s after the kill, %d consumers recorded there (%d answered when asked), recreated %d at a time by %s; every consumer answering again **%s** after the kill", r.detected.Round(time.Millisecond), r.missing, r.answered, recoverWorkers, r.recreate.Round(time.Millisecond), r.answering.Round(time.Millisecond))
}

// nodeLoss SIGKILLs node and then does what the provisioner's node-loss
// pass does (apps/provisioner offlineLoop, core RecreateLostNodeConsumers,
// serveradmin), timed from the kill, then asks every consumer until each
// answers from a live node. With -recover recorded: every 2 s one stream
// info request until the stream names a replica offline or silent for 5 s
// (serveradmin.LostNodes), then the consumers whose create answer named
// that node are asked (500 ms) and, when they do not answer, deleted (2 s
// wait) and created again (3 s), up to 4 rounds, 256 at a time (-recover-workers). With
// -recover list: what the provisioner did before (and does now as the
// fallback): the consumer list with nats-server's "missing" names, then
// the same recreation, 32 at a time.
func nodeLoss(ctx context.Context, r *result, node *natstest.Server, js jetstream.JetStream, nc *nats.Conn, n int, placed []string, consumer func(int) jetstream.ConsumerConfig) {
	r.recovery = recovery
	idx := map[string]int{}
	for i := range n {
		idx[fmt.Sprintf("s-%06d", i)] = i
	}
	var fleet *sensorFleet
	if pullSensors {
		fleet = startSensors(ctx, js, n)
		fleet.publish(ctx, js, 0, n/2)
	}
	node.Kill()
	killed := time.Now()
	if fleet != nil {
		// The other half of the commands while the node is lost, as
		// the control plane sends them (a command refused while the
		// stream has no leader is sent again; the stream deduplicates).
		go fleet.publish(ctx, js, n/2, n)
	}
	var lost []string
	var todo []string
	workers := recoverWorkers
	if recovery == "list" {
		workers = 32
		time.Sleep(2 * time.Second) // the loop's first look
		start := time.Now()
		if err := retry(ctx, 30*time.Second, func() error {
			var err error
			todo, err = missingConsumers(ctx, nc, "RXC_CMD")
			return err
		}); err != nil {
			r.err = fmt.Errorf("list after the node loss: %w", err)
			return
		}
		r.listed = time.Since(start)
	} else {
		for {
			time.Sleep(2 * time.Second)
			if time.Since(killed) > 2*time.Minute {
				r.err = errors.New("the stream named no lost node within 2 minutes")
				return
			}
			lost = lostNodes(ctx, js)
			if len(lost) > 0 {
				break
			}
		}
		r.detected = time.Since(killed)
		for i, p := range placed {
			if slices.Contains(lost, p) {
				todo = append(todo, fmt.Sprintf("s-%06d", i))
			}
		}
	}
	r.missing = len(todo)
	var (
		mu       sync.Mutex
		errs     []error
		answered atomic.Int64
	)
	_ = benchenv.Parallel(ctx, len(todo), workers, func(k int) error {
		name := todo[k]
		if recovery != "list" {
			actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			cons, err := js.Consumer(actx, "RXC_CMD", name)
			cancel()
			if err == nil && cons.CachedInfo().Cluster != nil && !slices.Contains(lost, cons.CachedInfo().Cluster.Leader) {
				answered.Add(1)
				return nil
			}
		}
		var err error
		for range 4 {
			// As serveradmin.RecreateConsumer: a delete nobody answers
			// within 2 s was applied (nats-server has not marked the killed
			// node offline yet); the create tells.
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = js.DeleteConsumer(dctx, "RXC_CMD", name)
			cancel()
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = js.CreateOrUpdateConsumer(cctx, "RXC_CMD", consumer(idx[name]))
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	})
	r.recreate = time.Since(killed)
	r.answered = int(answered.Load())
	if len(errs) > 0 {
		r.err = fmt.Errorf("%d consumers not recreated: %v", len(errs), errs[0])
		return
	}
	// Every consumer asked until it answers from a live node.
	var left []int
	for i := range n {
		left = append(left, i)
	}
	for len(left) > 0 {
		if time.Since(killed) > 5*time.Minute {
			r.err = fmt.Errorf("%d consumers not answering 5 minutes after the kill", len(left))
			return
		}
		var still []int
		_ = benchenv.Parallel(ctx, len(left), 64, func(k int) error {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			cons, err := js.Consumer(actx, "RXC_CMD", fmt.Sprintf("s-%06d", left[k]))
			if err == nil && (cons.CachedInfo().Cluster == nil || !slices.Contains(lost, cons.CachedInfo().Cluster.Leader)) {
				return nil
			}
			mu.Lock()
			still = append(still, left[k])
			mu.Unlock()
			return nil
		})
		left = still
	}
	r.answering = time.Since(killed)
	fmt.Fprintf(os.Stderr, "node loss (%s): %s\n", recovery, killText(*r))
	if fleet != nil {
		r.sensors = fleet.wait(killed, 2*time.Minute)
		fmt.Fprintf(os.Stderr, "sensors pulling: %s\n", r.sensors)
	}
}

// pullSensors is the -pull flag.
var pullSensors bool

// sensorFleet is one puller a sensor, as the agent pulls its consumer:
// fetch, apply a command whose id it has not applied (the agent keeps the
// ids it applied), acknowledge; after a failed pull it tries again within
// 5 s. Each sensor gets one command k-<i> (half sent before the kill, half
// after); it already applied the fan-out's c-<i>, which a recreated
// consumer delivers again.
type sensorFleet struct {
	n         int
	mu        sync.Mutex
	accepted  map[string]time.Time // command id → the stream's acknowledgement
	applied   map[string]time.Time // command id → when it was applied
	delivered map[string]int       // command id → deliveries
	refused   int                  // publishes refused and sent again
	done      sync.WaitGroup
}

func startSensors(ctx context.Context, js jetstream.JetStream, n int) *sensorFleet {
	f := &sensorFleet{n: n, accepted: map[string]time.Time{}, applied: map[string]time.Time{}, delivered: map[string]int{}}
	for i := range n {
		f.applied[fmt.Sprintf("c-%d", i)] = time.Time{} // the fan-out's, applied
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	var started sync.WaitGroup
	for i := range n {
		f.done.Add(1)
		started.Add(1)
		go func() {
			defer f.done.Done()
			name, want := fmt.Sprintf("s-%06d", i), fmt.Sprintf("k-%d", i)
			var cons jetstream.Consumer
			for cons == nil && pctx.Err() == nil {
				c, err := js.Consumer(pctx, "RXC_CMD", name)
				if err == nil {
					cons = c
				}
			}
			started.Done()
			backoff := time.Second
			for pctx.Err() == nil {
				f.mu.Lock()
				_, got := f.applied[want]
				f.mu.Unlock()
				if got {
					return
				}
				b, err := cons.Fetch(4, jetstream.FetchMaxWait(2*time.Second))
				if err == nil {
					for m := range b.Messages() {
						id := m.Headers().Get(jetstream.MsgIDHeader)
						f.mu.Lock()
						f.delivered[id]++
						if _, ok := f.applied[id]; !ok {
							f.applied[id] = time.Now()
						}
						f.mu.Unlock()
						_ = m.Ack()
					}
					err = b.Error()
				}
				if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
					time.Sleep(backoff)
					backoff = min(2*backoff, 5*time.Second)
					continue
				}
				backoff = time.Second
			}
		}()
	}
	started.Wait()
	go func() { f.done.Wait(); cancel() }()
	return f
}

// publish sends k-<i> for i in [from, to), each until the stream
// acknowledges it, 32 at a time.
func (f *sensorFleet) publish(ctx context.Context, js jetstream.JetStream, from, to int) {
	_ = benchenv.Parallel(ctx, to-from, 32, func(k int) error {
		i := from + k
		id := fmt.Sprintf("k-%d", i)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.Publish(pctx, fmt.Sprintf("cmd.t%d.s-%06d", i%10, i), []byte(`{"action":"stop"}`), jetstream.WithMsgID(id))
			cancel()
			f.mu.Lock()
			if err == nil {
				f.accepted[id] = time.Now()
			} else {
				f.refused++
			}
			f.mu.Unlock()
			if err == nil {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
}

// wait waits until every sensor applied its k-<i> or within runs out, and
// says what happened.
func (f *sensorFleet) wait(killed time.Time, within time.Duration) string {
	finished := make(chan struct{})
	go func() { f.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Until(killed.Add(within))):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var notAccepted, notApplied, twice, late int
	var last, worst time.Duration
	for i := range f.n {
		id := fmt.Sprintf("k-%d", i)
		acc, ok := f.accepted[id]
		if !ok {
			notAccepted++
			continue
		}
		at, ok := f.applied[id]
		if !ok {
			notApplied++
			continue
		}
		if f.delivered[id] > 1 {
			twice++
		}
		last = max(last, at.Sub(killed))
		if acc.After(killed) {
			worst = max(worst, at.Sub(acc))
		}
		if at.Sub(killed) > 30*time.Second && at.Sub(acc) > 30*time.Second {
			late++
		}
	}
	again := 0
	for i := range f.n {
		again += max(0, f.delivered[fmt.Sprintf("c-%d", i)])
	}
	return fmt.Sprintf("%d sensors, each sent k-<i> (half after the kill; %d publishes refused and sent again): %d not accepted, **%d accepted and not applied**, %d delivered twice (applied once); the last applied %s after the kill, the slowest sent after the kill applied %s after its acceptance, %d later than 30 s after both; %d earlier commands delivered again by recreated consumers and skipped",
		f.n, f.refused, notAccepted, notApplied, twice, last.Round(time.Millisecond), worst.Round(time.Millisecond), late, again)
}

// lostNodes names the command stream's replicas that are offline, silent
// for 5 s, or not heard from by a leader elected 5 s ago, as
// serveradmin.LostNodes: none while it has no leader.
func lostNodes(ctx context.Context, js jetstream.JetStream) []string {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := js.Stream(sctx, "RXC_CMD")
	if err != nil {
		return nil
	}
	ci := st.CachedInfo().Cluster
	if ci == nil || ci.Leader == "" {
		return nil
	}
	var lost []string
	settled := ci.LeaderSince != nil && time.Since(*ci.LeaderSince) > 5*time.Second
	for _, rp := range ci.Replicas {
		if rp.Offline || rp.Active > 5*time.Second || (settled && rp.Active == 0 && !rp.Current) {
			lost = append(lost, rp.Name)
		}
	}
	return lost
}

// missingConsumers pages through the stream's consumer list as
// serveradmin.OfflineConsumers does (the first page, then the others 8 at a
// time): nats-server names the consumers none of whose peers answered
// under "missing".
func missingConsumers(ctx context.Context, nc *nats.Conn, stream string) ([]string, error) {
	type page struct {
		Total     int               `json:"total"`
		Consumers []json.RawMessage `json:"consumers"`
		Missing   []string          `json:"missing"`
		Error     *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	get := func(offset int) (page, error) {
		var p page
		req, _ := json.Marshal(map[string]int{"offset": offset})
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		msg, err := nc.RequestWithContext(rctx, "$JS.API.CONSUMER.LIST."+stream, req)
		if err != nil {
			return p, err
		}
		if err := json.Unmarshal(msg.Data, &p); err != nil {
			return p, err
		}
		if p.Error != nil {
			return p, errors.New(p.Error.Description)
		}
		return p, nil
	}
	first, err := get(0)
	if err != nil {
		return nil, err
	}
	out := first.Missing
	size := len(first.Consumers)
	if size == 0 || size >= first.Total {
		return out, nil
	}
	var offsets []int
	for o := size; o < first.Total; o += size {
		offsets = append(offsets, o)
	}
	var mu sync.Mutex
	err = benchenv.Parallel(ctx, len(offsets), 8, func(i int) error {
		p, err := get(offsets[i])
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, p.Missing...)
		mu.Unlock()
		return nil
	})
	return out, err
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func startNodes(t *benchenv.T, n int) ([]*natstest.Server, error) {
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
		conf := ""
		if n > 1 {
			var routes []string
			for j, p := range routePorts {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
				}
			}
			conf = fmt.Sprintf("cluster {\n  name: rxc\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", routePorts[i], strings.Join(routes, ", "))
		}
		nodes[i] = natstest.New(t, natstest.Options{Dir: t.TempDir(), Name: fmt.Sprintf("nats-%d", i+1), Port: clientPorts[i], Config: conf, ReadyTimeout: 60 * time.Second})
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

type provResult struct {
	total time.Duration
	rate  float64
	// cpu is what the enrolment cost the machine: this process (the
	// provisioner and the HTTP client driving it), the nats-servers and
	// PostgreSQL.
	cpu, self, nats, pg time.Duration
	err                 error
}

// selfCPU is this process's own CPU time (user and system, children
// excluded).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// provisioned enrols n sensors through the provisioner (POST /users, 32 at
// a time, over ten tenants) on three nats-servers in the shape deploy/
// ships, PostgreSQL on the same disk. With cpuProfile it writes a CPU
// profile of this process (the provisioner and the HTTP client) during
// the enrolment to that file.
func provisioned(ctx context.Context, n, pgPool int, cpuProfile, blockProfile, natsProfile string) (r provResult) {
	t := &benchenv.T{}
	defer t.Close()
	pg, err := pgtest.Start()
	if err != nil {
		r.err = err
		return r
	}
	t.Cleanup(func() { _ = pg.Stop() })
	pgtest.Use(pg.DSN("postgres"))
	dsn := ""
	if pgPool > 0 {
		dsn = pgtest.DSN(t) + fmt.Sprintf("&pool_max_conns=%d", pgPool)
	}
	prov := provisionertest.Start(t, provisionertest.Options{
		PGDSN: dsn, LogLevel: "warn", ClusterNodes: 3, ConsumerReplicas: 1, CommandStreamRetention: "limits", CommandStreamMaxConsumers: n + 10,
		NATSProfiling: natsProfile != "",
	})
	for i := range 10 {
		if status, body := prov.Post("/accounts", map[string]string{"tenantId": fmt.Sprintf("t%d", i)}); status != 200 && status != 201 {
			r.err = fmt.Errorf("POST /accounts: %d %s", status, body)
			return r
		}
	}
	// Like the bare run's one NATS connection, the client keeps a
	// connection for each request in flight (http.DefaultClient keeps 2 a
	// host: the others would each open and close a TCP connection).
	//
	// The bare runs create their stream before the clock starts; the
	// provisioner creates the command stream when it connects, which on a
	// cluster still forming can take seconds (meanwhile POST /users waits
	// for it or answers 503). One enrolment outside the measured ones,
	// retried until it succeeds, starts the clock on a ready stream.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	warm := time.Now()
	if err := retry(ctx, time.Minute, func() error {
		status, body, err := postUser(hc, prov, "t0", "warm-up")
		if err == nil && status != 200 && status != 201 {
			err = fmt.Errorf("POST /users: %d %s", status, body)
		}
		return err
	}); err != nil {
		r.err = fmt.Errorf("first enrolment: %w", err)
		return r
	}
	fmt.Fprintf(os.Stderr, "first enrolment (the provisioner ensures the command stream) in %s\n", time.Since(warm).Round(time.Millisecond))
	var natsPIDs []int
	for _, node := range prov.Nodes {
		natsPIDs = append(natsPIDs, node.PID())
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			r.err = err
			return r
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			r.err = err
			return r
		}
		defer pprof.StopCPUProfile()
	}
	if blockProfile != "" {
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
		defer func() {
			runtime.SetBlockProfileRate(0)
			f, err := os.Create(blockProfile)
			if err == nil {
				_ = pprof.Lookup("block").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	var profiles sync.WaitGroup
	if natsProfile != "" {
		for i, node := range prov.Nodes {
			profiles.Go(func() {
				if err := fetchProfile(node.ProfileURL()+"/debug/pprof/profile?seconds=10", fmt.Sprintf("%s%d.pb.gz", natsProfile, i+1)); err != nil {
					fmt.Fprintln(os.Stderr, "nats-server profile:", err)
				}
			})
		}
	}
	defer profiles.Wait()
	var failed atomic.Int64
	var first atomic.Value
	all0, self0, nats0, pg0 := benchenv.TreeCPU(os.Getpid(), pg.PID()), selfCPU(), benchenv.TreeCPU(natsPIDs...), benchenv.TreeCPU(pg.PID())
	start := time.Now()
	_ = benchenv.Parallel(ctx, n, 32, func(i int) error {
		for attempt := 0; ; attempt++ {
			status, body, err := postUser(hc, prov, fmt.Sprintf("t%d", i%10), fmt.Sprintf("s-%06d", i))
			if err != nil {
				status, body = 0, []byte(err.Error())
			}
			if status == 200 || status == 201 {
				return nil
			}
			if status == 503 && attempt < 5 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			failed.Add(1)
			first.CompareAndSwap(nil, fmt.Sprintf("%d %s", status, body))
			return nil
		}
	})
	r.total = time.Since(start)
	r.rate = float64(n) / r.total.Seconds()
	r.cpu, r.self = benchenv.TreeCPU(os.Getpid(), pg.PID())-all0, selfCPU()-self0
	r.nats, r.pg = benchenv.TreeCPU(natsPIDs...)-nats0, benchenv.TreeCPU(pg.PID())-pg0
	if f := failed.Load(); f > 0 {
		r.err = fmt.Errorf("%d of %d sensors not provisioned (first: %v)", f, n, first.Load())
	}
	fmt.Fprintf(os.Stderr, "provisioned %d sensors in %s; CPU %s (this process %s, nats-servers %s, PostgreSQL %s)\n", n, r.total.Round(time.Millisecond),
		r.cpu.Round(10*time.Millisecond), r.self.Round(10*time.Millisecond), r.nats.Round(10*time.Millisecond), r.pg.Round(10*time.Millisecond))
	return r
}

// fetchProfile saves what a pprof URL answers to path.
func fetchProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// postUser asks the provisioner for a sensor's user (POST /users).
func postUser(hc *http.Client, prov *provisionertest.Stack, tenantID, sensorID string) (int, []byte, error) {
	data, err := json.Marshal(map[string]string{"tenantId": tenantID, "sensorId": sensorID})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, prov.URL+"/users", bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Backend-Shared-Secret", prov.Secret)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
