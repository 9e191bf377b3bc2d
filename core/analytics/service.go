package analytics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// Defaults of Config.
const (
	DefaultModelTimeout      = 60 * time.Second
	DefaultEnrichmentTimeout = 3 * time.Second
	DefaultStatusTTL         = 30 * time.Second
	// DefaultPingTimeout bounds the provider check behind the chat status.
	DefaultPingTimeout = 3 * time.Second
	// DefaultQueryTimeout bounds one overview's queries.
	DefaultQueryTimeout = 15 * time.Second
)

// Config wires a Service. Optional parts are nil when not configured.
type Config struct {
	Events EventStore
	// ChatEnabled is the operator's switch; the chat also needs a provider
	// and a model.
	ChatEnabled bool
	Model       string
	Provider    ModelProvider
	// Intel is nil unless threat intelligence is switched on and complete.
	Intel ThreatIntel
	// Playbooks is nil without a playbook folder.
	Playbooks PlaybookLibrary
	// IngestionEnabled says events are being written to the store; with the
	// table present, historical enrichment is offered.
	IngestionEnabled bool
	// IncludePrivate enriches private and documentation addresses too.
	IncludePrivate    bool
	ModelTimeout      time.Duration
	EnrichmentTimeout time.Duration
	PingTimeout       time.Duration
	QueryTimeout      time.Duration
	// StatusTTL is how long a provider check is trusted.
	StatusTTL time.Duration
	Logger    *slog.Logger
	Clock     func() time.Time
}

// Service implements the analytics use cases.
type Service struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	checkedAt  time.Time
	reachable  bool
	eventsSeen bool
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Events == nil {
		return nil, errors.New("analytics: an event store is required")
	}
	if cfg.ModelTimeout < 0 || cfg.EnrichmentTimeout < 0 || cfg.StatusTTL < 0 || cfg.PingTimeout < 0 || cfg.QueryTimeout < 0 {
		return nil, errors.New("analytics: negative timeout")
	}
	cfg.ModelTimeout = cmp.Or(cfg.ModelTimeout, DefaultModelTimeout)
	cfg.EnrichmentTimeout = cmp.Or(cfg.EnrichmentTimeout, DefaultEnrichmentTimeout)
	cfg.PingTimeout = cmp.Or(cfg.PingTimeout, DefaultPingTimeout)
	cfg.QueryTimeout = cmp.Or(cfg.QueryTimeout, DefaultQueryTimeout)
	cfg.StatusTTL = cmp.Or(cfg.StatusTTL, DefaultStatusTTL)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// Overview validates q and aggregates the tenant's events.
func (s *Service) Overview(ctx context.Context, q Query) (Overview, error) {
	if err := q.Validate(); err != nil {
		return Overview{}, err
	}
	q.From, q.To = q.From.UTC(), q.To.UTC()
	bucket := BucketFor(q.To.Sub(q.From))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	ov, err := s.cfg.Events.Overview(ctx, q, bucket)
	if err != nil {
		return Overview{}, fmt.Errorf("analytics overview: %w", err)
	}
	ov.Query, ov.Bucket = q, bucket
	ov.Series = fillSeries(q.From, q.To, bucket, ov.Series)
	return ov, nil
}

// Status is what the chat can do right now.
type Status struct {
	Enabled              bool
	Model                string
	ThreatIntel          bool
	HistoricalEnrichment bool
	Playbooks            bool
}

// ChatStatus reports the chat's availability. The provider check and the
// event table check are cached for StatusTTL so that the console's polling
// never hammers either.
func (s *Service) ChatStatus(ctx context.Context) Status {
	c := s.cfg
	if !s.ChatConfigured() {
		return Status{Model: c.Model}
	}
	reachable, events := s.checks(ctx)
	if !reachable {
		return Status{Model: c.Model}
	}
	return Status{
		Enabled:              true,
		Model:                c.Model,
		ThreatIntel:          c.Intel != nil,
		HistoricalEnrichment: c.IngestionEnabled && events,
		Playbooks:            c.Playbooks != nil && c.Playbooks.Available(ctx),
	}
}

// ChatConfigured reports whether the configuration turns the chat on (a
// model provider and a model), whether or not the provider answers now.
func (s *Service) ChatConfigured() bool {
	return s.cfg.ChatEnabled && s.cfg.Provider != nil && s.cfg.Model != ""
}

func (s *Service) checks(ctx context.Context) (reachable, events bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	if !s.checkedAt.IsZero() && now.Sub(s.checkedAt) < s.cfg.StatusTTL {
		return s.reachable, s.eventsSeen
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.PingTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var pingErr, eventsErr error
	wg.Go(func() { pingErr = s.cfg.Provider.Ping(pctx) })
	if s.cfg.IngestionEnabled {
		wg.Go(func() { events, eventsErr = s.cfg.Events.EventsStored(pctx) })
	}
	wg.Wait()
	if pingErr != nil {
		s.log.Warn("model provider unreachable; chat reported disabled", logkey.Error, pingErr)
	}
	if eventsErr != nil {
		s.log.Warn("checking the events table", logkey.Error, eventsErr)
	}
	if ctx.Err() != nil {
		// The caller went away: do not cache a verdict it caused.
		return pingErr == nil, events && eventsErr == nil
	}
	s.checkedAt, s.reachable, s.eventsSeen = now, pingErr == nil, events && eventsErr == nil
	return s.reachable, s.eventsSeen
}
