package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// Errors of command publication. A publisher wraps exactly one of them
// (beside ErrMessagingUnavailable or ErrMessagingDisabled): the difference
// is whether the command may have been stored.
var (
	// ErrNotPublished: the command provably did not reach the stream (it
	// was never sent, or the stream refused it).
	ErrNotPublished = errors.New("command not stored")
	// ErrPublishUnknown: the command was sent but its acknowledgement did
	// not come; it may be stored.
	ErrPublishUnknown = errors.New("command publication unconfirmed")
)

// PublishAck is the stream's acknowledgement of a command.
type PublishAck struct {
	// Sequence is the command's sequence in the stream.
	Sequence uint64
	// Duplicate is true when the stream held the message id already: an
	// earlier, unconfirmed publication of the same command was stored.
	Duplicate bool
}

// CommandPublisher delivers a command to its sensor, with the command id as
// the deduplication id: the same command published again is stored once.
// Errors wrap ErrMessagingUnavailable or ErrMessagingDisabled, and
// ErrNotPublished or ErrPublishUnknown.
type CommandPublisher interface {
	// PublishCommand publishes c to its sensor (c.TenantID, c.SensorID)
	// with c.ID as the deduplication id. What the sensor is sent (id,
	// tenant, sensor, action, issuedAt, issuedBy, expiresAt) and where it
	// goes on the wire are the publisher's business.
	PublishCommand(ctx context.Context, c Command) (PublishAck, error)
}

// PublishResult is one command's outcome: Ack when Err is nil, else Err as
// PublishCommand would return it.
type PublishResult struct {
	Ack PublishAck
	Err error
}

// CommandBatchPublisher is a CommandPublisher that also publishes many
// commands pipelined: at most window unacknowledged at once, without
// waiting for each acknowledgement before sending the next. Batches use it
// when the publisher has it.
type CommandBatchPublisher interface {
	CommandPublisher
	// PublishCommands publishes msgs and returns each one's outcome, in
	// order, with the guarantees and errors of PublishCommand.
	PublishCommands(ctx context.Context, cmds []Command, window int) []PublishResult
}

// CommandStore persists commands.
type CommandStore interface {
	// CreateCommand records c (status pending) and makes it the sensor's
	// last command. When c has an idempotency key the sensor already used,
	// nothing is written and the existing command is returned with created
	// false; ErrConflict when that command asks for another action.
	CreateCommand(ctx context.Context, c Command) (stored Command, created bool, err error)
	// AcceptCommand marks a pending command accepted by the stream.
	AcceptCommand(ctx context.Context, id string, seq uint64, at time.Time) error
	// FailCommand marks a pending command failed (provably not stored);
	// a command the sensor reported on is never marked failed.
	FailCommand(ctx context.Context, id string, at time.Time) error
	// PendingCommands lists pending commands first sent at or after since
	// (never-sent batch commands are not listed), oldest first, at most
	// limit.
	PendingCommands(ctx context.Context, since time.Time, limit int) ([]Command, error)
	// ExpireCommands marks pending and accepted commands the sensor has
	// not reported on whose expiresAt lies before before expired, and
	// returns how many. A report recorded later (results reach the control
	// plane after an outage) still records its outcome and makes the
	// command accepted.
	ExpireCommands(ctx context.Context, before time.Time) (int, error)
	// SensorCommands pages a sensor's commands, newest first: those issued
	// before after (the cursor of the previous page; zero for the first).
	SensorCommands(ctx context.Context, sensorID string, after CommandCursor, limit int) ([]Command, error)
}

// CommandCursor is a position in a sensor's command history.
type CommandCursor struct {
	IssuedAt time.Time
	ID       string
}

// Bounds of command requests.
const (
	maxIdempotencyKey = 128
	// MaxCommandPage bounds one page of command history.
	MaxCommandPage = 200
	// republishWindow is how long after its first publication a pending
	// command is published again with the same message id: inside the stream's
	// 2-minute duplicate window (a republication of a stored command is
	// then acknowledged as a duplicate, never stored twice), with margin.
	republishWindow = 90 * time.Second
	// reconcileAfter leaves a command's first publication (bounded by the
	// publisher's timeout, 5 s by default) to settle it.
	reconcileAfter = 15 * time.Second
)

// IssueCommand records a start or stop command for an enrolled, unrevoked
// sensor and publishes it. The returned command's status says what is
// known: accepted (the stream acknowledged it), pending (sent, not
// confirmed: ReconcileCommands settles it), or failed (provably not stored;
// the publisher's error is returned too). With an idempotency key the
// sensor used before, the existing command is returned and not published
// again unless it is still pending; created says which.
func (s *Commands) IssueCommand(ctx context.Context, sensorID string, action Action, issuedBy, idempotencyKey string) (c Command, created bool, err error) {
	if !action.Valid() {
		return Command{}, false, fmt.Errorf("%w: action %q (want start or stop)", ErrInvalidInput, action)
	}
	if err := validateLabel("issuer", issuedBy, maxIssuer); err != nil {
		return Command{}, false, err
	}
	if err := validateIdempotencyKey(idempotencyKey); err != nil {
		return Command{}, false, err
	}
	sensor, err := readValid(ctx, "sensor id", sensorID, s.store.Sensor)
	if err != nil {
		return Command{}, false, err
	}
	switch sensor.State {
	case StateRevoked:
		return Command{}, false, fmt.Errorf("command for sensor %s: %w", sensorID, ErrRevoked)
	case StatePending:
		return Command{}, false, fmt.Errorf("command for sensor %s: %w", sensorID, ErrNotEnrolled)
	}
	id, err := NewUUID()
	if err != nil {
		return Command{}, false, err
	}
	now := s.now()
	c = Command{
		ID: id, TenantID: sensor.TenantID, SensorID: sensor.ID, Action: action,
		IssuedAt: now, IssuedBy: issuedBy, ExpiresAt: now.Add(s.commandTTL),
		IdempotencyKey: idempotencyKey, Status: CommandPending,
	}
	c, created, err = s.store.CreateCommand(ctx, c)
	if err != nil {
		return Command{}, false, fmt.Errorf("record command: %w", err)
	}
	if !created && (c.Status != CommandPending || !now.Before(c.IssuedAt.Add(republishWindow))) {
		// Settled, or pending too long to publish again safely: the
		// reconciliation and the sensor's report settle it.
		return c, false, nil
	}
	// Only the first publication can prove the command was never stored; a
	// later one failing says nothing about an earlier one.
	c, err = s.publish(ctx, c, created)
	if err == nil {
		s.log.InfoContext(ctx, "command issued", logkey.Tenant, c.TenantID, logkey.Sensor, c.SensorID, logkey.Command, c.ID, "action", string(c.Action), "status", string(c.Status))
	}
	return c, created, err
}

// publish sends c (again) with its id as the message id and records what
// the stream answered. A refusal marks the command failed only when first
// is set: otherwise an earlier publication may be stored.
func (s *Commands) publish(ctx context.Context, c Command, first bool) (Command, error) {
	ack, err := s.publisher.PublishCommand(ctx, c)
	wctx := context.WithoutCancel(ctx)
	switch {
	case err == nil:
		at := s.now()
		if serr := s.store.AcceptCommand(wctx, c.ID, ack.Sequence, at); serr != nil {
			// Stored in the stream: the record catches up with the
			// reconciliation or the sensor's report.
			s.log.ErrorContext(ctx, "record accepted command", logkey.Command, c.ID, logkey.Error, serr)
			return c, nil
		}
		c.Status, c.AcceptedAt, c.StreamSeq = CommandAccepted, at, ack.Sequence
		return c, nil
	case errors.Is(err, ErrNotPublished) && first:
		at := s.now()
		if ferr := s.store.FailCommand(wctx, c.ID, at); ferr != nil {
			s.log.ErrorContext(ctx, "mark command failed", logkey.Command, c.ID, logkey.Error, ferr)
		} else {
			c.Status, c.FailedAt = CommandFailed, at
		}
		return c, fmt.Errorf("publish command %s: %w", c.ID, err)
	default:
		// Sent and maybe stored, or a repeat that failed: pending until
		// reconciled. Not an error for the caller, who is told the status.
		s.log.WarnContext(ctx, "command publication unconfirmed; reconciling", logkey.Command, c.ID, logkey.Error, err)
		return c, nil
	}
}

// ReconcileCommands settles pending commands: those first sent within the
// republish window are published again with the same message id (a stored
// one is acknowledged as a duplicate, never stored twice); those past their
// expiresAt plus the clock-skew allowance, which agents refuse, become
// expired, and so do accepted ones the sensor never reported on by then
// (shown as expired, not as accepted forever). A sensor's report on a
// command accepts it as well, even an expired one. It returns
// how many it settled.
func (s *Commands) ReconcileCommands(ctx context.Context) (int, error) {
	now := s.now()
	pending, err := s.store.PendingCommands(ctx, now.Add(-republishWindow), 500)
	if err != nil {
		return 0, fmt.Errorf("pending commands: %w", err)
	}
	var due []Command
	for _, c := range pending {
		// A young command's first publication may still be in flight: its
		// answer, not a republication, settles it.
		if !now.Before(c.ExpiresAt) || now.Sub(c.FirstSentAt) < reconcileAfter {
			continue
		}
		due = append(due, c)
	}
	settled := 0
	if len(due) > 0 {
		// Published again together, pipelined as a batch claim is. One
		// at a time, a stream slow to confirm (a work-queue stream with
		// thousands of consumers during a fan-out) made each wait out the
		// publisher's timeout in turn: a pass of hundreds ran for minutes,
		// the later ones were sent after the stream's duplicate window had
		// closed and were stored a second time. Pipelined, a pass of at
		// most 500 takes about two timeouts, so a republication leaves
		// within the republish window plus that, inside the duplicate
		// window.
		settled = s.recordRepublished(ctx, due, s.publishClaimed(ctx, due))
	}
	n, err := s.store.ExpireCommands(ctx, now.Add(-s.maxSkew))
	if err != nil {
		return settled, fmt.Errorf("expire commands: %w", err)
	}
	return settled + n, nil
}

// recordRepublished records what the stream answered for republished
// commands and returns how many it accepted. A republication that failed
// says nothing about the first one (which may be stored): those stay
// pending, never failed.
func (s *Commands) recordRepublished(ctx context.Context, cmds []Command, results []PublishResult) int {
	at := s.now()
	var acks []CommandAck
	for i, r := range results {
		if r.Err == nil {
			acks = append(acks, CommandAck{ID: cmds[i].ID, Seq: r.Ack.Sequence, At: at})
		}
	}
	if unsure := len(cmds) - len(acks); unsure > 0 {
		s.log.WarnContext(ctx, "command publication unconfirmed; reconciling", "republished", len(cmds), "unconfirmed", unsure)
	}
	if len(acks) == 0 {
		return 0
	}
	if err := s.store.AcceptCommands(context.WithoutCancel(ctx), acks); err != nil {
		// Stored in the stream: the next pass or the sensors' reports
		// catch the records up.
		s.log.ErrorContext(ctx, "record republished commands", "count", len(acks), logkey.Error, err)
		return 0
	}
	return len(acks)
}

// SensorCommands pages a sensor's command history, newest first.
func (s *Commands) SensorCommands(ctx context.Context, sensorID string, after CommandCursor, limit int) ([]Command, error) {
	if _, err := readValid(ctx, "sensor id", sensorID, s.store.Sensor); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxCommandPage {
		return nil, fmt.Errorf("%w: limit must be 1–%d", ErrInvalidInput, MaxCommandPage)
	}
	return s.store.SensorCommands(ctx, sensorID, after, limit)
}

// validateIdempotencyKey accepts "" or 1–128 printable ASCII characters
// without spaces.
func validateIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey {
		return fmt.Errorf("%w: idempotency key longer than %d characters", ErrInvalidInput, maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= 0x20 || k[i] >= 0x7f {
			return fmt.Errorf("%w: idempotency key must be printable ASCII without spaces", ErrInvalidInput)
		}
	}
	return nil
}
