// Package ids validates the identifiers that RXC turns into NATS subject tokens,
// consumer names and URI SANs. Tenant and sensor ids share one grammar so that a
// value accepted at the edge can never break a subject or a consumer name later.
package ids

import (
	"errors"
	"fmt"
)

// MaxLen is the longest id accepted.
const MaxLen = 64

// ErrInvalidID is wrapped by every validation failure.
var ErrInvalidID = errors.New("invalid id")

// Validate reports whether id matches ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$.
// It is hand-written rather than a regexp because it sits on every request path.
func Validate(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(id) > MaxLen {
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidID, MaxLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '_' || c == '-') {
			continue
		}
		return fmt.Errorf("%w: character %q at position %d (allowed: letters, digits, '_' and '-', starting with a letter or digit)", ErrInvalidID, c, i)
	}
	return nil
}

// ValidateSensor validates the pair that names a sensor, saying which id
// is wrong ("tenant id: …", "sensor id: …"). Every port that takes a
// sensor's pair checks it with this one function.
func ValidateSensor(tenantID, sensorID string) error {
	if err := Validate(tenantID); err != nil {
		return fmt.Errorf("tenant id: %w", err)
	}
	if err := Validate(sensorID); err != nil {
		return fmt.Errorf("sensor id: %w", err)
	}
	return nil
}
