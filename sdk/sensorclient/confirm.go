package sensorclient

import (
	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// confirmSubject is where, in the sensor's private inbox, the control
// plane's confirmations arrive: the reply subject of reports carrying
// results.
func (c *Commands) confirmSubject() string { return c.cfg.NATS.InboxPrefix + ".results" }

// confirmReply is the reply subject of a report: the confirmation subject
// when it carries results and confirmations are wanted, none otherwise.
func (c *Commands) confirmReply(hasResults bool) string {
	if !hasResults || c.cfg.Confirmed == nil {
		return ""
	}
	return c.confirmSubject()
}

// subscribeConfirmations listens for confirmations on nc (nats.go
// subscribes again after every reconnection).
func (c *Commands) subscribeConfirmations(nc *nats.Conn) error {
	if c.cfg.Confirmed == nil {
		return nil
	}
	_, err := nc.Subscribe(c.confirmSubject(), func(m *nats.Msg) {
		conf, err := decodeConfirmation(m.Data, c.cfg.TenantID, c.cfg.SensorID)
		if err != nil {
			// Not trusted: the results stay in the outbox.
			c.log.Warn("results confirmation ignored", logkey.Error, err)
			return
		}
		c.cfg.Confirmed(conf)
	})
	return err
}
