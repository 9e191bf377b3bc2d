// Package sensorbus is the control plane's NATS messaging: it publishes sensor
// commands into the JetStream command stream (de-duplicated by message id)
// and receives sensor status reports through a queue subscription, as the
// CONTROL account's backend user. It connects in the background and never
// blocks start-up: a down server or provisioner only delays the connection,
// and a connection that nats.go gives up on (for example after its
// credentials are revoked) is replaced using freshly fetched credentials.
//
// Status handlers run sequentially per subscription, in the order the
// server delivers: a handler that falls behind makes nats.go drop messages
// past the subscription's pending limits (logged as a slow consumer) rather
// than grow memory without bound.
package sensorbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/backendconn"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultQueueGroup     = "rxc-controlplane"
	DefaultPublishTimeout = 5 * time.Second
	DefaultReconnectWait  = 2 * time.Second
	DefaultDrainTimeout   = 5 * time.Second
)

// MaxStatusBytes is the largest status message handed to a handler; larger
// ones are dropped and counted.
const MaxStatusBytes = sensorwire.MaxStatusBytes

const (
	// Pending limits per status subscription: beyond them nats.go drops
	// messages and reports a slow consumer.
	pendingMsgs  = 8192
	pendingBytes = 32 << 20
	connName     = "rxc-controlplane"
)

// Config wires a Client.
type Config struct {
	// URL is the nats-server URL (a comma-separated list is accepted).
	URL string
	// Creds returns the backend user's .creds content. It is called before
	// every new connection, so it may read a file or ask the provisioner.
	Creds func(ctx context.Context) (string, error)
	// Stream is the command stream (default topology.DefaultStream); a
	// publish whose subject lands in another stream fails.
	Stream string
	// PublishTimeout bounds waiting for the stream's acknowledgement (default 5s).
	PublishTimeout time.Duration
	// QueueGroup shares status messages among control-plane replicas
	// (default "rxc-controlplane").
	QueueGroup string
	// ReconnectWait is nats.go's pause between reconnect attempts and the
	// base of the back-off between failed initial connections (default 2s).
	ReconnectWait time.Duration
	// DrainTimeout bounds Close (default 5s).
	DrainTimeout time.Duration
	// Logger names the component (With("component", …)): the client adds
	// no component key of its own, so no record carries it twice.
	Logger *slog.Logger
}

type statusHandler = func(ctx context.Context, m fleet.StatusUpdate)

// Stats are cumulative counters since New.
type Stats struct {
	// Published counts commands the stream acknowledged (duplicates included).
	Published uint64
	// StatusReceived counts status messages that arrived, dropped ones included.
	StatusReceived uint64
	// StatusDropped counts status messages not handed to a handler because
	// they were larger than MaxStatusBytes (or named no sensor, which the
	// status wildcard never delivers).
	StatusDropped uint64
	// StatusMalformed counts status messages not handed to a handler
	// because they are not a status in sdk/sensorwire's format (not one
	// JSON object, unknown fields, trailing data).
	StatusMalformed uint64
}

// Client is the control plane's NATS connection. It is safe for concurrent use.
type Client struct {
	url           string
	creds         func(ctx context.Context) (string, error)
	stream        string
	pubTimeout    time.Duration
	queue         string
	reconnectWait time.Duration
	drainTimeout  time.Duration
	log           *slog.Logger
	bg            backendconn.Background

	// wake tells the connection loop that a handler was registered.
	wake chan struct{}

	mu       sync.Mutex
	conn     *nats.Conn
	js       jetstream.JetStream
	ajs      jetstream.JetStream // asynchronous publications (PublishCommands)
	subsUp   bool                // the current connection's subscriptions are registered
	handlers []statusHandler

	published, received, dropped, malformed atomic.Uint64
}

// New checks cfg and returns a Client that is not yet connected.
func New(cfg Config) (*Client, error) {
	var err error
	if cfg.Stream, err = backendconn.CheckTarget("sensorbus", cfg.URL, cfg.Creds, cfg.Stream, topology.DefaultStream); err != nil {
		return nil, err
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = DefaultQueueGroup
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.ReconnectWait <= 0 {
		cfg.ReconnectWait = DefaultReconnectWait
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{
		url: cfg.URL, creds: cfg.Creds, stream: cfg.Stream, pubTimeout: cfg.PublishTimeout, queue: cfg.QueueGroup,
		reconnectWait: cfg.ReconnectWait, drainTimeout: cfg.DrainTimeout,
		log:  cfg.Logger,
		wake: make(chan struct{}, 1),
	}, nil
}

// Start connects in the background and returns at once. The client keeps
// (re)connecting until ctx ends or Close is called. Later calls do nothing.
func (c *Client) Start(ctx context.Context) { c.bg.Start(ctx, c.run) }

// Close stops reconnecting and drains the connection: status messages
// already received are handled, then the connection closes. It waits at
// most about DrainTimeout.
func (c *Client) Close() { c.bg.Close() }

// Ready reports whether the client is connected and its status
// subscriptions are registered with the server.
func (c *Client) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil && c.subsUp && c.conn.IsConnected()
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Published: c.published.Load(), StatusReceived: c.received.Load(), StatusDropped: c.dropped.Load(), StatusMalformed: c.malformed.Load()}
}

// SubscribeStatus has handle called for every sensor status message, in a
// queue subscription on topology.StatusWildcard shared with the other
// clients of the same queue group. The update names the sensor its
// subject ("rxc.<tenantId>.<sensorId>.status") names; its report is the
// payload decoded with sdk/sensorwire (at most MaxStatusBytes, strict).
// Its values are not checked: that is the fleet service's rule. Registered before the connection exists, it is
// subscribed once connected; nats.go restores it after reconnects.
func (c *Client) SubscribeStatus(handle func(ctx context.Context, m fleet.StatusUpdate)) {
	c.mu.Lock()
	c.handlers = append(c.handlers, handle)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// PublishCommand publishes cmd, encoded with sdk/sensorwire, on its
// sensor's command subject ("rxc.<tenantId>.<sensorId>.cmd", from
// core/topology) with its id as Nats-Msg-Id and waits for the stream's acknowledgement. Publishing the
// same command again within the stream's duplicate window is acknowledged
// without storing a second copy.
//
// Errors wrap fleet.ErrMessagingUnavailable and say whether the command may
// be stored: fleet.ErrNotPublished when it provably is not (not connected,
// so nothing was sent; no stream listens on the subject; the stream
// refused it), fleet.ErrPublishUnknown when it was sent and no answer came
// (a hung or partitioned server may still store it).
func (c *Client) PublishCommand(ctx context.Context, cmd fleet.Command) (fleet.PublishAck, error) {
	subject, payload, err := commandMessage(cmd)
	if err != nil {
		return fleet.PublishAck{}, err
	}
	msgID := cmd.ID
	c.mu.Lock()
	nc, js := c.conn, c.js
	c.mu.Unlock()
	// Fail at once rather than park the command in the reconnect buffer
	// until the timeout: the caller can report the outage now, and nothing
	// was sent.
	if nc == nil || !nc.IsConnected() {
		return fleet.PublishAck{}, fmt.Errorf("sensorbus: publish %s: not connected: %w: %w", subject, fleet.ErrMessagingUnavailable, fleet.ErrNotPublished)
	}
	ctx, cancel := context.WithTimeout(ctx, c.pubTimeout)
	defer cancel()
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: payload},
		jetstream.WithMsgID(msgID), jetstream.WithExpectStream(c.stream))
	if err != nil {
		return fleet.PublishAck{}, fmt.Errorf("sensorbus: publish %s: %w: %w", subject, fleet.ErrMessagingUnavailable, publishOutcome(err))
	}
	c.published.Add(1)
	if ack.Duplicate {
		c.log.Debug("command already in the stream", "subject", subject, "msgId", msgID, "seq", ack.Sequence)
	}
	return fleet.PublishAck{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// asyncMaxPending bounds a connection's unacknowledged asynchronous
// publications over all PublishCommands calls; each call's window is
// smaller. Past it a publication waits up to the publish timeout for room,
// then fails unsent.
const asyncMaxPending = 4096

// PublishCommands publishes msgs as PublishCommand does, each with its
// message id and the stream expected, but pipelined: up to window (at
// least 1) are sent before their acknowledgements come back, and each one's
// acknowledgement is awaited for at most the publish timeout from its
// sending. It returns each message's outcome in order, with
// PublishCommand's errors: fleet.ErrNotPublished when the message provably
// is not stored (not connected, so nothing was sent; no stream answered;
// the stream refused it; no room to send it), fleet.ErrPublishUnknown when
// it was sent and no acknowledgement came (a timeout, a reconnect while it
// was in flight, ctx ending).
func (c *Client) PublishCommands(ctx context.Context, msgs []fleet.Command, window int) []fleet.PublishResult {
	res := make([]fleet.PublishResult, len(msgs))
	c.mu.Lock()
	nc, ajs := c.conn, c.ajs
	c.mu.Unlock()
	connected := nc != nil && ajs != nil && nc.IsConnected()
	window = max(window, 1)
	type inflight struct {
		i int
		f jetstream.PubAckFuture
	}
	room := make(chan struct{}, window) // a token per publication in flight
	sent := make(chan inflight, len(msgs))
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for x := range sent {
			res[x.i] = c.settleAsync(ctx, msgs[x.i], x.f)
			<-room
		}
	}()
	for i, m := range msgs {
		subject, payload, err := commandMessage(m)
		switch {
		case err != nil:
			res[i].Err = err
			continue
		case !connected:
			res[i].Err = fmt.Errorf("sensorbus: publish %s: not connected: %w: %w", subject, fleet.ErrMessagingUnavailable, fleet.ErrNotPublished)
			continue
		}
		// A full window waits for the oldest publication in flight to
		// be settled.
		room <- struct{}{}
		f, err := ajs.PublishMsgAsync(&nats.Msg{Subject: subject, Data: payload},
			jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(c.stream), jetstream.WithStallWait(c.pubTimeout))
		if err != nil {
			<-room
			res[i].Err = fmt.Errorf("sensorbus: publish %s: %w: %w", subject, fleet.ErrMessagingUnavailable, asyncSendOutcome(err))
			continue
		}
		sent <- inflight{i, f}
	}
	close(sent)
	<-collected
	return res
}

// settleAsync waits for one asynchronous publication's answer.
func (c *Client) settleAsync(ctx context.Context, m fleet.Command, f jetstream.PubAckFuture) fleet.PublishResult {
	subject := topology.Sensor{TenantID: m.TenantID, SensorID: m.SensorID}.CommandSubject()
	var err error
	select {
	case ack := <-f.Ok():
		c.published.Add(1)
		if ack.Duplicate {
			c.log.Debug("command already in the stream", "subject", subject, "msgId", m.ID, "seq", ack.Sequence)
		}
		return fleet.PublishResult{Ack: fleet.PublishAck{Sequence: ack.Sequence, Duplicate: ack.Duplicate}}
	case err = <-f.Err():
	case <-ctx.Done():
		err = ctx.Err()
	}
	return fleet.PublishResult{Err: fmt.Errorf("sensorbus: publish %s: %w: %w", subject, fleet.ErrMessagingUnavailable, publishOutcome(err))}
}

// commandMessage is the subject m goes on, from core/topology, and its
// payload; ids that are not valid (a wildcard, a dot, nothing) and an
// empty command id are bad input.
func commandMessage(m fleet.Command) (subject string, payload []byte, err error) {
	if ids.Validate(m.TenantID) != nil || ids.Validate(m.SensorID) != nil {
		return "", nil, fmt.Errorf("sensorbus: publish: tenant %q, sensor %q: not a sensor: %w", m.TenantID, m.SensorID, fleet.ErrInvalidInput)
	}
	subject = topology.Sensor{TenantID: m.TenantID, SensorID: m.SensorID}.CommandSubject()
	if m.ID == "" {
		return "", nil, fmt.Errorf("sensorbus: publish %s: empty message id: %w", subject, fleet.ErrInvalidInput)
	}
	payload, err = encodeCommand(m)
	return subject, payload, err
}

// asyncSendOutcome classifies an error of sending an asynchronous
// publication: only a full window provably sent nothing; any other error
// is treated as unknown, as PublishCommand treats its own.
func asyncSendOutcome(err error) error {
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		return fmt.Errorf("%w: %w", fleet.ErrNotPublished, err)
	}
	return publishOutcome(err)
}

// publishOutcome tells a publication that provably stored nothing (the
// server answered that no stream took it) from one whose fate is unknown.
func publishOutcome(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: %w", fleet.ErrNotPublished, err)
	default:
		return fmt.Errorf("%w: %w", fleet.ErrPublishUnknown, err)
	}
}

// Check is a round trip to the server within ctx: a socket that is open to
// a server that does not answer (hung, partitioned) fails it, which Ready
// alone cannot tell.
func (c *Client) Check(ctx context.Context) error {
	c.mu.Lock()
	nc, up := c.conn, c.subsUp
	c.mu.Unlock()
	if !up {
		return errors.New("not connected")
	}
	return backendconn.Check(ctx, nc, c.pubTimeout)
}

// run owns the connection: backendconn dials it with back-off and fresh
// credentials, serve uses it until it is closed for good.
func (c *Client) run(ctx context.Context) {
	// Handlers outlive ctx by the drain, so messages received before Close
	// are handled with a live context; it ends when the loop returns.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	backendconn.Run(ctx, backendconn.Config{
		URL: c.url, Name: connName, Creds: c.creds, ReconnectWait: c.reconnectWait, DrainTimeout: c.drainTimeout, Logger: c.log,
	}, func(ctx context.Context, nc *nats.Conn, closed <-chan struct{}) { c.serve(ctx, hctx, nc, closed) })
}

func (c *Client) serve(ctx, hctx context.Context, nc *nats.Conn, closed <-chan struct{}) {
	js, err := jetstream.New(nc)
	if err == nil {
		// Its own context: the acknowledgement timeout applies to
		// asynchronous publications only through the context's options.
		var ajs jetstream.JetStream
		ajs, err = jetstream.New(nc, jetstream.WithPublishAsyncTimeout(c.pubTimeout), jetstream.WithPublishAsyncMaxPending(asyncMaxPending))
		c.mu.Lock()
		c.ajs = ajs
		c.mu.Unlock()
	}
	if err != nil {
		c.log.Error("jetstream context", logkey.Error, err)
		nc.Close()
		return
	}
	c.mu.Lock()
	c.conn, c.js, c.subsUp = nc, js, false
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn, c.js, c.ajs, c.subsUp = nil, nil, nil, false
		c.mu.Unlock()
	}()

	installed := 0
	install := func() {
		c.mu.Lock()
		pending := c.handlers[installed:]
		c.mu.Unlock()
		for _, h := range pending {
			sub, err := nc.QueueSubscribe(topology.StatusWildcard, c.queue, c.deliver(hctx, h))
			if err != nil {
				c.log.Error("status subscription failed", logkey.Error, err)
				continue
			}
			_ = sub.SetPendingLimits(pendingMsgs, pendingBytes)
		}
		installed += len(pending)
		// The flush makes Ready mean the server knows the subscriptions.
		if err := nc.FlushTimeout(c.drainTimeout); err != nil {
			c.log.Warn("nats flush after subscribing", logkey.Error, err)
			return
		}
		c.mu.Lock()
		c.subsUp = true
		c.mu.Unlock()
	}
	install()
	for {
		select {
		case <-c.wake:
			install()
		case <-closed:
			c.log.Warn("nats connection closed; reconnecting with fresh credentials", logkey.Error, nc.LastError())
			return
		case <-ctx.Done():
			c.drain(nc, closed)
			return
		}
	}
}

func (c *Client) drain(nc *nats.Conn, closed <-chan struct{}) {
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	t := time.NewTimer(c.drainTimeout + time.Second)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		c.log.Warn("nats drain did not finish in time; closing")
		nc.Close()
	}
}

func (c *Client) deliver(ctx context.Context, h statusHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		c.received.Add(1)
		if len(m.Data) > MaxStatusBytes {
			c.dropped.Add(1)
			c.log.Debug("status message too large; dropped", "subject", m.Subject, "bytes", len(m.Data))
			return
		}
		tenantID, sensorID, ok := topology.ParseStatusSubject(m.Subject)
		if !ok {
			// The status wildcard delivers nothing else; counted with the
			// dropped ones should a server ever do so.
			c.dropped.Add(1)
			c.log.Debug("status message on a subject naming no sensor; dropped", "subject", m.Subject)
			return
		}
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("status handler panicked", "subject", m.Subject, "panic", fmt.Sprint(r))
			}
		}()
		report, err := decodeStatus(m.Data)
		if err != nil {
			c.malformed.Add(1)
			// The payload is sensor-controlled text: only the subject and
			// the decoder's error are logged.
			c.log.Debug("status message malformed; dropped", "subject", m.Subject, logkey.Error, err)
			return
		}
		h(ctx, fleet.StatusUpdate{Sensor: fleet.SensorRef{TenantID: tenantID, SensorID: sensorID}, Report: report, Confirm: c.confirmer(m)})
	}
}
