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
//
// Results are the sensor's outcomes of its commands; an agent reports them
// again until it learns they are recorded (they are applied once, the first
// report wins): agents with an outbox from a ResultsConfirmation, older
// ones by repeating their latest results. CommandID alone is what agents
// before Results sent: the command counts as applied.
type StatusReport struct {
	State        State           `json:"state"`
	CommandID    string          `json:"commandId,omitempty"`
	At           time.Time       `json:"at"`
	Detail       string          `json:"detail,omitempty"`
	AgentVersion string          `json:"agentVersion,omitempty"`
	Results      []CommandResult `json:"results,omitempty"`
}

// CommandResult is a sensor's outcome of one command.
type CommandResult struct {
	CommandID string  `json:"commandId"`
	Outcome   Outcome `json:"outcome"`
	// Reason says why a command was refused: expired, malformed,
	// unknown_action or foreign (addressed to another sensor).
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Refusal reasons of a CommandResult.
const (
	ReasonExpired       = "expired"
	ReasonMalformed     = "malformed"
	ReasonUnknownAction = "unknown_action"
	ReasonForeign       = "foreign"
)

// Limits on status reports.
const (
	// MaxStatusPayload is the largest status message accepted.
	MaxStatusPayload = 4 << 10
	// MaxResults bounds the results one report carries.
	MaxResults = 8
	// maxResultDetail bounds a result's detail, in characters.
	maxResultDetail = 512
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
	if len(r.Results) > MaxResults {
		return StatusReport{}, fmt.Errorf("%w: more than %d results", ErrInvalidInput, MaxResults)
	}
	for i, res := range r.Results {
		if err := validateResult(res); err != nil {
			return StatusReport{}, err
		}
		r.Results[i].At = res.At.UTC().Truncate(time.Microsecond)
	}
	r.At = r.At.UTC().Truncate(time.Microsecond)
	return r, nil
}

func validateResult(r CommandResult) error {
	if err := ids.Validate(r.CommandID); err != nil {
		return fmt.Errorf("%w: result commandId: %w", ErrInvalidInput, err)
	}
	switch {
	case r.Outcome == OutcomeApplied && r.Reason != "":
		return fmt.Errorf("%w: an applied result has no reason", ErrInvalidInput)
	case r.Outcome == OutcomeRefused:
		switch r.Reason {
		case ReasonExpired, ReasonMalformed, ReasonUnknownAction, ReasonForeign:
		default:
			return fmt.Errorf("%w: refusal reason %q", ErrInvalidInput, r.Reason)
		}
	case r.Outcome != OutcomeApplied:
		return fmt.Errorf("%w: outcome %q (want applied or refused)", ErrInvalidInput, r.Outcome)
	}
	if r.At.IsZero() {
		return fmt.Errorf("%w: result without at", ErrInvalidInput)
	}
	return validateLabel("result detail", r.Detail, maxResultDetail)
}

// results is what a report says about commands: its Results, or for an
// older agent its CommandID, applied.
func (r StatusReport) results() []CommandResult {
	if len(r.Results) > 0 || r.CommandID == "" {
		return r.Results
	}
	return []CommandResult{{CommandID: r.CommandID, Outcome: OutcomeApplied, At: r.At}}
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
