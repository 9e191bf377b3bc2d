package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

// nodeCluster is the consumers fake of a NATS cluster with the
// ConsumerLocator and ConsumerRecreator capabilities: consumers are placed
// on the live nodes in turn, a down node's consumers answer nothing.
type nodeCluster struct {
	*provisioningtest.Consumers
	mu         sync.Mutex
	nodes      []string
	next       int
	on         map[string]string // consumer → the node it lives on
	down       map[string]bool
	unknown    bool
	placed     []provisioning.ConsumerNode
	extra      []string // listed missing although they answer (a slow node)
	asked      []string
	recreated  []string
	lists      int
	failLost   error
	failCreate map[string]bool
}

func newNodeCluster() *nodeCluster {
	return &nodeCluster{Consumers: &provisioningtest.Consumers{}, nodes: []string{"n1", "n2", "n3"}, on: map[string]string{}, down: map[string]bool{}}
}

// place puts the consumer on the next live node; c.mu held.
func (c *nodeCluster) place(name string) string {
	for {
		n := c.nodes[c.next%len(c.nodes)]
		c.next++
		if !c.down[n] {
			c.on[name] = n
			c.placed = append(c.placed, provisioning.ConsumerNode{Consumer: name, Node: n})
			return n
		}
	}
}

func (c *nodeCluster) EnsureConsumer(ctx context.Context, s topology.Sensor) error {
	if err := c.Consumers.EnsureConsumer(ctx, s); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.on[s.Consumer()]; !ok {
		c.place(s.Consumer())
	}
	return nil
}

func (c *nodeCluster) Placements() []provisioning.ConsumerNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.placed
	c.placed = nil
	return p
}

func (c *nodeCluster) LostNodes(context.Context) ([]string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failLost != nil {
		return nil, false, c.failLost
	}
	if c.unknown {
		return nil, false, nil
	}
	var lost []string
	for n, d := range c.down {
		if d {
			lost = append(lost, n)
		}
	}
	slices.Sort(lost)
	return lost, true, nil
}

func (c *nodeCluster) ConsumerNodes(context.Context) ([]provisioning.ConsumerNode, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	var nodes []provisioning.ConsumerNode
	missing := slices.Clone(c.extra)
	for name, n := range c.on {
		if c.down[n] {
			missing = append(missing, name)
		} else {
			nodes = append(nodes, provisioning.ConsumerNode{Consumer: name, Node: n})
		}
	}
	return nodes, missing, nil
}

func (c *nodeCluster) OfflineConsumers(ctx context.Context, _ bool) ([]string, error) {
	_, missing, err := c.ConsumerNodes(ctx)
	return missing, err
}

func (c *nodeCluster) ConsumerNode(_ context.Context, s topology.Sensor) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, s.Consumer())
	if n := c.on[s.Consumer()]; !c.down[n] {
		return n, nil
	}
	return "", nil
}

func (c *nodeCluster) RecreateConsumer(_ context.Context, s topology.Sensor) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failCreate[s.Consumer()] {
		return "", errors.New("no answer")
	}
	c.recreated = append(c.recreated, s.Consumer())
	return c.place(s.Consumer()), nil
}

func (c *nodeCluster) liveOn(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on[name]
}

func consumerOf(tenant, sensor string) string {
	return topology.Sensor{Stream: topology.DefaultStream, TenantID: tenant, SensorID: sensor}.Consumer()
}

// newNodeFixture is a fixture whose consumers live on a nodeCluster, with
// n sensors of acme (s-0, s-1, …) holding active users, returned in order.
func newNodeFixture(t *testing.T, n int) (*fixture, *nodeCluster, []provisioning.SensorUser) {
	t.Helper()
	nc := newNodeCluster()
	f := newFixture(t, func(c *provisioning.Config) { c.Consumers = nc })
	f.tenant(t, "acme")
	users := make([]provisioning.SensorUser, n)
	for i := range n {
		users[i] = f.sensorUser(t, "acme", fmt.Sprintf("s-%d", i))
	}
	return f, nc, users
}

func sortedNames(claims []provisioning.ConsumerClaim) []string {
	return contracttest.SortedKeys(claims, func(c provisioning.ConsumerClaim) string { return c.Consumer })
}

// A node loss repaired from the recorded nodes: exactly the active sensors'
// consumers recorded on the lost node are recreated, on live nodes, and
// recorded there; a consumer whose record is stale (it answers from a live
// node) is recorded anew, not recreated; a revoked sensor's consumer is
// left alone; nothing lists every consumer; the progress the pass reports
// ends at its result.
func TestRecreateLostNodeConsumers(t *testing.T) {
	f, nc, users := newNodeFixture(t, 9)
	if n, err := f.svc.RecordConsumerNodes(f.ctx); err != nil || n != 9 {
		t.Fatalf("RecordConsumerNodes = %d, %v; want 9", n, err)
	}
	ns := any(f.store).(provisioning.ConsumerNodeStore)
	onN1, err := ns.ConsumersOnNode(f.ctx, "n1")
	if err != nil || len(onN1) != 3 {
		t.Fatalf("recorded on n1: %v, %v; want 3 (placed in turn)", onN1, err)
	}
	// s-0 is revoked; s-3's leader moved to n2 unrecorded (a stale record).
	if _, _, err := f.svc.Revoke(f.ctx, users[0].User.AccountPubKey, users[0].User.PubKey); err != nil {
		t.Fatal(err)
	}
	nc.mu.Lock()
	nc.on[consumerOf("acme", "s-3")] = "n2"
	nc.down["n1"] = true
	nc.mu.Unlock()

	var last provisioning.NodeRecovery
	calls := 0
	r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 4, func(p provisioning.NodeRecovery) { last = p; calls++ })
	if err != nil {
		t.Fatal(err)
	}
	want := provisioning.NodeRecovery{Lost: []string{"n1"}, Known: true, OnLost: 2, Answered: 1, Recreated: 1}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("RecreateLostNodeConsumers = %+v, want %+v", r, want)
	}
	if fmt.Sprint(last) != fmt.Sprint(r) || calls != 3 {
		t.Errorf("progress ended at %+v after %d calls, want the result after 3 (start, each consumer)", last, calls)
	}
	if !slices.Equal(nc.recreated, []string{consumerOf("acme", "s-6")}) {
		t.Errorf("recreated %v, want only acme/s-6 (revoked s-0 and stale s-3 left alone)", nc.recreated)
	}
	if nc.lists != 0 {
		t.Errorf("the pass listed every consumer %d times, want none", nc.lists)
	}
	if got, _ := ns.ConsumersOnNode(f.ctx, "n1"); len(got) != 0 {
		t.Errorf("still recorded on the lost node: %v", got)
	}
	onN2, _ := ns.ConsumersOnNode(f.ctx, "n2")
	onN3, _ := ns.ConsumersOnNode(f.ctx, "n3")
	recorded := map[string]string{}
	for node, cs := range map[string][]provisioning.ConsumerClaim{"n2": onN2, "n3": onN3} {
		for _, c := range cs {
			recorded[c.Consumer] = node
		}
	}
	for _, id := range []string{"s-3", "s-6"} {
		name := consumerOf("acme", id)
		if got, live := recorded[name], nc.liveOn(name); got != live || live == "n1" {
			t.Errorf("%s recorded on %q, lives on %q", name, got, live)
		}
	}
	if len(recorded) != 8 {
		t.Errorf("active sensors recorded on live nodes: %d (%v), want 8", len(recorded), recorded)
	}

	// The next pass finds nothing left on the lost node: nothing asked,
	// nothing recreated.
	nc.asked, nc.recreated = nil, nil
	if r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 4, nil); err != nil || r.OnLost != 0 || len(nc.asked) != 0 || len(nc.recreated) != 0 {
		t.Errorf("second pass = %+v, %v; asked %v, recreated %v", r, err, nc.asked, nc.recreated)
	}
}

// Nothing lost, or a stream that cannot tell: nothing asked, nothing
// recreated. A stream info failure is ErrNATSUnavailable; a recreation
// that fails is reported and the others go on.
func TestRecreateLostNodeConsumersQuietAndFailing(t *testing.T) {
	f, nc, _ := newNodeFixture(t, 6)
	if r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 2, nil); err != nil || !r.Known || r.OnLost != 0 || len(nc.asked) != 0 {
		t.Errorf("whole cluster: %+v, %v, asked %v", r, err, nc.asked)
	}
	nc.down["n2"], nc.unknown = true, true
	if r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 2, nil); err != nil || r.Known || len(nc.asked) != 0 || len(nc.recreated) != 0 {
		t.Errorf("stream without a leader: %+v, %v, asked %v", r, err, nc.asked)
	}
	nc.unknown, nc.failLost = false, errors.New("timeout")
	if _, err := f.svc.RecreateLostNodeConsumers(f.ctx, 2, nil); !errors.Is(err, provisioning.ErrNATSUnavailable) {
		t.Errorf("stream info failure: %v, want ErrNATSUnavailable", err)
	}
	nc.failLost = nil
	nc.failCreate = map[string]bool{consumerOf("acme", "s-1"): true}
	r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 2, nil)
	if !errors.Is(err, provisioning.ErrNATSUnavailable) || r.OnLost != 2 || r.Recreated != 1 {
		t.Errorf("one recreation failing: %+v, %v; want OnLost 2, Recreated 1, ErrNATSUnavailable", r, err)
	}
	// The failed one stays recorded on the lost node for the next pass.
	ns := any(f.store).(provisioning.ConsumerNodeStore)
	if got, _ := ns.ConsumersOnNode(f.ctx, "n2"); !slices.Equal(sortedNames(got), []string{consumerOf("acme", "s-1")}) {
		t.Errorf("left on the lost node: %v, want acme/s-1", sortedNames(got))
	}
}

// The list fallback asks each consumer it finds missing first: one a slow
// node listed missing but that answers is recorded, not recreated; one no
// live node holds is recreated.
func TestRecreateOfflineConsumersAsksFirst(t *testing.T) {
	f, nc, _ := newNodeFixture(t, 3)
	// Never recorded (an earlier release): the node-loss pass cannot know
	// them, the fallback can.
	nc.Placements()
	nc.extra = []string{consumerOf("acme", "s-1")}
	nc.down[nc.liveOn(consumerOf("acme", "s-0"))] = true
	if r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 2, nil); err != nil || r.OnLost != 0 {
		t.Fatalf("node-loss pass without records: %+v, %v; want nothing on the lost node", r, err)
	}
	var last provisioning.NodeRecovery
	r, err := f.svc.RecreateOfflineConsumersReporting(f.ctx, false, 2, func(p provisioning.NodeRecovery) { last = p })
	if err != nil || r.OnLost != 2 || r.Answered != 1 || r.Recreated != 1 || fmt.Sprint(last) != fmt.Sprint(r) {
		t.Fatalf("fallback = %+v (progress %+v), %v; want 2 listed, 1 answered, 1 recreated", r, last, err)
	}
	if !slices.Equal(nc.recreated, []string{consumerOf("acme", "s-0")}) {
		t.Errorf("recreated %v, want only acme/s-0", nc.recreated)
	}
	// The full pass records where every consumer lives (the refresh).
	nc.extra = nil
	ns := any(f.store).(provisioning.ConsumerNodeStore)
	if got, _ := ns.ConsumersOnNode(f.ctx, nc.liveOn(consumerOf("acme", "s-2"))); slices.Contains(sortedNames(got), consumerOf("acme", "s-2")) {
		t.Fatalf("acme/s-2 recorded before the full pass: %v", sortedNames(got))
	}
	if r, err := f.svc.RecreateOfflineConsumersReporting(f.ctx, true, 2, nil); err != nil || r.Recreated != 0 {
		t.Fatalf("full pass = %+v, %v", r, err)
	}
	for i := range 3 {
		name := consumerOf("acme", fmt.Sprintf("s-%d", i))
		if got, _ := ns.ConsumersOnNode(f.ctx, nc.liveOn(name)); !slices.Contains(sortedNames(got), name) {
			t.Errorf("after the full pass %s is not recorded on %s, where it lives", name, nc.liveOn(name))
		}
	}
}

// An adapter or a store without the capabilities: nothing done, nothing
// failed.
func TestRecreateLostNodeConsumersWithoutCapability(t *testing.T) {
	f := newFixture(t)
	if r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 4, nil); err != nil || r.OnLost != 0 {
		t.Errorf("RecreateLostNodeConsumers = %+v, %v", r, err)
	}
	if n, err := f.svc.RecordConsumerNodes(f.ctx); n != 0 || err != nil {
		t.Errorf("RecordConsumerNodes = %d, %v", n, err)
	}
}
