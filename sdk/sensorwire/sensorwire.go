// Package sensorwire declares, once, the sensor command and status wire
// format: the JSON the control plane publishes on rxc.<t>.<s>.cmd (Command),
// the JSON a sensor publishes on rxc.<t>.<s>.status (Status), and the
// control plane's answer to a status carrying results (Confirmation). Both
// ends use it: the control plane's NATS adapter (adapters/nats/sensorbus)
// encodes commands and confirmations and decodes status, the sensor side
// (sensorclient) decodes commands and confirmations and encodes status, so
// the two cannot drift. It decodes only the shape (size, one JSON object,
// field types); what the values may be is the receiver's rule. It imports
// only the standard library, so an agent can take it alone.
package sensorwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Action is what a command asks the sensor to do.
type Action string

// Actions the control plane sends.
const (
	ActionStart Action = "start"
	ActionStop  Action = "stop"
)

// Valid reports whether a is an action this format knows.
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

// State is what a sensor reports about itself.
type State string

// States a sensor may report.
const (
	StateOnline  State = "online"
	StateRunning State = "running"
	StateStopped State = "stopped"
	StateError   State = "error"
)

// Status is the JSON a sensor publishes on rxc.<t>.<s>.status. The
// subject, not the payload, says which sensor sent it.
//
// Results carry outcomes of the sensor's commands not yet confirmed by the
// control plane (at most MaxResults; the reference agent takes them from
// its outbox). Status is fire-and-forget over core NATS, so they are
// reported again until a Confirmation says they are recorded (agents
// without an outbox repeat their latest results in every report); the
// control plane records the first report of each command. A status
// carrying results may be published with a reply subject: the control
// plane answers it with a Confirmation once the results are durable.
// CommandID alone is what agents before Results sent: the command counts
// as applied. Control planes older than Results refuse reports carrying
// them: upgrade the control plane first.
type Status struct {
	State        State           `json:"state"`
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
	// Reason says why a command was refused: one of the Reason constants.
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Command outcomes.
const (
	OutcomeApplied = "applied"
	OutcomeRefused = "refused"
)

// Refusal reasons of a CommandResult.
const (
	ReasonExpired       = "expired"
	ReasonMalformed     = "malformed"
	ReasonUnknownAction = "unknown_action"
	ReasonForeign       = "foreign"
)

// Confirmation is the control plane's answer to a status that carried
// results and was published with a reply subject: the command ids of the
// results now settled in its store — recorded by this report, recorded
// earlier (the first report of a command wins), or naming no command of
// this sensor, which will never be recorded. It is sent only once they are
// durable, so the sensor may forget what it confirms. TenantID and
// SensorID name the sensor whose report it answers, from the subject the
// report arrived on: a sensor ignores a confirmation naming another sensor
// (a sibling of the tenant can point its own report's reply subject at
// this sensor's inbox).
type Confirmation struct {
	TenantID string   `json:"tenantId"`
	SensorID string   `json:"sensorId"`
	Recorded []string `json:"recorded"`
}

// Size bounds of the format.
const (
	// MaxConfirmationBytes bounds a confirmation payload (MaxResults ids
	// of a report are far below it).
	MaxConfirmationBytes = 64 << 10
	// MaxCommandBytes bounds a command payload; real ones are a few
	// hundred bytes.
	MaxCommandBytes = 16 << 10
	// MaxStatusBytes is the largest status payload a control plane
	// accepts.
	MaxStatusBytes = 4 << 10
	// MaxResults is the most results one status carries.
	MaxResults = 8
)

// ErrMalformed marks a payload that is not one JSON object of the format.
var ErrMalformed = errors.New("malformed payload")

// EncodeCommand is c as published.
func EncodeCommand(c Command) ([]byte, error) { return json.Marshal(c) }

// DecodeCommand parses a command payload leniently: unknown fields are
// ignored, so a newer control plane can add some. An oversized payload,
// one that is not a JSON object of Command's shape, and trailing data give
// ErrMalformed. Missing fields are left zero: the receiver checks them.
func DecodeCommand(data []byte) (Command, error) {
	var c Command
	if err := decode(data, MaxCommandBytes, false, &c); err != nil {
		return Command{}, err
	}
	return c, nil
}

// EncodeStatus is s as published; bounding it is the sender's business.
func EncodeStatus(s Status) ([]byte, error) { return json.Marshal(s) }

// DecodeStatus parses a status payload strictly: at most MaxStatusBytes,
// one JSON object, no unknown fields, no trailing data; anything else gives
// ErrMalformed. The values are not checked.
func DecodeStatus(data []byte) (Status, error) {
	var s Status
	if err := decode(data, MaxStatusBytes, true, &s); err != nil {
		return Status{}, err
	}
	return s, nil
}

// EncodeConfirmation is c as sent in answer to a status.
func EncodeConfirmation(c Confirmation) ([]byte, error) { return json.Marshal(c) }

// DecodeConfirmation parses a confirmation payload leniently, as
// DecodeCommand does: unknown fields are ignored; an oversized payload, one
// that is not a JSON object of Confirmation's shape, and trailing data give
// ErrMalformed. Whether it names the receiving sensor is the receiver's
// check.
func DecodeConfirmation(data []byte) (Confirmation, error) {
	var c Confirmation
	if err := decode(data, MaxConfirmationBytes, false, &c); err != nil {
		return Confirmation{}, err
	}
	return c, nil
}

func decode(data []byte, limit int, strict bool, v any) error {
	if len(data) > limit {
		return fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(data), limit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	return nil
}
