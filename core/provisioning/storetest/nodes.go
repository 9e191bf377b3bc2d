package storetest

// Consumer nodes: where each claimed consumer was last seen, read back by
// node for the active sensors only.

import (
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
)

func testConsumerNodes(t *testing.T, s Store) {
	ns, ok := any(s).(provisioning.ConsumerNodeStore)
	if !ok {
		t.Fatal("the store does not keep consumer nodes (provisioning.ConsumerNodeStore)")
	}
	acct := createAccount(t, s, "acme")
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		if _, err := s.ClaimSensor(ctx(t), "cmd-acme-"+id, "acme", id); err != nil {
			t.Fatal(err)
		}
	}
	createUser(t, s, sensorUser(acct, "s1"))
	createUser(t, s, sensorUser(acct, "s2"))
	u3 := createUser(t, s, sensorUser(acct, "s3"))
	// s4 has a claim and no user.
	on := func(node string) []provisioning.ConsumerClaim {
		t.Helper()
		got, err := ns.ConsumersOnNode(ctx(t), node)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := on("n1"); len(got) != 0 {
		t.Fatalf("ConsumersOnNode before any record = %v", got)
	}
	err := ns.SetConsumerNodes(ctx(t), []provisioning.ConsumerNode{
		{Consumer: "cmd-acme-s1", Node: "n1"}, {Consumer: "cmd-acme-s2", Node: "n2"}, {Consumer: "cmd-acme-s3", Node: "n1"},
		{Consumer: "cmd-acme-s4", Node: "n1"}, {Consumer: "unclaimed", Node: "n1"}, {Consumer: "cmd-acme-s2", Node: ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(id string) provisioning.ConsumerClaim {
		return provisioning.ConsumerClaim{Consumer: "cmd-acme-" + id, TenantID: "acme", SensorID: id}
	}
	// s4 (no active user) and the unclaimed name are not listed; an empty
	// node leaves s2's record alone.
	diff(t, "on n1", []provisioning.ConsumerClaim{claim("s1"), claim("s3")}, on("n1"))
	diff(t, "on n2", []provisioning.ConsumerClaim{claim("s2")}, on("n2"))
	// A consumer moved (recreated elsewhere) is listed on its new node
	// only; given twice in one batch, the later node wins.
	if err := ns.SetConsumerNodes(ctx(t), []provisioning.ConsumerNode{{Consumer: "cmd-acme-s1", Node: "n3"}, {Consumer: "cmd-acme-s1", Node: "n2"}}); err != nil {
		t.Fatal(err)
	}
	diff(t, "on n1 after the move", []provisioning.ConsumerClaim{claim("s3")}, on("n1"))
	diff(t, "on n2 after the move", []provisioning.ConsumerClaim{claim("s1"), claim("s2")}, on("n2"))
	// A revoked sensor's consumer is not listed.
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u3.PubKey, RevokedAt: t0.Add(time.Hour), RetireSensor: true}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	if got := on("n1"); len(got) != 0 {
		t.Errorf("on n1 after s3's revocation = %v, want none", got)
	}
}
