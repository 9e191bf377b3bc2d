// Package backendconn keeps one of the control plane's connections to NATS
// as a CONTROL-account backend user. Credentials are fetched afresh for
// every connection (a re-minted backend user replaces a revoked one instead
// of being retried forever) and checked without ever being echoed; nats.go
// reconnects on its own, and once it gives a connection up the loop dials a
// new one with jittered backoff. sensorbus (commands, status) and eventlog
// (the event stream) each run their own connection through it, so the event
// load never shares a socket with command delivery.
package backendconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// credsTimeout bounds one fetch of the credentials.
const credsTimeout = 30 * time.Second

// Config describes the connection.
type Config struct {
	URL string
	// Name is the connection name nats-server shows.
	Name string
	// Creds returns the content of a .creds file; it is called before
	// every new connection.
	Creds func(ctx context.Context) (string, error)
	// ReconnectWait is nats.go's wait between reconnects and the base of
	// the backoff between new connections; it must be positive.
	ReconnectWait time.Duration
	// DrainTimeout is nats.go's drain timeout; zero keeps its default.
	DrainTimeout time.Duration
	Logger       *slog.Logger
}

// CheckTarget checks what a client of a CONTROL-account stream needs
// before it connects: a URL, a credentials source, and a stream name (def
// when stream is empty) that is an id. It returns the stream name; pkg
// prefixes its errors.
func CheckTarget(pkg, url string, creds func(ctx context.Context) (string, error), stream, def string) (string, error) {
	if url == "" {
		return "", errors.New(pkg + ": URL is required")
	}
	if creds == nil {
		return "", errors.New(pkg + ": a credentials source is required")
	}
	if stream == "" {
		stream = def
	}
	if err := ids.Validate(stream); err != nil {
		return "", fmt.Errorf("%s: stream name: %w", pkg, err)
	}
	return stream, nil
}

// Session uses one connection. It must return once closed is closed (nats.go
// gave the connection up) or ctx ends; in the latter case it closes or
// drains nc itself.
type Session func(ctx context.Context, nc *nats.Conn, closed <-chan struct{})

// Run dials and hands each connection to session until ctx ends.
func Run(ctx context.Context, cfg Config, session Session) {
	for failures := 0; ctx.Err() == nil; {
		nc, closed, err := dial(ctx, cfg)
		if err != nil {
			wait := redial(cfg.ReconnectWait).Delay(failures)
			failures++
			cfg.Logger.Warn("nats connection failed; retrying", "attempt", failures, "wait", wait.String(), logkey.Error, err)
			backoff.Sleep(ctx, wait)
			continue
		}
		failures = 0
		cfg.Logger.Info("nats connected", "server", nc.ConnectedUrlRedacted())
		session(ctx, nc, closed)
		// A connection closed right after it opened must not spin the loop.
		backoff.Sleep(ctx, redial(cfg.ReconnectWait).Delay(0))
	}
}

// redial paces new connections after failed dials: from about base up to
// 16×base, with jitter so replicas do not dial in step.
func redial(base time.Duration) backoff.Policy {
	return backoff.Policy{Min: base, Max: 16 * base}
}

func dial(ctx context.Context, cfg Config) (*nats.Conn, <-chan struct{}, error) {
	cctx, cancel := context.WithTimeout(ctx, credsTimeout)
	creds, err := cfg.Creds(cctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("credentials: %w", err)
	}
	if err := checkCreds(creds); err != nil {
		return nil, nil, err
	}
	closed := make(chan struct{})
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.UserCredentialBytes([]byte(creds)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			cfg.Logger.Warn("nats disconnected", logkey.Error, err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			cfg.Logger.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			cfg.Logger.Warn("nats asynchronous error", "subject", subject, logkey.Error, err)
		}),
	}
	if cfg.DrainTimeout > 0 {
		opts = append(opts, nats.DrainTimeout(cfg.DrainTimeout))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, nil, err
	}
	return nc, closed, nil
}

// checkCreds reports a bad creds content once, clearly, and without echoing
// it: neither parser includes the content in its error.
func checkCreds(creds string) error {
	tok, err := jwt.ParseDecoratedJWT([]byte(creds))
	if err != nil {
		return errors.New("credentials: no user JWT in the creds content")
	}
	if _, err := jwt.DecodeUserClaims(tok); err != nil {
		return errors.New("credentials: the creds content holds no valid user JWT")
	}
	kp, err := nkeys.ParseDecoratedNKey([]byte(creds))
	if err != nil {
		return errors.New("credentials: no user seed in the creds content")
	}
	kp.Wipe()
	return nil
}
