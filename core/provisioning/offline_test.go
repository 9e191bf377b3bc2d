package provisioning_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

// recreator is the consumers fake with the ConsumerRecreator capability:
// offline names the consumers no live node holds.
type recreator struct {
	*provisioningtest.Consumers
	mu        sync.Mutex
	offline   []string
	fulls     []bool
	recreated []string
	fail      error
}

func (r *recreator) OfflineConsumers(_ context.Context, full bool) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fulls = append(r.fulls, full)
	return slices.Clone(r.offline), r.fail
}

func (r *recreator) RecreateConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	r.mu.Lock()
	r.recreated = append(r.recreated, s.Consumer())
	r.mu.Unlock()
	return "", r.Consumers.EnsureConsumer(ctx, s)
}

// A node loss: the consumers no live node holds that belong to active
// sensors are recreated, once each; names of no active sensor (a revoked
// sensor's, one made by hand) are left alone.
func TestRecreateOfflineConsumers(t *testing.T) {
	rc := &recreator{Consumers: &provisioningtest.Consumers{}}
	f := newFixture(t, func(c *provisioning.Config) { c.Consumers = rc })
	acct := f.tenant(t, "acme")
	f.sensorUser(t, "acme", "s-1")
	f.sensorUser(t, "acme", "s-2")
	revoked := f.sensorUser(t, "acme", "s-3")
	if _, _, err := f.svc.Revoke(f.ctx, acct.PubKey, revoked.User.PubKey); err != nil {
		t.Fatal(err)
	}
	lostName := consumerOf("acme", "s-1")
	revokedName := consumerOf("acme", "s-3")
	rc.offline = []string{lostName, revokedName, "by-hand"}

	n, err := f.svc.RecreateOfflineConsumers(f.ctx, true, 4)
	if err != nil || n != 1 {
		t.Fatalf("RecreateOfflineConsumers = %d, %v; want 1", n, err)
	}
	if !slices.Equal(rc.recreated, []string{lostName}) {
		t.Errorf("recreated %v, want only %s", rc.recreated, lostName)
	}
	if !slices.Equal(rc.fulls, []bool{true}) {
		t.Errorf("full flags passed = %v", rc.fulls)
	}

	// Nothing offline: nothing recreated.
	rc.offline, rc.recreated = nil, nil
	if n, err := f.svc.RecreateOfflineConsumers(f.ctx, false, 4); err != nil || n != 0 || len(rc.recreated) != 0 {
		t.Errorf("with nothing offline: %d, %v, recreated %v", n, err, rc.recreated)
	}

	// NATS not answering is ErrNATSUnavailable.
	rc.fail = errors.New("timeout")
	if _, err := f.svc.RecreateOfflineConsumers(f.ctx, false, 4); !errors.Is(err, provisioning.ErrNATSUnavailable) {
		t.Errorf("list failure: %v, want ErrNATSUnavailable", err)
	}
}

// An adapter without the capability recreates nothing and fails nothing.
func TestRecreateOfflineConsumersWithoutCapability(t *testing.T) {
	f := newFixture(t)
	if n, err := f.svc.RecreateOfflineConsumers(f.ctx, true, 4); n != 0 || err != nil {
		t.Errorf("RecreateOfflineConsumers = %d, %v; want 0, nil", n, err)
	}
}

// revokingRecreator revokes, on the first recreation of a pass, every other
// sensor the pass has yet to recreate: a decommission that lands while a
// node loss is being repaired.
type revokingRecreator struct {
	*recreator
	once   sync.Once
	revoke func(first topology.Sensor)
}

func (r *revokingRecreator) RecreateConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	r.once.Do(func() { r.revoke(s) })
	return r.recreator.RecreateConsumer(ctx, s)
}

// Attack: a sensor decommissioned while a node-loss pass is under way (its
// user revoked, its consumer removed) must not get its consumer back from
// that pass, which read the active users before the revocation. Control:
// the sensor still active is recreated.
func TestRecreateOfflineConsumersSkipsSensorsRevokedDuringThePass(t *testing.T) {
	rc := &revokingRecreator{recreator: &recreator{Consumers: &provisioningtest.Consumers{}}}
	f := newFixture(t, func(c *provisioning.Config) { c.Consumers = rc })
	acct := f.tenant(t, "acme")
	users := map[string]provisioning.SensorUser{"s-1": f.sensorUser(t, "acme", "s-1"), "s-2": f.sensorUser(t, "acme", "s-2")}
	var revoked string
	rc.revoke = func(first topology.Sensor) {
		for id, u := range users {
			if id != first.SensorID {
				revoked = id
				if _, _, err := f.svc.Revoke(f.ctx, acct.PubKey, u.User.PubKey); err != nil {
					t.Error(err)
				}
			}
		}
	}
	for id := range users {
		rc.offline = append(rc.offline, consumerOf("acme", id))
	}
	n, err := f.svc.RecreateOfflineConsumers(f.ctx, true, 1)
	if err != nil || n != 1 {
		t.Fatalf("RecreateOfflineConsumers = %d, %v; want 1", n, err)
	}
	gone := consumerOf("acme", revoked)
	if slices.Contains(rc.recreated, gone) || len(rc.recreated) != 1 {
		t.Fatalf("recreated %v; the consumer of %s, revoked during the pass, must not come back", rc.recreated, revoked)
	}
}
