package fleet

import (
	"context"
	"sync"
	"time"
)

// CheckInBatcher sits between the sensors' health checks and CheckIns:
// the checks that arrive within maxWait of each other (or maxBatch of
// them) are authorised and recorded by one database statement, and each
// caller gets its own answer. A fleet of 10,000 sensors checking every
// 15 s makes about 670 calls a second; a read and a write each would queue
// them behind the connection pool.
type CheckInBatcher struct {
	apply    func(context.Context, []CheckIn) []error
	maxBatch int
	maxWait  time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	pending []checkInCall
	timer   *time.Timer
}

type checkInCall struct {
	in   CheckIn
	done chan error
}

// CheckInBatcherConfig shapes a CheckInBatcher; zero fields take the
// defaults.
type CheckInBatcherConfig struct {
	// Apply authorises and records a batch and answers each check-in in
	// order (Service.CheckIns).
	Apply func(context.Context, []CheckIn) []error
	// MaxBatch is the most check-ins one call of Apply takes (default
	// 500).
	MaxBatch int
	// MaxWait is how long the first of a batch waits for company (default
	// 10 ms).
	MaxWait time.Duration
	// Timeout bounds one call of Apply (default 10 s).
	Timeout time.Duration
}

// NewCheckInBatcher returns a batcher applying cfg.Apply.
func NewCheckInBatcher(cfg CheckInBatcherConfig) *CheckInBatcher {
	b := &CheckInBatcher{apply: cfg.Apply, maxBatch: cfg.MaxBatch, maxWait: cfg.MaxWait, timeout: cfg.Timeout}
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

// CheckIn queues one health check of the certificate serial and waits for
// its batch's answer (or ctx: the batch still takes it).
func (b *CheckInBatcher) CheckIn(ctx context.Context, tenantID, sensorID, serial string, c Contact) error {
	call := checkInCall{in: CheckIn{Ref: SensorRef{TenantID: tenantID, SensorID: sensorID}, Serial: serial, Contact: c}, done: make(chan error, 1)}
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
func (b *CheckInBatcher) take() []checkInCall {
	batch := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

func (b *CheckInBatcher) flushPending() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	b.flush(batch)
}

func (b *CheckInBatcher) flush(batch []checkInCall) {
	if len(batch) == 0 {
		return
	}
	in := make([]CheckIn, len(batch))
	for i, c := range batch {
		in[i] = c.in
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	for i, err := range b.apply(ctx, in) {
		batch[i].done <- err
	}
}
