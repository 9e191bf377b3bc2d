package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Fetch pulls up to max events from the writer consumer, waiting up to
// FetchWait to fill the batch. Messages that are not readable events are
// terminated (never delivered again) and left out.
func (c *Client) Fetch(ctx context.Context, max int) (events.Batch, error) {
	cons, err := c.consumer(ctx)
	if err != nil {
		return nil, err
	}
	// Not bound to ctx: a fetch cut short would strand delivered messages
	// until the ack wait; it ends within FetchWait anyway.
	fb, err := cons.Fetch(max, jetstream.FetchMaxWait(c.cfg.FetchWait))
	if err != nil {
		return nil, fmt.Errorf("eventlog: fetch: %w: %w", events.ErrUnavailable, err)
	}
	b := &batch{c: c}
	for m := range fb.Messages() {
		ev, err := c.read(m)
		if err != nil {
			// Never log the payload: only where it came from.
			c.log.Warn("unreadable event message terminated", "subject", m.Subject(), logkey.Error, err)
			_ = m.TermWithReason("unreadable event")
			continue
		}
		b.msgs = append(b.msgs, m)
		b.evs = append(b.evs, ev)
	}
	if err := fb.Error(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		if len(b.msgs) == 0 {
			return nil, fmt.Errorf("eventlog: fetch: %w: %w", events.ErrUnavailable, err)
		}
		c.log.Debug("fetch ended early", logkey.Error, err, "messages", len(b.msgs))
	}
	return b, nil
}

func (c *Client) read(m jetstream.Msg) (events.Event, error) {
	tenantID, sensorID, ok := topology.ParseEventSubject(m.Subject())
	if !ok || ids.Validate(tenantID) != nil || ids.Validate(sensorID) != nil {
		return events.Event{}, fmt.Errorf("%w: subject is not a sensor's event subject", events.ErrInvalidEvent)
	}
	ev, err := decode(m.Data())
	if err != nil {
		return events.Event{}, err
	}
	md, err := m.Metadata()
	if err != nil {
		return events.Event{}, fmt.Errorf("%w: %v", events.ErrInvalidEvent, err)
	}
	ev.TenantID, ev.SensorID, ev.ReceivedAt = tenantID, sensorID, md.Timestamp
	// The ingest path validated the event; it is not checked again here
	// (parsing raw_json twice costs the writer a good share of its CPU). Only the
	// backend user can publish here, and should something the store cannot
	// hold get in anyway, the writer skips it (events.Writer).
	if ev.ID == "" || ev.Time.IsZero() {
		return events.Event{}, fmt.Errorf("%w: no event_id or time", events.ErrInvalidEvent)
	}
	return ev, nil
}

// consumer binds the writer consumer on the current connection.
func (c *Client) consumer(ctx context.Context) (jetstream.Consumer, error) {
	c.mu.Lock()
	js, cons := c.js, c.cons
	c.mu.Unlock()
	if js == nil {
		return nil, fmt.Errorf("eventlog: %w: not connected", events.ErrUnavailable)
	}
	if cons != nil {
		return cons, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, c.cfg.Stream, topology.EventWriter)
	if err != nil {
		return nil, fmt.Errorf("eventlog: consumer %s on %s: %w: %w", topology.EventWriter, c.cfg.Stream, events.ErrUnavailable, err)
	}
	c.mu.Lock()
	if c.js == js {
		c.cons = cons
	}
	c.mu.Unlock()
	return cons, nil
}

type batch struct {
	c    *Client
	msgs []jetstream.Msg
	evs  []events.Event
}

func (b *batch) Events() []events.Event { return b.evs }

// Ack acknowledges every message and flushes, so the acks left this
// process when it returns; an ack lost later only causes a redelivery.
func (b *batch) Ack(ctx context.Context) error {
	return b.each(ctx, jetstream.Msg.Ack)
}

// Nak hands every message back for redelivery.
func (b *batch) Nak(ctx context.Context) error {
	return b.each(ctx, jetstream.Msg.Nak)
}

func (b *batch) each(ctx context.Context, fn func(jetstream.Msg) error) error {
	if len(b.msgs) == 0 {
		// An idle fetch: nothing to answer, nothing to flush.
		return nil
	}
	var first error
	for _, m := range b.msgs {
		if err := fn(m); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("eventlog: %w: %w", events.ErrUnavailable, first)
	}
	nc, _ := b.c.current()
	if nc == nil {
		return fmt.Errorf("eventlog: %w: not connected", events.ErrUnavailable)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("eventlog: flush: %w: %w", events.ErrUnavailable, err)
	}
	return nil
}
