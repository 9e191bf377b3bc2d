package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/nats/eventlog"
	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/adapters/promtext"
	"github.com/rxc-project/rxc/core/events"
)

// EventsConfig is the EVENTS_ group. Events need NATS messaging: without
// NATS_MESSAGING_ENABLED they stay off whatever ENABLED says, and the
// sensors' streamed events are only logged at debug level.
type EventsConfig struct {
	Enabled bool `envconfig:"ENABLED" default:"true"`
	// StreamName must match the provisioner's EVENTS_STREAM_NAME.
	StreamName string `envconfig:"STREAM_NAME" default:"RXC_EVENTS"`
	// WriterBatch is the most events loaded into PostgreSQL at once.
	WriterBatch int `envconfig:"WRITER_BATCH" default:"2000"`
	// RetentionDays is how many days of events PostgreSQL keeps (whole
	// days are dropped), 0 for ever; it applies whatever ENABLED says.
	RetentionDays int `envconfig:"RETENTION_DAYS" default:"30"`
}

// eventPipeline is the event path of one replica: gRPC streams append to
// JetStream through ingest; writer loads the shared writer consumer's
// batches into PostgreSQL.
type eventPipeline struct {
	nats   *eventlog.Client
	ingest *events.Ingest
	writer *events.Writer
}

// buildEvents wires the pipeline when events are enabled; it returns nil
// otherwise.
func (s *Server) buildEvents(log *slog.Logger) (*eventPipeline, error) {
	cfg := s.cfg
	if !cfg.Events.Enabled || !cfg.Messaging.Enabled {
		return nil, nil
	}
	if cfg.Events.WriterBatch < 0 {
		return nil, errors.New("configuration: EVENTS_WRITER_BATCH must not be negative")
	}
	client, err := eventlog.New(eventlog.Config{
		URL: cfg.Messaging.URL, Creds: s.backendCreds, Stream: cfg.Events.StreamName,
		Logger: log.With("component", "nats-events"),
	})
	if err != nil {
		return nil, fmt.Errorf("configuration: events: %w", err)
	}
	store, err := eventstore.New(eventstore.Config{Pool: s.pool})
	if err != nil {
		return nil, err
	}
	ingest, err := events.NewIngest(events.IngestConfig{Log: client})
	if err != nil {
		return nil, err
	}
	writer, err := events.NewWriter(events.WriterConfig{
		Source: client, Store: store, BatchSize: cfg.Events.WriterBatch, Logger: log.With("component", "event-writer"),
	})
	if err != nil {
		return nil, err
	}
	// Closed with the other resources, after gRPC has drained: streams
	// still running at shutdown need the connection for their acks.
	s.close.Add(client.Close)
	return &eventPipeline{nats: client, ingest: ingest, writer: writer}, nil
}

// grpcIngest is what the gRPC server takes events with; nil keeps its
// logging sink.
func (p *eventPipeline) grpcIngest() grpcmtls.EventIngest {
	if p == nil {
		return nil
	}
	return p.ingest
}

// start connects to NATS (for as long as the server lives, see
// buildEvents) and runs the writer until ctx ends.
func (p *eventPipeline) start(ctx context.Context) {
	p.nats.Start(context.WithoutCancel(ctx))
	p.writer.Run(ctx)
}

func (p *eventPipeline) ready() bool { return p == nil || p.nats.Ready() }

// check is the readiness round trip of the event connection.
func (p *eventPipeline) check(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.nats.Check(ctx)
}

// metrics writes the pipeline's counters.
func (p *eventPipeline) metrics(w *promtext.Writer) {
	if p == nil {
		return
	}
	in, wr := p.ingest.Stats(), p.writer.Stats()
	w.Counts("rxc_controlplane_events_received_total", promtext.Counter, "Sensor events by outcome at ingest: accepted (stored in the event stream, resends included), duplicate (a resend the stream already held), refused (the stream was full or did not acknowledge; the sensor resends), invalid.", "outcome",
		promtext.Count{Value: "accepted", N: in.Accepted}, promtext.Count{Value: "duplicate", N: in.Duplicates},
		promtext.Count{Value: "refused", N: in.Refused}, promtext.Count{Value: "invalid", N: in.Invalid})
	w.Single("rxc_controlplane_events_written_total", promtext.Counter, "Events inserted into PostgreSQL.", int64(wr.Written))
	w.Single("rxc_controlplane_events_duplicates_skipped_total", promtext.Counter, "Redelivered events PostgreSQL already held.", int64(wr.Duplicates))
	w.Single("rxc_controlplane_events_revoked_skipped_total", promtext.Counter, "Events received at or after their sensor's revocation, never stored.", int64(wr.Revoked))
	w.Single("rxc_controlplane_events_rejected_total", promtext.Counter, "Events PostgreSQL refused (skipped, logged by id).", int64(wr.Rejected))
	w.Single("rxc_controlplane_event_batches_failed_total", promtext.Counter, "Writer batches handed back for redelivery.", int64(wr.Failures))
}
