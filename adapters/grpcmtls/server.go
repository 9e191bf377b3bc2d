// Package grpcmtls is the control plane's gRPC endpoint for sensors: health
// checks and the event stream, over TLS 1.3 with client certificates from
// the sensor CA. A sensor's identity is read only from its verified
// certificate, and every call, unary or streaming, is authorised again (the
// certificate serial must still be active), because TLS session resumption
// skips certificate callbacks. Live streams can be cut at once when a
// sensor is revoked.
package grpcmtls

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Authorizer decides whether a certificate serial is the active one of the
// sensor it names. It returns nil, or an error wrapping fleet.ErrRevoked,
// fleet.ErrNotFound or fleet.ErrInvalidToken to refuse; other errors are
// treated as failures of the check itself.
type Authorizer interface {
	AuthorizeSensor(ctx context.Context, tenantID, sensorID, serial string) error
}

// Heartbeats takes the health checks: CheckIn authorises the certificate
// serial as Authorizer does (same refusals) and, when it is good, records
// that the sensor was heard from and what it said about itself (its
// address as this server sees it, its agent's version), both in one step
// against the database. The health check is the one call not authorised
// by Authorizer first.
type Heartbeats interface {
	CheckIn(ctx context.Context, tenantID, sensorID, serial string, c fleet.Contact) error
}

// EventSink takes the events a sensor streams. ev.EventId is the sensor's
// idempotency key: a sink that stores events should ignore repeats.
type EventSink interface {
	AcceptEvent(ctx context.Context, from Identity, ev *sensorpb.SensorEvent) error
}

// EventIngest takes a sensor stream's events into the durable event log
// with back-pressure (events.Ingest). When set it replaces Events.
type EventIngest interface {
	Open(tenantID, sensorID string) *events.Session
}

// Defaults.
const (
	DefaultMaxRecvMsgSize = 256 << 10
	// DefaultRecheckInterval is how often an open stream re-checks its
	// certificate on its own, bounding how long a missed revocation or
	// renewal broadcast keeps it open.
	DefaultRecheckInterval = 30 * time.Second
	handshakeTimeout       = 10 * time.Second
)

// What the server holds per connection (docs/benchmarks.md, "Control-plane
// memory per sensor connection"). A sensor makes at most a health check and
// one event stream at a time.
const (
	// maxConcurrentStreams bounds the calls one connection runs at once.
	maxConcurrentStreams = 8
	// readBufferSize 0: the HTTP/2 framer reads straight from the TLS
	// connection, which already buffers a whole record; grpc-go's default
	// would pin another 32 KiB a connection, idle or not.
	readBufferSize = 0
	// windowSize fixes the flow-control windows of a stream and of a
	// connection at HTTP/2's 64 KiB instead of letting the BDP estimator
	// grow them to megabytes: what one sensor can make the server buffer
	// stays bounded. Events are small; 64 KiB a round trip is thousands of
	// them a second.
	windowSize = 64 << 10
)

// transportTuned applies the settings above; a benchmark turns it off to
// compare with grpc-go's defaults.
var transportTuned = true

// Config for New. TLS, Authorizer and Heartbeats are required.
type Config struct {
	// TLS must require and verify client certificates and allow TLS 1.3
	// only, e.g. x509ca.CA.ServerTLSConfig().
	TLS        *tls.Config
	Authorizer Authorizer
	Heartbeats Heartbeats
	// Events defaults to a sink that logs each event at debug level.
	Events EventSink
	// Ingest, when set, takes events instead of Events: validated, stamped
	// with the certificate's identity and appended to the event log; the
	// response counts the events the log acknowledged.
	Ingest EventIngest
	Logger *slog.Logger
	// DatabaseUnavailable reports whether an error of the Authorizer or
	// Heartbeats means the database could not be reached; such calls end
	// Unavailable (retry later), not Internal. Default: never.
	DatabaseUnavailable func(error) bool
	// MaxRecvMsgSize bounds one inbound message; default
	// DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
	// RecheckInterval is how often each open stream re-authorises its
	// certificate (default DefaultRecheckInterval); Recheck does it at once.
	RecheckInterval time.Duration
}

// Server serves the sensor gRPC services.
type Server struct {
	grpc         *grpc.Server
	log          *slog.Logger
	auth         Authorizer
	beats        Heartbeats
	events       EventSink
	ingest       EventIngest
	statusTable  []statusRule
	recheckEvery time.Duration

	mu      sync.Mutex
	streams map[sensorKey]map[*liveStream]struct{}
	nstream int

	conns atomic.Int64
}

type sensorKey struct{ tenantID, sensorID string }

type liveStream struct {
	id     Identity
	cancel context.CancelCauseFunc
}

// New builds a Server. It refuses a TLS configuration that would let a
// client in without a verified certificate or below TLS 1.3.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.TLS == nil:
		return nil, errors.New("grpcmtls: TLS config is required")
	case cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert:
		return nil, errors.New("grpcmtls: TLS config must set ClientAuth to RequireAndVerifyClientCert")
	case cfg.TLS.ClientCAs == nil:
		return nil, errors.New("grpcmtls: TLS config must set ClientCAs to the sensor CA")
	case cfg.TLS.MinVersion < tls.VersionTLS13:
		return nil, errors.New("grpcmtls: TLS config must set MinVersion to TLS 1.3")
	case cfg.Authorizer == nil:
		return nil, errors.New("grpcmtls: Authorizer is required")
	case cfg.Heartbeats == nil:
		return nil, errors.New("grpcmtls: Heartbeats is required")
	case cfg.MaxRecvMsgSize < 0:
		return nil, fmt.Errorf("grpcmtls: negative MaxRecvMsgSize %d", cfg.MaxRecvMsgSize)
	case cfg.RecheckInterval < 0:
		return nil, fmt.Errorf("grpcmtls: negative RecheckInterval %s", cfg.RecheckInterval)
	}
	if cfg.RecheckInterval == 0 {
		cfg.RecheckInterval = DefaultRecheckInterval
	}
	if cfg.MaxRecvMsgSize == 0 {
		cfg.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	events := cfg.Events
	if events == nil {
		events = LogSink{Logger: log}
	}
	if cfg.DatabaseUnavailable == nil {
		cfg.DatabaseUnavailable = func(error) bool { return false }
	}
	s := &Server{
		log:          log,
		auth:         cfg.Authorizer,
		beats:        cfg.Heartbeats,
		events:       events,
		ingest:       cfg.Ingest,
		statusTable:  statusTable(cfg.DatabaseUnavailable),
		recheckEvery: cfg.RecheckInterval,
		streams:      map[sensorKey]map[*liveStream]struct{}{},
	}
	opts := []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(cfg.TLS.Clone())),
		grpc.UnaryInterceptor(s.unaryInterceptor),
		grpc.StreamInterceptor(s.streamInterceptor),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.StatsHandler(connCounter{&s.conns}),
		grpc.ConnectionTimeout(handshakeTimeout),
		// Sensors sit behind NATs that drop idle flows: let them ping every
		// 30 s even without a call in flight, but no more often.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             30 * time.Second,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 15 * time.Minute,
			Time:              2 * time.Minute,
			Timeout:           20 * time.Second,
		}),
	}
	if transportTuned {
		opts = append(opts,
			grpc.MaxConcurrentStreams(maxConcurrentStreams),
			grpc.ReadBufferSize(readBufferSize),
			grpc.InitialWindowSize(windowSize),
			grpc.InitialConnWindowSize(windowSize))
	} else {
		opts = append(opts, grpc.MaxConcurrentStreams(32)) // as before
	}
	s.grpc = grpc.NewServer(opts...)
	sensorpb.RegisterSensorHealthcheckServiceServer(s.grpc, healthService{s: s})
	sensorpb.RegisterSensorEventStreamServiceServer(s.grpc, eventService{s: s})
	return s, nil
}

// Serve accepts connections on lis until Shutdown. It returns nil after
// Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpcmtls: serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting calls and waits for running ones until ctx is
// done, then closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
}

// Terminate cancels every live stream of the sensor at once; the sensor sees
// codes.PermissionDenied. Calls it makes afterwards are authorised afresh.
func (s *Server) Terminate(tenantID, sensorID string) {
	s.mu.Lock()
	live := s.streams[sensorKey{tenantID, sensorID}]
	delete(s.streams, sensorKey{tenantID, sensorID})
	s.nstream -= len(live)
	s.mu.Unlock()
	for l := range live {
		l.cancel(errTerminated)
	}
	if len(live) > 0 {
		s.log.Info("sensor streams terminated", logkey.Tenant, tenantID, logkey.Sensor, sensorID, "streams", len(live))
	}
}

// Recheck re-authorises every live stream of the sensor now and ends those
// whose certificate is no longer the sensor's active one: revoked
// (PermissionDenied, "terminated") or superseded by a renewal
// (PermissionDenied, "superseded"; a stream on the new certificate stays).
// A check that fails for another reason (database down) leaves the stream
// to its next periodic check.
func (s *Server) Recheck(ctx context.Context, tenantID, sensorID string) {
	s.mu.Lock()
	var live []*liveStream
	for l := range s.streams[sensorKey{tenantID, sensorID}] {
		live = append(live, l)
	}
	s.mu.Unlock()
	for _, l := range live {
		s.recheckStream(ctx, l)
	}
}

// RecheckAll is Recheck for every sensor with a live stream: after
// broadcasts may have been missed.
func (s *Server) RecheckAll(ctx context.Context) {
	s.mu.Lock()
	var live []*liveStream
	for _, m := range s.streams {
		for l := range m {
			live = append(live, l)
		}
	}
	s.mu.Unlock()
	for _, l := range live {
		s.recheckStream(ctx, l)
	}
}

func (s *Server) recheckStream(ctx context.Context, l *liveStream) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.auth.AuthorizeSensor(ctx, l.id.TenantID, l.id.SensorID, l.id.Serial)
	switch {
	case err == nil:
	case errors.Is(err, fleet.ErrRevoked), errors.Is(err, fleet.ErrNotFound):
		l.cancel(errTerminated)
		s.log.Info("sensor stream ended: sensor revoked", logkey.Tenant, l.id.TenantID, logkey.Sensor, l.id.SensorID)
	case errors.Is(err, fleet.ErrInvalidToken):
		l.cancel(errSuperseded)
		s.log.Info("sensor stream ended: certificate no longer active", logkey.Tenant, l.id.TenantID, logkey.Sensor, l.id.SensorID, "serial", l.id.Serial)
	default:
		s.log.Warn("stream re-check failed; kept until the next one", logkey.Tenant, l.id.TenantID, logkey.Sensor, l.id.SensorID, logkey.Error, err)
	}
}

func (s *Server) register(ctx context.Context, id Identity) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	l := &liveStream{id: id, cancel: cancel}
	k := sensorKey{id.TenantID, id.SensorID}
	s.mu.Lock()
	if s.streams[k] == nil {
		s.streams[k] = map[*liveStream]struct{}{}
	}
	s.streams[k][l] = struct{}{}
	s.nstream++
	s.mu.Unlock()
	// The periodic re-check bounds how long a stream outlives a revocation
	// or renewal whose broadcast this replica missed. A timer, not a
	// goroutine, waits for it: an idle stream costs no stack.
	var (
		timerMu sync.Mutex
		timer   *time.Timer
	)
	var recheck func()
	recheck = func() {
		if ctx.Err() != nil {
			return
		}
		s.recheckStream(context.WithoutCancel(ctx), l)
		timerMu.Lock()
		defer timerMu.Unlock()
		if ctx.Err() == nil {
			timer = time.AfterFunc(s.recheckEvery, recheck)
		}
	}
	timerMu.Lock()
	timer = time.AfterFunc(s.recheckEvery, recheck)
	timerMu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		if _, ok := s.streams[k][l]; ok {
			s.nstream--
		}
		delete(s.streams[k], l)
		if len(s.streams[k]) == 0 {
			delete(s.streams, k)
		}
		s.mu.Unlock()
		cancel(context.Canceled)
		timerMu.Lock()
		timer.Stop()
		timerMu.Unlock()
	}
}

// Stats counts what the server holds open.
type Stats struct {
	// Connections are the open gRPC connections (counted from the end of
	// their TLS handshake).
	Connections int
	// EventStreams are the open event streams.
	EventStreams int
}

// Stats returns the open connections and event streams.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Connections: int(s.conns.Load()), EventStreams: s.nstream}
}

// connCounter counts open connections.
type connCounter struct{ n *atomic.Int64 }

func (c connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c connCounter) HandleRPC(context.Context, stats.RPCStats)                       {}
func (c connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c connCounter) HandleConn(_ context.Context, st stats.ConnStats) {
	switch st.(type) {
	case *stats.ConnBegin:
		c.n.Add(1)
	case *stats.ConnEnd:
		c.n.Add(-1)
	}
}
