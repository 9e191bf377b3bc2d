// Package serveradmin is the provisioner's connection to the running
// nats-servers. As the SYS user it pushes changed account JWTs with
// "$SYS.REQ.ACCOUNT.<pk>.CLAIMS.UPDATE" (the URL resolver never refetches an
// account, so a revocation only takes effect when pushed); as the CONTROL
// account's JetStream administrator it keeps the command stream, each
// sensor's durable pull consumer, and the alert event stream with its
// writer consumer in place. It connects in the background and
// keeps retrying, because nats-server will not start until the provisioner's
// resolver answers: nothing in the provisioner may wait for NATS to start.
// It implements the Pusher and Consumers ports of core/provisioning.
package serveradmin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Errors of the client.
var (
	// ErrNotConnected is returned at once, without waiting, while the
	// connection a call needs is down.
	ErrNotConnected = errors.New("not connected to NATS")
	// ErrClaimUpdate is wrapped when nats-server answers a claim update with
	// an error or with a reply that is not a success.
	ErrClaimUpdate = errors.New("claim update rejected")
	// ErrInvalidConfig is wrapped by New.
	ErrInvalidConfig = errors.New("invalid serveradmin config")
	// ErrStreamMismatch is returned when a sensor names another stream than
	// the one this client manages.
	ErrStreamMismatch = errors.New("sensor stream differs from the managed stream")
)

// StreamConfig describes the command stream.
type StreamConfig struct {
	Name string
	// Replicas defaults to 1.
	Replicas int
	// MaxAge drops commands never fetched; 0 keeps them.
	MaxAge time.Duration
	// Duplicates is the window in which a repeated Nats-Msg-Id is dropped;
	// 0 leaves the server default (2 minutes).
	Duplicates time.Duration
	// Retention is RetentionWorkQueue (default: an acked command leaves the
	// stream), RetentionInterest (an acked command leaves the stream once
	// every consumer filtering its subject acked it) or RetentionLimits
	// (commands stay until MaxAge or until MaxMsgsPerSubject newer ones for
	// the same sensor; each sensor's consumer tracks what it acked).
	// nats-server checks every consumer of a work-queue or interest stream
	// on each ack, so fleets that command thousands of sensors at once want
	// limits; see docs/benchmarks.md.
	Retention string
	// MaxMsgsPerSubject bounds the commands kept per sensor with limits
	// retention (default 64).
	MaxMsgsPerSubject int64
	// ConsumerReplicas is the replicas of each sensor's consumer; 0 means
	// Replicas. Below Replicas (1 on a three-node cluster) each consumer is
	// one node's, not a Raft group of its own: enrolment and fan-out run at
	// about single-node speed, and a consumer whose node is lost is
	// recreated on a live node by RecreateOfflineConsumers. nats-server
	// allows it only with limits retention (work-queue and interest
	// streams need consumers of the stream's replicas).
	ConsumerReplicas int
	// WorkQueueWarnConsumers is the number of consumers above which a work-queue
	// or interest command stream is reported as crowded (a warning after
	// each connect, ConsumerLimit.Crowded): every ack then scans that many
	// consumers. 0 turns the warning off.
	WorkQueueWarnConsumers int
	// MaxConsumers is the stream's consumer limit, that is the number of
	// sensors it serves; 0 means DefaultMaxConsumers. It is set explicitly
	// because nats-server 2.15+ caps a stream without one at 1,000.
	MaxConsumers int
}

// Command stream retention settings.
const (
	RetentionWorkQueue = "workqueue"
	RetentionInterest  = "interest"
	RetentionLimits    = "limits"
)

// EventStreamConfig describes the alert event stream and its durable
// writer consumer (topology.EventWriter). Only the control plane's backend
// user publishes into it and pulls from the writer consumer.
type EventStreamConfig struct {
	// Name of the stream; empty leaves event stream and consumer alone.
	Name string
	// Replicas defaults to 1.
	Replicas int
	// MaxAge drops events older than this; 0 keeps them until MaxBytes.
	MaxAge time.Duration
	// MaxBytes bounds the stream; when it is full new events are refused
	// (discard new) rather than old ones silently dropped. 0: no bound
	// besides the account's.
	MaxBytes int64
	// Duplicates is the window in which a resent event (same Nats-Msg-Id)
	// is acknowledged without a second copy; defaults to 10 minutes.
	Duplicates time.Duration
	// WriterAckWait is how long the writer has to ack a fetched event
	// before it is delivered again; defaults to 60s.
	WriterAckWait time.Duration
	// WriterMaxAckPending bounds events fetched but not acked across all
	// writers; defaults to 20000.
	WriterMaxAckPending int
}

// Config configures a Client.
type Config struct {
	// URL of the nats-servers; several may be given separated by commas.
	URL string
	// SystemUser mints the SYS account user that pushes claim updates.
	// Start calls it once and wipes the seed slice after decoding it.
	SystemUser func() (jwt string, seed []byte, err error)
	// AdminUser mints the CONTROL account's JetStream administrator, like
	// SystemUser.
	AdminUser func() (jwt string, seed []byte, err error)
	Stream    StreamConfig
	// Events is the alert event stream, managed together with the command
	// stream (ManageStream).
	Events EventStreamConfig
	// ManageStream lets the client create or update the command stream (and
	// the event stream with its writer consumer) after
	// each (re)connect of the admin connection and when a consumer finds it
	// missing. When false (STARTUP_ENSURE_COMMAND_STREAM=false) the stream is
	// managed elsewhere and only consumers are created.
	ManageStream bool
	// UpgradeLock, when set, is held while the command stream is carried
	// over to limits retention (upgrade.go): replicas sharing it take turns,
	// so only one upgrades and the others find the work done. nil: only
	// this process's upgrades are serialised.
	UpgradeLock func(ctx context.Context) (unlock func(), err error)
	// ConsumerAckWait is how long a sensor has to ack a command before it is
	// redelivered; defaults to 30s.
	ConsumerAckWait time.Duration
	// ConsumerMaxDeliver bounds deliveries of one command; defaults to 10.
	ConsumerMaxDeliver int
	// ConsumerMaxAckPending bounds unacknowledged commands per sensor;
	// defaults to 16.
	ConsumerMaxAckPending int
	// Logger defaults to discarding; the caller names the component (the
	// client adds no component key, so no record carries it twice).
	Logger *slog.Logger
	// RequestTimeout bounds every request to NATS; defaults to 5s.
	RequestTimeout time.Duration
	// MaxReconnectWait caps the back-off between connection attempts;
	// defaults to 5s.
	MaxReconnectWait time.Duration
}

// Client holds the SYS and the CONTROL admin connections. Its methods are
// safe for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	links   [2]link
	hook    func(ctx context.Context)
	started bool
	closed  bool
	cancel  context.CancelFunc

	limit      ConsumerLimit
	limitKnown bool
	// crowdedWarned is set once the crowded-stream warning was logged for
	// the current connection and the stream stayed crowded since.
	crowdedWarned bool

	// upgradeMu serialises stream upgrades (upgrade.go).
	upgradeMu sync.Mutex

	// placed keeps the nodes consumers were created on until
	// Placements hands them over (nodes.go).
	placed placements

	hookKick   chan struct{}
	streamKick chan struct{}
	wg         sync.WaitGroup
}

// link is one connection and the signal of its current session.
type link struct {
	nc *nats.Conn
	// down is closed when the connection drops, ending calls in flight; nil
	// while the connection is not up.
	down chan struct{}
}

type role int

const (
	sysConn role = iota
	adminConn
)

func (r role) String() string {
	if r == sysConn {
		return "sys"
	}
	return "control-admin"
}

// New checks cfg, fills defaults and returns a Client that is not connected
// yet; Start connects.
func New(cfg Config) (*Client, error) {
	if err := checkURLs(cfg.URL); err != nil {
		return nil, fmt.Errorf("serveradmin: %w: %v", ErrInvalidConfig, err)
	}
	if cfg.SystemUser == nil || cfg.AdminUser == nil {
		return nil, fmt.Errorf("serveradmin: %w: SystemUser and AdminUser are required", ErrInvalidConfig)
	}
	if err := ids.Validate(cfg.Stream.Name); err != nil {
		return nil, fmt.Errorf("serveradmin: %w: stream name: %v", ErrInvalidConfig, err)
	}
	if cfg.Stream.Replicas == 0 {
		cfg.Stream.Replicas = 1
	}
	if cfg.Stream.Retention == "" {
		cfg.Stream.Retention = RetentionWorkQueue
	}
	if cfg.Stream.MaxMsgsPerSubject == 0 {
		cfg.Stream.MaxMsgsPerSubject = 64
	}
	if cfg.Stream.MaxConsumers == 0 {
		cfg.Stream.MaxConsumers = DefaultMaxConsumers
	}
	if cfg.Stream.ConsumerReplicas == 0 {
		cfg.Stream.ConsumerReplicas = cfg.Stream.Replicas
	}
	s := cfg.Stream
	switch {
	case s.Retention != RetentionWorkQueue && s.Retention != RetentionInterest && s.Retention != RetentionLimits:
		return nil, fmt.Errorf("serveradmin: %w: stream retention %q, want %q, %q or %q", ErrInvalidConfig, s.Retention, RetentionWorkQueue, RetentionInterest, RetentionLimits)
	case s.WorkQueueWarnConsumers < 0:
		return nil, fmt.Errorf("serveradmin: %w: negative consumer warning threshold", ErrInvalidConfig)
	case s.MaxMsgsPerSubject < 0:
		return nil, fmt.Errorf("serveradmin: %w: negative max messages per subject", ErrInvalidConfig)
	case s.MaxConsumers < 0:
		// nats-server 2.15+ treats -1 ("unlimited") as unset and applies its
		// default of 1,000.
		return nil, fmt.Errorf("serveradmin: %w: stream max consumers %d, want a positive limit", ErrInvalidConfig, s.MaxConsumers)
	case s.Replicas < 1 || s.Replicas > 5:
		return nil, fmt.Errorf("serveradmin: %w: stream replicas %d, want 1 to 5", ErrInvalidConfig, s.Replicas)
	case s.ConsumerReplicas < 1 || s.ConsumerReplicas > s.Replicas:
		return nil, fmt.Errorf("serveradmin: %w: consumer replicas %d, want 1 to the stream's %d", ErrInvalidConfig, s.ConsumerReplicas, s.Replicas)
	case s.ConsumerReplicas != s.Replicas && s.Retention != RetentionLimits:
		return nil, fmt.Errorf("serveradmin: %w: consumer replicas %d below the stream's %d need %s retention (nats-server refuses them on a %s stream)", ErrInvalidConfig, s.ConsumerReplicas, s.Replicas, RetentionLimits, s.Retention)
	case s.MaxAge < 0 || s.Duplicates < 0:
		return nil, fmt.Errorf("serveradmin: %w: negative stream max age or duplicate window", ErrInvalidConfig)
	case s.MaxAge > 0 && s.Duplicates > s.MaxAge:
		return nil, fmt.Errorf("serveradmin: %w: duplicate window %s exceeds max age %s", ErrInvalidConfig, s.Duplicates, s.MaxAge)
	case cfg.ConsumerAckWait < 0 || cfg.ConsumerMaxDeliver < 0 || cfg.ConsumerMaxAckPending < 0 || cfg.RequestTimeout < 0 || cfg.MaxReconnectWait < 0:
		return nil, fmt.Errorf("serveradmin: %w: negative consumer or timeout setting", ErrInvalidConfig)
	}
	if err := checkEvents(&cfg.Events, cfg.Stream.Name); err != nil {
		return nil, fmt.Errorf("serveradmin: %w: event stream: %v", ErrInvalidConfig, err)
	}
	cfg.ConsumerAckWait = orDefault(cfg.ConsumerAckWait, 30*time.Second)
	cfg.ConsumerMaxDeliver = orDefault(cfg.ConsumerMaxDeliver, 10)
	cfg.ConsumerMaxAckPending = orDefault(cfg.ConsumerMaxAckPending, 16)
	cfg.RequestTimeout = orDefault(cfg.RequestTimeout, 5*time.Second)
	cfg.MaxReconnectWait = orDefault(cfg.MaxReconnectWait, 5*time.Second)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		cfg: cfg, log: log,
		hookKick: make(chan struct{}, 1), streamKick: make(chan struct{}, 1),
	}, nil
}

// checkEvents validates the event stream settings and fills defaults.
func checkEvents(e *EventStreamConfig, commandStream string) error {
	if e.Name == "" {
		return nil
	}
	if err := ids.Validate(e.Name); err != nil {
		return fmt.Errorf("name: %v", err)
	}
	if e.Name == commandStream {
		return fmt.Errorf("name %q is the command stream's", e.Name)
	}
	e.Replicas = orDefault(e.Replicas, 1)
	e.Duplicates = orDefault(e.Duplicates, 10*time.Minute)
	e.WriterAckWait = orDefault(e.WriterAckWait, 60*time.Second)
	e.WriterMaxAckPending = orDefault(e.WriterMaxAckPending, 20000)
	switch {
	case e.Replicas < 1 || e.Replicas > 5:
		return fmt.Errorf("replicas %d, want 1 to 5", e.Replicas)
	case e.MaxAge < 0 || e.MaxBytes < 0 || e.Duplicates < 0 || e.WriterAckWait < 0 || e.WriterMaxAckPending < 0:
		return errors.New("negative setting")
	case e.MaxAge > 0 && e.Duplicates > e.MaxAge:
		return fmt.Errorf("duplicate window %s exceeds max age %s", e.Duplicates, e.MaxAge)
	}
	return nil
}

// checkURLs catches malformed server URLs up front: nats.go would otherwise
// report them only from the background connect loop.
func checkURLs(list string) error {
	if strings.TrimSpace(list) == "" {
		return errors.New("URL is required")
	}
	for _, u := range strings.Split(list, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" {
			return fmt.Errorf("server URL %q is malformed", redact(u))
		}
	}
	return nil
}

// redact hides a password in a URL for error messages.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable)"
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// OnConnect registers fn to run after every connect and reconnect of the SYS
// connection, so the caller can push account JWTs that changed while NATS
// was away. Runs never overlap; a (re)connect during a run causes one more
// run. fn's ctx ends when the client closes.
func (c *Client) OnConnect(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = fn
}

// Start mints the two users and connects both in the background, retrying
// with back-off until Close or until ctx ends. It returns at once; it fails
// only when a user cannot be minted or Start was called before. Once the
// admin connection is up (and after each reconnect) the command stream is
// ensured.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return errors.New("serveradmin: Start called twice or after Close")
	}
	creds := [2]func() (string, []byte, error){sysConn: c.cfg.SystemUser, adminConn: c.cfg.AdminUser}
	var opts [2]nats.Option
	for r, mint := range creds {
		o, err := userAuth(mint)
		if err != nil {
			return fmt.Errorf("serveradmin: %s user: %w", role(r), err)
		}
		opts[r] = o
	}
	c.started = true
	ctx, c.cancel = context.WithCancel(ctx)
	c.run(func() { c.worker(ctx, c.hookKick, c.runHook) })
	c.run(func() { c.worker(ctx, c.streamKick, c.ensureStreamOnConnect) })
	c.run(func() { c.dial(ctx, sysConn, opts[sysConn], c.hookKick) })
	c.run(func() { c.dial(ctx, adminConn, opts[adminConn], c.streamKick) })
	c.run(func() { <-ctx.Done(); c.shutdown() })
	return nil
}

func (c *Client) run(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// userAuth mints a user once and signs the server's nonce with its key on
// every (re)connect. The seed stays inside the key pair.
func userAuth(mint func() (string, []byte, error)) (nats.Option, error) {
	tok, seed, err := mint()
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed(seed)
	clear(seed)
	if err != nil {
		return nil, errors.New("seed does not decode")
	}
	return nats.UserJWT(
		func() (string, error) { return tok, nil },
		func(nonce []byte) ([]byte, error) { return kp.Sign(nonce) },
	), nil
}

// dial creates the connection. nats.go then reconnects by itself forever;
// the loop here only covers errors Connect reports before that (such as a
// malformed URL).
func (c *Client) dial(ctx context.Context, r role, auth nats.Option, kick chan struct{}) {
	log := c.log.With("conn", r.String())
	up := func(nc *nats.Conn) {
		c.up(r, nc)
		log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	opts := []nats.Option{
		nats.Name("rxc-provisioner-" + r.String()),
		auth,
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.IgnoreAuthErrorAbort(),
		nats.CustomReconnectDelay(c.backoff),
		// Buffering while disconnected would turn fail-fast calls into
		// timeouts; callers retry instead.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(up),
		nats.ReconnectHandler(up),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.lost(r)
			log.Warn("disconnected from NATS", logkey.Error, err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS error", logkey.Error, err)
		}),
	}
	for attempt := 0; ; attempt++ {
		nc, err := nats.Connect(c.cfg.URL, opts...)
		if err == nil {
			c.keep(r, nc)
			return
		}
		log.Error("cannot set up NATS connection", logkey.Error, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.backoff(attempt)):
		}
	}
}

// backoff doubles from 100ms up to MaxReconnectWait, with jitter so a fleet
// of provisioners does not reconnect in step.
func (c *Client) backoff(attempt int) time.Duration {
	return backoff.Policy{Min: 100 * time.Millisecond, Max: c.cfg.MaxReconnectWait}.Delay(attempt)
}

// keep records the connection nats.Connect returned; it may not be up yet.
func (c *Client) keep(r role, nc *nats.Conn) {
	c.mu.Lock()
	closed := c.closed
	if !closed && c.links[r].nc == nil {
		c.links[r].nc = nc
	}
	c.mu.Unlock()
	if closed {
		nc.Close()
	}
}

// up starts a new session of connection r.
func (c *Client) up(r role, nc *nats.Conn) {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		l := &c.links[r]
		if l.down != nil {
			close(l.down)
		}
		l.nc, l.down = nc, make(chan struct{})
	}
	c.mu.Unlock()
	if closed {
		nc.Close()
	}
}

// lost ends the current session of connection r.
func (c *Client) lost(r role) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := &c.links[r]; l.down != nil {
		close(l.down)
		l.down = nil
	}
}

// session returns connection r and its session signal when it is up now.
func (c *Client) session(r role) (link, error) {
	c.mu.Lock()
	l := c.links[r]
	c.mu.Unlock()
	if l.nc == nil || l.down == nil || !l.nc.IsConnected() {
		return link{}, fmt.Errorf("serveradmin: %s connection: %w", r, ErrNotConnected)
	}
	return l, nil
}

// call runs fn on connection r with a context bounded by RequestTimeout that
// also ends when the connection drops, so a call caught by an outage fails
// with ErrNotConnected at once instead of waiting for its timeout.
func (c *Client) call(ctx context.Context, r role, fn func(ctx context.Context, nc *nats.Conn) error) error {
	return c.callWithin(ctx, r, c.cfg.RequestTimeout, fn)
}

// callWithin is call bounded by d instead of RequestTimeout.
func (c *Client) callWithin(ctx context.Context, r role, d time.Duration, fn func(ctx context.Context, nc *nats.Conn) error) error {
	l, err := c.session(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ctx, drop := context.WithCancelCause(ctx)
	defer drop(nil)
	go func() {
		select {
		case <-l.down:
			drop(ErrNotConnected)
		case <-ctx.Done():
		}
	}()
	err = fn(ctx, l.nc)
	if err != nil && (errors.Is(context.Cause(ctx), ErrNotConnected) || outage(err) || !l.nc.IsConnected()) {
		return fmt.Errorf("serveradmin: %s connection dropped during the call: %w (%w)", r, ErrNotConnected, err)
	}
	return err
}

// outage reports whether err is nats.go's way of saying the connection went
// away under the call: the client noticed the drop before our disconnect
// handler ran, so the session signal has not fired yet. With ReconnectBufSize
// at -1 a publish during reconnection fails with ErrReconnectBufExceeded.
func outage(err error) bool {
	for _, e := range []error{
		nats.ErrReconnectBufExceeded, nats.ErrConnectionReconnecting,
		nats.ErrConnectionClosed, nats.ErrConnectionDraining,
		nats.ErrDisconnected, nats.ErrNoServers, nats.ErrStaleConnection,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (c *Client) worker(ctx context.Context, kick chan struct{}, fn func(context.Context)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			fn(ctx)
		}
	}
}

func (c *Client) runHook(ctx context.Context) {
	c.mu.Lock()
	fn := c.hook
	c.mu.Unlock()
	if fn != nil {
		fn(ctx)
	}
}

// ensureStreamOnConnect runs after each (re)connect of the admin connection:
// it ensures the streams when the client manages them, then checks the
// command stream's room for consumers.
func (c *Client) ensureStreamOnConnect(ctx context.Context) {
	defer c.checkConsumerLimit(ctx)
	if !c.cfg.ManageStream {
		return
	}
	if err := c.EnsureStream(ctx); err != nil {
		c.log.Error("cannot ensure the command stream", "stream", c.cfg.Stream.Name, logkey.Error, err)
	}
	if c.cfg.Events.Name == "" {
		return
	}
	if err := c.EnsureEventStream(ctx); err != nil {
		c.log.Error("cannot ensure the event stream", "stream", c.cfg.Events.Name, logkey.Error, err)
	}
}

// Ready reports whether both connections are up.
func (c *Client) Ready() bool {
	_, errSys := c.session(sysConn)
	_, errAdmin := c.session(adminConn)
	return errSys == nil && errAdmin == nil
}

// Close closes both connections and waits for the background work, including
// a running OnConnect function, to stop. It is safe to call more than once.
func (c *Client) Close() {
	c.shutdown()
	c.wg.Wait()
}

func (c *Client) shutdown() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	links, cancel := c.links, c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, l := range links {
		if l.nc != nil {
			l.nc.Close()
		}
	}
}

// The ports this adapter implements.
var (
	_ provisioning.Pusher    = (*Client)(nil)
	_ provisioning.Consumers = (*Client)(nil)
)
