package events

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Log is the durable event log the ingest path appends to.
type Log interface {
	// Appender starts appending one sensor's events.
	Appender(tenantID, sensorID string) Appender
}

// Appender appends one sensor's events without waiting for each
// acknowledgement. It is used by one goroutine at a time.
type Appender interface {
	// Append queues ev. It blocks while the window of unacknowledged events
	// is full, and returns an error wrapping ErrLogFull or ErrUnavailable
	// once an earlier append has failed, so the caller stops sending.
	Append(ctx context.Context, ev Event) error
	// Close waits for the outstanding acknowledgements and reports them.
	Close(ctx context.Context) (AppendResult, error)
}

// AppendResult counts an Appender's events by outcome.
type AppendResult struct {
	// Acked events are stored in the log; Duplicates among them were
	// already there (a resend within the duplicate window).
	Acked, Duplicates uint64
	// Failed events were refused or not acknowledged; the sensor resends.
	Failed uint64
}

// IngestConfig configures NewIngest.
type IngestConfig struct {
	Log Log
	// Now defaults to time.Now.
	Now func() time.Time
}

// IngestStats are cumulative counters.
type IngestStats struct {
	Accepted, Duplicates, Refused, Invalid uint64
}

// Ingest takes sensors' events into the log.
type Ingest struct {
	log Log
	now func() time.Time

	accepted, duplicates, refused, invalid atomic.Uint64
}

// NewIngest checks cfg.
func NewIngest(cfg IngestConfig) (*Ingest, error) {
	if cfg.Log == nil {
		return nil, errors.New("events: ingest needs a Log")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ingest{log: cfg.Log, now: cfg.Now}, nil
}

// Stats returns the counters.
func (in *Ingest) Stats() IngestStats {
	return IngestStats{Accepted: in.accepted.Load(), Duplicates: in.duplicates.Load(), Refused: in.refused.Load(), Invalid: in.invalid.Load()}
}

// Open starts a session for one sensor's stream. tenantID and sensorID come
// from the sensor's verified certificate.
func (in *Ingest) Open(tenantID, sensorID string) *Session {
	return &Session{in: in, app: in.log.Appender(tenantID, sensorID), tenantID: tenantID, sensorID: sensorID}
}

// Session is one sensor stream's ingest; one goroutine uses it.
type Session struct {
	in                 *Ingest
	app                Appender
	tenantID, sensorID string
	closed             bool
}

// Add validates ev, stamps it with the session's tenant and sensor and the
// time it was received, and appends it. The event's own time is required:
// with its ID it is the key that keeps a resent event from being stored
// twice, which a receipt time could not do.
func (s *Session) Add(ctx context.Context, ev Event) error {
	now := s.in.now()
	ev.ReceivedAt = now
	if err := Validate(ev, now); err != nil {
		s.in.invalid.Add(1)
		return err
	}
	ev.TenantID, ev.SensorID = s.tenantID, s.sensorID
	if err := s.app.Append(ctx, ev); err != nil {
		return fmt.Errorf("events: append %s: %w", ev.ID, err)
	}
	return nil
}

// Close waits for the log's acknowledgements and returns how many events
// it stored. The error wraps ErrLogFull or ErrUnavailable when some were
// not stored; the sensor should then resend what it sent since its last
// success (stored ones are de-duplicated).
func (s *Session) Close(ctx context.Context) (uint64, error) {
	if s.closed {
		return 0, errors.New("events: session closed twice")
	}
	s.closed = true
	res, err := s.app.Close(ctx)
	s.in.accepted.Add(res.Acked)
	s.in.duplicates.Add(res.Duplicates)
	s.in.refused.Add(res.Failed)
	if err != nil {
		return res.Acked, fmt.Errorf("events: %d of the stream's events not stored: %w", res.Failed, err)
	}
	return res.Acked, nil
}
