package sensorbus

import (
	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// confirmer answers a status report published with a reply subject (an
// agent with a result outbox) with the fleet's confirmation of the results
// it stored; nil for a report without one. The answer goes back through the
// tenant's status import to the reply subject in the sensor's own account;
// the confirmation names the sensor of the status subject, so an agent
// ignores one sent to it on another sensor's report.
func (c *Client) confirmer(m *nats.Msg) func(fleet.ResultsConfirmation) {
	if m.Reply == "" {
		return nil
	}
	return func(conf fleet.ResultsConfirmation) {
		data, err := encodeConfirmation(conf)
		if err == nil {
			err = m.Respond(data)
		}
		if err != nil {
			// Not confirmed: the agent reports the results again.
			c.log.Debug("results confirmation not sent", logkey.Tenant, conf.TenantID, logkey.Sensor, conf.SensorID, logkey.Error, err)
		}
	}
}
