package provisioning_test

import (
	"context"
	"testing"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// revokingCluster is nodeCluster where the sensor is revoked (by the hook)
// just before its consumer is recreated: after the node-loss pass checked
// the sensor was active, before the recreate reached NATS.
type revokingCluster struct {
	*nodeCluster
	before func(topology.Sensor)
}

func (c *revokingCluster) RecreateConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	if c.before != nil {
		c.before(s)
	}
	node, err := c.nodeCluster.RecreateConsumer(ctx, s)
	if err == nil {
		err = c.Consumers.EnsureConsumer(ctx, s) // the fake's record that it exists
	}
	return node, err
}

// TestNodeLossRecreateRacingARevocation (attack): a sensor revoked while
// the node-loss pass recreates its consumer (between the pass's check that
// the sensor is active and the create) had its consumer removed by the
// revocation and then created again by the pass, with nothing due to
// remove it (CleanupDue false): a revoked sensor kept a consumer on the
// command stream. The pass must leave no consumer of a revoked sensor, or
// at least make the cleanup due. Control: the active sensor's consumer is
// recreated.
func TestNodeLossRecreateRacingARevocation(t *testing.T) {
	nc := &revokingCluster{nodeCluster: newNodeCluster()}
	f := newFixture(t, func(c *provisioning.Config) { c.Consumers = nc })
	acct := f.tenant(t, "acme")
	victim := f.sensorUser(t, "acme", "s-0") // placed on n1
	f.sensorUser(t, "acme", "s-1")           // n2
	f.sensorUser(t, "acme", "s-2")           // n3
	keep := f.sensorUser(t, "acme", "s-3")   // n1
	if _, err := f.svc.RecordConsumerNodes(f.ctx); err != nil {
		t.Fatal(err)
	}
	nc.mu.Lock()
	nc.down["n1"] = true
	nc.mu.Unlock()
	victimConsumer := consumerOf("acme", "s-0")
	nc.before = func(s topology.Sensor) {
		if s.Consumer() == victimConsumer {
			if _, _, err := f.svc.Revoke(f.ctx, acct.PubKey, victim.User.PubKey); err != nil {
				t.Errorf("revoke: %v", err)
			}
		}
	}
	r, err := f.svc.RecreateLostNodeConsumers(f.ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.OnLost != 2 {
		t.Fatalf("pass %+v, want 2 on the lost node", r)
	}
	if !nc.Has(consumerOf("acme", "s-3")) {
		t.Errorf("control: the active sensor %s lost its consumer", keep.User.PubKey)
	}
	if nc.Has(victimConsumer) && !f.svc.CleanupDue() {
		t.Errorf("the sensor revoked during the pass has a consumer again and no cleanup is due")
	}
}
