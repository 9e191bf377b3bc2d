package sensorclient

import (
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// The wire format is sdk/sensorwire's, the one the control plane uses;
// these names keep the package's API.
type (
	// Action is what a command asks the sensor to do.
	Action = sensorwire.Action
	// Command is a SensorControlCommand as published on rxc.<t>.<s>.cmd.
	Command = sensorwire.Command
	// ReportedState is what a sensor reports about itself.
	ReportedState = sensorwire.State
	// Status is the JSON a sensor publishes on rxc.<t>.<s>.status.
	Status = sensorwire.Status
	// CommandResult is what the sensor did with one command.
	CommandResult = sensorwire.CommandResult
)

// Actions the control plane sends.
const (
	ActionStart = sensorwire.ActionStart
	ActionStop  = sensorwire.ActionStop
)

// Errors of DecodeCommand and of command checks.
var (
	// ErrMalformedCommand marks a payload that is not a usable command.
	ErrMalformedCommand = errors.New("malformed command")
	// ErrUnsupportedAction marks a well-formed command whose action this
	// agent does not know (a newer control plane).
	ErrUnsupportedAction = errors.New("unsupported command action")
	// ErrExpiredCommand marks a command that arrived after its expiresAt.
	ErrExpiredCommand = errors.New("command expired")
	// ErrForeignCommand marks a command addressed to another sensor.
	ErrForeignCommand = errors.New("command addressed to another sensor")
)

// MaxCommandBytes bounds a command payload; real ones are a few hundred bytes.
const MaxCommandBytes = sensorwire.MaxCommandBytes

// idPattern is the id grammar the control plane uses for subject tokens and
// command ids; a status naming a command id outside it is refused.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// DecodeCommand parses a command payload. Unknown fields are ignored so a
// newer control plane can add some; missing ids or times, trailing data and
// oversized payloads give ErrMalformedCommand, an unknown action
// ErrUnsupportedAction (with the decoded command).
func DecodeCommand(data []byte) (Command, error) {
	c, err := sensorwire.DecodeCommand(data)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrMalformedCommand, err)
	}
	switch {
	case !idPattern.MatchString(c.CommandID):
		return Command{}, fmt.Errorf("%w: commandId missing or not an id", ErrMalformedCommand)
	case c.TenantID == "" || c.SensorID == "":
		// The id is kept so the refusal can name the command.
		return Command{CommandID: c.CommandID}, fmt.Errorf("%w: tenantId and sensorId are required", ErrMalformedCommand)
	case c.IssuedAt.IsZero() || c.ExpiresAt.IsZero():
		return Command{CommandID: c.CommandID}, fmt.Errorf("%w: issuedAt and expiresAt are required", ErrMalformedCommand)
	case !c.Action.Valid():
		return c, fmt.Errorf("%w: %q", ErrUnsupportedAction, truncate(string(c.Action), 64))
	}
	return c, nil
}

// States a sensor may report.
const (
	StateOnline  = sensorwire.StateOnline
	StateRunning = sensorwire.StateRunning
	StateStopped = sensorwire.StateStopped
	StateError   = sensorwire.StateError
)

// Command outcomes.
const (
	OutcomeApplied = sensorwire.OutcomeApplied
	OutcomeRefused = sensorwire.OutcomeRefused
)

// RefusalReason is the reason the control plane records for a command
// refused with err: expired, malformed, unknown_action or foreign.
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, ErrExpiredCommand):
		return sensorwire.ReasonExpired
	case errors.Is(err, ErrUnsupportedAction):
		return sensorwire.ReasonUnknownAction
	case errors.Is(err, ErrForeignCommand):
		return sensorwire.ReasonForeign
	default:
		return sensorwire.ReasonMalformed
	}
}

// Limits that keep a status under the control plane's 4 KiB.
const (
	maxDetail       = 1024
	maxAgentVersion = 64
	// MaxResults is how many results a report carries (the control
	// plane's bound).
	MaxResults      = sensorwire.MaxResults
	maxResultDetail = 160
	maxStatusBytes  = sensorwire.MaxStatusBytes
)

// encodeStatus marshals s with at in UTC, detail and version trimmed, and a
// command id outside the id grammar dropped (the control plane would
// refuse the whole report).
func encodeStatus(s Status) ([]byte, error) {
	if s.At.IsZero() {
		return nil, errors.New("status without at")
	}
	s.At = s.At.UTC()
	s.Detail = truncate(s.Detail, maxDetail)
	s.AgentVersion = truncate(s.AgentVersion, maxAgentVersion)
	if s.CommandID != "" && !idPattern.MatchString(s.CommandID) {
		s.CommandID = ""
	}
	results := make([]CommandResult, 0, len(s.Results))
	for _, r := range s.Results {
		if !idPattern.MatchString(r.CommandID) || r.At.IsZero() {
			continue
		}
		r.Detail, r.At = truncate(r.Detail, maxResultDetail), r.At.UTC()
		results = append(results, r)
	}
	if len(results) > MaxResults {
		results = results[len(results)-MaxResults:]
	}
	for {
		s.Results = results
		data, err := sensorwire.EncodeStatus(s)
		if err != nil || len(data) <= maxStatusBytes || len(results) == 0 {
			return data, err
		}
		// The oldest results give way first.
		results = results[1:]
	}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
