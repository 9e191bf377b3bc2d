package fleettest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// testListBatches: newest first, paged strictly after a position, each
// with its counts, and only the batches the reader's scope covers.
func testListBatches(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "globex"}, sensorIn{"acme", "s1", "f1"}, sensorIn{"globex", "g1", "f2"})
	mk := func(id, op string, at time.Time, tenants []string, cmds []fleet.Command) {
		t.Helper()
		b := batchOf(id, "", hash(id), cmds)
		b.CreatedAt, b.OperatorID, b.TenantIDs = at, op, tenants
		if _, _, err := s.CreateBatch(ctx, b, cmds); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	mk("b1", "op-1", t0, []string{"acme"}, batchCommands("b1", "s1"))
	g := batchCommands("b2", "g1")
	g[0].TenantID = "globex"
	mk("b2", "op-1", t0.Add(time.Second), []string{"globex"}, g)
	mk("b3", "op-1", t0.Add(2*time.Second), []string{"acme", "globex"}, nil)
	mk("b4", "op-2", t0.Add(2*time.Second), nil, nil) // same time as b3: the id breaks the tie
	mk("b5", "op-1", t0.Add(3*time.Second), nil, nil)

	for _, tc := range []struct {
		name string
		q    fleet.BatchQuery
		want []string
	}{
		{"admin sees all, newest first", fleet.BatchQuery{Limit: 10}, []string{"b5", "b4", "b3", "b2", "b1"}},
		{"limit", fleet.BatchQuery{Limit: 2}, []string{"b5", "b4"}},
		{"after a tie", fleet.BatchQuery{Limit: 10, After: &fleet.SensorKey{Time: t0.Add(2 * time.Second), ID: "b4"}}, []string{"b3", "b2", "b1"}},
		{"acme reader, own tenantless batch", fleet.BatchQuery{Tenants: []string{"acme"}, OperatorID: "op-1", Limit: 10}, []string{"b5", "b1"}},
		{"acme reader, not another's tenantless batch", fleet.BatchQuery{Tenants: []string{"acme"}, OperatorID: "op-2", Limit: 10}, []string{"b4", "b1"}},
		{"both tenants", fleet.BatchQuery{Tenants: []string{"acme", "globex"}, OperatorID: "op-3", Limit: 10}, []string{"b3", "b2", "b1"}},
		{"no tenants", fleet.BatchQuery{Tenants: []string{}, OperatorID: "op-3", Limit: 10}, []string{}},
	} {
		got, err := s.ListBatches(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, idsOf(got, batchID)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	got, err := s.ListBatches(ctx, fleet.BatchQuery{Tenants: []string{"acme"}, OperatorID: "x", Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("acme page: %v, %v", got, err)
	}
	if c := got[0].Counts; c.Pending != 1 || got[0].Total != 1 || !got[0].CreatedAt.Equal(t0) {
		t.Errorf("b1 listed as %+v, want 1 pending of 1, created at t0", got[0])
	}
}
