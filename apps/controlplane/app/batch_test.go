package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/fleet"
)

// noPublisher is the publisher of a replica that recorded batches and
// stopped before sending anything.
type noPublisher struct{ t *testing.T }

func (p noPublisher) PublishCommand(context.Context, fleet.Command) (fleet.PublishAck, error) {
	p.t.Error("the stopped replica published")
	return fleet.PublishAck{}, fleet.ErrNotPublished
}

// nilCA is the stopped replica's CA: never used.
type nilCA struct{}

func (nilCA) SignCSR(fleet.CertRequest) (fleet.IssuedCertificate, error) {
	return fleet.IssuedCertificate{}, fleet.ErrInvalidCSR
}
func (nilCA) CACertificatePEM() []byte                         { return nil }
func (nilCA) VerifyCSRPossession([]byte, []byte, []byte) error { return fleet.ErrInvalidProof }
func (nilCA) VerifyPossession([]byte, []byte, []byte, time.Time) (fleet.CertIdentity, error) {
	return fleet.CertIdentity{}, fleet.ErrInvalidProof
}

type noTerminator struct{}

func (noTerminator) Terminate(string, string) {}

type batchView struct {
	BatchID                               string
	Total, Pending, Accepted, Failed      int
	Acknowledged, SkippedRevoked, Matched int
	Done                                  bool
}

// TestCommandBatchSurvivesAReplicaStop: batches left by a replica that
// stopped — one recorded and never sent, one whose commands it had
// claimed (first send on record) but not published — are published by
// the replica still running, through real NATS, each command once with its
// id as Nats-Msg-Id, and a real sensor receives its command. A batch made
// through the API is published at once.
func TestCommandBatchSurvivesAReplicaStop(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	p := startPlane(t, prov)
	p.login()
	p.provisionedTenant("acme", "Acme")
	real := p.enrol("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := p.Pool()
	if _, err := fleetseed.Seed(ctx, db, fleetseed.Spec{TenantID: "acme", Count: 600}); err != nil {
		t.Fatal(err)
	}

	// The stopped replica: the same database, a publisher that never runs.
	store, err := controlplanestore.New(controlplanestore.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := fleet.New(fleet.Config{Store: store, CA: nilCA{}, Publisher: noPublisher{t}, Terminator: noTerminator{}, Locker: store, CommandTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	never, _, err := gone.CreateBatch(ctx, fleet.BatchRequest{Action: fleet.ActionStart, Filter: &fleet.SensorMatch{Tenants: []string{"acme"}, State: fleet.StateRunning},
		IssuedBy: opEmail, OperatorID: "op-gone"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, _, err := gone.CreateBatch(ctx, fleet.BatchRequest{Action: fleet.ActionStop, SensorIDs: []string{real.enr.SensorID, "seed-000061"},
		IssuedBy: opEmail, OperatorID: "op-gone"})
	if err != nil {
		t.Fatal(err)
	}
	// It claimed the second batch's commands 20 s ago and stopped.
	if _, err := db.Exec(ctx, `UPDATE commands SET first_sent_at = now() - interval '20 seconds' WHERE batch_id = $1`, claimed.ID); err != nil {
		t.Fatal(err)
	}
	if never.Total < 300 || claimed.Total != 2 {
		t.Fatalf("batches of %d and %d commands", never.Total, claimed.Total)
	}

	for _, b := range []fleet.Batch{never, claimed} {
		var v batchView
		waitUntil(t, 90*time.Second, "batch "+b.ID+" published by the running replica", func() bool {
			p.must("GET", "/api/commands/batches/"+b.ID, nil, "", 200, &v)
			return v.Done
		})
		if v.Accepted != b.Total || v.Failed != 0 || v.Pending != 0 {
			t.Errorf("batch %s: %+v, want all %d accepted", b.ID, v, b.Total)
		}
	}
	// Each command is in the stream once, under its own id.
	var dupSeq int
	if err := db.QueryRow(ctx, `SELECT count(*) - count(DISTINCT stream_seq) FROM commands WHERE batch_id IN ($1, $2)`, never.ID, claimed.ID).Scan(&dupSeq); err != nil {
		t.Fatal(err)
	}
	if dupSeq != 0 {
		t.Errorf("%d commands share a stream sequence", dupSeq)
	}

	// The real sensor gets its command (the stop of the claimed batch).
	_, cons := commandConsumer(t, ctx, real)
	var want string
	if err := db.QueryRow(ctx, `SELECT id FROM commands WHERE batch_id = $1 AND sensor_id = $2`, claimed.ID, real.enr.SensorID).Scan(&want); err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("the sensor got no command: %v", err)
	}
	var wire struct{ CommandID, Action string }
	if err := json.Unmarshal(msg.Data(), &wire); err != nil {
		t.Fatal(err)
	}
	if wire.CommandID != want || wire.Action != "stop" || msg.Headers().Get("Nats-Msg-Id") != want {
		t.Errorf("sensor got %+v (Nats-Msg-Id %q), want stop %s", wire, msg.Headers().Get("Nats-Msg-Id"), want)
	}
	_ = msg.Ack()

	// Through the API: 202 at once, then published by this replica.
	var made batchView
	p.must("POST", "/api/commands", map[string]any{"action": "stop", "filter": map[string]string{"tenantId": "acme", "state": "error"}}, "", 202, &made)
	waitUntil(t, 60*time.Second, "API batch published", func() bool {
		p.must("GET", "/api/commands/batches/"+made.BatchID, nil, "", 200, &made)
		return made.Done
	})
	if made.Accepted != made.Total || made.Total != 24 { // 4 of each 100 seeded are in error
		t.Errorf("API batch %+v, want 24 accepted", made)
	}
}
