package app

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/logkey"
)

// statusBatcher sits between the NATS status subscription and the fleet
// service: the subscription hands messages over without waiting, and one
// loop applies them in batches (one database transaction each), which is
// what lets a replica keep up with a large fleet. When the queue is full
// messages are dropped and counted; the next heartbeat of the same sensor
// carries its state again.
type statusBatcher struct {
	in       chan fleet.StatusMessage
	apply    func(context.Context, []fleet.StatusMessage) []error
	maxBatch int
	maxWait  time.Duration
	log      *slog.Logger

	applied, stale, rejected, dropped atomic.Uint64
}

func newStatusBatcher(apply func(context.Context, []fleet.StatusMessage) []error, log *slog.Logger) *statusBatcher {
	return &statusBatcher{in: make(chan fleet.StatusMessage, 65536), apply: apply, maxBatch: 2000, maxWait: 20 * time.Millisecond, log: log}
}

// handle is the NATS handler; it never blocks.
func (b *statusBatcher) handle(_ context.Context, subject string, data []byte) {
	msg := fleet.StatusMessage{Subject: subject, Payload: append([]byte(nil), data...)}
	select {
	case b.in <- msg:
	default:
		b.dropped.Add(1)
	}
}

// run applies batches until ctx ends, then applies what is queued within a
// short grace period.
func (b *statusBatcher) run(ctx context.Context) {
	batch := make([]fleet.StatusMessage, 0, b.maxBatch)
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

func (b *statusBatcher) flushQueued() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		batch := make([]fleet.StatusMessage, 0, b.maxBatch)
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

func (b *statusBatcher) applyBatch(ctx context.Context, batch []fleet.StatusMessage) {
	for i, err := range b.apply(ctx, batch) {
		switch {
		case err == nil:
			b.applied.Add(1)
		case errors.Is(err, fleet.ErrStale):
			b.stale.Add(1)
		default:
			b.rejected.Add(1)
			// The payload is sensor-controlled text: only the subject is logged.
			b.log.Debug("status ignored", "subject", batch[i].Subject, logkey.Error, err)
		}
	}
}
