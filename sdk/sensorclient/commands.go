package sensorclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// Defaults of CommandsConfig.
const (
	DefaultFetchWait   = 5 * time.Second
	DefaultNATSTimeout = 5 * time.Second
	fetchBatch         = 8
)

// Errors of Commands.
var (
	// ErrNATSRefused: the server closed the connection for good because it
	// refuses the credentials (revoked user, or an authorisation failure
	// nats.go gave up on). It may mean the sensor was revoked.
	ErrNATSRefused = errors.New("nats refused the sensor's credentials")
	// ErrNotConnected: a status could not be published because the
	// connection is down; the caller reports again later.
	ErrNotConnected = errors.New("nats not connected")
)

// CommandsConfig configures Commands.
type CommandsConfig struct {
	// TenantID and SensorID are this sensor's; commands naming another
	// sensor are refused.
	TenantID string
	SensorID string
	NATS     NATSInfo
	Creds    []byte
	// Name is the connection name shown by the server.
	Name string
	// Backoff paces reconnections and retries after failed pulls.
	Backoff Backoff
	// FetchWait is how long one pull waits for commands (default 5s).
	FetchWait time.Duration
	// Timeout bounds a consumer lookup, an ack or a flush (default 5s).
	Timeout time.Duration
	// Handle applies a command; it is acked when Handle returns.
	Handle func(ctx context.Context, c Command)
	// Skipped is told about commands acknowledged without being applied:
	// expired, addressed to another sensor, malformed (zero Command) or
	// with an unsupported action. err says which.
	Skipped func(ctx context.Context, c Command, err error)
	// Connected, when set, is called after every (re)connection, e.g. to
	// report the current status at once.
	Connected func()
	// Confirmed, when set, is told the control plane's confirmations of
	// the results it recorded (see Outbox); reports carrying results then
	// ask for one. Confirmations naming another sensor never reach it.
	Confirmed func(Confirmation)
	Logger    *slog.Logger
	Clock     func() time.Time
}

// Commands is the sensor's NATS side: it pulls the sensor's own commands
// from its durable consumer through the imported JetStream API, and
// publishes status on core NATS.
type Commands struct {
	cfg CommandsConfig
	log *slog.Logger

	credMu sync.Mutex // apart from mu: nats.Connect asks for them while mu is held
	userJW string
	seed   string

	mu     sync.Mutex
	nc     *nats.Conn
	closed bool
	// refused remembers an authentication failure the server sent.
	refused error
}

// NewCommands checks cfg; it does not connect.
func NewCommands(cfg CommandsConfig) (*Commands, error) {
	if cfg.TenantID == "" || cfg.SensorID == "" {
		return nil, errors.New("sensorclient: tenant and sensor ids are required")
	}
	n := cfg.NATS
	if n.URL == "" || n.Stream == "" || n.Consumer == "" || n.JSAPIPrefix == "" || n.InboxPrefix == "" || n.StatusSubject == "" {
		return nil, errors.New("sensorclient: NATS url, stream, consumer, jsApiPrefix, inboxPrefix and statusSubject are required")
	}
	if cfg.Handle == nil {
		return nil, errors.New("sensorclient: a command handler is required")
	}
	userJWT, seed, err := parseCreds(cfg.Creds)
	if err != nil {
		return nil, err
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = DefaultFetchWait
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultNATSTimeout
	}
	if cfg.Skipped == nil {
		cfg.Skipped = func(context.Context, Command, error) {}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Backoff = cfg.Backoff.WithDefaults()
	return &Commands{cfg: cfg, log: log, userJW: userJWT, seed: seed}, nil
}

func parseCreds(creds []byte) (string, string, error) {
	userJWT, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "", "", fmt.Errorf("sensorclient: nats creds: %w", err)
	}
	if _, err := jwt.DecodeUserClaims(userJWT); err != nil {
		return "", "", fmt.Errorf("sensorclient: nats creds hold no valid user JWT: %w", err)
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		return "", "", fmt.Errorf("sensorclient: nats creds: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", "", fmt.Errorf("sensorclient: nats creds: %w", err)
	}
	return userJWT, string(seed), nil
}

// SetCreds replaces the credentials the connection authenticates with on
// its next (re)connection, e.g. after a renewal handed out a user JWT with
// a later expiry: nats-server closes a connection whose JWT expires, and
// the reconnection then presents the new one.
func (c *Commands) SetCreds(creds []byte) error {
	userJWT, seed, err := parseCreds(creds)
	if err != nil {
		return err
	}
	c.credMu.Lock()
	c.userJW, c.seed = userJWT, seed
	c.credMu.Unlock()
	return nil
}

// creds are the current credentials, for nats.go's callbacks.
func (c *Commands) creds() (string, string) {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	return c.userJW, c.seed
}

// connect opens the connection; nats.go keeps reconnecting with our
// backoff until the server refuses the credentials.
func (c *Commands) connect() (*nats.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("sensorclient: commands closed")
	}
	if c.nc != nil {
		return c.nc, nil
	}
	nc, err := nats.Connect(c.cfg.NATS.URL,
		nats.UserJWT(func() (string, error) {
			tok, _ := c.creds()
			return tok, nil
		}, func(nonce []byte) ([]byte, error) {
			_, seed := c.creds()
			kp, err := nkeys.FromSeed([]byte(seed))
			if err != nil {
				return nil, err
			}
			defer kp.Wipe()
			return kp.Sign(nonce)
		}),
		nats.CustomInboxPrefix(c.cfg.NATS.InboxPrefix),
		nats.Name(c.cfg.Name),
		nats.Timeout(c.cfg.Timeout),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration { return c.cfg.Backoff.Delay(attempts - 1) }),
		// A status is reported again after a reconnection; queued stale
		// ones would only be refused as out of date.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(*nats.Conn) { c.connected("connected") }),
		nats.ReconnectHandler(func(*nats.Conn) { c.connected("reconnected") }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.log.Warn("nats disconnected", logkey.Error, err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.asyncError(err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	if err := c.subscribeConfirmations(nc); err != nil {
		nc.Close()
		return nil, err
	}
	c.nc = nc
	return nc, nil
}

func (c *Commands) connected(how string) {
	c.log.Info("nats "+how, "url", c.cfg.NATS.URL)
	// A refusal before this (re)connection, such as an expired JWT
	// replaced since, no longer holds.
	c.mu.Lock()
	c.refused = nil
	c.mu.Unlock()
	if c.cfg.Connected != nil {
		go c.cfg.Connected()
	}
}

func (c *Commands) asyncError(err error) {
	if errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
		c.mu.Lock()
		c.refused = err
		c.mu.Unlock()
	}
	c.log.Warn("nats error", logkey.Error, err)
}

// Run connects, then pulls and handles commands until ctx ends (nil) or the
// server refuses the credentials for good (an error wrapping
// ErrNATSRefused). Outages in between are retried with backoff.
func (c *Commands) Run(ctx context.Context) error {
	nc, err := c.connect()
	if err != nil {
		return err
	}
	js, err := jetstream.NewWithAPIPrefix(nc, c.cfg.NATS.JSAPIPrefix)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	var cons jetstream.Consumer
	failures := 0
	for ctx.Err() == nil {
		if nc.IsClosed() {
			return c.closedError(nc)
		}
		if cons == nil {
			lctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			cons, err = js.Consumer(lctx, c.cfg.NATS.Stream, c.cfg.NATS.Consumer)
			cancel()
			if err != nil {
				cons = nil
				c.retry(ctx, "command consumer lookup", err, &failures)
				continue
			}
			c.log.Info("command consumer bound", "stream", c.cfg.NATS.Stream, "consumer", c.cfg.NATS.Consumer)
		}
		if err := c.fetch(ctx, cons); err != nil {
			// A consumer that does not answer may be recreated on another
			// NATS node (a node loss, docs/operations.md): its commands
			// wait there, so the pull is retried at least every
			// pullRetryMax rather than at the full back-off.
			c.retryWithin(ctx, "command pull", err, &failures, pullRetryMax)
			continue
		}
		failures = 0
	}
	return nil
}

func (c *Commands) retry(ctx context.Context, what string, err error, failures *int) {
	c.retryWithin(ctx, what, err, failures, 0)
}

// pullRetryMax caps the pause between failed command pulls.
const pullRetryMax = 5 * time.Second

// retryWithin is retry pausing at most limit (0: the back-off's maximum).
func (c *Commands) retryWithin(ctx context.Context, what string, err error, failures *int, limit time.Duration) {
	if ctx.Err() != nil {
		return
	}
	if *failures == 0 || *failures%10 == 0 {
		c.log.Warn(what+" failed; retrying", logkey.Error, err, "attempt", *failures+1)
	}
	b := c.cfg.Backoff
	if limit > 0 && (b.Max == 0 || b.Max > limit) {
		b.Max = limit
		b.Min = min(cmp.Or(b.Min, DefaultBackoffMin), limit)
	}
	b.Wait(ctx, *failures)
	*failures++
}

func (c *Commands) closedError(nc *nats.Conn) error {
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	last := nc.LastError()
	if refused == nil && (errors.Is(last, nats.ErrAuthorization) || errors.Is(last, nats.ErrAuthRevoked) || errors.Is(last, nats.ErrAuthExpired)) {
		refused = last
	}
	if refused != nil {
		return fmt.Errorf("%w: %w", ErrNATSRefused, refused)
	}
	return fmt.Errorf("nats connection closed: %v", last)
}

// fetch pulls one batch and handles it. No commands within FetchWait is
// not an error.
func (c *Commands) fetch(ctx context.Context, cons jetstream.Consumer) error {
	fctx, cancel := context.WithTimeout(ctx, c.cfg.FetchWait)
	defer cancel()
	batch, err := cons.Fetch(fetchBatch, jetstream.FetchContext(fctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for msg := range batch.Messages() {
		c.handle(ctx, msg)
	}
	err = batch.Error()
	if err == nil || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return nil
	}
	return err
}

// handle decodes, checks and applies one command, then acks it.
func (c *Commands) handle(ctx context.Context, msg jetstream.Msg) {
	cmd, err := DecodeCommand(msg.Data())
	switch {
	case err == nil && (cmd.TenantID != c.cfg.TenantID || cmd.SensorID != c.cfg.SensorID):
		err = fmt.Errorf("%w: %s/%s", ErrForeignCommand, truncate(cmd.TenantID, 64), truncate(cmd.SensorID, 64))
	case err == nil && cmd.Expired(c.cfg.Clock()):
		err = fmt.Errorf("%w at %s", ErrExpiredCommand, cmd.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if err != nil {
		// The payload is not logged: it is not ours to trust.
		c.log.Warn("command skipped", logkey.Command, cmd.CommandID, "action", truncate(string(cmd.Action), 64), logkey.Error, err)
		c.ack(ctx, msg, cmd.CommandID)
		c.cfg.Skipped(ctx, cmd, err)
		return
	}
	c.log.Info("command received", logkey.Command, cmd.CommandID, "action", string(cmd.Action), "issued_by", truncate(cmd.IssuedBy, 128))
	c.cfg.Handle(ctx, cmd)
	c.ack(ctx, msg, cmd.CommandID)
}

// ack acknowledges msg and waits for the server to confirm, so a command is
// not redelivered once its result was reported. Commands that must never
// be applied are acked too: redelivering them cannot make them valid.
func (c *Commands) ack(ctx context.Context, msg jetstream.Msg, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		c.log.Warn("command ack failed; it will be redelivered", logkey.Command, id, logkey.Error, err)
	}
}

// PublishStatus publishes s on the sensor's status subject and flushes it.
func (c *Commands) PublishStatus(ctx context.Context, s Status) error {
	switch s.State {
	case StateOnline, StateRunning, StateStopped, StateError:
	default:
		return fmt.Errorf("sensorclient: state %q cannot be reported", s.State)
	}
	data, err := encodeStatus(s)
	if err != nil {
		return err
	}
	c.mu.Lock()
	nc := c.nc
	c.mu.Unlock()
	if nc == nil || !nc.IsConnected() {
		return ErrNotConnected
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: c.cfg.NATS.StatusSubject, Reply: c.confirmReply(len(s.Results) > 0), Data: data}); err != nil {
		return fmt.Errorf("publish status: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("publish status: %w", err)
	}
	return nil
}

// Close flushes what is pending (bounded by Timeout) and closes the
// connection.
func (c *Commands) Close() {
	c.mu.Lock()
	nc := c.nc
	c.closed, c.nc = true, nil
	c.mu.Unlock()
	if nc == nil {
		return
	}
	if nc.IsConnected() {
		_ = nc.FlushTimeout(c.cfg.Timeout)
	}
	nc.Close()
}
