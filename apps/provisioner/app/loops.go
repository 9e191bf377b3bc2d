package app

import (
	"context"
	"strings"
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

// offlineInterval is how often the provisioner records where new consumers
// live and asks the command stream whether a node was lost; every
// offlineFullEvery-th look lists every consumer even when the stream's
// replicas all answer (a cluster larger than the stream's replicas can lose
// a node the stream is not on), which also refreshes the recorded nodes;
// while a node is lost, the list fallback (consumers whose recorded node is
// unknown or wrong) runs at most every offlineFallbackEvery-th look.
const (
	offlineInterval      = 2 * time.Second
	offlineFullEvery     = 30
	offlineFallbackEvery = 15
	// nodeLossWorkers bounds the consumers a pass re-checks and recreates
	// at once: each mostly waits on NATS (a consumer of the lost node
	// answers nothing, its delete is not answered either).
	nodeLossWorkers = 256
	// nodeLossLock is the PostgreSQL lock the replicas take turns at the
	// pass with: one repairs, the others record and skip.
	nodeLossLock = "rxc-consumer-node-loss"
)

// offlineLoop recreates, while NATS is connected, every sensor consumer
// whose only node was lost, on a live node, within seconds of the loss:
// each look records the nodes this replica's creates named, then the
// replica holding the node-loss lock asks the stream for lost nodes and
// recreates the consumers recorded there (RecreateLostNodeConsumers), with
// the list pass as the slower fallback.
func (s *Server) offlineLoop(ctx context.Context, every time.Duration, fullEvery int) {
	lastFallback, fellBackFor := 0, ""
	s.whileConnected(ctx, every, func(tick int) {
		if _, err := s.svc.RecordConsumerNodes(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("record the NATS nodes of new consumers", logkey.Error, err)
		}
		unlock, ok, err := s.store.TryLock(ctx, nodeLossLock)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("take the node-loss lock", logkey.Error, err)
			}
			return
		}
		if !ok {
			return // another replica repairs
		}
		r, err := s.nodeLossPass(ctx)
		degraded := len(r.Lost) > 0 || !r.Known || err != nil
		lost := strings.Join(r.Lost, ",")
		full := tick%fullEvery == 0
		// The fallback runs once right after the pass that repaired a
		// newly lost node (consumers not recorded yet, or recorded
		// wrong, wait no longer than that), then every
		// offlineFallbackEvery-th look while the loss lasts. Not while the
		// stream cannot name the lost node (it has no leader for a few
		// seconds): the list would hold up the pass that follows.
		if full || (lost != "" && lost != fellBackFor) || (degraded && tick-lastFallback >= offlineFallbackEvery) {
			lastFallback, fellBackFor = tick, lost
			s.offlineFallback(ctx, full)
		}
		if !degraded {
			fellBackFor = ""
		}
		unlock()
	})
}

// progress returns a NodeRecovery callback that keeps the offline gauge at
// what the pass has yet to do and counts each recreation as it happens.
func (s *Server) progress() func(provisioning.NodeRecovery) {
	counted := 0
	return func(r provisioning.NodeRecovery) {
		s.consumersOffline.Store(int64(r.OnLost - r.Answered - r.Recreated))
		s.consumersRecreated.Add(int64(r.Recreated - counted))
		counted = r.Recreated
	}
}

// nodeLossPass runs RecreateLostNodeConsumers, logs what it did and keeps
// the gauges.
func (s *Server) nodeLossPass(ctx context.Context) (provisioning.NodeRecovery, error) {
	start := time.Now()
	r, err := s.svc.RecreateLostNodeConsumers(ctx, nodeLossWorkers, s.progress())
	s.natsNodesLost.Store(int64(len(r.Lost)))
	left := r.OnLost - r.Answered - r.Recreated
	s.consumersOffline.Store(int64(left))
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("recreate the consumers of a lost NATS node", "nodes", r.Lost, "recorded", r.OnLost, "recreated", r.Recreated, "answered", r.Answered, logkey.Error, err)
	case r.Recreated > 0:
		s.log.Warn("recreated the consumers a lost NATS node held; their sensors receive again the commands the stream keeps and skip the ones they applied",
			"nodes", r.Lost, "recreated", r.Recreated, "answered", r.Answered, "took", time.Since(start).Round(time.Millisecond))
	}
	return r, err
}

// offlineFallback lists the consumers no live node answers for and
// recreates those of active sensors that do not answer when asked (their
// recorded node unknown or wrong); a full pass lists even when the stream
// looks whole, and records every consumer's node.
func (s *Server) offlineFallback(ctx context.Context, full bool) {
	r, err := s.svc.RecreateOfflineConsumersReporting(ctx, full, nodeLossWorkers, s.progress())
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("recreate consumers no live NATS node holds", "listed", r.OnLost, "recreated", r.Recreated, logkey.Error, err)
	case r.Recreated > 0:
		s.log.Warn("recreated consumers no live NATS node held (a node was lost); their sensors receive again the commands the stream keeps and skip the ones they applied", "count", r.Recreated, "answered", r.Answered)
	}
}
