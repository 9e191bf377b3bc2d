package events

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Source hands out batches of logged events to writers; several writers may
// share it, each batch goes to one.
type Source interface {
	// Fetch returns up to max events, waiting a while for the first one; an
	// empty batch means none arrived.
	Fetch(ctx context.Context, max int) (Batch, error)
}

// Batch is fetched events awaiting their outcome. Events not acknowledged
// in time are delivered again, to this writer or another.
type Batch interface {
	Events() []Event
	// Ack marks the batch done.
	Ack(ctx context.Context) error
	// Nak asks for the batch to be delivered again soon.
	Nak(ctx context.Context) error
}

// Store keeps events for queries.
type Store interface {
	// Write stores evs in one transaction and says what became of them:
	// an event the store already holds (same tenant, sensor, id and time)
	// is skipped, and so is one received at or after its sensor's
	// revocation (Revoked). An error wrapping ErrInvalidEvent means the
	// store cannot hold some event of evs at all.
	Write(ctx context.Context, evs []Event) (WriteResult, error)
}

// WriteResult counts a Write's events that were stored, and those skipped
// because their sensor was revoked when they arrived; the rest were
// duplicates.
type WriteResult struct {
	Inserted, Revoked int
}

// WriterConfig configures NewWriter.
type WriterConfig struct {
	Source Source
	Store  Store
	// BatchSize is the most events fetched at once; default 2000.
	BatchSize int
	// RetryDelay is the pause after a failed batch; default 1s.
	RetryDelay time.Duration
	Logger     *slog.Logger
}

// WriterStats are cumulative counters.
type WriterStats struct {
	Written, Duplicates, Batches, Failures uint64
	// Rejected events were refused by the store and skipped.
	Rejected uint64
	// Revoked events arrived after their sensor's revocation and were
	// skipped.
	Revoked uint64
}

// ackTimeout bounds acknowledging one batch.
const ackTimeout = 10 * time.Second

// Writer moves events from the log into the store.
type Writer struct {
	src   Source
	store Store
	batch int
	retry time.Duration
	log   *slog.Logger

	written, duplicates, batches, failures, rejected, revoked atomic.Uint64
}

// NewWriter checks cfg.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Source == nil || cfg.Store == nil {
		return nil, errors.New("events: writer needs a Source and a Store")
	}
	if cfg.BatchSize < 0 || cfg.RetryDelay < 0 {
		return nil, errors.New("events: negative writer batch size or retry delay")
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 2000)
	cfg.RetryDelay = cmp.Or(cfg.RetryDelay, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{src: cfg.Source, store: cfg.Store, batch: cfg.BatchSize, retry: cfg.RetryDelay, log: cfg.Logger}, nil
}

// Stats returns the counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Written: w.written.Load(), Duplicates: w.duplicates.Load(), Batches: w.batches.Load(), Failures: w.failures.Load(), Rejected: w.rejected.Load(), Revoked: w.revoked.Load()}
}

// Run writes batches until ctx ends. The next batch is fetched while the
// current one is written, so the store is not left idle during a fetch.
// Batches fetched but not written when ctx ends are handed back at once.
func (w *Writer) Run(ctx context.Context) {
	type fetched struct {
		b   Batch
		err error
	}
	next := make(chan fetched, 1)
	go func() {
		defer close(next)
		for failures := 0; ctx.Err() == nil; {
			b, err := w.src.Fetch(ctx, w.batch)
			next <- fetched{b, err}
			if err == nil {
				failures = 0
				continue
			}
			// A log that stays away (no stream yet, NATS down) is retried
			// ever more slowly, up to every 30 s.
			backoff.Sleep(ctx, backoff.Policy{Min: w.retry, Max: max(w.retry, 30*time.Second)}.Delay(failures))
			failures++
		}
	}()
	for f := range next {
		if f.err == nil && ctx.Err() != nil {
			w.handBack(ctx, f.b)
			continue
		}
		err := f.err
		if err == nil {
			_, err = w.write(ctx, f.b)
		}
		if err != nil && ctx.Err() == nil {
			w.failures.Add(1)
			w.log.Warn("event batch failed; retrying", logkey.Error, err)
			if f.err == nil {
				backoff.Sleep(ctx, w.retry)
			}
		}
	}
}

// Step fetches one batch, stores it and acknowledges it, returning how many
// events it held.
func (w *Writer) Step(ctx context.Context) (int, error) {
	b, err := w.src.Fetch(ctx, w.batch)
	if err != nil {
		return 0, err
	}
	return w.write(ctx, b)
}

// write stores b and acknowledges it. A batch the store did not take is
// handed back to the log at once (Nak), so another writer can take it.
func (w *Writer) write(ctx context.Context, b Batch) (int, error) {
	evs := b.Events()
	if len(evs) == 0 {
		// An idle fetch: nothing was written, so nothing failed. The ack
		// (for messages the source dropped as unreadable) is bounded like
		// every other one.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		return 0, b.Ack(actx)
	}
	for i := range evs {
		evs[i].CVEs = ExtractCVEs(alertSignature(evs[i].Alert), string(evs[i].RawJSON))
	}
	res, err := w.store.Write(ctx, evs)
	rejected := 0
	if errors.Is(err, ErrInvalidEvent) {
		res, rejected, err = w.writeEach(ctx, evs)
	}
	if err != nil {
		// The batch may be committed already (a lost reply): a redelivery
		// is harmless because the store skips rows it holds.
		w.handBack(ctx, b)
		return len(evs), err
	}
	w.batches.Add(1)
	w.written.Add(uint64(res.Inserted))
	w.revoked.Add(uint64(res.Revoked))
	w.duplicates.Add(uint64(len(evs) - res.Inserted - res.Revoked - rejected))
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if err := b.Ack(actx); err != nil {
		// Stored but not acknowledged: it comes back and is skipped then.
		return len(evs), err
	}
	return len(evs), nil
}

// writeEach stores a batch the store refused as a whole one event at a
// time and skips the events it refuses, so one bad event cannot stall the
// log behind it. Only ids are logged, never contents.
func (w *Writer) writeEach(ctx context.Context, evs []Event) (res WriteResult, rejected int, err error) {
	for i := range evs {
		n, err := w.store.Write(ctx, evs[i:i+1])
		switch {
		case errors.Is(err, ErrInvalidEvent):
			rejected++
			w.rejected.Add(1)
			w.log.Warn("event refused by the store; skipped", logkey.Tenant, evs[i].TenantID, logkey.Sensor, evs[i].SensorID, "event_id", evs[i].ID, logkey.Error, err)
		case err != nil:
			return res, rejected, err
		}
		res.Inserted += n.Inserted
		res.Revoked += n.Revoked
	}
	return res, rejected, nil
}

func (w *Writer) handBack(ctx context.Context, b Batch) {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := b.Nak(nctx); err != nil {
		w.log.Warn("nak of an unwritten event batch", logkey.Error, err)
	}
}

func alertSignature(a *Alert) string {
	if a == nil {
		return ""
	}
	return a.Signature
}
