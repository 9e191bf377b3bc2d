package serveradmin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
)

// cluster is three operator-mode nats-servers on loopback, routed to each
// other, with JetStream, resolving accounts through the env's resolver: the
// topology deploy/compose.yaml and the Kubernetes StatefulSet run.
type cluster struct {
	e           *env
	clientPorts [3]int
	nodes       [3]*natstest.Server
}

// clusterSlot lets one three-node cluster run at a time: the package's
// cluster tests, in parallel on two shared cores (CI runs them there),
// starved each other past their waits on nats-server 2.11.
var clusterSlot = make(chan struct{}, 1)

func newCluster(e *env) *cluster {
	clusterSlot <- struct{}{}
	e.t.Cleanup(func() { <-clusterSlot }) // registered first, so it runs after the nodes are stopped
	// A port freePort handed out can be taken by another test process
	// before a node binds it: such a start is tried again on new ports.
	for attempt := 1; ; attempt++ {
		c, errs := tryCluster(e)
		if len(errs) == 0 {
			return c
		}
		busy := false
		for _, err := range errs {
			busy = busy || strings.Contains(err.Error(), "address already in use")
		}
		if !busy || attempt == 3 {
			for _, err := range errs {
				e.t.Error(err)
			}
			e.t.FailNow()
		}
		for _, n := range c.nodes {
			n.Stop()
		}
		e.t.Logf("a cluster port was taken meanwhile (%v); starting again on new ports", errs)
	}
}

// tryCluster starts three nodes on fresh ports; it returns their start
// errors.
func tryCluster(e *env) (*cluster, []error) {
	c := &cluster{e: e}
	var routePorts [3]int
	for i := range c.nodes {
		c.clientPorts[i], routePorts[i] = freePort(e.t), freePort(e.t)
	}
	for i := range c.nodes {
		var routes []string
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		conf := e.operatorConfig() + fmt.Sprintf("cluster {\n  name: rxc\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", routePorts[i], strings.Join(routes, ", "))
		c.nodes[i] = natstest.New(e.t, natstest.Options{Dir: e.t.TempDir(), Name: fmt.Sprintf("nats-%d", i+1), Port: c.clientPorts[i], Config: conf})
	}
	// A node's JetStream is healthy only once the cluster has a meta
	// leader: start all three before waiting on any.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.nodes[i].TryStart(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("nats-%d: %w", i+1, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return c, errs
}

// startCluster is an env, a three-node cluster for it, and a context that
// bounds the test to within (cancelled when the test ends).
func startCluster(t *testing.T, within time.Duration) (*env, *cluster, context.Context) {
	t.Helper()
	e := newEnv(t)
	cl := newCluster(e)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return e, cl, ctx
}

// start runs node i again; it keeps its ports and JetStream store.
func (c *cluster) start(i int) { c.nodes[i].Start() }

func (c *cluster) stop(i int) { c.nodes[i].Stop() }

// urls lists every node, as the services' NATS_URL does.
func (c *cluster) urls() string {
	var us []string
	for _, p := range c.clientPorts {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(us, ",")
}

// streamLeader is the index of the node leading the command stream, or -1.
func (c *cluster) streamLeader(ctx context.Context, adm jetstream.JetStream) int {
	st, err := adm.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		return -1
	}
	for i := range c.nodes {
		if info.Cluster.Leader == fmt.Sprintf("nats-%d", i+1) {
			return i
		}
	}
	return -1
}

// ensureStream has ops ensure the command stream on the cluster and waits
// until its three replicas are current; it returns the admin's JetStream.
// The meta group elects its leader after the routes are up; until then
// JetStream API calls fail, so EnsureStream is retried.
func (c *cluster) ensureStream(ctx context.Context, ops *serveradmin.Client) jetstream.JetStream {
	t := c.e.t
	t.Helper()
	eventually(t, 15*time.Second, "EnsureStream with 3 replicas", func() bool { return ops.EnsureStream(ctx) == nil })
	adm := c.e.admin(c.urls())
	eventually(t, 15*time.Second, "three current stream replicas", func() bool { return streamHealthy(ctx, adm, 3) })
	return adm
}

// shippedConfig is the client's configuration for the cluster shape
// deploy/ ships (issue 21): a limits-retention stream of three replicas,
// each sensor's consumer of one.
func (c *cluster) shippedConfig() serveradmin.Config {
	cfg := c.e.config(c.urls())
	cfg.Stream.Replicas, cfg.Stream.ConsumerReplicas, cfg.Stream.Retention = 3, 1, serveradmin.RetentionLimits
	return cfg
}

// publisher is the control plane's command publisher on the cluster
// (sensorbus as the backend user), connected.
func (c *cluster) publisher(ctx context.Context) *sensorbus.Client {
	t, e := c.e.t, c.e
	t.Helper()
	backend := e.user(e.ctlPub, e.ctlSeed, "backend", topology.BackendPermissions())
	creds, err := e.signer.Creds(backend.JWT, backend.Seed)
	must(t, err)
	msg, err := sensorbus.New(sensorbus.Config{
		URL: c.urls(), Creds: func(context.Context) (string, error) { return string(creds), nil },
		ReconnectWait: 50 * time.Millisecond, PublishTimeout: 2 * time.Second, DrainTimeout: 2 * time.Second,
	})
	must(t, err)
	t.Cleanup(msg.Close)
	msg.Start(ctx)
	eventually(t, 10*time.Second, "sensorbus ready", msg.Ready)
	return msg
}

// publishStored publishes command id to s until the stream acknowledges
// it, as a caller must while its connection moves to another node; the
// message id makes a retry of an already stored command harmless.
func publishStored(t *testing.T, ctx context.Context, msg *sensorbus.Client, s topology.Sensor, id string, within time.Duration) {
	t.Helper()
	eventually(t, within, "command "+id+" stored", func() bool {
		_, err := msg.PublishCommand(ctx, fleet.Command{ID: id, TenantID: s.TenantID, SensorID: s.SensorID, Action: fleet.ActionStart})
		return err == nil
	})
}

// sensorJS connects sensor s of the account (acctPub, acctSeed) to the
// cluster with its own user, as agents do, reconnecting for ever.
func (c *cluster) sensorJS(s topology.Sensor, acctPub string, acctSeed []byte) jetstream.JetStream {
	t := c.e.t
	t.Helper()
	u := c.e.user(acctPub, acctSeed, s.SensorID, s.Permissions())
	nc, err := connect(c.urls(), u, nats.CustomInboxPrefix(s.InboxPrefix()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	must(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, topology.APIPrefix)
	must(t, err)
	return js
}

// fetchIDs pulls up to max messages from s's consumer with js and returns
// their message ids; with ack, only those it acknowledged (double ack).
func fetchIDs(ctx context.Context, js jetstream.JetStream, s topology.Sensor, max int, wait time.Duration, ack bool) ([]string, error) {
	cons, err := js.Consumer(ctx, stream, s.Consumer())
	if err != nil {
		return nil, err
	}
	b, err := cons.Fetch(max, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	var ids []string
	for m := range b.Messages() {
		if !ack || m.DoubleAck(ctx) == nil {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
		}
	}
	return ids, nil
}

// streamHealthy reports whether the stream has a leader and every replica
// is online and caught up.
func streamHealthy(ctx context.Context, adm jetstream.JetStream, replicas int) bool {
	st, err := adm.Stream(ctx, stream)
	if err != nil {
		return false
	}
	ci := st.CachedInfo().Cluster
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != replicas-1 {
		return false
	}
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// The command stream at three replicas keeps accepting and delivering
// commands while one node (the stream's leader) is down, and after the node
// returns no command is lost or delivered twice.
func TestClusterCommandsSurviveANodeOutage(t *testing.T) {
	t.Parallel()
	e, cl, ctx := startCluster(t, 45*time.Second)

	cfg := e.config(cl.urls())
	cfg.Stream.Replicas = 3
	ops := e.client(cfg)
	adm := cl.ensureStream(ctx, ops)

	tPub, tSeed := e.tenant("acme")
	s := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}
	must(t, ops.EnsureConsumer(ctx, s))

	msg := cl.publisher(ctx)
	publish := func(id string) { t.Helper(); publishStored(t, ctx, msg, s, id, 10*time.Second) }
	batch := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			id := fmt.Sprintf("%s-%02d", prefix, i)
			publish(id)
			out = append(out, id)
		}
		return out
	}

	sjs := cl.sensorJS(s, tPub, tSeed)
	counts := map[string]int{}
	// receive fetches and acks until want distinct commands have arrived.
	receive := func(want int) {
		t.Helper()
		eventually(t, 15*time.Second, fmt.Sprintf("%d commands delivered", want), func() bool {
			ids, err := fetchIDs(ctx, sjs, s, want, time.Second, true)
			for _, id := range ids {
				counts[id]++
			}
			return err == nil && len(counts) >= want
		})
	}

	before := batch("before", 5)

	leader := cl.streamLeader(ctx, adm)
	if leader < 0 {
		t.Fatal("no node leads the command stream")
	}
	cl.stop(leader)
	during := batch("during", 10)
	// Replays of commands stored before the outage are duplicates to the
	// new leader too: the duplicate window is replicated.
	for _, id := range before {
		publish(id)
	}
	eventually(t, 10*time.Second, "15 commands in the stream", func() bool {
		st, err := adm.Stream(ctx, stream)
		return err == nil && st.CachedInfo().State.Msgs == 15
	})
	receive(15)

	cl.start(leader)
	eventually(t, 20*time.Second, "returned node catches up", func() bool { return streamHealthy(ctx, adm, 3) })
	after := batch("after", 5)
	receive(20)

	// Nothing else is pending: a last fetch returns no redelivery.
	cons, err := sjs.Consumer(ctx, stream, s.Consumer())
	must(t, err)
	b, err := cons.Fetch(5, jetstream.FetchMaxWait(500*time.Millisecond))
	must(t, err)
	for m := range b.Messages() {
		counts[m.Headers().Get(jetstream.MsgIDHeader)]++
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("last fetch: %v", err)
	}

	var problems []string
	for _, id := range append(append(before, during...), after...) {
		if counts[id] != 1 {
			problems = append(problems, fmt.Sprintf("%s delivered %d times", id, counts[id]))
		}
		delete(counts, id)
	}
	for id, n := range counts {
		problems = append(problems, fmt.Sprintf("unexpected message id %q delivered %d times", id, n))
	}
	if len(problems) > 0 {
		t.Errorf("deliveries by Nats-Msg-Id, want each command exactly once:\n%s", strings.Join(problems, "\n"))
	}
	eventually(t, 5*time.Second, "acked commands removed from the work queue", func() bool {
		st, err := adm.Stream(ctx, stream)
		return err == nil && st.CachedInfo().State.Msgs == 0
	})
}

// consumerNode is the node holding an R1 consumer, or "".
func consumerNode(ctx context.Context, adm jetstream.JetStream, name string) string {
	cons, err := adm.Consumer(ctx, stream, name)
	if err != nil || cons.CachedInfo().Cluster == nil {
		return ""
	}
	return cons.CachedInfo().Cluster.Leader
}

// The shipped cluster shape (issue 21): a limits-retention stream of three
// replicas, each sensor's consumer of one. A node loss takes the consumers
// that node held, never a command: OfflineConsumers names exactly those,
// RecreateConsumer puts them on live nodes, and every sensor gets the
// command published while its consumer was gone. A recreated consumer
// delivers again what the stream keeps for its sensor (the agent's applied
// file skips those). When the node returns, the consumers it held stay gone: each sensor has one
// consumer and gets the next command once.
func TestClusterR1ConsumersSurviveANodeLoss(t *testing.T) {
	t.Parallel()
	e, cl, ctx := startCluster(t, 90*time.Second)

	ops := e.client(cl.shippedConfig())
	adm := cl.ensureStream(ctx, ops)

	tPub, tSeed := e.tenant("acme")
	const n = 9
	var sensors []topology.Sensor
	for i := range n {
		s := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: fmt.Sprintf("s-%d", i)}
		must(t, ops.EnsureConsumer(ctx, s))
		sensors = append(sensors, s)
	}
	byNode := map[string][]topology.Sensor{}
	for _, s := range sensors {
		node := consumerNode(ctx, adm, s.Consumer())
		if node == "" {
			t.Fatalf("consumer %s has no leader", s.Consumer())
		}
		if info, err := adm.Consumer(ctx, stream, s.Consumer()); err == nil && len(info.CachedInfo().Cluster.Replicas) != 0 {
			t.Fatalf("consumer %s has replicas %+v, want one node's", s.Consumer(), info.CachedInfo().Cluster.Replicas)
		}
		byNode[node] = append(byNode[node], s)
	}
	// Every create answer named the consumer's node (what the provisioner
	// records), handed over once.
	placed := map[string]string{}
	for _, p := range ops.Placements() {
		placed[p.Consumer] = p.Node
	}
	for node, ss := range byNode {
		for _, s := range ss {
			if placed[s.Consumer()] != node {
				t.Errorf("Placements named %q for %s, which lives on %s", placed[s.Consumer()], s.Consumer(), node)
			}
		}
	}
	if len(placed) != n {
		t.Errorf("Placements = %v, want the %d consumers", placed, n)
	}
	if again := ops.Placements(); len(again) != 0 {
		t.Errorf("Placements a second time = %v, want none", again)
	}
	if lost, known, err := ops.LostNodes(ctx); err != nil || !known || len(lost) != 0 {
		t.Errorf("LostNodes of the whole cluster = %v, %v, %v; want none known", lost, known, err)
	}
	// The node holding most consumers is lost.
	lost := ""
	for node, ss := range byNode {
		if lost == "" || len(ss) > len(byNode[lost]) {
			lost = node
		}
	}
	lostIdx := -1
	for i := range cl.nodes {
		if fmt.Sprintf("nats-%d", i+1) == lost {
			lostIdx = i
		}
	}
	if lostIdx < 0 || len(byNode[lost]) == 0 {
		t.Fatalf("no node to lose: %v", byNode)
	}
	onLost := map[string]bool{}
	for _, s := range byNode[lost] {
		onLost[s.Consumer()] = true
	}

	msg := cl.publisher(ctx)
	// Each sensor pulls and acks with its own user, as agents do.
	sjs := map[string]jetstream.JetStream{}
	for _, s := range sensors {
		sjs[s.Consumer()] = cl.sensorJS(s, tPub, tSeed)
	}

	counts := map[string]map[string]int{} // consumer → message id → deliveries
	publish := func(prefix string) {
		t.Helper()
		for _, s := range sensors {
			publishStored(t, ctx, msg, s, prefix+"-"+s.SensorID, 15*time.Second)
		}
	}
	// receive fetches and acks on every sensor's consumer until each has
	// got the command prefix-<sensor>.
	receive := func(prefix string, within time.Duration) {
		t.Helper()
		for _, s := range sensors {
			want := prefix + "-" + s.SensorID
			if counts[s.Consumer()] == nil {
				counts[s.Consumer()] = map[string]int{}
			}
			eventually(t, within, s.Consumer()+" receives "+want, func() bool {
				ids, _ := fetchIDs(ctx, sjs[s.Consumer()], s, 4, 500*time.Millisecond, true)
				for _, id := range ids {
					counts[s.Consumer()][id]++
				}
				return counts[s.Consumer()][want] > 0
			})
		}
	}

	publish("c1")
	receive("c1", 10*time.Second)

	cl.stop(lostIdx)
	publish("c2") // the stream keeps a quorum: every command is stored

	// OfflineConsumers names exactly the lost node's consumers.
	var offline []string
	eventually(t, 20*time.Second, "the lost node's consumers listed offline", func() bool {
		var err error
		offline, err = ops.OfflineConsumers(ctx, false)
		return err == nil && len(offline) == len(onLost)
	})
	for _, name := range offline {
		if !onLost[name] {
			t.Fatalf("OfflineConsumers named %s, which a live node holds (offline: %v, on the lost node: %v)", name, offline, onLost)
		}
	}
	// LostNodes names exactly the lost node; its consumers answer nothing
	// (ConsumerNode ""), the others answer from where they live.
	eventually(t, 20*time.Second, "LostNodes names the lost node", func() bool {
		got, known, err := ops.LostNodes(ctx)
		return err == nil && known && slices.Equal(got, []string{lost})
	})
	for node, ss := range byNode {
		for _, s := range ss {
			got, err := ops.ConsumerNode(ctx, s)
			must(t, err)
			if want := map[bool]string{true: "", false: node}[node == lost]; got != want {
				t.Errorf("ConsumerNode(%s) = %q, want %q (lost: %s)", s.Consumer(), got, want, lost)
			}
		}
	}
	for _, s := range sensors {
		if onLost[s.Consumer()] {
			node, err := ops.RecreateConsumer(ctx, s)
			must(t, err)
			if node == "" || node == lost || node != consumerNode(ctx, adm, s.Consumer()) {
				t.Errorf("RecreateConsumer(%s) named %q; it lives on %q (lost: %s)", s.Consumer(), node, consumerNode(ctx, adm, s.Consumer()), lost)
			}
		}
	}
	eventually(t, 10*time.Second, "no consumer offline after the recreation", func() bool {
		names, err := ops.OfflineConsumers(ctx, true)
		return err == nil && len(names) == 0
	})
	receive("c2", 15*time.Second)

	cl.start(lostIdx)
	eventually(t, 30*time.Second, "returned node catches up", func() bool { return streamHealthy(ctx, adm, 3) })
	publish("c3")
	receive("c3", 15*time.Second)
	names, err := ops.ConsumerNames(ctx)
	must(t, err)
	if len(names) != n {
		t.Errorf("consumers after the node returned: %v, want one a sensor", names)
	}

	var problems []string
	for _, s := range sensors {
		got := counts[s.Consumer()]
		wantC1 := 1
		if onLost[s.Consumer()] {
			wantC1 = 2 // delivered again by the recreated consumer
		}
		if got["c1-"+s.SensorID] != wantC1 || got["c2-"+s.SensorID] != 1 || got["c3-"+s.SensorID] != 1 || len(got) != 3 {
			problems = append(problems, fmt.Sprintf("%s (on the lost node: %v): %v", s.Consumer(), onLost[s.Consumer()], got))
		}
	}
	if len(problems) > 0 {
		t.Errorf("deliveries by message id; want c2 and c3 once each, c1 once (twice from a recreated consumer):\n%s", strings.Join(problems, "\n"))
	}
}

// LostNodes names a killed node within seconds even when it led the
// command stream: the new leader has never heard from it (nats-server
// forgets when it last heard from the others when a leader is lost, and
// marks a killed node offline only minutes later). Control: a whole
// cluster, and the cluster once the node is back, name none. With
// RXC_NATS_SERVER_BIN the node is SIGKILLed; in process it is shut down.
func TestClusterLostNodesNamesAKilledStreamLeader(t *testing.T) {
	t.Parallel()
	e, cl, ctx := startCluster(t, 180*time.Second)
	ops := e.client(cl.shippedConfig())
	adm := cl.ensureStream(ctx, ops)
	if lost, known, err := ops.LostNodes(ctx); err != nil || !known || len(lost) != 0 {
		t.Fatalf("LostNodes of the whole cluster = %v, %v, %v; want none known", lost, known, err)
	}
	leader := cl.streamLeader(ctx, adm)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	name := fmt.Sprintf("nats-%d", leader+1)
	cl.nodes[leader].Kill()
	killed := time.Now()
	eventually(t, 30*time.Second, "LostNodes names the killed stream leader "+name, func() bool {
		lost, known, err := ops.LostNodes(ctx)
		return err == nil && known && slices.Equal(lost, []string{name})
	})
	t.Logf("LostNodes named the killed stream leader %s %s after the kill", name, time.Since(killed).Round(100*time.Millisecond))
	cl.start(leader)
	// nats-server 2.11 left the returned former leader's replica behind
	// for more than a minute under CI's load (twice in a row; it is named
	// lost meanwhile, which is true); the node-loss timings are stated for
	// 2.15 on (docs/operations.md), so the return is checked there.
	if v, err := cl.nodes[leader].Version(); err == nil && (strings.HasPrefix(v, "2.11.") || strings.HasPrefix(v, "2.10.")) {
		t.Logf("nats-server %s: the return of a killed stream leader is not checked before 2.15", v)
		return
	}
	// "Back" is a current replica again.
	eventually(t, 60*time.Second, "the returned node's replica is current", func() bool { return streamHealthy(ctx, adm, 3) })
	eventually(t, 30*time.Second, "LostNodes names none once the node is back", func() bool {
		lost, known, err := ops.LostNodes(ctx)
		return err == nil && known && len(lost) == 0
	})
}

// The upgrade path from the shape deploy/ shipped before (a work-queue
// stream of three replicas, R3 consumers) to the current one (limits
// retention, R1 consumers): the provisioner started with the new settings
// replaces the stream under its name, carrying over every pending command
// (never fetched, or delivered and not acknowledged); acknowledged ones
// stay gone; every sensor then receives new commands on its new consumer.
func TestClusterUpgradeFromWorkQueue(t *testing.T) {
	t.Parallel()
	e, cl, ctx := startCluster(t, 3*time.Minute)

	oldCfg := e.config(cl.urls())
	oldCfg.Stream.Replicas, oldCfg.Stream.Retention = 3, serveradmin.RetentionWorkQueue
	old := e.client(oldCfg)
	adm := cl.ensureStream(ctx, old)

	tPub, tSeed := e.tenant("acme")
	var sensors []topology.Sensor
	sjs := map[string]jetstream.JetStream{}
	for i := range 6 {
		s := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: fmt.Sprintf("s-%d", i)}
		must(t, old.EnsureConsumer(ctx, s))
		sensors = append(sensors, s)
		sjs[s.Consumer()] = cl.sensorJS(s, tPub, tSeed)
	}
	msg := cl.publisher(ctx)
	publish := func(prefix string) {
		t.Helper()
		for _, s := range sensors {
			publishStored(t, ctx, msg, s, prefix+"-"+s.SensorID, 15*time.Second)
		}
	}
	// fetch returns the message ids one pull brings, acknowledged when ack.
	fetch := func(s topology.Sensor, ack bool) []string {
		t.Helper()
		ids, err := fetchIDs(ctx, sjs[s.Consumer()], s, 10, time.Second, ack)
		must(t, err)
		return ids
	}

	publish("c1")
	for _, s := range sensors[:3] { // acknowledged: gone
		if got := fetch(s, true); len(got) != 1 {
			t.Fatalf("%s before the upgrade got %v", s.SensorID, got)
		}
	}
	if got := fetch(sensors[3], false); len(got) != 1 { // delivered, not acknowledged
		t.Fatalf("%s before the upgrade got %v", sensors[3].SensorID, got)
	}
	publish("c2")
	old.Close()

	// Two replicas start with the new settings at once, sharing the lock the
	// provisioner takes in PostgreSQL (here a channel): one upgrades, the
	// other waits and finds the work done.
	newCfg := cl.shippedConfig()
	turn := make(chan struct{}, 1)
	var held atomic.Int32
	newCfg.UpgradeLock = func(ctx context.Context) (func(), error) {
		select {
		case turn <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		held.Add(1)
		return func() { <-turn }, nil
	}
	upgraded, other := e.client(newCfg), e.client(newCfg)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*serveradmin.Client{upgraded, other} {
		wg.Go(func() { errs[i] = c.EnsureStream(ctx) })
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	if held.Load() == 0 {
		t.Error("the upgrade ran without its lock")
	}
	st, err := adm.Stream(ctx, stream)
	must(t, err)
	if cfg := st.CachedInfo().Config; cfg.Retention != jetstream.LimitsPolicy || cfg.Replicas != 3 || len(cfg.Sources) != 0 || !slices.Equal(cfg.Subjects, []string{topology.CommandWildcard}) {
		t.Fatalf("stream after the upgrade: retention %v, replicas %d, sources %v, subjects %v", cfg.Retention, cfg.Replicas, cfg.Sources, cfg.Subjects)
	}
	if _, err := adm.Stream(ctx, stream+"_UPGRADE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("holding stream after the upgrade: %v, want gone", err)
	}
	// Again: nothing to do.
	must(t, upgraded.EnsureStream(ctx))
	for _, s := range sensors { // the repair pass
		must(t, upgraded.EnsureConsumer(ctx, s))
		cons, err := adm.Consumer(ctx, stream, s.Consumer())
		must(t, err)
		if ci := cons.CachedInfo(); ci.Config.Replicas != 1 {
			t.Errorf("%s replicas %d after the upgrade, want 1", s.Consumer(), ci.Config.Replicas)
		}
	}
	for i, s := range sensors {
		want := []string{"c2-" + s.SensorID}
		if i >= 3 {
			want = []string{"c1-" + s.SensorID, "c2-" + s.SensorID}
		}
		if got := fetch(s, true); !slices.Equal(got, want) {
			t.Errorf("%s after the upgrade received %v, want %v", s.SensorID, got, want)
		}
	}
	publish("c3")
	for _, s := range sensors {
		if got := fetch(s, true); !slices.Equal(got, []string{"c3-" + s.SensorID}) {
			t.Errorf("%s after the upgrade, a new command: received %v", s.SensorID, got)
		}
	}
}
