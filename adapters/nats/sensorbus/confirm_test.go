package sensorbus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// A status report published with a reply subject in the sensor's inbox is
// answered there with the fleet's confirmation, across the tenant's status
// import; a report without one gets a nil Confirm; a backend user without
// the response permission cannot answer (the control that the grant is what
// makes it work).
func TestStatusConfirmationReachesTheSensor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		responses bool
	}{{"backend answers", true}, {"backend without responses", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			url := w.start(freePort(t))
			s1 := sensorT1("s1")
			w.admin(url, s1)
			perms := topology.BackendPermissions()
			perms.Responses = tt.responses
			c := newClient(t, url, static(w.creds(w.control, "backend", perms)))
			got := make(chan fleet.StatusUpdate, 4)
			c.SubscribeStatus(func(_ context.Context, m fleet.StatusUpdate) {
				got <- m
				if m.Confirm != nil {
					m.Confirm(fleet.ResultsConfirmation{TenantID: m.Sensor.TenantID, SensorID: m.Sensor.SensorID, Recorded: []string{"cmd-1"}})
				}
			})
			startReady(t, c)

			snc, _ := w.sensor(url, s1)
			inbox := s1.InboxPrefix() + ".results"
			answers, err := snc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			if err := snc.Publish(s1.StatusSubject(), []byte(statusJSON("plain"))); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Confirm != nil {
				t.Error("a report without a reply subject has a Confirm")
			}
			if err := snc.PublishMsg(&nats.Msg{Subject: s1.StatusSubject(), Reply: inbox, Data: []byte(statusJSON("with results"))}); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Confirm == nil {
				t.Fatal("a report with a reply subject has no Confirm")
			}
			msg, err := answers.NextMsg(2 * time.Second)
			if !tt.responses {
				if err == nil {
					t.Fatalf("a backend without the response permission answered: %s", msg.Data)
				}
				return
			}
			if err != nil {
				t.Fatalf("no confirmation: %v", err)
			}
			conf, err := sensorwire.DecodeConfirmation(msg.Data)
			if err != nil || conf.TenantID != "t1" || conf.SensorID != "s1" || len(conf.Recorded) != 1 {
				t.Fatalf("confirmation %s (%v)", msg.Data, err)
			}
		})
	}
}

// A sensor cannot forge a sibling's confirmation: publishing into the
// sibling's inbox is refused by its permissions, and pointing its own
// report's reply at the sibling's inbox gets the sibling a confirmation
// naming the sender (which the agent ignores: sensorclient's
// decodeConfirmation).
func TestStatusConfirmationCannotBeForged(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	url := w.start(freePort(t))
	s1, s2 := sensorT1("s1"), sensorT1("s2")
	w.admin(url, s1, s2)
	c := newClient(t, url, static(w.backendCreds()))
	c.SubscribeStatus(func(_ context.Context, m fleet.StatusUpdate) {
		if m.Confirm != nil {
			m.Confirm(fleet.ResultsConfirmation{TenantID: m.Sensor.TenantID, SensorID: m.Sensor.SensorID, Recorded: []string{"cmd-of-s2"}})
		}
	})
	startReady(t, c)
	n1, _ := w.sensor(url, s1)
	n2, _ := w.sensor(url, s2)
	victim, err := n2.SubscribeSync(s2.InboxPrefix() + ".results")
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Flush(); err != nil {
		t.Fatal(err)
	}
	forged := []byte(`{"tenantId":"t1","sensorId":"s2","recorded":["cmd-of-s2"]}`)
	_ = n1.Publish(s2.InboxPrefix()+".results", forged)
	if err := n1.PublishMsg(&nats.Msg{Subject: s1.StatusSubject(), Reply: s2.InboxPrefix() + ".results", Data: []byte(statusJSON("report"))}); err != nil {
		t.Fatal(err)
	}
	msg, err := victim.NextMsg(3 * time.Second)
	if err != nil {
		t.Fatalf("the redirected confirmation did not arrive: %v", err)
	}
	if conf, err := sensorwire.DecodeConfirmation(msg.Data); err != nil || conf.SensorID != "s1" {
		t.Fatalf("s2 received %s: want only the confirmation naming s1", msg.Data)
	}
	if extra, err := victim.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("s2 received a message s1 published into its inbox: %s", extra.Data)
	}
}
