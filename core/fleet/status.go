package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// SensorControlCommand is the JSON published on rxc.<t>.<s>.cmd.
type SensorControlCommand struct {
	CommandID string    `json:"commandId"`
	TenantID  string    `json:"tenantId"`
	SensorID  string    `json:"sensorId"`
	Action    Action    `json:"action"`
	IssuedAt  time.Time `json:"issuedAt"`
	IssuedBy  string    `json:"issuedBy"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// StatusReport is the JSON a sensor publishes on rxc.<t>.<s>.status. The
// subject, not the payload, says which sensor sent it.
type StatusReport struct {
	State        State     `json:"state"`
	CommandID    string    `json:"commandId,omitempty"`
	At           time.Time `json:"at"`
	Detail       string    `json:"detail,omitempty"`
	AgentVersion string    `json:"agentVersion,omitempty"`
}

// Limits on status reports.
const (
	// MaxStatusPayload is the largest status message accepted.
	MaxStatusPayload = 4 << 10
)

// ParseStatusReport strictly decodes a status payload: at most
// MaxStatusPayload bytes, one JSON object, no unknown fields, a reportable
// state and a timestamp. Failures wrap ErrInvalidInput.
func ParseStatusReport(payload []byte) (StatusReport, error) {
	if len(payload) > MaxStatusPayload {
		return StatusReport{}, fmt.Errorf("%w: status payload of %d bytes exceeds %d", ErrInvalidInput, len(payload), MaxStatusPayload)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var r StatusReport
	if err := dec.Decode(&r); err != nil {
		return StatusReport{}, fmt.Errorf("%w: status payload: %v", ErrInvalidInput, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return StatusReport{}, fmt.Errorf("%w: status payload: trailing data", ErrInvalidInput)
	}
	if !Reportable(r.State) {
		return StatusReport{}, fmt.Errorf("%w: status state %q (want online, running, stopped or error)", ErrInvalidInput, r.State)
	}
	if r.At.IsZero() {
		return StatusReport{}, fmt.Errorf("%w: status without at", ErrInvalidInput)
	}
	if r.CommandID != "" {
		if err := ids.Validate(r.CommandID); err != nil {
			return StatusReport{}, fmt.Errorf("%w: commandId: %w", ErrInvalidInput, err)
		}
	}
	r.At = r.At.UTC().Truncate(time.Microsecond)
	return r, nil
}

// Reportable reports whether a sensor may report state s about itself.
func Reportable(s State) bool {
	switch s {
	case StateOnline, StateRunning, StateStopped, StateError:
		return true
	}
	return false
}

// Transition is the sensor state machine for status reports: it returns the
// state a sensor in state from moves to when it reports reported, and false
// when the report must not be applied (revoked is terminal; only online,
// running, stopped and error can be reported).
func Transition(from State, reported State) (State, bool) {
	if !from.Valid() || from == StateRevoked || !Reportable(reported) {
		return from, false
	}
	return reported, true
}
