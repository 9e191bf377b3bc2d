package fleet

import (
	"fmt"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// StatusReport is what a sensor reported about itself, decoded from
// whatever carried it (the NATS adapter decodes sdk/sensorwire's Status);
// the ids of the channel it arrived on, never the report, say which sensor
// sent it.
//
// Results are the sensor's outcomes of its commands; an agent reports them
// again until it learns they are recorded (they are applied once, the first
// report wins): agents with an outbox from a ResultsConfirmation, older
// ones by repeating their latest results. CommandID alone is what agents
// before Results sent: the command counts as applied.
type StatusReport struct {
	State        State
	CommandID    string
	At           time.Time
	Detail       string
	AgentVersion string
	Results      []CommandResult
}

// CommandResult is a sensor's outcome of one command.
type CommandResult struct {
	CommandID string
	Outcome   Outcome
	// Reason says why a command was refused: expired, malformed,
	// unknown_action or foreign (addressed to another sensor).
	Reason string
	Detail string
	At     time.Time
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
	// MaxResults bounds the results one report carries.
	MaxResults = 8
	// maxResultDetail bounds a result's detail, in characters.
	maxResultDetail = 512
)

// CheckStatusReport checks a decoded report (HandleStatusBatch applies it
// to every update): a reportable state, a timestamp, ids in the id
// grammar, at most MaxResults valid results; it returns it with its times
// in UTC at PostgreSQL's precision. Failures wrap ErrInvalidInput.
func CheckStatusReport(r StatusReport) (StatusReport, error) {
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
	results := make([]CommandResult, len(r.Results))
	for i, res := range r.Results {
		if err := validateResult(res); err != nil {
			return StatusReport{}, err
		}
		res.At = res.At.UTC().Truncate(time.Microsecond)
		results[i] = res
	}
	if len(results) == 0 {
		results = nil
	}
	r.Results = results
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
