package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/topology"
)

// SensorStore reads sensors.
type SensorStore interface {
	// Sensor returns one sensor with its active certificate and last command.
	Sensor(ctx context.Context, id string) (Sensor, error)
	// Sensors lists sensors matching f, oldest first.
	Sensors(ctx context.Context, f SensorFilter) ([]Sensor, error)
}

// SensorStatus is the part of a sensor that status reports change.
type SensorStatus struct {
	State        State
	LastSeenAt   time.Time
	LastStatusAt time.Time // "at" of the last applied report
	// AcknowledgeCommandID, when set on the way out, names a command of
	// this sensor to mark acknowledged at AcknowledgedAt.
	AcknowledgeCommandID string
	AcknowledgedAt       time.Time
}

// StatusStore applies status changes.
type StatusStore interface {
	// UpdateSensorStatus locks the sensor of that tenant (ErrNotFound when
	// there is none), passes its status to apply and stores the result, in
	// one transaction. An error from apply is returned and nothing changes.
	UpdateSensorStatus(ctx context.Context, tenantID, sensorID string, apply func(SensorStatus) (SensorStatus, error)) error
	// MarkSilent moves sensors in one of the states from, last seen before
	// seenBefore, to state to, and returns how many moved.
	MarkSilent(ctx context.Context, seenBefore time.Time, from []State, to State) (int, error)
}

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

// Sensor returns one sensor.
func (s *Service) Sensor(ctx context.Context, id string) (Sensor, error) {
	if err := validateID("sensor id", id); err != nil {
		return Sensor{}, err
	}
	return s.store.Sensor(ctx, id)
}

// Sensors lists sensors, optionally of one tenant and in one state.
func (s *Service) Sensors(ctx context.Context, f SensorFilter) ([]Sensor, error) {
	if f.TenantID != "" {
		if err := validateID("tenant id", f.TenantID); err != nil {
			return nil, err
		}
	}
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("%w: state %q", ErrInvalidInput, f.State)
	}
	return s.store.Sensors(ctx, f)
}

// HandleStatus applies a status message. The sensor's identity comes only
// from the subject. Reports older than the last applied one give ErrStale,
// unknown sensors ErrNotFound, revoked sensors ErrRevoked, malformed ones
// ErrInvalidInput; none of them changes anything. A report naming a command
// of this sensor marks it acknowledged.
func (s *Service) HandleStatus(ctx context.Context, subject string, payload []byte) error {
	tenantID, sensorID, ok := topology.ParseStatusSubject(subject)
	if !ok {
		return fmt.Errorf("%w: not a status subject", ErrInvalidInput)
	}
	if err := validateID("tenant id", tenantID); err != nil {
		return err
	}
	if err := validateID("sensor id", sensorID); err != nil {
		return err
	}
	r, err := ParseStatusReport(payload)
	if err != nil {
		return err
	}
	now := s.now()
	if r.At.After(now.Add(s.maxSkew)) {
		return fmt.Errorf("%w: status time %s is ahead of the server clock", ErrInvalidInput, r.At.Format(time.RFC3339))
	}
	return s.store.UpdateSensorStatus(ctx, tenantID, sensorID, func(cur SensorStatus) (SensorStatus, error) {
		if cur.State == StateRevoked {
			return cur, ErrRevoked
		}
		if r.At.Before(cur.LastStatusAt) {
			return cur, ErrStale
		}
		next, ok := Transition(cur.State, r.State)
		if !ok {
			return cur, fmt.Errorf("%w: transition %s → %s", ErrInvalidInput, cur.State, r.State)
		}
		return SensorStatus{
			State: next, LastSeenAt: now, LastStatusAt: r.At,
			AcknowledgeCommandID: r.CommandID, AcknowledgedAt: now,
		}, nil
	})
}

// silentStates are the states MarkSilentOffline leaves: pending sensors
// never spoke, offline ones already are, revoked is terminal.
var silentStates = []State{StateOnline, StateRunning, StateStopped, StateError}

// MarkSilentOffline moves sensors not seen for silence to offline.
func (s *Service) MarkSilentOffline(ctx context.Context, silence time.Duration) (int, error) {
	if silence <= 0 {
		return 0, fmt.Errorf("%w: silence must be positive", ErrInvalidInput)
	}
	n, err := s.store.MarkSilent(ctx, s.now().Add(-silence), silentStates, StateOffline)
	if err != nil {
		return 0, fmt.Errorf("mark silent sensors offline: %w", err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "silent sensors marked offline", "count", n)
	}
	return n, nil
}

// AuthorizeSensor is the gRPC check: nil only when the sensor exists in
// that tenant, is not revoked, and serial is its active, unexpired
// certificate's serial.
func (s *Service) AuthorizeSensor(ctx context.Context, tenantID, sensorID, serial string) error {
	if ids.Validate(tenantID) != nil || ids.Validate(sensorID) != nil {
		return fmt.Errorf("sensor %q in tenant %q: %w", sensorID, tenantID, ErrNotFound)
	}
	sensor, err := s.store.Sensor(ctx, sensorID)
	if err != nil {
		return err
	}
	if sensor.TenantID != tenantID {
		return fmt.Errorf("sensor %s in tenant %s: %w", sensorID, tenantID, ErrNotFound)
	}
	if sensor.State == StateRevoked {
		return fmt.Errorf("sensor %s: %w", sensorID, ErrRevoked)
	}
	c := sensor.Certificate
	if serial == "" || c.Serial != strings.ToLower(serial) || !s.now().Before(c.NotAfter) {
		return fmt.Errorf("sensor %s: certificate not active: %w", sensorID, ErrInvalidToken)
	}
	return nil
}

// SensorSeen records a sign of life other than a status report (a gRPC
// call, a health check): it refreshes lastSeenAt and wakes an offline
// sensor to online.
func (s *Service) SensorSeen(ctx context.Context, tenantID, sensorID string) error {
	if err := validateID("tenant id", tenantID); err != nil {
		return err
	}
	if err := validateID("sensor id", sensorID); err != nil {
		return err
	}
	now := s.now()
	return s.store.UpdateSensorStatus(ctx, tenantID, sensorID, func(cur SensorStatus) (SensorStatus, error) {
		if cur.State == StateRevoked {
			return cur, ErrRevoked
		}
		next := cur.State
		if next == StateOffline {
			next = StateOnline
		}
		return SensorStatus{State: next, LastSeenAt: now, LastStatusAt: cur.LastStatusAt}, nil
	})
}

// RevokeSensor revokes a sensor for good: state revoked, certificates
// deactivated, live gRPC streams cancelled, NATS user revoked through the
// provisioner. When that last step fails the sensor stays revoked locally
// and the error is returned; calling again retries it.
func (s *Service) RevokeSensor(ctx context.Context, sensorID, by string) error {
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
	s.terminator.Terminate(sensor.TenantID, sensor.ID)
	s.log.InfoContext(ctx, "sensor revoked", "tenant_id", sensor.TenantID, "sensor_id", sensor.ID, "by", by)
	if sensor.NATSUserPubKey == "" {
		return nil
	}
	if !s.provisioning {
		return fmt.Errorf("sensor %s revoked; its NATS user must be revoked once provisioning is enabled: %w: %w", sensorID, ErrNATSRevokePending, ErrProvisionerDisabled)
	}
	if err := s.provisioner.RevokeUser(ctx, sensor.NATSAccountPubKey, sensor.NATSUserPubKey); err != nil {
		s.log.WarnContext(ctx, "nats user revocation failed; retry the revocation", "sensor_id", sensor.ID, "error", err)
		return fmt.Errorf("sensor %s revoked; revoking its NATS user failed and must be retried: %w: %w", sensorID, ErrNATSRevokePending, err)
	}
	return nil
}
