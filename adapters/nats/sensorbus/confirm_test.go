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

// answeringBackend starts, on url with creds, a backend status
// subscription that answers every report carrying a reply subject with a
// confirmation recording cmd; then, when not nil, hands the update on.
func answeringBackend(t *testing.T, url, creds, cmd string, then func(fleet.StatusUpdate)) {
	t.Helper()
	c := newClient(t, url, static(creds))
	c.SubscribeStatus(func(_ context.Context, m fleet.StatusUpdate) {
		if m.Confirm != nil {
			m.Confirm(fleet.ResultsConfirmation{TenantID: m.Sensor.TenantID, SensorID: m.Sensor.SensorID, Recorded: []string{cmd}})
		}
		if then != nil {
			then(m)
		}
	})
	startReady(t, c)
}

// subscribed subscribes nc to subject and flushes, so that the server has
// the interest before anything is published.
func subscribed(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// confirmation waits up to within for the next message on sub and decodes
// it as a results confirmation; where names the inbox in a failure.
func confirmation(t *testing.T, sub *nats.Subscription, within time.Duration, where string) sensorwire.Confirmation {
	t.Helper()
	msg, err := sub.NextMsg(within)
	if err != nil {
		t.Fatalf("no confirmation in %s: %v", where, err)
	}
	conf, err := sensorwire.DecodeConfirmation(msg.Data)
	if err != nil {
		t.Fatalf("%s: confirmation %s (%v)", where, msg.Data, err)
	}
	return conf
}

// report publishes a status report of s with detail, its reply subject
// reply.
func report(nc *nats.Conn, s topology.Sensor, reply, detail string) error {
	return nc.PublishMsg(&nats.Msg{Subject: s.StatusSubject(), Reply: reply, Data: []byte(statusJSON(detail))})
}

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
			s1 := sensorT1("s1")
			w, url, _ := running(t, freePort(t), s1)
			perms := topology.BackendPermissions()
			perms.Responses = tt.responses
			got := make(chan fleet.StatusUpdate, 4)
			answeringBackend(t, url, w.creds(w.control, "backend", perms), "cmd-1", func(m fleet.StatusUpdate) { got <- m })

			snc, _ := w.sensor(url, s1)
			inbox := s1.InboxPrefix() + ".results"
			answers := subscribed(t, snc, inbox)
			if err := report(snc, s1, "", "plain"); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Confirm != nil {
				t.Error("a report without a reply subject has a Confirm")
			}
			if err := report(snc, s1, inbox, "with results"); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Confirm == nil {
				t.Fatal("a report with a reply subject has no Confirm")
			}
			if !tt.responses {
				if msg, err := answers.NextMsg(2 * time.Second); err == nil {
					t.Fatalf("a backend without the response permission answered: %s", msg.Data)
				}
				return
			}
			if conf := confirmation(t, answers, 2*time.Second, "s1's inbox"); conf.TenantID != "t1" || conf.SensorID != "s1" || len(conf.Recorded) != 1 {
				t.Fatalf("confirmation %+v", conf)
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
	s1, s2 := sensorT1("s1"), sensorT1("s2")
	w, url, _ := running(t, freePort(t), s1, s2)
	answeringBackend(t, url, w.backendCreds(), "cmd-of-s2", nil)
	n1, _ := w.sensor(url, s1)
	n2, _ := w.sensor(url, s2)
	victim := subscribed(t, n2, s2.InboxPrefix()+".results")
	forged := []byte(`{"tenantId":"t1","sensorId":"s2","recorded":["cmd-of-s2"]}`)
	_ = n1.Publish(s2.InboxPrefix()+".results", forged)
	if err := report(n1, s1, s2.InboxPrefix()+".results", "report"); err != nil {
		t.Fatal(err)
	}
	if conf := confirmation(t, victim, 3*time.Second, "the redirected report"); conf.SensorID != "s1" {
		t.Fatalf("s2 received %+v: want only the confirmation naming s1", conf)
	}
	if extra, err := victim.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("s2 received a message s1 published into its inbox: %s", extra.Data)
	}
}
