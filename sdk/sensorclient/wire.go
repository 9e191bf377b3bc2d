package sensorclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
	"unicode/utf8"
)

// Action is what a command asks the sensor to do.
type Action string

// Actions the control plane sends.
const (
	ActionStart Action = "start"
	ActionStop  Action = "stop"
)

// Valid reports whether a is an action this package knows.
func (a Action) Valid() bool { return a == ActionStart || a == ActionStop }

// Command is a SensorControlCommand as published on rxc.<t>.<s>.cmd.
type Command struct {
	CommandID string    `json:"commandId"`
	TenantID  string    `json:"tenantId"`
	SensorID  string    `json:"sensorId"`
	Action    Action    `json:"action"`
	IssuedAt  time.Time `json:"issuedAt"`
	IssuedBy  string    `json:"issuedBy"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Expired reports whether the command must no longer be applied at now.
func (c Command) Expired(now time.Time) bool { return !now.Before(c.ExpiresAt) }

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
const MaxCommandBytes = 16 << 10

// idPattern is the id grammar the control plane uses for subject tokens and
// command ids; a status naming a command id outside it is refused.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// DecodeCommand parses a command payload. Unknown fields are ignored so a
// newer control plane can add some; missing ids or times, trailing data and
// oversized payloads give ErrMalformedCommand, an unknown action
// ErrUnsupportedAction (with the decoded command).
func DecodeCommand(data []byte) (Command, error) {
	if len(data) > MaxCommandBytes {
		return Command{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformedCommand, len(data), MaxCommandBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var c Command
	if err := dec.Decode(&c); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrMalformedCommand, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Command{}, fmt.Errorf("%w: trailing data", ErrMalformedCommand)
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

// ReportedState is what a sensor reports about itself.
type ReportedState string

// States a sensor may report.
const (
	StateOnline  ReportedState = "online"
	StateRunning ReportedState = "running"
	StateStopped ReportedState = "stopped"
	StateError   ReportedState = "error"
)

// Status is the JSON a sensor publishes on rxc.<t>.<s>.status.
//
// Results carry outcomes of the sensor's commands not yet confirmed by the
// control plane (at most MaxResults, from an Outbox). Status is
// fire-and-forget over core NATS, so they are reported again until a
// Confirmation says they are recorded; the control plane records the first
// report of each command. Control planes older than Results refuse reports
// carrying them: upgrade the control plane first.
type Status struct {
	State        ReportedState   `json:"state"`
	CommandID    string          `json:"commandId,omitempty"`
	At           time.Time       `json:"at"`
	Detail       string          `json:"detail,omitempty"`
	AgentVersion string          `json:"agentVersion,omitempty"`
	Results      []CommandResult `json:"results,omitempty"`
}

// CommandResult is what the sensor did with one command.
type CommandResult struct {
	CommandID string `json:"commandId"`
	// Outcome is OutcomeApplied or OutcomeRefused.
	Outcome string `json:"outcome"`
	// Reason says why a command was refused (RefusalReason).
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Command outcomes.
const (
	OutcomeApplied = "applied"
	OutcomeRefused = "refused"
)

// RefusalReason is the reason the control plane records for a command
// refused with err: expired, malformed, unknown_action or foreign.
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, ErrExpiredCommand):
		return "expired"
	case errors.Is(err, ErrUnsupportedAction):
		return "unknown_action"
	case errors.Is(err, ErrForeignCommand):
		return "foreign"
	default:
		return "malformed"
	}
}

// Limits that keep a status under the control plane's 4 KiB.
const (
	maxDetail       = 1024
	maxAgentVersion = 64
	// MaxResults is how many results a report carries (the control
	// plane's bound).
	MaxResults      = 8
	maxResultDetail = 160
	maxStatusBytes  = 4 << 10
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
		data, err := json.Marshal(s)
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
