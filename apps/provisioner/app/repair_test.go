package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// consumerNames lists the command stream's consumers through nats-server's
// monitoring endpoint.
func consumerNames(t *testing.T, s *provisionertest.Stack) map[string]bool {
	t.Helper()
	var jsz server.JSInfo
	if err := s.NATS.Monitor("/jsz?acc="+s.Operator.ControlAccount+"&streams=true&consumers=true", &jsz); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			if st.Name != "RXC_CMD" {
				continue
			}
			for _, c := range st.Consumer {
				out[c.Name] = true
			}
		}
	}
	return out
}

// Users created while NATS was unreachable get their consumer when it is
// back, without anyone asking again.
func TestMissingConsumersAreRepairedAfterNATSReturns(t *testing.T) {
	s := acmeStack(t)
	sensorUser(t, s, "acme", "s1")
	s.StopNATS()
	for deadline := time.Now().Add(30 * time.Second); s.NATSReady(); {
		if time.Now().After(deadline) {
			t.Fatal("still connected 30s after nats-server stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{"s2", "s3"} {
		if st, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": id}); st != http.StatusServiceUnavailable {
			t.Fatalf("POST /users %s with NATS down: %d %s", id, st, body)
		}
	}
	s.StartNATS()
	s.WaitNATSReady()
	deadline := time.Now().Add(30 * time.Second)
	for {
		have := consumerNames(t, s)
		if have["cmd-acme-s1"] && have["cmd-acme-s2"] && have["cmd-acme-s3"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumers after NATS returned: %v, want cmd-acme-s1, -s2 and -s3 without a retry", have)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
