package sensorbus_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// An attacker sensor (s1 of t1) points the reply subject of its own status
// report at subjects it may not publish to itself: a sibling's status
// subject, the sibling's command pull, consumer info and ack subjects (each
// a service import of the tenant account into CONTROL), the control plane's
// own status wildcard, and _INBOX-style wildcards. The backend's answer
// (allow_responses) lands in the tenant account on that subject; it must not
// travel on into CONTROL through the tenant's imports, nor reach anything
// but a subscriber in the attacker's own account. A spy in CONTROL
// subscribed to everything sees every message there: none may carry a
// confirmation except the backend's own answers on _R_ subjects. Positive
// control: the same report with its reply in s1's inbox is answered there,
// and the spy sees that answer leave on an _R_ subject (so the spy would see
// a forwarded one).
func TestConfirmationReplyCannotReachOtherSubjects(t *testing.T) {
	t.Parallel()
	s1, s2 := sensorT1("s1"), sensorT1("s2")
	w, url, _ := running(t, freePort(t), s1, s2)

	var (
		mu       sync.Mutex
		spied    []*nats.Msg
		statuses []fleet.SensorRef
	)
	spy := w.connect(url, w.creds(w.control, "spy", topology.Permissions{Subscribe: []string{">"}}))
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		spied = append(spied, m)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	answered := make(chan string, 64)
	answeringBackend(t, url, w.backendCreds(), "cmd-x", func(m fleet.StatusUpdate) {
		mu.Lock()
		statuses = append(statuses, m.Sensor)
		mu.Unlock()
		if m.Confirm != nil {
			answered <- m.Sensor.SensorID
		}
	})

	n1, _ := w.sensor(url, s1)
	n2, _ := w.sensor(url, s2)
	victim := subscribed(t, n2, s2.InboxPrefix()+".>")

	// Positive control first.
	own := subscribed(t, n1, s1.InboxPrefix()+".results")
	if err := report(n1, s1, s1.InboxPrefix()+".results", "own"); err != nil {
		t.Fatal(err)
	}
	if conf := confirmation(t, own, 3*time.Second, "control: s1's own inbox"); conf.SensorID != "s1" {
		t.Fatalf("control: confirmation %+v", conf)
	}
	waitFor(t, 3*time.Second, "the spy sees the backend's answer on an _R_ subject", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range spied {
			if strings.HasPrefix(m.Subject, "_R_.") && bytes.Contains(m.Data, []byte(`"recorded"`)) {
				return true
			}
		}
		return false
	})

	c2 := s2.Consumer()
	targets := []string{
		s2.StatusSubject(),
		topology.APIPrefix + ".CONSUMER.MSG.NEXT." + stream + "." + c2,
		topology.APIPrefix + ".CONSUMER.INFO." + stream + "." + c2,
		"$JS.API.CONSUMER.DELETE." + stream + "." + c2,
		"rxc.t1.s2.cmd",
		"_INBOX.>",
		s2.InboxPrefix() + ".>",
		"rxc.*.*.status",
		">",
	}
	// nats-server checks a reply subject under $JS.ACK against the
	// publisher's permissions: a report naming the sibling's ack subject as
	// its reply is refused and never reaches the backend.
	for _, reply := range []string{
		"$JS.ACK." + stream + "." + c2 + ".1.1.1.1700000000000000000.0",
		"$JS.ACK.dom.acc." + stream + "." + c2 + ".1.1.1.1700000000000000000.0.tok",
	} {
		_ = report(n1, s1, reply, "attack")
	}
	for _, reply := range targets {
		if err := report(n1, s1, reply, "attack"); err != nil {
			t.Fatal(err)
		}
	}
	// Every attack report reached the backend and was answered (so the
	// answer really was sent somewhere).
	for i := 0; i < 1+len(targets); i++ {
		select {
		case id := <-answered:
			if id != "s1" {
				t.Fatalf("a confirmation was made for %s", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d reports were answered", i, 1+len(targets))
		}
	}
	_ = n1.Flush()
	time.Sleep(time.Second)
	select {
	case id := <-answered:
		t.Fatalf("a report with a sibling's ack subject as reply was answered (%s)", id)
	default:
	}

	mu.Lock()
	defer mu.Unlock()
	for _, m := range spied {
		if strings.HasPrefix(m.Subject, "_R_.") {
			continue
		}
		if bytes.Contains(m.Data, []byte(`"recorded"`)) {
			t.Errorf("a confirmation travelled into CONTROL on %s: %s", m.Subject, m.Data)
		}
		if m.Subject != s1.StatusSubject() && strings.HasSuffix(m.Subject, ".status") {
			t.Errorf("CONTROL saw a status on %s", m.Subject)
		}
	}
	for _, ref := range statuses {
		if ref.SensorID != "s1" || ref.TenantID != "t1" {
			t.Errorf("the backend received a status as %+v", ref)
		}
	}
	for {
		m, err := victim.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		// The only thing s2 may see is a confirmation naming s1 (which the
		// agent refuses); never one naming s2.
		if conf, err := sensorwire.DecodeConfirmation(m.Data); err != nil || conf.SensorID == "s2" {
			t.Errorf("s2 received on %s: %s", m.Subject, m.Data)
		}
	}
}
