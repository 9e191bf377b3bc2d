package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// Defaults of a StatusBatcher.
const (
	DefaultStatusQueue    = 65536
	DefaultStatusBatch    = 2000
	DefaultStatusMaxWait  = 20 * time.Millisecond
	statusFlushAtShutdown = 2 * time.Second
)

// StatusBatcherConfig configures a StatusBatcher; zero values take the
// defaults.
type StatusBatcherConfig struct {
	// Apply applies a batch and returns one error per message, as
	// Service.HandleStatusBatch does. Required.
	Apply func(context.Context, []StatusUpdate) []error
	// Queue is how many messages wait at most; more are dropped.
	Queue int
	// MaxBatch is the most messages applied at once.
	MaxBatch int
	// MaxWait is how long a batch waits to fill after its first message.
	MaxWait time.Duration
	Logger  *slog.Logger
}

// StatusBatcher sits between the status subscription and the fleet
// service: the subscription hands messages over without waiting, and one
// loop applies them in batches (one database transaction each), which is
// what lets a replica keep up with a large fleet. When the queue is full
// messages are dropped and counted; the next heartbeat of the same sensor
// carries its state again, since a report holds the whole state.
type StatusBatcher struct {
	in       chan StatusUpdate
	apply    func(context.Context, []StatusUpdate) []error
	maxBatch int
	maxWait  time.Duration
	log      *slog.Logger

	applied, stale, rejected, dropped atomic.Uint64
}

// StatusStats counts status messages by outcome since the batcher began.
type StatusStats struct {
	// Applied changed the sensor's state or results.
	Applied uint64
	// Stale were older than the sensor's last applied report.
	Stale uint64
	// Rejected were invalid, of an unknown or revoked sensor, or failed to
	// be stored.
	Rejected uint64
	// Dropped found the queue full.
	Dropped uint64
}

// NewStatusBatcher checks cfg; Run starts applying.
func NewStatusBatcher(cfg StatusBatcherConfig) (*StatusBatcher, error) {
	if cfg.Apply == nil {
		return nil, errors.New("fleet: status batcher: Apply is required")
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultStatusQueue
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultStatusBatch
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultStatusMaxWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &StatusBatcher{
		in: make(chan StatusUpdate, cfg.Queue), apply: cfg.Apply,
		maxBatch: cfg.MaxBatch, maxWait: cfg.MaxWait, log: cfg.Logger,
	}, nil
}

// Handle queues one status update; it never blocks. The caller hands the
// update over: it must not change its Results afterwards.
func (b *StatusBatcher) Handle(_ context.Context, m StatusUpdate) {
	select {
	case b.in <- m:
	default:
		b.dropped.Add(1)
	}
}

// Stats returns the counts so far.
func (b *StatusBatcher) Stats() StatusStats {
	return StatusStats{Applied: b.applied.Load(), Stale: b.stale.Load(), Rejected: b.rejected.Load(), Dropped: b.dropped.Load()}
}

// Run applies batches until ctx ends, then applies what is queued within a
// short grace period.
func (b *StatusBatcher) Run(ctx context.Context) {
	batch := make([]StatusUpdate, 0, b.maxBatch)
	for {
		select {
		case <-ctx.Done():
			b.flushQueued()
			return
		case m := <-b.in:
			batch = append(batch[:0], m)
		}
		timer := time.NewTimer(b.maxWait)
	collect:
		for len(batch) < b.maxBatch {
			select {
			case m := <-b.in:
				batch = append(batch, m)
			case <-timer.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		timer.Stop()
		b.applyBatch(context.WithoutCancel(ctx), batch)
	}
}

func (b *StatusBatcher) flushQueued() {
	ctx, cancel := context.WithTimeout(context.Background(), statusFlushAtShutdown)
	defer cancel()
	for {
		batch := make([]StatusUpdate, 0, b.maxBatch)
		for len(batch) < b.maxBatch {
			select {
			case m := <-b.in:
				batch = append(batch, m)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 || ctx.Err() != nil {
			return
		}
		b.applyBatch(ctx, batch)
	}
}

func (b *StatusBatcher) applyBatch(ctx context.Context, batch []StatusUpdate) {
	for i, err := range b.apply(ctx, batch) {
		switch {
		case err == nil:
			b.applied.Add(1)
		case errors.Is(err, ErrStale):
			b.stale.Add(1)
		default:
			b.rejected.Add(1)
			// The report is sensor-controlled text: only the ids are logged.
			b.log.Debug("status ignored", logkey.Tenant, batch[i].Sensor.TenantID, logkey.Sensor, batch[i].Sensor.SensorID, logkey.Error, err)
		}
	}
}
