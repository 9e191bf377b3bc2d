// Package retention bounds the control plane's history: a pass, run by one
// replica at a time, deletes what is older than the operator's retention
// and no longer live: sensor events by whole days, audit entries, finished
// commands and command batches, ended sensor tokens, claim codes and
// operators' API tokens. What
// counts as finished or ended is the owning package's rule (fleet.
// HistoryStore, audit.Pruner, events.Pruner); this package decides when and
// how much, deletes in bounded steps, and counts what it removed.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Day is the unit retentions are set in.
const Day = 24 * time.Hour

// Defaults: events as long as the gRPC edge accepts them (30 days), the
// audit trail a year and a month (a yearly review can always see a full
// year), commands, batches, tokens and claim codes a quarter.
const (
	DefaultEvents      = 30 * Day
	DefaultAudit       = 400 * Day
	DefaultCommands    = 90 * Day
	DefaultCredentials = 90 * Day
	// MaxRetention bounds a retention (100 years); longer is "keep
	// forever", which 0 says.
	MaxRetention = 36500 * Day
	// DefaultBatch is how many rows (or command batches, DefaultBatch/100)
	// one delete statement removes.
	DefaultBatch = 1000
	// Lock is the Locker name that keeps the pass to one replica at a time.
	Lock = "rxc-history-retention"
)

// Policy is how long each history is kept. Zero keeps it forever.
type Policy struct {
	Events      time.Duration
	Audit       time.Duration
	Commands    time.Duration
	Credentials time.Duration
}

// DefaultPolicy is the policy of the defaults above.
func DefaultPolicy() Policy {
	return Policy{Events: DefaultEvents, Audit: DefaultAudit, Commands: DefaultCommands, Credentials: DefaultCredentials}
}

// ErrInvalidPolicy is wrapped by Validate's errors.
var ErrInvalidPolicy = errors.New("invalid retention")

// Validate checks each retention is 0 (forever) or a whole number of days
// from 1 to 36,500.
func (p Policy) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"events", p.Events}, {"audit", p.Audit}, {"commands", p.Commands}, {"credentials", p.Credentials}} {
		if err := ValidateDays(f.d); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// ValidateDays checks one retention.
func ValidateDays(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if d < Day || d > MaxRetention || d%Day != 0 {
		return fmt.Errorf("%w: %s is not 0 (keep forever) or a whole number of days from 1 to %d", ErrInvalidPolicy, d, MaxRetention/Day)
	}
	return nil
}

// Locker is a cluster-wide mutual exclusion (fleet.Locker).
type Locker = fleet.Locker

// Config wires a Service. Fleet, Audit, Events and Locker are required:
// the control plane has all of these histories whatever is enabled.
type Config struct {
	Policy Policy
	Fleet  fleet.HistoryStore
	Audit  audit.Pruner
	Events events.Pruner
	// APITokens prunes operators' API tokens with the credentials.
	APITokens operators.APITokenPruner
	Locker    Locker
	// Batch is the most rows one statement deletes (default DefaultBatch).
	Batch  int
	Logger *slog.Logger
	Clock  func() time.Time
}

// Report is what one pass removed.
type Report struct {
	// Skipped: another replica held the lock; this one removed nothing.
	Skipped       bool
	EventDays     int
	Audit         int
	Commands      int
	Batches       int
	BatchCommands int
	Tokens        int
	ClaimCodes    int
	APITokens     int
}

// Total is how many rows (and event days) the pass removed.
func (r Report) Total() int {
	return r.EventDays + r.Audit + r.Commands + r.Batches + r.BatchCommands + r.Tokens + r.ClaimCodes + r.APITokens
}

func (r *Report) add(o Report) {
	r.EventDays += o.EventDays
	r.Audit += o.Audit
	r.Commands += o.Commands
	r.Batches += o.Batches
	r.BatchCommands += o.BatchCommands
	r.Tokens += o.Tokens
	r.ClaimCodes += o.ClaimCodes
	r.APITokens += o.APITokens
}

// Stats are a Service's counters since it started.
type Stats struct {
	Removed Report // summed over passes
	Passes  uint64 // passes that held the lock and finished
	Skipped uint64 // passes another replica's held lock skipped
	Failed  uint64 // passes that stopped on an error
}

// Service runs retention passes.
type Service struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	stats Stats
}

// New returns a Service; the policy must be valid.
func New(cfg Config) (*Service, error) {
	if cfg.Fleet == nil || cfg.Audit == nil || cfg.Events == nil || cfg.APITokens == nil || cfg.Locker == nil {
		return nil, errors.New("retention: fleet, audit, event and API token stores and a locker are required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	s := &Service{cfg: cfg, log: cfg.Logger, now: cfg.Clock}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Run makes one pass when no other replica is making one: each history
// with a retention is pruned of what is older than now minus its
// retention, in statements of at most Batch rows, until nothing of it is
// left to remove or ctx ends. A failing history does not stop the others;
// the errors are returned together. What a pass removed stays removed if
// it is interrupted; the next pass goes on from there.
func (s *Service) Run(ctx context.Context) (Report, error) {
	unlock, ok, err := s.cfg.Locker.TryLock(ctx, Lock)
	if err != nil {
		s.count(Report{}, false, err)
		return Report{}, fmt.Errorf("retention: lock: %w", err)
	}
	if !ok {
		s.count(Report{Skipped: true}, true, nil)
		return Report{Skipped: true}, nil
	}
	defer unlock()
	now := s.now()
	p, n := s.cfg.Policy, s.cfg.Batch
	var (
		rep  Report
		errs []error
	)
	step := func(what string, d time.Duration, fn func(before time.Time) error) {
		if d == 0 || ctx.Err() != nil {
			return
		}
		if err := fn(now.Add(-d)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	step("events", p.Events, func(before time.Time) error {
		days, err := s.cfg.Events.DropDaysBefore(ctx, before)
		rep.EventDays += days
		return err
	})
	step("audit", p.Audit, func(before time.Time) error {
		return drain(ctx, n, &rep.Audit, func() (int, error) { return s.cfg.Audit.PruneAudit(ctx, before, n) })
	})
	step("commands", p.Commands, func(before time.Time) error {
		if err := drain(ctx, n, &rep.Commands, func() (int, error) { return s.cfg.Fleet.PruneCommands(ctx, before, n) }); err != nil {
			return err
		}
		nb := max(n/100, 1)
		return drain(ctx, nb, &rep.Batches, func() (int, error) {
			b, c, err := s.cfg.Fleet.PruneBatches(ctx, before, nb)
			rep.BatchCommands += c
			return b, err
		})
	})
	step("credentials", p.Credentials, func(before time.Time) error {
		if err := drain(ctx, n, &rep.Tokens, func() (int, error) { return s.cfg.Fleet.PruneTokens(ctx, before, n) }); err != nil {
			return err
		}
		if err := drain(ctx, n, &rep.ClaimCodes, func() (int, error) { return s.cfg.Fleet.PruneClaimCodes(ctx, before, n) }); err != nil {
			return err
		}
		return drain(ctx, n, &rep.APITokens, func() (int, error) { return s.cfg.APITokens.PruneAPITokens(ctx, before, n) })
	})
	err = errors.Join(errs...)
	if ctx.Err() != nil && err == nil {
		err = ctx.Err()
	}
	s.count(rep, false, err)
	if rep.Total() > 0 || err != nil {
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "history retention pass", "event_days", rep.EventDays, "audit_entries", rep.Audit,
			"commands", rep.Commands, "batches", rep.Batches, "batch_commands", rep.BatchCommands,
			"sensor_tokens", rep.Tokens, "claim_codes", rep.ClaimCodes, "api_tokens", rep.APITokens, logkey.Error, errString(err))
	}
	return rep, err
}

// drain calls fn while it removes its full limit and ctx lasts, adding
// what it removed to total.
func drain(ctx context.Context, limit int, total *int, fn func() (int, error)) error {
	for {
		k, err := fn()
		*total += k
		if err != nil || k < limit {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (s *Service) count(r Report, skipped bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Removed.add(r)
	switch {
	case skipped:
		s.stats.Skipped++
	case err != nil:
		s.stats.Failed++
	default:
		s.stats.Passes++
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
