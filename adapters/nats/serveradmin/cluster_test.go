package serveradmin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
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

func newCluster(e *env) *cluster {
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
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.nodes[i].TryStart(); err != nil {
				e.t.Errorf("nats-%d: %v", i+1, err)
			}
		}()
	}
	wg.Wait()
	if e.t.Failed() {
		e.t.FailNow()
	}
	return c
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
	e := newEnv(t)
	cl := newCluster(e)
	urls := cl.urls()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	cfg := e.config(urls)
	cfg.Stream.Replicas = 3
	ops := e.client(cfg)
	// The meta group elects its leader after the routes are up; until then
	// JetStream API calls fail.
	var ensureErr error
	eventually(t, 15*time.Second, "EnsureStream with 3 replicas", func() bool {
		ensureErr = ops.EnsureStream(ctx)
		return ensureErr == nil
	})
	adm := e.admin(urls)
	eventually(t, 15*time.Second, "three current stream replicas", func() bool { return streamHealthy(ctx, adm, 3) })

	tPub, tSeed := e.tenant("acme")
	s := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}
	must(t, ops.EnsureConsumer(ctx, s))

	backend := e.user(e.ctlPub, e.ctlSeed, "backend", topology.BackendPermissions())
	creds, err := e.signer.Creds(backend.JWT, backend.Seed)
	must(t, err)
	msg, err := sensorbus.New(sensorbus.Config{
		URL: urls, Creds: func(context.Context) (string, error) { return string(creds), nil },
		ReconnectWait: 50 * time.Millisecond, PublishTimeout: 2 * time.Second, DrainTimeout: 2 * time.Second,
	})
	must(t, err)
	t.Cleanup(msg.Close)
	msg.Start(ctx)
	eventually(t, 10*time.Second, "sensorbus ready", msg.Ready)

	// publish retries one command until the stream acknowledges it, as a
	// caller must while its connection moves to another node; the message
	// id makes a retry of an already stored command harmless.
	publish := func(id string) {
		t.Helper()
		var err error
		eventually(t, 10*time.Second, "command "+id+" acknowledged", func() bool {
			_, err = msg.PublishCommand(ctx, fleet.Command{ID: id, TenantID: s.TenantID, SensorID: s.SensorID, Action: fleet.ActionStart})
			return err == nil
		})
	}
	batch := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			id := fmt.Sprintf("%s-%02d", prefix, i)
			publish(id)
			out = append(out, id)
		}
		return out
	}

	sensorUser := e.user(tPub, tSeed, s.SensorID, s.Permissions())
	snc, err := connect(urls, sensorUser, nats.CustomInboxPrefix(s.InboxPrefix()),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	must(t, err)
	t.Cleanup(snc.Close)
	sjs, err := jetstream.NewWithAPIPrefix(snc, topology.APIPrefix)
	must(t, err)
	counts := map[string]int{}
	// receive fetches and acks until want distinct commands have arrived.
	receive := func(want int) {
		t.Helper()
		eventually(t, 15*time.Second, fmt.Sprintf("%d commands delivered", want), func() bool {
			cons, err := sjs.Consumer(ctx, stream, s.Consumer())
			if err != nil {
				return false
			}
			b, err := cons.Fetch(want, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				return false
			}
			for m := range b.Messages() {
				if m.DoubleAck(ctx) == nil {
					counts[m.Headers().Get(jetstream.MsgIDHeader)]++
				}
			}
			return len(counts) >= want
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
