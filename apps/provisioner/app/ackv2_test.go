package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
)

// TestAckV2Shape runs the isolation checks with nats-server's v2 ack
// subjects switched on (feature flag js_ack_fc_v2, nats-server 2.15+): a
// sensor acks its own commands through the 11-token grant and import, and
// every v2 subject aimed at a sibling's or another tenant's consumer — with
// the real domain and account hash the server uses, taken from the
// sensor's own reply subject — is refused and leaves the victim untouched.
// It needs the in-process server (the newest supported version).
func TestAckV2Shape(t *testing.T) {
	if natstest.External() {
		t.Skip("v2 ack subjects need nats-server 2.15+ with js_ack_fc_v2; checked with the in-process server")
	}
	s := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	startNATSWithFlags(t, s, "js_ack_fc_v2")
	s.WaitNATSReady()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const stream = topology.DefaultStream
	account(t, s, "acme")
	account(t, s, "acme-eu")
	own := sensorUser(t, s, "acme", "s1")
	victims := []provisionerwire.UserResponse{sensorUser(t, s, "acme", "s2"), sensorUser(t, s, "acme-eu", "s1")}
	_, admin := controlAdmin(t, s)
	_, bjs := backend(t, s)
	for _, u := range append([]provisionerwire.UserResponse{own}, victims...) {
		for i := range 2 {
			if _, err := bjs.Publish(ctx, u.CommandSubject, []byte(fmt.Sprintf("cmd-%d-of-%s", i, u.Consumer))); err != nil {
				t.Fatal(err)
			}
		}
	}

	_, cons := ownConsumer(t, ctx, s, own)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	reply := msg.Reply()
	tokens := strings.Split(reply, ".")
	if len(tokens) != 11 || tokens[4] != stream || tokens[5] != own.Consumer {
		t.Fatalf("reply subject %q is not the v2 shape: is js_ack_fc_v2 on?", reply)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatalf("positive control: v2 ack of its own command: %v", err)
	}

	domain, hash := tokens[2], tokens[3]
	p := newPrincipal(t, "acme/s1", s.NATSURL, own.Creds, own.InboxPrefix)
	var subjects []string
	for _, v := range victims {
		for _, subj := range []string{
			fmt.Sprintf("$JS.ACK.%s.%s.%s.%s.1.1.1.1.1", domain, hash, stream, v.Consumer),
			fmt.Sprintf("$JS.ACK.%s.%s.%s.%s.1.1.1.1.1.1", domain, hash, stream, v.Consumer),
			fmt.Sprintf("$JS.ACK.%s.%s.%s.%s.%s.%s.1.1.1", domain, hash, stream, v.Consumer, stream, own.Consumer),
			fmt.Sprintf("$JS.ACK.%s.%s.%s.%s.>", domain, hash, stream, v.Consumer),
		} {
			for _, body := range ackBodies {
				p.attempt(t, subj, body)
			}
			subjects = append(subjects, subj)
		}
	}
	p.denied(t, subjects)
	for _, v := range victims {
		untouched(t, ctx, admin, stream, v.Consumer, 2)
	}
	// +NXT on its own v2 ack subject still hands it its own next command.
	next, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(next.Data()) != "cmd-1-of-"+own.Consumer {
		t.Fatalf("own second command: %v", err)
	}
	if err := next.Ack(); err != nil {
		t.Fatal(err)
	}
}

// startNATSWithFlags starts an in-process nats-server for the stack on its
// port, from the fragment init-operator wrote, with its own JetStream store
// and the given feature flags on.
func startNATSWithFlags(t *testing.T, s *provisionertest.Stack, flags ...string) {
	t.Helper()
	var conf strings.Builder
	conf.WriteString("include \"nats-operator.conf\"\nfeature_flags {\n")
	for _, f := range flags {
		fmt.Fprintf(&conf, "  %s: true\n", f)
	}
	conf.WriteString("}\n")
	natstest.Start(t, natstest.Options{Dir: s.Dir, Name: "rxc-flags", Port: s.NATS.Port(), Config: conf.String(), InProcess: true})
}
