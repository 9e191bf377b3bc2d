package fleet

import (
	"context"
	"encoding/json"
	"fmt"

	"time"

	"github.com/rxc-project/rxc/core/topology"
)

// CommandPublisher delivers a command to the sensor's command subject with
// msgID as the deduplication id. Errors wrap ErrMessagingUnavailable or
// ErrMessagingDisabled.
type CommandPublisher interface {
	PublishCommand(ctx context.Context, subject, msgID string, payload []byte) error
}

// CommandStore persists commands.
type CommandStore interface {
	// CreateCommand records c and makes it the sensor's last command.
	CreateCommand(ctx context.Context, c Command) error
	// FailCommand marks a command that could not be published.
	FailCommand(ctx context.Context, id string, at time.Time) error
}

// IssueCommand records a start or stop command for an enrolled, unrevoked
// sensor and publishes it. When publishing fails the command stays on record
// marked failed (so the operator sees what was attempted and that it never
// left) and the publisher's error is returned.
func (s *Service) IssueCommand(ctx context.Context, sensorID string, action Action, issuedBy string) (Command, error) {
	if !action.Valid() {
		return Command{}, fmt.Errorf("%w: action %q (want start or stop)", ErrInvalidInput, action)
	}
	if err := validateLabel("issuer", issuedBy, maxIssuer); err != nil {
		return Command{}, err
	}
	sensor, err := s.Sensor(ctx, sensorID)
	if err != nil {
		return Command{}, err
	}
	switch sensor.State {
	case StateRevoked:
		return Command{}, fmt.Errorf("command for sensor %s: %w", sensorID, ErrRevoked)
	case StatePending:
		return Command{}, fmt.Errorf("command for sensor %s: %w", sensorID, ErrNotEnrolled)
	}
	id, err := NewUUID()
	if err != nil {
		return Command{}, err
	}
	now := s.now()
	c := Command{
		ID: id, TenantID: sensor.TenantID, SensorID: sensor.ID, Action: action,
		IssuedAt: now, IssuedBy: issuedBy, ExpiresAt: now.Add(s.commandTTL),
	}
	payload, err := json.Marshal(SensorControlCommand{
		CommandID: c.ID, TenantID: c.TenantID, SensorID: c.SensorID, Action: c.Action,
		IssuedAt: c.IssuedAt, IssuedBy: c.IssuedBy, ExpiresAt: c.ExpiresAt,
	})
	if err != nil {
		return Command{}, fmt.Errorf("encode command: %w", err)
	}
	if err := s.store.CreateCommand(ctx, c); err != nil {
		return Command{}, fmt.Errorf("record command: %w", err)
	}
	subject := topology.Sensor{Stream: s.stream, TenantID: c.TenantID, SensorID: c.SensorID}.CommandSubject()
	if err := s.publisher.PublishCommand(ctx, subject, c.ID, payload); err != nil {
		c.FailedAt = s.now()
		if ferr := s.store.FailCommand(context.WithoutCancel(ctx), c.ID, c.FailedAt); ferr != nil {
			s.log.ErrorContext(ctx, "mark command failed", "command_id", c.ID, "error", ferr)
		}
		return c, fmt.Errorf("publish command %s: %w", c.ID, err)
	}
	s.log.InfoContext(ctx, "command issued", "tenant_id", c.TenantID, "sensor_id", c.SensorID, "command_id", c.ID, "action", string(c.Action))
	return c, nil
}
