package sensorbus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
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
			got := make(chan fleet.StatusMessage, 4)
			c.SubscribeStatus(func(_ context.Context, m fleet.StatusMessage) {
				got <- m
				if m.Confirm != nil {
					m.Confirm(fleet.ResultsConfirmation{TenantID: m.TenantID, SensorID: m.SensorID, Recorded: []string{"cmd-1"}})
				}
			})
			startReady(t, c)

			snc, _ := w.sensor(url, s1)
			inbox := s1.InboxPrefix() + ".results"
			answers, err := snc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			if err := snc.Publish(s1.StatusSubject(), []byte("plain")); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Confirm != nil {
				t.Error("a report without a reply subject has a Confirm")
			}
			if err := snc.PublishMsg(&nats.Msg{Subject: s1.StatusSubject(), Reply: inbox, Data: []byte("with results")}); err != nil {
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
			var conf fleet.ResultsConfirmation
			if err := json.Unmarshal(msg.Data, &conf); err != nil || conf.TenantID != "t1" || conf.SensorID != "s1" || len(conf.Recorded) != 1 {
				t.Fatalf("confirmation %s (%v)", msg.Data, err)
			}
		})
	}
}
