package fleet

import (
	"context"
	"sync"
	"time"
)

// SeenBatcher sits between the sensors' health checks and SensorsSeen:
// the signs of life that arrive within maxWait of each other (or maxBatch
// of them) are recorded in one database transaction, and each caller gets
// its own answer. A fleet of 10,000 sensors checking every 15 s makes
// about 670 calls a second; one transaction each would queue them behind
// the connection pool.
type SeenBatcher struct {
	apply    func(context.Context, []Seen) []error
	maxBatch int
	maxWait  time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	pending []seenCall
	timer   *time.Timer
}

type seenCall struct {
	seen Seen
	done chan error
}

// SeenBatcherConfig shapes a SeenBatcher; zero fields take the defaults.
type SeenBatcherConfig struct {
	// Apply records a batch and answers each sign of life in order
	// (Service.SensorsSeen).
	Apply func(context.Context, []Seen) []error
	// MaxBatch is the most signs of life one call of Apply records
	// (default 500).
	MaxBatch int
	// MaxWait is how long the first of a batch waits for company (default
	// 10 ms).
	MaxWait time.Duration
	// Timeout bounds one call of Apply (default 10 s).
	Timeout time.Duration
}

// NewSeenBatcher returns a batcher applying cfg.Apply.
func NewSeenBatcher(cfg SeenBatcherConfig) *SeenBatcher {
	b := &SeenBatcher{apply: cfg.Apply, maxBatch: cfg.MaxBatch, maxWait: cfg.MaxWait, timeout: cfg.Timeout}
	if b.maxBatch <= 0 {
		b.maxBatch = 500
	}
	if b.maxWait <= 0 {
		b.maxWait = 10 * time.Millisecond
	}
	if b.timeout <= 0 {
		b.timeout = 10 * time.Second
	}
	return b
}

// SensorSeen queues one sign of life and waits for its batch's answer (or
// ctx: the batch still records it).
func (b *SeenBatcher) SensorSeen(ctx context.Context, tenantID, sensorID string, c Contact) error {
	call := seenCall{seen: Seen{Ref: SensorRef{TenantID: tenantID, SensorID: sensorID}, Contact: c}, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, call)
	switch {
	case len(b.pending) >= b.maxBatch:
		batch := b.take()
		go b.flush(batch)
	case len(b.pending) == 1:
		b.timer = time.AfterFunc(b.maxWait, b.flushPending)
	}
	b.mu.Unlock()
	select {
	case err := <-call.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take empties the queue; b.mu is held.
func (b *SeenBatcher) take() []seenCall {
	batch := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

func (b *SeenBatcher) flushPending() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	b.flush(batch)
}

func (b *SeenBatcher) flush(batch []seenCall) {
	if len(batch) == 0 {
		return
	}
	seen := make([]Seen, len(batch))
	for i, c := range batch {
		seen[i] = c.seen
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	for i, err := range b.apply(ctx, seen) {
		batch[i].done <- err
	}
}
