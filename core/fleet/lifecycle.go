package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// ErrDecommissioned refuses a change to a decommissioned sensor, a second
// decommission included.
var ErrDecommissioned = errors.New("sensor decommissioned")

// SensorEdit is what operators may change of a sensor.
type SensorEdit struct {
	Name   string
	Labels map[string]string
}

// LifecycleStore changes sensors on an operator's behalf.
type LifecycleStore interface {
	// EditSensor locks the sensor, passes it to edit and stores the name and
	// labels edit returns, in one transaction, and returns the sensor as
	// stored. An error of edit is returned and nothing is written;
	// ErrNotFound when there is no such sensor.
	EditSensor(ctx context.Context, sensorID string, edit func(Sensor) (SensorEdit, error)) (Sensor, error)
	// DecommissionSensor, in one transaction, revokes the sensor as
	// RevokeSensor does, marks it decommissioned (by, at) and expires its
	// pending commands; already is true, and nothing written, when it was
	// decommissioned before.
	DecommissionSensor(ctx context.Context, sensorID, by string, at time.Time) (s Sensor, already bool, err error)
}

// SensorPatch is an RFC 7396 merge patch of a sensor: Name nil leaves the
// name; ClearLabels removes every label before Labels apply; in Labels a
// nil value removes the key, any other sets it.
type SensorPatch struct {
	Name        *string
	ClearLabels bool
	Labels      map[string]*string
}

// PatchSensor applies a merge patch to a sensor's name and labels and
// returns the sensor. The result is checked as a whole (ValidateLabels:
// ErrInvalidLabels naming the key), so a refused patch changes nothing.
func (s *Service) PatchSensor(ctx context.Context, sensorID string, p SensorPatch) (Sensor, error) {
	if err := validateID("sensor id", sensorID); err != nil {
		return Sensor{}, err
	}
	if p.Name != nil {
		if *p.Name == "" {
			return Sensor{}, fmt.Errorf("%w: name must not be empty", ErrInvalidInput)
		}
		if err := validateLabel("sensor name", *p.Name, maxSensorName); err != nil {
			return Sensor{}, err
		}
	}
	for k, v := range p.Labels {
		// Checked before the sensor is read: a key only removed is still
		// named in the error when it is not one a label may have.
		if !ValidLabelKey(k) || (v != nil && !ValidLabelValue(*v)) {
			return Sensor{}, ValidateLabels(map[string]string{k: deref(v)})
		}
	}
	sn, err := s.store.EditSensor(ctx, sensorID, func(cur Sensor) (SensorEdit, error) {
		if !cur.DecommissionedAt.IsZero() {
			return SensorEdit{}, fmt.Errorf("sensor %s: %w", sensorID, ErrDecommissioned)
		}
		e := SensorEdit{Name: cur.Name, Labels: maps.Clone(cur.Labels)}
		if p.Name != nil {
			e.Name = *p.Name
		}
		if p.ClearLabels || e.Labels == nil {
			e.Labels = map[string]string{}
		}
		for k, v := range p.Labels {
			if v == nil {
				delete(e.Labels, k)
			} else {
				e.Labels[k] = *v
			}
		}
		return e, ValidateLabels(e.Labels)
	})
	if err != nil {
		return Sensor{}, fmt.Errorf("edit sensor %s: %w", sensorID, err)
	}
	return sn, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
