package sensorbus

import (
	"fmt"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// The sensor command, status and confirmation format is sdk/sensorwire's,
// the one the sensor side uses too; this file is the only place the
// control plane converts between it and the fleet domain.

// encodeCommand is c as published on its command subject.
func encodeCommand(c fleet.Command) ([]byte, error) {
	data, err := sensorwire.EncodeCommand(sensorwire.Command{
		CommandID: c.ID, TenantID: c.TenantID, SensorID: c.SensorID, Action: sensorwire.Action(c.Action),
		IssuedAt: c.IssuedAt, IssuedBy: c.IssuedBy, ExpiresAt: c.ExpiresAt,
	})
	if err != nil {
		return nil, fmt.Errorf("sensorbus: encode command %s: %w: %w", c.ID, fleet.ErrInvalidInput, err)
	}
	return data, nil
}

// decodeStatus decodes a status payload strictly (sensorwire.DecodeStatus:
// bounded, one object, no unknown fields) into the report the fleet
// service checks and applies.
func decodeStatus(data []byte) (fleet.StatusReport, error) {
	s, err := sensorwire.DecodeStatus(data)
	if err != nil {
		return fleet.StatusReport{}, err
	}
	r := fleet.StatusReport{
		State: fleet.State(s.State), CommandID: s.CommandID, At: s.At,
		Detail: s.Detail, AgentVersion: s.AgentVersion,
	}
	if len(s.Results) > 0 {
		r.Results = make([]fleet.CommandResult, len(s.Results))
		for i, x := range s.Results {
			r.Results[i] = fleet.CommandResult{CommandID: x.CommandID, Outcome: fleet.Outcome(x.Outcome), Reason: x.Reason, Detail: x.Detail, At: x.At}
		}
	}
	return r, nil
}

// encodeConfirmation is c as sent in answer to a status report.
func encodeConfirmation(c fleet.ResultsConfirmation) ([]byte, error) {
	return sensorwire.EncodeConfirmation(sensorwire.Confirmation{TenantID: c.TenantID, SensorID: c.SensorID, Recorded: c.Recorded})
}
