package provisioning_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

// gatedStore is the in-memory store whose CreateUser can be made to fail.
type gatedStore struct {
	*provisionmem.Store
	fail atomic.Pointer[error]
}

func (s *gatedStore) CreateUser(ctx context.Context, u provisioning.User) (provisioning.User, bool, error) {
	if err := s.fail.Load(); err != nil {
		return provisioning.User{}, false, *err
	}
	return s.Store.CreateUser(ctx, u)
}

// gatedConsumers is the fake consumer creator whose EnsureConsumer first
// calls before (nil: nothing) and counts the calls in flight.
type gatedConsumers struct {
	*provisioningtest.Consumers
	before   func()
	inFlight atomic.Int32
	calls    atomic.Int32
}

func (c *gatedConsumers) EnsureConsumer(ctx context.Context, s topology.Sensor) error {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	c.calls.Add(1)
	if c.before != nil {
		c.before()
	}
	return c.Consumers.EnsureConsumer(ctx, s)
}

func newGatedFixture(t *testing.T) (*fixture, *gatedStore, *gatedConsumers) {
	t.Helper()
	gs := &gatedStore{}
	gc := &gatedConsumers{}
	f := newFixture(t, func(c *provisioning.Config) {
		gs.Store = c.Store.(*provisionmem.Store)
		gc.Consumers = c.Consumers.(*provisioningtest.Consumers)
		c.Store, c.Consumers = gs, gc
	})
	return f, gs, gc
}

// The answer waits for the consumer: no credentials before it exists.
func TestEnsureSensorUserAnswersOnlyOnceTheConsumerExists(t *testing.T) {
	t.Parallel()
	f, _, gc := newGatedFixture(t)
	f.tenant(t, "acme")
	release := make(chan struct{})
	gc.before = func() { <-release }
	done := make(chan error, 1)
	go func() {
		_, _, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("EnsureSensorUser answered (%v) while the consumer was still being created", err)
	case <-time.After(200 * time.Millisecond):
	}
	// Positive control: released, it answers with the consumer there.
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !gc.Has("cmd-acme-s1") {
		t.Error("answered without the consumer")
	}
}

// Storing the user fails: the call fails and leaves neither a user nor a
// consumer (the consumer is created only for a stored user, so nothing
// is left without credentials), and the retry finishes with one user and
// one consumer.
func TestEnsureSensorUserStoreFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	f, gs, gc := newGatedFixture(t)
	f.tenant(t, "acme")
	broken := errors.New("connection reset by peer")
	gs.fail.Store(&broken)
	_, _, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	wantErr(t, "the user's insert failing", err, broken)
	if n := gc.inFlight.Load(); n != 0 {
		t.Errorf("%d consumer creations still running after the answer", n)
	}
	if _, err := f.store.ActiveSensorUser(f.ctx, "acme", "s1"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("a user was kept after the failed insert: %v", err)
	}
	if n := gc.calls.Load(); n != 0 || gc.Has("cmd-acme-s1") {
		t.Errorf("%d consumer creations for a user that was not stored", n)
	}
	gs.fail.Store(nil)
	su, created, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || !created {
		t.Fatalf("retry = created %v, %v", created, err)
	}
	stored, err := f.store.ActiveSensorUser(f.ctx, "acme", "s1")
	if err != nil || stored.PubKey != su.User.PubKey {
		t.Errorf("stored user %s (%v), handed out %s", stored.PubKey, err, su.User.PubKey)
	}
	if names, _ := gc.ConsumerNames(f.ctx); !slices.Equal(names, []string{"cmd-acme-s1"}) {
		t.Errorf("consumers %v, want cmd-acme-s1 once", names)
	}
}

// The consumer creation fails while the user is stored: as before, the
// user is kept, the call says NATS is unavailable, the retry finishes.
func TestEnsureSensorUserConsumerFailureKeepsTheUser(t *testing.T) {
	t.Parallel()
	f, _, gc := newGatedFixture(t)
	f.tenant(t, "acme")
	gc.Fail(errors.New("no responders"))
	_, _, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	wantErr(t, "the consumer creation failing", err, provisioning.ErrNATSUnavailable)
	kept, err := f.store.ActiveSensorUser(f.ctx, "acme", "s1")
	if err != nil {
		t.Fatalf("the user was not kept: %v", err)
	}
	gc.Fail(nil)
	su, created, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || created || su.User.PubKey != kept.PubKey || !gc.Has("cmd-acme-s1") {
		t.Errorf("retry = %s, created %v, %v; want the kept user %s and its consumer", su.User.PubKey, created, err, kept.PubKey)
	}
}

// Many identical requests for a new sensor at once: one user, every
// caller handed it, one consumer.
func TestEnsureSensorUserConcurrentIdenticalRequests(t *testing.T) {
	t.Parallel()
	f, _, gc := newGatedFixture(t)
	f.tenant(t, "acme")
	const n = 32
	keys := make([]string, n)
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			su, c, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if c {
				created.Add(1)
			}
			keys[i] = su.User.PubKey
		})
	}
	wg.Wait()
	stored, err := f.store.ActiveSensorUser(f.ctx, "acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if k != stored.PubKey {
			t.Errorf("request %d was handed %s, want the stored user %s", i, k, stored.PubKey)
		}
	}
	if created.Load() != 1 {
		t.Errorf("%d requests said created, want 1", created.Load())
	}
	if names, _ := gc.ConsumerNames(f.ctx); !slices.Equal(names, []string{"cmd-acme-s1"}) {
		t.Errorf("consumers %v, want cmd-acme-s1 once", names)
	}
}
