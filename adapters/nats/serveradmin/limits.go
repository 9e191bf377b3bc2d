package serveradmin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// DefaultMaxConsumers is the command stream's consumer limit when
// StreamConfig.MaxConsumers is 0: one durable consumer per sensor, so it
// bounds the fleet. nats-server 2.15 and later cap a stream without an
// explicit limit (and without an account limit) at 1,000 consumers
// (jetstream.limits.default_max_consumers); an explicit limit on the stream
// lifts that cap.
const DefaultMaxConsumers = 1_000_000

// serverDefaultMaxConsumers is nats-server's own cap (JSDefaultMaxConsumersPerStream)
// for a stream and account without a limit, from release 2.15 on, unless the
// server's configuration sets jetstream.limits.default_max_consumers.
const serverDefaultMaxConsumers = 1_000

// ErrConsumerLimit is wrapped when nats-server refuses a consumer because the
// command stream or the account holds its maximum of consumers (JetStream
// error 10026). Retrying does not help until the limit is raised.
var ErrConsumerLimit = provisioning.ErrConsumerLimit

// ConsumerLimit is what the servers report about the command stream's room
// for consumers, checked after each (re)connect.
type ConsumerLimit struct {
	// Configured is StreamConfig.MaxConsumers (what this client asks for).
	Configured int
	// Stream is the stream's max_consumers as the server reports it (-1 or
	// 0: none set).
	Stream int
	// Account is the CONTROL account's JetStream consumer limit (-1: none).
	Account int
	// Effective is the number of consumers the stream can hold: the
	// smallest limit that applies; -1 when none does.
	Effective int
	// Source names where Effective comes from: "stream", "account",
	// "server default" (nats-server 2.15+ without stream or account limit;
	// 1,000 unless the server's configuration says otherwise) or "none".
	Source string
	// Consumers is the number of consumers the stream holds now.
	Consumers int
	// ServerVersion is the version of the server that answered.
	ServerVersion string
	// Retention is the stream's retention as the server reports it
	// (RetentionWorkQueue, RetentionInterest or RetentionLimits), which may
	// differ from the configured one when the stream is managed elsewhere.
	Retention string
	// WorkQueueWarnConsumers is StreamConfig.WorkQueueWarnConsumers.
	WorkQueueWarnConsumers int
}

// Crowded reports a work-queue or interest stream holding more consumers
// than WorkQueueWarnConsumers: nats-server checks every consumer of such a
// stream on each ack, so a command to every sensor costs time that grows
// with the square of the fleet. Limits retention does not scan.
func (l ConsumerLimit) Crowded() bool {
	return l.WorkQueueWarnConsumers > 0 && l.Consumers > l.WorkQueueWarnConsumers &&
		(l.Retention == RetentionWorkQueue || l.Retention == RetentionInterest)
}

// retentionName maps the server's retention policy to the configuration's
// words.
func retentionName(p jetstream.RetentionPolicy) string {
	switch p {
	case jetstream.WorkQueuePolicy:
		return RetentionWorkQueue
	case jetstream.InterestPolicy:
		return RetentionInterest
	case jetstream.LimitsPolicy:
		return RetentionLimits
	}
	return p.String()
}

// Caps reports whether the limit the server applies is below Configured:
// the fleet stops growing before the configuration says it should.
func (l ConsumerLimit) Caps() bool { return l.Effective >= 0 && l.Effective < l.Configured }

// effectiveLimit applies nats-server's rule (server/consumer.go): the
// stream's limit, or the account's when that is lower or the stream has
// none; when neither is set (-1 counts as unset) servers from 2.15 on apply
// their default.
func effectiveLimit(stream, account int, version string) (int, string) {
	limit, source := stream, "stream"
	if limit <= 0 || (account > 0 && account < limit) {
		limit, source = account, "account"
	}
	if limit > 0 {
		return limit, source
	}
	if versionAtLeast(version, 2, 15) {
		return serverDefaultMaxConsumers, "server default"
	}
	return -1, "none"
}

// versionAtLeast compares a "2.15.2" style version with major.minor; an
// unreadable version counts as new (the cautious guess: the server caps).
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}

// CheckConsumerLimit asks the server for the command stream's consumer limit
// and the CONTROL account's, and reports the limit that applies. It logs a
// warning when the stream has become crowded (ConsumerLimit.Crowded) since
// the last check or connect.
func (c *Client) CheckConsumerLimit(ctx context.Context) (ConsumerLimit, error) {
	l := ConsumerLimit{Configured: c.cfg.Stream.MaxConsumers, WorkQueueWarnConsumers: c.cfg.Stream.WorkQueueWarnConsumers}
	err := c.call(ctx, adminConn, func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		l.ServerVersion = nc.ConnectedServerVersion()
		st, err := js.Stream(ctx, c.cfg.Stream.Name)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		l.Stream, l.Consumers = info.Config.MaxConsumers, info.State.Consumers
		l.Retention = retentionName(info.Config.Retention)
		acct, err := js.AccountInfo(ctx)
		if err != nil {
			return err
		}
		l.Account = acct.Limits.MaxConsumers
		return nil
	})
	if err != nil {
		return ConsumerLimit{}, fmt.Errorf("serveradmin: consumer limit of stream %s: %w", c.cfg.Stream.Name, err)
	}
	l.Effective, l.Source = effectiveLimit(l.Stream, l.Account, l.ServerVersion)
	c.mu.Lock()
	warn := l.Crowded() && !c.crowdedWarned
	c.crowdedWarned = l.Crowded()
	c.mu.Unlock()
	// Logged before the result is published: once LastConsumerLimit has
	// it, its warning is written.
	if warn {
		c.log.Warn(fmt.Sprintf("the command stream has %s retention and more consumers than COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS: nats-server checks every consumer on each ack, so a command to every sensor takes time that grows with the square of the fleet; large fleets should use COMMAND_STREAM_RETENTION=limits (a new stream: retention cannot change in place)", l.Retention),
			"stream", c.cfg.Stream.Name, "retention", l.Retention, "consumers", l.Consumers, "warn_above", l.WorkQueueWarnConsumers)
	}
	c.mu.Lock()
	c.limit, c.limitKnown = l, true
	c.mu.Unlock()
	return l, nil
}

// LastConsumerLimit returns the result of the last successful
// CheckConsumerLimit.
func (c *Client) LastConsumerLimit() (ConsumerLimit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit, c.limitKnown
}

// checkConsumerLimit logs what CheckConsumerLimit found: an error when the
// server would stop the fleet below the configured size, a warning when the
// stream is nearly full or crowded.
func (c *Client) checkConsumerLimit(ctx context.Context) {
	// A crowded stream is reported after every connect (CheckConsumerLimit
	// warns again), and between connects only when it becomes crowded.
	c.mu.Lock()
	c.crowdedWarned = false
	c.mu.Unlock()
	l, err := c.CheckConsumerLimit(ctx)
	if err != nil {
		c.log.Warn("cannot check the command stream's consumer limit", "stream", c.cfg.Stream.Name, logkey.Error, err)
		return
	}
	attrs := []any{"stream", c.cfg.Stream.Name, "configured", l.Configured, "stream_limit", l.Stream,
		"account_limit", l.Account, "effective", l.Effective, "source", l.Source, "consumers", l.Consumers, "server_version", l.ServerVersion}
	switch {
	case l.Caps():
		hint := "set COMMAND_STREAM_MAX_CONSUMERS and STARTUP_ENSURE_COMMAND_STREAM=true, or set max_consumers on the stream"
		if l.Source == "account" {
			hint = "raise the CONTROL account's JetStream consumer limit"
		}
		c.log.Error("nats-server caps the command stream below COMMAND_STREAM_MAX_CONSUMERS: sensors beyond the cap get no consumer; "+hint, attrs...)
	case l.Effective > 0 && l.Consumers >= l.Effective-l.Effective/10:
		c.log.Warn("the command stream is nearly out of room for consumers", attrs...)
	default:
		c.log.Info("command stream consumer limit", attrs...)
	}
}

// isConsumerLimit reports JetStream's "maximum consumers limit reached".
func isConsumerLimit(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMaximumConsumersLimit
}

// isMaxConsumersChangeRefused reports the refusal of servers before 2.15 to
// change max_consumers of an existing stream.
func isMaxConsumersChangeRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "can not change MaxConsumers")
}
