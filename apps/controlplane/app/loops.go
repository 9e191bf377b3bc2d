package app

import (
	"context"
	"sync"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// startBackground starts, each on wg, the workers that run beside the
// edges until ctx ends: the status batcher and the NATS connection, the
// event pipeline, the credential-change listener, command and tenant
// reconciliation, batch publication, marking silent sensors offline,
// purging sessions and the history retention pass.
func (s *Server) startBackground(ctx context.Context, wg *sync.WaitGroup) {
	if s.messaging != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.status.Run(ctx) }()
		s.messaging.SubscribeStatus(s.status.Handle)
		s.messaging.Start(ctx)
	}
	if s.events != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.events.start(ctx) }()
	}
	// Revocations and renewals committed by any replica end the streams
	// this one holds on a certificate no longer active.
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.store.ListenCredentialChanges(ctx, s.log.With("component", "credentials"),
			func(tenantID, sensorID string) { s.grpc.Recheck(ctx, tenantID, sensorID) },
			func() { s.grpc.RecheckAll(ctx) })
	}()
	if s.messaging != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.every(ctx, commandReconcileEvery, s.reconcileCommands) }()
		wg.Add(1)
		go func() { defer wg.Done(); s.publishBatches(ctx) }()
	}
	if s.cfg.Provisioner.Enabled {
		wg.Add(1)
		go func() { defer wg.Done(); s.every(ctx, s.cfg.Provisioner.Interval(), s.reconcile) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.every(ctx, min(s.cfg.SensorOfflineAfter/3, 15*time.Second), s.markOffline) }()
	go func() { defer wg.Done(); s.every(ctx, time.Hour, s.purgeSessions) }()
	if s.retention != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.every(ctx, s.cfg.historyPruneInterval(), s.pruneHistory) }()
	}
}

// every runs fn at once and then every d until ctx ends.
func (s *Server) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	if d <= 0 {
		d = time.Second
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) reconcile(ctx context.Context) {
	n, err := s.fleet.ReconcileTenants(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("tenant reconcile", "provisioned", n, logkey.Error, err, "breaker", s.provisioner.BreakerState())
	case n > 0:
		s.log.Info("tenants provisioned", "count", n)
	}
}

// commandReconcileEvery is how often pending commands are settled: a
// command whose publication timed out is published again (same message id)
// within the stream's duplicate window, so the period must stay well inside it.
const commandReconcileEvery = 5 * time.Second

func (s *Server) reconcileCommands(ctx context.Context) {
	if n, err := s.fleet.ReconcileCommands(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("command reconcile", "settled", n, logkey.Error, err)
	} else if n > 0 {
		s.log.Info("pending commands settled", "count", n)
	}
}

// batchPollEvery is how often a replica looks for batch commands nobody
// has sent (another replica's batch, or one left by a replica that
// stopped); its own batches wake it at once.
const batchPollEvery = 2 * time.Second

// publishBatches publishes queued batch commands until ctx ends.
func (s *Server) publishBatches(ctx context.Context) {
	t := time.NewTicker(batchPollEvery)
	defer t.Stop()
	for {
		if n, err := s.fleet.PublishQueued(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("publish batch commands", "published", n, logkey.Error, err)
		} else if n > 0 {
			s.log.Info("batch commands published", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.fleet.PublisherWake():
		}
	}
}

func (s *Server) markOffline(ctx context.Context) {
	if n, err := s.fleet.MarkSilentOffline(ctx, s.cfg.SensorOfflineAfter); err != nil && ctx.Err() == nil {
		s.log.Warn("mark silent sensors offline", logkey.Error, err)
	} else if n > 0 {
		s.log.Info("sensors marked offline", "count", n, "silence", s.cfg.SensorOfflineAfter.String())
	}
}

func (s *Server) purgeSessions(ctx context.Context) {
	if _, err := s.operators.PurgeExpiredSessions(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("purge expired sessions", logkey.Error, err)
	}
	if _, err := s.operators.PurgeLoginFailures(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("purge login failures", logkey.Error, err)
	}
}
