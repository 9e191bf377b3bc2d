// Package eventlog is the control plane's side of the JetStream event
// stream (topology.DefaultEventStream, created by the provisioner). As the
// CONTROL account's backend user it appends sensors' events with the async
// JetStream API — a bounded window of unacknowledged publishes per sensor
// stream, so a slow or full stream pushes back on the sensor instead of
// growing memory — and it pulls batches from the durable consumer
// topology.EventWriter, which all control-plane replicas share. It
// implements events.Log and events.Source.
//
// A message is one sensorpb.SensorEvent in protobuf; its subject,
// topology.EventSubject, names tenant and sensor, its Nats-Msg-Id
// (events.MsgID) lets the stream drop a resend within its duplicate window,
// and its stream timestamp is the event's received_at.
package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/backendconn"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxPending    = 4096
	DefaultAckTimeout    = 10 * time.Second
	DefaultFetchWait     = time.Second
	DefaultReconnectWait = 2 * time.Second
	connName             = "rxc-controlplane-events"
	// maxAsyncPending bounds unacknowledged publishes over all sensor
	// streams of this connection.
	maxAsyncPending = 1 << 16
)

// Config wires a Client.
type Config struct {
	// URL is the nats-server URL (a comma-separated list is accepted).
	URL string
	// Creds returns the backend user's .creds content; it is called before
	// every new connection.
	Creds func(ctx context.Context) (string, error)
	// Stream is the event stream (default topology.DefaultEventStream).
	Stream string
	// MaxPending bounds unacknowledged publishes of one sensor stream;
	// Append blocks beyond it (default 4096).
	MaxPending int
	// AckTimeout bounds the wait for one publish's acknowledgement (default 10s).
	AckTimeout time.Duration
	// FetchWait is how long Fetch waits to fill a batch (default 1s).
	FetchWait time.Duration
	// ReconnectWait is nats.go's pause between reconnects (default 2s).
	ReconnectWait time.Duration
	// Logger names the component (With("component", …)): the client adds
	// no component key of its own, so no record carries it twice.
	Logger *slog.Logger
}

// Client is the event stream connection. It is safe for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger
	bg  backendconn.Background

	mu   sync.Mutex
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

// New checks cfg and returns a Client that is not yet connected.
func New(cfg Config) (*Client, error) {
	var err error
	if cfg.Stream, err = backendconn.CheckTarget("eventlog", cfg.URL, cfg.Creds, cfg.Stream, topology.DefaultEventStream); err != nil {
		return nil, err
	}
	if cfg.MaxPending < 0 || cfg.AckTimeout < 0 || cfg.FetchWait < 0 || cfg.ReconnectWait < 0 {
		return nil, errors.New("eventlog: negative setting")
	}
	cfg.MaxPending = orDefault(cfg.MaxPending, DefaultMaxPending)
	cfg.AckTimeout = orDefault(cfg.AckTimeout, DefaultAckTimeout)
	cfg.FetchWait = orDefault(cfg.FetchWait, DefaultFetchWait)
	cfg.ReconnectWait = orDefault(cfg.ReconnectWait, DefaultReconnectWait)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, log: cfg.Logger}, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Start connects in the background and returns at once; it keeps
// (re)connecting until ctx ends or Close.
func (c *Client) Start(ctx context.Context) { c.bg.Start(ctx, c.run) }

// Close stops the client: pending acknowledgements are given up.
func (c *Client) Close() { c.bg.Close() }

// Ready reports whether the connection is up.
func (c *Client) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nc != nil && c.nc.IsConnected()
}

// Check is a round trip to the server within ctx (default bound
// AckTimeout): a socket open to a hung server fails it.
func (c *Client) Check(ctx context.Context) error {
	nc, _ := c.current()
	return backendconn.Check(ctx, nc, c.cfg.AckTimeout)
}

func (c *Client) current() (*nats.Conn, jetstream.JetStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nc, c.js
}

// run owns the connection: backendconn dials it with back-off and fresh
// credentials, session uses it until it is closed for good.
func (c *Client) run(ctx context.Context) {
	backendconn.Run(ctx, backendconn.Config{
		URL: c.cfg.URL, Name: connName, Creds: c.cfg.Creds, ReconnectWait: c.cfg.ReconnectWait, Logger: c.log,
	}, c.session)
}

func (c *Client) session(ctx context.Context, nc *nats.Conn, closed <-chan struct{}) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxAsyncPending), jetstream.WithPublishAsyncTimeout(c.cfg.AckTimeout))
	if err != nil {
		c.log.Error("jetstream context", logkey.Error, err)
		nc.Close()
		return
	}
	c.mu.Lock()
	c.nc, c.js, c.cons = nc, js, nil
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.nc, c.js, c.cons = nil, nil, nil
		c.mu.Unlock()
	}()
	select {
	case <-closed:
		c.log.Warn("nats connection closed; reconnecting with fresh credentials", logkey.Error, nc.LastError())
	case <-ctx.Done():
		nc.Close()
	}
}

// The ports this adapter implements.
var (
	_ events.Log    = (*Client)(nil)
	_ events.Source = (*Client)(nil)
)
