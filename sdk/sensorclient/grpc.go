package sensorclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Defaults of GRPCConfig.
const (
	DefaultGRPCTimeout   = 10 * time.Second
	DefaultBatchSize     = 500
	DefaultBatchInterval = 30 * time.Second
	DefaultMaxPending    = 10000
	// DefaultIdleTimeout closes the connection this long after its last
	// call: a quiet sensor holds no connection on the control plane
	// between health checks (every 15 s by default).
	DefaultIdleTimeout = 2 * time.Second
)

// ErrGRPCRefused: the control plane refused the client certificate
// (PermissionDenied or Unauthenticated). The sensor may be revoked, or its
// certificate replaced by a renewal this client has not picked up.
var ErrGRPCRefused = errors.New("control plane refused the sensor certificate")

// GRPCConfig configures GRPC.
type GRPCConfig struct {
	// Address is the control plane's gRPC host:port from enrolment.
	Address string
	// CAPEM verifies the server (the sensor CA from enrolment).
	CAPEM []byte
	// Certificate is the client certificate with its key.
	Certificate tls.Certificate
	// ServerName overrides the name checked in the server certificate
	// (default: the host of Address).
	ServerName string
	// Timeout bounds a health check and the closing of an event batch
	// (default 10s).
	Timeout time.Duration
	// Backoff paces reopening the event stream after failures.
	Backoff Backoff
	// BatchSize and BatchInterval end an event stream after that many
	// events or that long, whichever comes first, so the server's count of
	// accepted events confirms them (defaults 500 and 30s).
	BatchSize     int
	BatchInterval time.Duration
	// MaxPending bounds the unconfirmed events kept for resending after a
	// broken stream; the oldest are dropped beyond it (default 10000).
	MaxPending int
	// IdleTimeout closes the connection after that long without a call
	// (health check or event stream); the next call opens a new one
	// (default DefaultIdleTimeout; negative: never).
	IdleTimeout time.Duration
	Logger      *slog.Logger
}

// EventStats are cumulative event counters.
type EventStats struct {
	// Sent counts Send calls, resends included.
	Sent uint64
	// Accepted counts events the server confirmed.
	Accepted uint64
	// Dropped counts unconfirmed events given up on.
	Dropped uint64
}

// GRPC is the sensor's mutual-TLS gRPC client.
type GRPC struct {
	cfg  GRPCConfig
	log  *slog.Logger
	pool *x509.CertPool

	mu   sync.Mutex
	conn *grpc.ClientConn
	gen  uint64

	// pending survives a StreamEvents return so a later call resends it.
	pendingMu sync.Mutex
	pending   []*sensorpb.SensorEvent

	sent, accepted, dropped atomic.Uint64
}

// NewGRPC checks cfg and prepares the connection; it dials lazily.
func NewGRPC(cfg GRPCConfig) (*GRPC, error) {
	if cfg.Address == "" {
		return nil, errors.New("sensorclient: gRPC address is required")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAPEM) {
		return nil, errors.New("sensorclient: gRPC CA: no certificate in PEM")
	}
	if len(cfg.Certificate.Certificate) == 0 || cfg.Certificate.PrivateKey == nil {
		return nil, errors.New("sensorclient: a client certificate with its key is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultGRPCTimeout
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchInterval <= 0 {
		cfg.BatchInterval = DefaultBatchInterval
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	switch {
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	case cfg.IdleTimeout < 0:
		cfg.IdleTimeout = 0 // grpc-go: no idleness
	}
	cfg.Backoff = cfg.Backoff.WithDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &GRPC{cfg: cfg, log: log, pool: pool}
	conn, err := g.dial(cfg.Certificate)
	if err != nil {
		return nil, err
	}
	g.conn = conn
	return g, nil
}

func (g *GRPC) dial(cert tls.Certificate) (*grpc.ClientConn, error) {
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		RootCAs:      g.pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   g.cfg.ServerName,
		// The connection closes when idle: resuming the TLS session
		// makes the next handshake cheap. The cache belongs to this
		// certificate's connection (SetCertificate dials afresh), and the
		// server authorises the certificate on every call anyway.
		ClientSessionCache: tls.NewLRUClientSessionCache(1),
	}
	conn, err := grpc.NewClient(g.cfg.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: g.cfg.Backoff.Min, Multiplier: 1.6, Jitter: 0.2, MaxDelay: g.cfg.Backoff.Max},
			MinConnectTimeout: g.cfg.Timeout,
		}),
		// The server lets clients ping every 30 s at most.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: time.Minute, Timeout: 20 * time.Second, PermitWithoutStream: true}),
		grpc.WithIdleTimeout(g.cfg.IdleTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("sensorclient: gRPC client: %w", err)
	}
	return conn, nil
}

func (g *GRPC) current() (*grpc.ClientConn, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conn, g.gen
}

// SetCertificate switches to a renewed certificate: later calls use a new
// connection presenting it, and calls on the old one (whose serial the
// control plane no longer accepts) are ended; the event stream reopens at
// once and resends what was not confirmed.
func (g *GRPC) SetCertificate(cert tls.Certificate) error {
	conn, err := g.dial(cert)
	if err != nil {
		return err
	}
	g.mu.Lock()
	old := g.conn
	g.conn = conn
	g.gen++
	g.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Check calls the health check with the sensor's engine state.
func (g *GRPC) Check(ctx context.Context, state sensorpb.SensorState, agentVersion string) (*sensorpb.CheckResponse, error) {
	conn, _ := g.current()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	resp, err := sensorpb.NewSensorHealthcheckServiceClient(conn).Check(ctx, &sensorpb.CheckRequest{AgentVersion: agentVersion, State: state})
	if err != nil {
		return nil, classify(err)
	}
	return resp, nil
}

// classify marks refusals with ErrGRPCRefused.
func classify(err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("%w: %w", ErrGRPCRefused, err)
	}
	return err
}

// Stats returns the event counters.
func (g *GRPC) Stats() EventStats {
	return EventStats{Sent: g.sent.Load(), Accepted: g.accepted.Load(), Dropped: g.dropped.Load()}
}

// StreamEvents sends the events read from events on client streams until
// ctx ends or events is closed (nil), or the server refuses the certificate
// (an error wrapping ErrGRPCRefused; unconfirmed events are kept for the
// next call). Each stream carries one batch; events of a broken batch are
// resent on the next stream (their ids make the resend idempotent). A
// stream is opened only when there is an event to send, so an idle sensor
// holds no stream (and, after IdleTimeout, no connection) on the server.
func (g *GRPC) StreamEvents(ctx context.Context, events <-chan *sensorpb.SensorEvent) error {
	failures := 0
	for ctx.Err() == nil {
		if g.pendingLen() == 0 {
			select {
			case <-ctx.Done():
				return nil
			case ev, ok := <-events:
				if !ok {
					return nil
				}
				g.addPending(ev) // sent by batch with what is unconfirmed
			}
		}
		conn, gen := g.current()
		more, err := g.batch(ctx, conn, events)
		if !more {
			return nil
		}
		switch {
		case err == nil:
			failures = 0
			continue
		case errors.Is(err, ErrGRPCRefused):
			return err
		case status.Code(err) == codes.InvalidArgument:
			// The server refused an event of the batch; resending the
			// same batch would fail forever.
			n := g.dropPending()
			g.log.Error("event batch refused by the control plane; dropped", "events", n, logkey.Error, err)
			continue
		}
		if _, now := g.current(); now != gen {
			continue // certificate swapped: reopen at once
		}
		if ctx.Err() != nil {
			return nil
		}
		if failures == 0 || failures%10 == 0 {
			g.log.Warn("event stream failed; reopening", logkey.Error, err, "attempt", failures+1, "unconfirmed", g.pendingLen())
		}
		g.cfg.Backoff.Wait(ctx, failures)
		failures++
	}
	return nil
}

// batch runs one stream: send what is unconfirmed (at least one event),
// add new events until the batch is full, old or ctx ends, then close it
// and count what the server accepted. more is false when events was closed
// or ctx ended.
func (g *GRPC) batch(ctx context.Context, conn *grpc.ClientConn, events <-chan *sensorpb.SensorEvent) (more bool, err error) {
	// The stream outlives ctx by up to Timeout so a final batch can be
	// confirmed during shutdown.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(g.cfg.Timeout, cancel) })
	defer stop()

	stream, err := sensorpb.NewSensorEventStreamServiceClient(conn).StreamEvents(sctx)
	if err != nil {
		return ctx.Err() == nil, classify(err)
	}
	// The answer is awaited from the start: a server that ends the call
	// early (refusal, revocation, shutdown) is noticed even while no event
	// is being sent.
	answer := make(chan answerOrErr, 1)
	go func() {
		var resp sensorpb.StreamEventsResponse
		err := stream.RecvMsg(&resp)
		answer <- answerOrErr{&resp, err}
	}()
	finish := func() error { return g.finish(stream, answer, cancel) }

	g.pendingMu.Lock()
	resend := append([]*sensorpb.SensorEvent(nil), g.pending...)
	g.pendingMu.Unlock()
	for _, ev := range resend {
		if err := stream.Send(ev); err != nil {
			return ctx.Err() == nil, finish()
		}
		g.sent.Add(1)
	}
	timer := time.NewTimer(g.cfg.BatchInterval)
	defer timer.Stop()
	more = true
	for g.pendingLen() < g.cfg.BatchSize {
		select {
		case <-ctx.Done():
			return false, finish()
		case a := <-answer:
			answer <- a
			return more, finish()
		case <-timer.C:
			return more, finish()
		case ev, ok := <-events:
			if !ok {
				return false, finish()
			}
			g.addPending(ev)
			if err := stream.Send(ev); err != nil {
				return more, finish()
			}
			g.sent.Add(1)
		}
	}
	return more, finish()
}

type answerOrErr struct {
	resp *sensorpb.StreamEventsResponse
	err  error
}

// finish half-closes the stream, waits up to Timeout for the server's
// answer and confirms the first Accepted pending events (the server takes
// them in order).
func (g *GRPC) finish(stream sensorpb.SensorEventStreamService_StreamEventsClient, answer <-chan answerOrErr, cancel context.CancelFunc) error {
	_ = stream.CloseSend()
	timer := time.AfterFunc(g.cfg.Timeout, cancel)
	defer timer.Stop()
	a := <-answer
	if a.err != nil {
		return classify(a.err)
	}
	n := int(a.resp.GetAccepted())
	g.pendingMu.Lock()
	n = min(n, len(g.pending))
	g.pending = append(g.pending[:0:0], g.pending[n:]...)
	g.pendingMu.Unlock()
	g.accepted.Add(uint64(n))
	if n > 0 {
		g.log.Debug("events confirmed", "accepted", n, "total", g.accepted.Load())
	}
	return nil
}

func (g *GRPC) addPending(ev *sensorpb.SensorEvent) {
	g.pendingMu.Lock()
	defer g.pendingMu.Unlock()
	if len(g.pending) >= g.cfg.MaxPending {
		g.pending = g.pending[1:]
		g.dropped.Add(1)
	}
	g.pending = append(g.pending, ev)
}

func (g *GRPC) pendingLen() int {
	g.pendingMu.Lock()
	defer g.pendingMu.Unlock()
	return len(g.pending)
}

func (g *GRPC) dropPending() int {
	g.pendingMu.Lock()
	defer g.pendingMu.Unlock()
	n := len(g.pending)
	g.pending = nil
	g.dropped.Add(uint64(n))
	return n
}

// Close closes the connection.
func (g *GRPC) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == nil {
		return nil
	}
	err := g.conn.Close()
	g.conn = nil
	return err
}
