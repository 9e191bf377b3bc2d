package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// RevokeStore performs a revocation atomically.
type RevokeStore interface {
	// RevokeSensor, in one transaction, sets the sensor revoked (keeping the
	// first revocation), deactivates its certificates and revokes its tokens,
	// and returns it. Repeats are no-ops that return the sensor.
	RevokeSensor(ctx context.Context, sensorID, by string, at time.Time) (Sensor, error)
}

// SessionTerminator cancels a sensor's live gRPC streams.
type SessionTerminator interface {
	Terminate(tenantID, sensorID string)
}

// RevocationPorts is what revocation and decommissioning change.
type RevocationPorts interface {
	RevokeStore
	// DecommissionSensor is LifecycleStore's.
	DecommissionSensor(ctx context.Context, sensorID, by string, at time.Time) (s Sensor, already bool, err error)
}

// RevocationConfig wires a Revocation.
type RevocationConfig struct {
	Store RevocationPorts
	// Provisioner revokes NATS users; required when ProvisioningEnabled.
	Provisioner         Provisioner
	ProvisioningEnabled bool
	// Terminator ends the sensor's live gRPC streams: the gRPC edge,
	// built before (on the StatusService), never bound later.
	Terminator SessionTerminator
	Logger     *slog.Logger
	Clock      func() time.Time
}

// Revocation ends what a sensor holds: revocation and decommissioning.
// It is the only part of the fleet that needs the session terminator.
type Revocation struct {
	store        RevocationPorts
	provisioner  Provisioner
	provisioning bool
	terminator   SessionTerminator
	clocked
}

// NewRevocation checks cfg and returns a Revocation.
func NewRevocation(cfg RevocationConfig) (*Revocation, error) {
	switch {
	case cfg.Store == nil || cfg.Terminator == nil:
		return nil, errors.New("fleet: revocation: store and terminator are required")
	case cfg.ProvisioningEnabled && cfg.Provisioner == nil:
		return nil, errors.New("fleet: revocation: provisioning is enabled but no provisioner is configured")
	}
	return &Revocation{
		store: cfg.Store, provisioner: cfg.Provisioner, provisioning: cfg.ProvisioningEnabled,
		terminator: cfg.Terminator, clocked: newClocked(cfg.Logger, cfg.Clock),
	}, nil
}

// RevokeSensor revokes a sensor for good: state revoked, certificates
// deactivated, live gRPC streams cancelled, NATS user revoked through the
// provisioner. When that last step fails the sensor stays revoked locally
// and the error is returned; calling again retries it.
func (s *Revocation) RevokeSensor(ctx context.Context, sensorID, by string) error {
	if err := validateID("sensor id", sensorID); err != nil {
		return err
	}
	if err := validateLabel("revoked by", by, maxIssuer); err != nil {
		return err
	}
	sensor, err := s.store.RevokeSensor(ctx, sensorID, by, s.now())
	if err != nil {
		return fmt.Errorf("revoke sensor %s: %w", sensorID, err)
	}
	s.log.InfoContext(ctx, "sensor revoked", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID, "by", by)
	return s.revokeHeld(ctx, sensor)
}

// revokeHeld ends what a locally revoked sensor still holds outside the
// store: its live streams and its NATS user (through the provisioner).
func (s *Revocation) revokeHeld(ctx context.Context, sensor Sensor) error {
	sensorID := sensor.ID
	s.terminator.Terminate(sensor.TenantID, sensor.ID)
	if sensor.NATSUserPubKey == "" {
		return nil
	}
	if !s.provisioning {
		return fmt.Errorf("sensor %s revoked; its NATS user must be revoked once provisioning is enabled: %w: %w", sensorID, ErrNATSRevokePending, ErrProvisionerDisabled)
	}
	if err := s.provisioner.RevokeUser(ctx, sensor.NATSAccountPubKey, sensor.NATSUserPubKey); err != nil {
		s.log.WarnContext(ctx, "nats user revocation failed; retry the revocation", logkey.Sensor, sensor.ID, logkey.Error, err)
		return fmt.Errorf("sensor %s revoked; revoking its NATS user failed and must be retried: %w: %w", sensorID, ErrNATSRevokePending, err)
	}
	return nil
}

// DecommissionSensor retires a sensor for good: everything it holds is
// revoked (certificate, sensor token, live streams, NATS user through the
// provisioner, as RevokeSensor does), its pending commands expire, and it
// leaves the lists; its history stays. A decommissioned id never enrols
// again (it is revoked). A second call retries a NATS revocation that
// failed and then answers ErrDecommissioned.
func (s *Revocation) DecommissionSensor(ctx context.Context, sensorID, by string) (Sensor, error) {
	if err := validateID("sensor id", sensorID); err != nil {
		return Sensor{}, err
	}
	if err := validateLabel("decommissioned by", by, maxIssuer); err != nil {
		return Sensor{}, err
	}
	sn, already, err := s.store.DecommissionSensor(ctx, sensorID, by, s.now())
	if err != nil {
		return Sensor{}, fmt.Errorf("decommission sensor %s: %w", sensorID, err)
	}
	if !already {
		s.log.InfoContext(ctx, "sensor decommissioned", logkey.Tenant, sn.TenantID, logkey.Sensor, sn.ID, "by", by)
	}
	if err := s.revokeHeld(ctx, sn); err != nil {
		return sn, err
	}
	if already {
		return sn, fmt.Errorf("sensor %s was decommissioned at %s: %w", sensorID, sn.DecommissionedAt.Format(time.RFC3339), ErrDecommissioned)
	}
	return sn, nil
}
