package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/topology"
)

// JetStream error codes that mean the stream or the account is full.
var fullCodes = map[jetstream.ErrorCode]bool{
	10077: true, // stream store failed: maximum bytes or messages
	10047: true, // insufficient storage resources
	10023: true, // insufficient resources
	10002: true, // account resources exceeded
}

// classify maps a publish failure to events.ErrLogFull or ErrUnavailable.
func classify(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && fullCodes[apiErr.ErrorCode] {
		return fmt.Errorf("%w: %s", events.ErrLogFull, apiErr.Description)
	}
	return fmt.Errorf("%w: %w", events.ErrUnavailable, err)
}

// Appender starts appending one sensor's events.
func (c *Client) Appender(tenantID, sensorID string) events.Appender {
	a := &appender{
		c: c, subject: topology.EventSubject(tenantID, sensorID), prefix: events.MsgID(tenantID, sensorID, ""),
		window: make(chan jetstream.PubAckFuture, c.cfg.MaxPending), done: make(chan struct{}),
	}
	go a.await()
	return a
}

type appender struct {
	c       *Client
	subject string
	prefix  string
	window  chan jetstream.PubAckFuture
	done    chan struct{}
	closed  bool

	mu  sync.Mutex
	res events.AppendResult
	err error
}

func (a *appender) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

func (a *appender) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.res.Failed++
	if a.err == nil {
		a.err = err
	}
}

// Append publishes ev and queues its acknowledgement; it blocks while the
// window is full.
func (a *appender) Append(ctx context.Context, ev events.Event) error {
	if err := a.failure(); err != nil {
		return err
	}
	_, js := a.c.current()
	if js == nil {
		err := fmt.Errorf("%w: not connected", events.ErrUnavailable)
		a.fail(err)
		return err
	}
	data, err := encode(ev)
	if err != nil {
		return fmt.Errorf("eventlog: encode: %w", err)
	}
	msg := &nats.Msg{Subject: a.subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, a.prefix+ev.ID)
	f, err := js.PublishMsgAsync(msg)
	if err != nil {
		err = classify(err)
		a.fail(err)
		return err
	}
	select {
	case a.window <- f:
		return nil
	case <-ctx.Done():
		// Published but no longer awaited: the sensor resends it and the
		// stream drops the copy.
		a.fail(fmt.Errorf("%w: %w", events.ErrUnavailable, ctx.Err()))
		return ctx.Err()
	}
}

// await collects acknowledgements in publish order.
func (a *appender) await() {
	defer close(a.done)
	for f := range a.window {
		select {
		case ack := <-f.Ok():
			a.mu.Lock()
			a.res.Acked++
			if ack.Duplicate {
				a.res.Duplicates++
			}
			a.mu.Unlock()
		case err := <-f.Err():
			a.fail(classify(err))
		}
	}
}

// Close waits for the outstanding acknowledgements.
func (a *appender) Close(ctx context.Context) (events.AppendResult, error) {
	if !a.closed {
		a.closed = true
		close(a.window)
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.res, fmt.Errorf("%w: %w", events.ErrUnavailable, ctx.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.res, a.err
}
