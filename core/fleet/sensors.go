package fleet

import (
	"context"
	"fmt"
	"time"
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
	// AgentVersion and Address are what the sensor last said about itself;
	// stores keep them as given.
	AgentVersion string
	Address      string
	// Results, when set on the way out, are outcomes of this sensor's
	// commands to record at AcknowledgedAt; a command keeps the first.
	Results        []CommandResult
	AcknowledgedAt time.Time
}

// SensorRef names a sensor of a tenant, as a status subject does.
type SensorRef struct {
	TenantID string
	SensorID string
}

// StatusStore applies status changes.
type StatusStore interface {
	// UpdateSensorStatuses locks the sensors named by refs, passes each
	// one's status to apply (found is false for a sensor that does not exist
	// in that tenant) and stores the statuses apply asks to store, all in one
	// transaction. Batching is what lets a replica keep up with a fleet's
	// status traffic.
	UpdateSensorStatuses(ctx context.Context, refs []SensorRef, apply func(ref SensorRef, cur SensorStatus, found bool) (next SensorStatus, store bool)) error
	// MarkSilent moves sensors in one of the states from, last seen before
	// seenBefore, to state to, and returns how many moved.
	MarkSilent(ctx context.Context, seenBefore time.Time, from []State, to State) (int, error)
	// CheckIn authorises and records health checks in one step. A
	// check-in is authorised when its sensor exists in its tenant, is not
	// revoked, and has an active certificate with that serial expiring
	// after now; recorded[i] says whether in[i] was, and one that was not
	// changes nothing. An authorised check-in sets lastSeenAt to now (never
	// back), the agent version and address that are not empty, and an
	// offline sensor online; it is not written at all when the sensor was
	// seen at or after fresh and nothing else would change (a status report
	// just refreshed it). Sensors written are locked in id order, as
	// UpdateSensorStatuses locks them. At most one check-in a sensor and
	// serial.
	CheckIn(ctx context.Context, in []SensorCheckIn, now, fresh time.Time) (recorded []bool, err error)
}

// Sensor returns one sensor.
func (s *Service) Sensor(ctx context.Context, id string) (Sensor, error) {
	return readValid(ctx, "sensor id", id, s.store.Sensor)
}

// SensorReader reads one sensor with its active certificate and last
// command (SensorStore's Sensor); the seams that only look a sensor up
// take it instead of the whole SensorStore.
type SensorReader interface {
	Sensor(ctx context.Context, id string) (Sensor, error)
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
