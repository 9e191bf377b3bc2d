package app

import (
	"context"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// repairConsumers gives every active sensor user whose consumer is missing
// (created while NATS was unreachable, or lost with the stream) its
// consumer, once the JetStream connection is up too.
func (s *Server) repairConsumers(ctx context.Context) {
	for deadline := time.Now().Add(30 * time.Second); !s.nats.Ready(); {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The gauge follows the pass: the count found, then each repair.
	r, err := s.svc.RepairConsumersReporting(ctx, 4, func(n int) { s.consumersMissing.Store(int64(n)) })
	if err == nil {
		s.consumersMissing.Store(int64(r.Missing - r.Repaired))
	}
	switch {
	case err != nil:
		s.log.Warn("repair missing consumers", logkey.Error, err)
	case r.Err != nil:
		s.log.Warn("repair missing consumers", "missing", r.Missing, "repaired", r.Repaired, logkey.Error, r.Err)
	case r.Missing > 0:
		s.log.Info("repaired missing consumers", "count", r.Repaired)
	}
}

// retryInterval is how often the background retry looks for account JWTs
// that did not reach NATS and revoked sensors' consumers left behind.
const retryInterval = 5 * time.Second

// retryLoop pushes, while NATS is connected, every account JWT that has not
// reached it (a push that failed: NATS refused it as undeliverable, or a
// timeout) and finishes removing revoked sensors' consumers when an
// earlier removal failed. Each account is pushed on its own.
func (s *Server) retryLoop(ctx context.Context, every time.Duration) {
	s.whileConnected(ctx, every, func(int) {
		if n, err := s.svc.PushPending(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("push pending account JWTs", "pushed", n, logkey.Error, err)
		} else if n > 0 {
			s.log.Info("pushed pending account JWTs", "count", n)
		}
		if s.svc.CleanupDue() {
			s.removeRetired(ctx)
		}
	})
}

// whileConnected calls do once every interval until ctx ends, skipping the
// intervals in which NATS is not connected; tick counts the intervals
// from 1, skipped ones included.
func (s *Server) whileConnected(ctx context.Context, every time.Duration, do func(tick int)) {
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if s.nats.Ready() {
			do(tick)
		}
	}
}

// removeRetired removes the consumers and pending commands revoked sensors
// left behind (a failure or a crash between a revocation's steps).
func (s *Server) removeRetired(ctx context.Context) {
	n, err := s.svc.RemoveRetiredConsumers(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("remove revoked sensors' consumers", "removed", n, logkey.Error, err)
	case n > 0:
		s.log.Info("removed revoked sensors' consumers", "count", n)
	}
}

// keepSnapshot reads every account from PostgreSQL into the last known
// copy and writes the snapshot file when it changed, at start and then
// every RESOLVER_SNAPSHOT_INTERVAL. The resolver's own reads and the
// service's writes update the copy in between.
func (s *Server) keepSnapshot(ctx context.Context) {
	for {
		if accts, err := s.store.ListAccounts(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("refresh the resolver snapshot", logkey.Error, err)
			}
		} else {
			for _, a := range accts {
				s.last.Observe(a)
			}
			s.metrics.accounts.Set(float64(len(accts)))
		}
		// Counted, not read: at 10,000 sensors the users' JWTs are
		// megabytes a snapshot.
		if counts, err := s.store.ActiveUserCounts(ctx); err == nil {
			for _, k := range []provisioning.UserKind{provisioning.UserSensor, provisioning.UserBackend} {
				s.metrics.users.WithLabelValues(string(k)).Set(float64(counts[k]))
			}
		}
		if unpushed, err := s.store.UnpushedAccounts(ctx); err == nil {
			s.metrics.unpushed.Set(float64(len(unpushed)))
		}
		if s.nats.Ready() {
			// Keeps the consumer-limit metrics current; the check after
			// each connect logs what it finds.
			_, _ = s.nats.CheckConsumerLimit(ctx)
		}
		if err := s.last.Save(time.Now()); err != nil {
			s.log.Error("write the resolver snapshot", "path", s.cfg.ResolverSnapshotPath, logkey.Error, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.ResolverSnapshotInterval):
		}
	}
}

// offlineInterval is how often the provisioner looks for sensor consumers
// that no live NATS node holds (consumers of fewer replicas than the
// stream, after a node loss); every offlineFullEvery-th look lists every
// consumer even when the stream's replicas all answer (a cluster larger
// than the stream's replicas can lose a node the stream is not on).
const (
	offlineInterval  = 2 * time.Second
	offlineFullEvery = 30
)

// offlineLoop recreates, while NATS is connected, every sensor consumer
// whose only node was lost, on a live node, within seconds of the loss.
func (s *Server) offlineLoop(ctx context.Context, every time.Duration, fullEvery int) {
	s.whileConnected(ctx, every, func(tick int) {
		n, err := s.svc.RecreateOfflineConsumers(ctx, tick%fullEvery == 0, 32)
		s.consumersRecreated.Add(int64(n))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("recreate consumers no live NATS node holds", "recreated", n, logkey.Error, err)
		case n > 0:
			s.log.Warn("recreated consumers no live NATS node held (a node was lost); their sensors receive again the commands the stream keeps and skip the ones they applied", "count", n)
		}
	})
}
