package app

import (
	"context"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/adapters/promtext"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/retention"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// defaultHistoryPruneInterval is HISTORY_PRUNE_INTERVAL's default, taken
// for 0 too.
const defaultHistoryPruneInterval = time.Hour

// retentionPolicy reads the retention settings, refusing what is not 0
// (keep forever) or a number of days from 1 to 36,500.
func (c ServeConfig) retentionPolicy() (retention.Policy, error) {
	var p retention.Policy
	for _, f := range []struct {
		name string
		days int
		into *time.Duration
	}{
		{"EVENTS_RETENTION_DAYS", c.Events.RetentionDays, &p.Events},
		{"AUDIT_RETENTION_DAYS", c.AuditRetentionDays, &p.Audit},
		{"COMMAND_HISTORY_RETENTION_DAYS", c.CommandHistoryRetentionDays, &p.Commands},
		{"CREDENTIAL_HISTORY_RETENTION_DAYS", c.CredentialHistoryRetentionDays, &p.Credentials},
	} {
		if f.days < 0 || time.Duration(f.days)*retention.Day > retention.MaxRetention {
			return p, fmt.Errorf("configuration: %s=%d: must be 0 (keep forever) or a number of days from 1 to %d", f.name, f.days, retention.MaxRetention/retention.Day)
		}
		*f.into = time.Duration(f.days) * retention.Day
	}
	if c.HistoryPruneInterval < 0 {
		return p, fmt.Errorf("configuration: HISTORY_PRUNE_INTERVAL=%s: must not be negative", c.HistoryPruneInterval)
	}
	return p, p.Validate()
}

// buildRetention builds the retention pass on the store, or nil when every
// history is kept forever.
func (s *Server) buildRetention() error {
	p, err := s.cfg.retentionPolicy()
	if err != nil {
		return err
	}
	if p == (retention.Policy{}) {
		s.log.Warn("history retention off: every *_RETENTION_DAYS is 0, PostgreSQL grows without bound")
		return nil
	}
	if p.Events > 0 && p.Events < events.MaxAge {
		s.log.Warn("EVENTS_RETENTION_DAYS is shorter than the 30 days of events the gRPC edge accepts: a late event recreates its day, dropped again by the next pass",
			"days", s.cfg.Events.RetentionDays)
	}
	evs, err := eventstore.New(eventstore.Config{Pool: s.pool})
	if err != nil {
		return err
	}
	s.retention, err = retention.New(retention.Config{
		Policy: p, Fleet: s.store, Audit: s.store, Events: evs, APITokens: s.store, Locker: s.store,
		Logger: s.log.With("component", "retention"),
	})
	return err
}

// historyPruneInterval is HISTORY_PRUNE_INTERVAL, its default for 0.
func (c ServeConfig) historyPruneInterval() time.Duration {
	if c.HistoryPruneInterval <= 0 {
		return defaultHistoryPruneInterval
	}
	return c.HistoryPruneInterval
}

// pruneHistory makes one retention pass unless another replica is making
// one; the pass logs what it removed.
func (s *Server) pruneHistory(ctx context.Context) {
	if _, err := s.retention.Run(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("history retention pass", logkey.Error, err)
	}
}

// retentionMetrics writes the pass's counters.
func (s *Server) retentionMetrics(w *promtext.Writer) {
	if s.retention == nil {
		return
	}
	st := s.retention.Stats()
	r := st.Removed
	w.Counts("rxc_controlplane_history_pruned_total", promtext.Counter, "History removed by the retention pass (this replica's passes), by history: event_days (whole days of events), audit_entries, commands, batches, batch_commands, sensor_tokens, claim_codes, api_tokens.", "history",
		promtext.Count{Value: "event_days", N: uint64(r.EventDays)}, promtext.Count{Value: "audit_entries", N: uint64(r.Audit)},
		promtext.Count{Value: "commands", N: uint64(r.Commands)}, promtext.Count{Value: "batches", N: uint64(r.Batches)},
		promtext.Count{Value: "batch_commands", N: uint64(r.BatchCommands)}, promtext.Count{Value: "sensor_tokens", N: uint64(r.Tokens)},
		promtext.Count{Value: "claim_codes", N: uint64(r.ClaimCodes)}, promtext.Count{Value: "api_tokens", N: uint64(r.APITokens)})
	w.Counts("rxc_controlplane_history_prune_passes_total", promtext.Counter, "Retention passes by outcome: done, skipped (another replica was making one), failed.", "outcome",
		promtext.Count{Value: "done", N: st.Passes}, promtext.Count{Value: "skipped", N: st.Skipped}, promtext.Count{Value: "failed", N: st.Failed})
}
