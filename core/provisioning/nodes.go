package provisioning

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rxc-project/rxc/core/topology"
)

// ConsumerNode says which NATS node (server name) holds a durable consumer:
// the leader its create, recreate or info answer named.
type ConsumerNode struct {
	Consumer string
	Node     string
}

// ConsumerNodeStore keeps each consumer's node next to its name claim
// (ConsumerNames), where every provisioner replica reads it. A Store that
// implements it lets RecreateLostNodeConsumers find a lost node's consumers
// without asking NATS for every consumer.
type ConsumerNodeStore interface {
	// SetConsumerNodes records the nodes of claimed consumer names; a
	// name nobody claims is ignored.
	SetConsumerNodes(ctx context.Context, nodes []ConsumerNode) error
	// ConsumersOnNode lists the claims of the active sensors whose
	// consumer was last seen on node.
	ConsumersOnNode(ctx context.Context, node string) ([]ConsumerClaim, error)
}

// ConsumerLocator tells where consumers live and which nodes are lost. A
// Consumers adapter that implements it (with ConsumerRecreator) lets
// RecreateLostNodeConsumers repair a node loss from the recorded nodes.
type ConsumerLocator interface {
	// Placements hands over the nodes consumers were created or updated
	// on since the last call (each create answer names its leader).
	Placements() []ConsumerNode
	// LostNodes names the command stream's replicas that are offline or
	// have gone silent; known is false when it cannot tell (the stream
	// has no leader yet).
	LostNodes(ctx context.Context) (lost []string, known bool, err error)
	// ConsumerNodes lists every consumer that answers with its node, and
	// the names of those none answered for (missing).
	ConsumerNodes(ctx context.Context) (nodes []ConsumerNode, missing []string, err error)
	// ConsumerNode asks the sensor's consumer where it lives, waiting
	// briefly: "" when it did not answer (or does not exist).
	ConsumerNode(ctx context.Context, s topology.Sensor) (string, error)
}

// NodeRecovery is what one RecreateLostNodeConsumers pass found and did.
type NodeRecovery struct {
	// Lost names the nodes the stream reported lost.
	Lost []string
	// Known is false when the stream could not tell (no leader).
	Known bool
	// OnLost is how many active sensors' consumers were recorded on them.
	OnLost int
	// Answered is how many of those answered from a live node when
	// re-checked (a stale record): recorded anew, not recreated.
	Answered int
	// Recreated is how many were recreated on a live node.
	Recreated int
}

// RecordConsumerNodes writes the nodes the adapter saw consumers created on
// (ConsumerLocator.Placements) to the store, in one batch. Without both
// capabilities it records nothing.
func (s *Service) RecordConsumerNodes(ctx context.Context) (int, error) {
	loc, ok := s.consumers.(ConsumerLocator)
	ns, ok2 := s.store.(ConsumerNodeStore)
	if !ok || !ok2 {
		return 0, nil
	}
	p := loc.Placements()
	if len(p) == 0 {
		return 0, nil
	}
	if err := ns.SetConsumerNodes(ctx, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// RefreshConsumerNodes asks NATS where every consumer lives and records it
// (leaders can move; consumers created by an earlier release have no
// record). It returns the names none answered for, for the fallback pass.
func (s *Service) RefreshConsumerNodes(ctx context.Context) (recorded int, missing []string, err error) {
	loc, ok := s.consumers.(ConsumerLocator)
	ns, ok2 := s.store.(ConsumerNodeStore)
	if !ok || !ok2 {
		return 0, nil, nil
	}
	nodes, missing, err := loc.ConsumerNodes(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: consumer nodes: %v", ErrNATSUnavailable, err)
	}
	if err := ns.SetConsumerNodes(ctx, nodes); err != nil {
		return 0, nil, err
	}
	return len(nodes), missing, nil
}

// RecreateLostNodeConsumers repairs a node loss from the recorded nodes:
// it asks the stream which of its replicas are lost (one request) and, for
// each lost node, recreates on a live node exactly the consumers of active
// sensors recorded there, workers at a time, without listing every
// consumer. Each is asked first: one that answers from a live node (its
// record was stale) is recorded anew and left alone. Each recreated
// consumer's new node is recorded. progress, when set, is called after
// each consumer is done (recreated or not) with the pass so far.
func (s *Service) RecreateLostNodeConsumers(ctx context.Context, workers int, progress func(NodeRecovery)) (NodeRecovery, error) {
	var r NodeRecovery
	loc, ok := s.consumers.(ConsumerLocator)
	rc, ok2 := s.consumers.(ConsumerRecreator)
	ns, ok3 := s.store.(ConsumerNodeStore)
	if !ok || !ok2 || !ok3 {
		return r, nil
	}
	if _, err := s.RecordConsumerNodes(ctx); err != nil {
		return r, err
	}
	lost, known, err := loc.LostNodes(ctx)
	r.Known = known
	if err != nil {
		return r, fmt.Errorf("%w: lost nodes: %v", ErrNATSUnavailable, err)
	}
	if !known || len(lost) == 0 {
		return r, nil
	}
	r.Lost = slices.Clone(lost)
	var todo []topology.Sensor
	for _, node := range lost {
		claims, err := ns.ConsumersOnNode(ctx, node)
		if err != nil {
			return r, err
		}
		for _, c := range claims {
			sensor := s.sensor(c.TenantID, c.SensorID)
			if sensor.Consumer() != c.Consumer {
				continue // a name of another stream or release: not ours to move
			}
			todo = append(todo, sensor)
		}
	}
	err = s.recover(ctx, todo, lost, workers, loc, rc, ns, &r, progress)
	return r, err
}

// recover re-checks and recreates todo, workers at a time (see
// RecreateLostNodeConsumers); lost names the nodes whose answer does not
// count as live. It counts todo in r.OnLost and reports that (progress,
// when set) before the first consumer. Without loc nothing is asked first;
// without ns nothing is recorded.
func (s *Service) recover(ctx context.Context, todo []topology.Sensor, lost []string, workers int,
	loc ConsumerLocator, rc ConsumerRecreator, ns ConsumerNodeStore, r *NodeRecovery, progress func(NodeRecovery)) error {
	r.OnLost = len(todo)
	if progress != nil {
		progress(*r)
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	done := func(answered, recreated bool) {
		mu.Lock()
		defer mu.Unlock()
		if answered {
			r.Answered++
		}
		if recreated {
			r.Recreated++
		}
		if progress != nil {
			progress(*r)
		}
	}
	eachSensor(ctx, todo, workers, func(sensor topology.Sensor) {
		// Asked first: a consumer that answers from a live node is not
		// recreated (its record was stale, or a leader moved), only
		// recorded anew.
		if loc != nil {
			if node, err := loc.ConsumerNode(ctx, sensor); err == nil && node != "" && !slices.Contains(lost, node) {
				if ns != nil {
					if err := ns.SetConsumerNodes(ctx, []ConsumerNode{{sensor.Consumer(), node}}); err != nil {
						fail(err)
					}
				}
				done(true, false)
				return
			}
		}
		// A sensor revoked since the pass read the records keeps its
		// consumer removed.
		if _, err := s.store.ActiveSensorUser(ctx, sensor.TenantID, sensor.SensorID); errors.Is(err, ErrNotFound) {
			done(false, false)
			return
		} else if err != nil {
			fail(err)
			return
		}
		node, err := rc.RecreateConsumer(ctx, sensor)
		if err != nil {
			fail(fmt.Errorf("%w: recreate consumer %s: %v", ErrNATSUnavailable, sensor.Consumer(), err))
			return
		}
		// A revocation between the check above and the create removed
		// the consumer before it was created again: checked once more,
		// and removed (retire makes the cleanup due if that fails).
		if err := s.retire(ctx, sensor); err != nil {
			fail(err)
		}
		if node != "" && ns != nil {
			if err := ns.SetConsumerNodes(ctx, []ConsumerNode{{sensor.Consumer(), node}}); err != nil {
				fail(err)
			}
		}
		done(false, true)
	})
	return errors.Join(errs...)
}

// eachSensor runs do for every sensor of todo, workers at a time (at least
// one), and stops handing out sensors once ctx is done.
func eachSensor(ctx context.Context, todo []topology.Sensor, workers int, do func(topology.Sensor)) {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	work := make(chan topology.Sensor)
	for range workers {
		wg.Go(func() {
			for sensor := range work {
				do(sensor)
			}
		})
	}
	for _, sensor := range todo {
		if ctx.Err() != nil {
			break
		}
		work <- sensor
	}
	close(work)
	wg.Wait()
}
