package fleettest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// sensorAt enrols sensor id of tenantID named name (the claim code's
// sensor name) with hostname host, created at at; enrolled is false for a
// sensor left pending.
func sensorAt(t *testing.T, s Store, tenantID, id, name, host string, at time.Time, isEnrolled bool) {
	t.Helper()
	ctx := context.Background()
	c := fleet.ClaimCode{ID: "cc-" + id, TenantID: tenantID, SensorName: name, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), CreatedBy: "ops"}
	if err := s.CreateClaimCode(ctx, c, hash("code cc-"+id)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redeem(ctx, fleet.RedeemRecord{
		CodeHash: hash("code cc-" + id), SensorID: id, Hostname: host,
		TokenHash: hash("enrol " + id), TokenExpiresAt: at.Add(15 * time.Minute), At: at,
	}); err != nil {
		t.Fatal(err)
	}
	if !isEnrolled {
		return
	}
	if err := s.CompleteEnrollment(ctx, fleet.EnrollmentRecord{
		SensorID: id, EnrollmentTokenHash: hash("enrol " + id), Certificate: certificate("c" + fmt.Sprintf("%x", hash(id)[:4])),
		SensorTokenHash: hash("sensor " + id), NATSUserPubKey: "U" + id, NATSAccountPubKey: "A" + tenantID,
		State: fleet.StateOffline, At: at,
	}); err != nil {
		t.Fatal(err)
	}
}

// listFleet is a fleet with every case the listing must order and match:
// equal names (the id breaks the tie), upper and lower case, LIKE
// wildcards in names, never-seen sensors, equal creation times, two tenants.
func listFleet(t *testing.T, s Store) []fleet.Sensor {
	t.Helper()
	tenant(t, s, "acme")
	tenant(t, s, "beta")
	type spec struct {
		tenant, id, name, host string
		at                     int // seconds after t0
		enrolled               bool
		state                  fleet.State
		seen                   int // seconds after t0; 0: never
	}
	specs := []spec{
		{"acme", "a01", "edge-1", "fra-1.example.net", 1, true, fleet.StateRunning, 100},
		{"acme", "a02", "edge-1", "fra-2.example.net", 1, true, fleet.StateStopped, 50},
		{"acme", "a03", "Edge-2", "ams-1.example.net", 2, true, fleet.StateRunning, 100},
		{"acme", "a04", "core_50%", "nyc-1.example.net", 3, true, fleet.StateError, 0},
		{"acme", "a05", "core-50", "NYC-2.example.net", 3, true, fleet.StateOnline, 75},
		{"acme", "a06", "lab", "sgp-1.example.net", 4, false, fleet.StatePending, 0},
		{"acme", "A07", "lab", "sgp-2.example.net", 5, true, fleet.StateRunning, 100},
		{"acme", "a08", "zeta", "syd-1.example.net", 6, true, fleet.StateOffline, 0},
		{"beta", "b01", "edge-1", "fra-9.example.net", 1, true, fleet.StateRunning, 20},
		{"beta", "b02", "alpha", "jnb-1.example.net", 7, true, fleet.StateRevoked, 0},
		{"beta", "b03", "beta-x", "gru-1.example.net", 8, true, fleet.StateRunning, 100},
	}
	ctx := context.Background()
	for _, sp := range specs {
		sensorAt(t, s, sp.tenant, sp.id, sp.name, sp.host, t0.Add(time.Duration(sp.at)*time.Second), sp.enrolled)
		if sp.state == fleet.StateRevoked {
			if _, err := s.RevokeSensor(ctx, sp.id, "ops", t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !sp.enrolled || (sp.state == fleet.StateOffline && sp.seen == 0) {
			continue
		}
		_, err := update(s, sp.tenant, sp.id, func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
			cur.State = sp.state
			if sp.seen > 0 {
				cur.LastSeenAt = t0.Add(time.Duration(sp.seen) * time.Second)
			}
			return cur, true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var all []fleet.Sensor
	for _, sp := range specs {
		sn, err := s.Sensor(ctx, sp.id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sn)
	}
	return all
}

// expected is the reference: the sensors m selects in sort's order.
func expected(all []fleet.Sensor, m fleet.SensorMatch, sort fleet.SensorSort) []string {
	var sel []fleet.Sensor
	for _, sn := range all {
		if m.Matches(sn) {
			sel = append(sel, sn)
		}
	}
	slices.SortFunc(sel, func(a, b fleet.Sensor) int {
		c := fleet.KeyOf(sort, a).Compare(fleet.KeyOf(sort, b))
		if sort.Desc() {
			return -c
		}
		return c
	})
	return idsOf(sel, sensorID)
}

// pageAll follows the store's pages of size limit to the end.
func pageAll(t *testing.T, s Store, m fleet.SensorMatch, sort fleet.SensorSort, limit int) []string {
	t.Helper()
	out := []string{}
	var after *fleet.SensorKey
	for i := 0; i < 100; i++ {
		page, err := s.ListSensors(context.Background(), fleet.SensorQuery{SensorMatch: m, Sort: sort, After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > limit {
			t.Fatalf("page of %d for limit %d", len(page), limit)
		}
		for _, sn := range page {
			out = append(out, sn.ID)
		}
		if len(page) < limit {
			return out
		}
		k := fleet.KeyOf(sort, page[len(page)-1])
		after = &k
	}
	t.Fatal("paging did not end")
	return nil
}

func testListSensors(t *testing.T, s Store) {
	all := listFleet(t, s)
	matches := []struct {
		name string
		m    fleet.SensorMatch
	}{
		{"everything", fleet.SensorMatch{}},
		{"one tenant", fleet.SensorMatch{Tenants: []string{"acme"}}},
		{"two tenants", fleet.SensorMatch{Tenants: []string{"acme", "beta"}}},
		{"unknown tenant", fleet.SensorMatch{Tenants: []string{"gamma"}}},
		{"state", fleet.SensorMatch{State: fleet.StateRunning}},
		{"tenant and state", fleet.SensorMatch{Tenants: []string{"acme"}, State: fleet.StateRunning}},
		{"q in name, any case", fleet.SensorMatch{Q: "EDGE"}},
		{"q in hostname", fleet.SensorMatch{Q: "nyc"}},
		{"q in id", fleet.SensorMatch{Q: "a0"}},
		{"q percent is literal", fleet.SensorMatch{Q: "50%"}},
		{"q underscore is literal", fleet.SensorMatch{Q: "core_"}},
		{"q backslash is literal", fleet.SensorMatch{Q: `\`}},
		{"q and tenant", fleet.SensorMatch{Tenants: []string{"beta"}, Q: "edge"}},
	}
	for _, mt := range matches {
		for _, sort := range fleet.SensorSorts {
			want := expected(all, mt.m, sort)
			for _, limit := range []int{1, 3, 50} {
				if diff := cmp.Diff(want, pageAll(t, s, mt.m, sort, limit)); diff != "" {
					t.Errorf("%s, sort %s, pages of %d (-want +got):\n%s", mt.name, sort, limit, diff)
				}
			}
		}
	}
	// The reference itself, on a few cases, so that a wrong KeyOf cannot
	// make both sides agree.
	for _, tc := range []struct {
		m    fleet.SensorMatch
		sort fleet.SensorSort
		want []string
	}{
		{fleet.SensorMatch{Tenants: []string{"acme"}}, fleet.SortName, []string{"a03", "a05", "a04", "a01", "a02", "A07", "a06", "a08"}},
		{fleet.SensorMatch{Tenants: []string{"acme"}}, fleet.SortCreatedAtDesc, []string{"a08", "A07", "a06", "a05", "a04", "a03", "a02", "a01"}},
		{fleet.SensorMatch{Q: "50%"}, fleet.SortName, []string{"a04"}},
		{fleet.SensorMatch{Q: "EDGE"}, fleet.SortNameDesc, []string{"b01", "a02", "a01", "a03"}},
	} {
		if diff := cmp.Diff(tc.want, expected(all, tc.m, tc.sort)); diff != "" {
			t.Errorf("reference %+v %s (-want +got):\n%s", tc.m, tc.sort, diff)
		}
	}
	// Never-seen sensors come first in lastSeen, last in -lastSeen.
	asc := expected(all, fleet.SensorMatch{Tenants: []string{"acme"}}, fleet.SortLastSeen)
	if got := asc[:3]; !slices.Equal(got, []string{"a04", "a06", "a08"}) {
		t.Errorf("lastSeen starts with %v, want the never-seen a04, a06, a08", got)
	}
	// What the console shows is there.
	page, err := s.ListSensors(context.Background(), fleet.SensorQuery{SensorMatch: fleet.SensorMatch{Q: "a05"}, Sort: fleet.SortName, Limit: 5})
	if err != nil || len(page) != 1 {
		t.Fatalf("list a05: %v, %v", page, err)
	}
	if sn := page[0]; sn.Hostname != "NYC-2.example.net" || sn.Certificate.Serial == "" || sn.TenantID != "acme" || sn.State != fleet.StateOnline {
		t.Errorf("listed sensor %+v lacks its details", sn)
	}
}

func testCountSensors(t *testing.T, s Store) {
	listFleet(t, s)
	for _, tc := range []struct {
		tenants []string
		want    map[fleet.State]int
	}{
		{nil, map[fleet.State]int{fleet.StateRunning: 5, fleet.StateStopped: 1, fleet.StateError: 1, fleet.StateOnline: 1, fleet.StatePending: 1, fleet.StateOffline: 1, fleet.StateRevoked: 1}},
		{[]string{"beta"}, map[fleet.State]int{fleet.StateRunning: 2, fleet.StateRevoked: 1}},
		{[]string{"gamma"}, map[fleet.State]int{}},
	} {
		got, err := s.CountSensors(context.Background(), tc.tenants)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("count %v (-want +got):\n%s", tc.tenants, diff)
		}
	}
}

func batchOf(id, key string, hash []byte, cmds []fleet.Command) fleet.Batch {
	return fleet.Batch{
		ID: id, Action: fleet.ActionStart, CreatedAt: t0, CreatedBy: "ops", OperatorID: "op-1", IdempotencyKey: key,
		RequestHash: hash, TenantIDs: []string{"acme"}, Matched: len(cmds), Total: len(cmds),
	}
}

func batchCommands(batch string, sensors ...string) []fleet.Command {
	var out []fleet.Command
	for _, sn := range sensors {
		out = append(out, fleet.Command{
			ID: batch + "-" + sn, TenantID: "acme", SensorID: sn, Action: fleet.ActionStart, IssuedAt: t0, IssuedBy: "ops",
			ExpiresAt: t0.Add(10 * time.Minute), Status: fleet.CommandPending, BatchID: batch,
		})
	}
	return out
}

func testBatches(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	for i, id := range []string{"s1", "s2", "s3", "s4"} {
		enrolled(t, s, "acme", id, fmt.Sprintf("f%d", i))
	}
	targets, err := s.SensorTargets(ctx, []string{"s1", "s3", "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(targets, func(a, b fleet.SensorTarget) int { return strings.Compare(a.ID, b.ID) })
	if diff := cmp.Diff([]fleet.SensorTarget{{ID: "s1", TenantID: "acme", State: fleet.StateOffline}, {ID: "s3", TenantID: "acme", State: fleet.StateOffline}}, targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	matched, err := s.MatchSensors(ctx, fleet.SensorMatch{Tenants: []string{"acme"}}, 3)
	if err != nil || len(matched) != 3 {
		t.Errorf("match with limit 3: %d, %v", len(matched), err)
	}

	// s4 is revoked after the targets were resolved: it gets no command.
	if _, err := s.RevokeSensor(ctx, "s4", "ops", t0); err != nil {
		t.Fatal(err)
	}
	cmds := batchCommands("b1", "s1", "s2", "s3", "s4")
	b, created, err := s.CreateBatch(ctx, batchOf("b1", "key-1", hash("req-1"), cmds), cmds)
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	if b.Total != 3 || b.SkippedRevoked != 1 || b.Matched != 4 {
		t.Errorf("batch counts %+v, want total 3, 1 skipped as revoked", b)
	}
	sn, _ := s.Sensor(ctx, "s2")
	if sn.LastCommand == nil || sn.LastCommand.ID != "b1-s2" || sn.LastCommand.BatchID != "b1" || !sn.LastCommand.FirstSentAt.IsZero() {
		t.Errorf("s2's last command %+v, want b1-s2, not yet sent", sn.LastCommand)
	}

	// A repeat with the key returns the batch; another request with it is
	// a conflict; the key is the operator's own.
	again, created, err := s.CreateBatch(ctx, batchOf("b2", "key-1", hash("req-1"), nil), nil)
	if err != nil || created || again.ID != "b1" {
		t.Errorf("repeat: %s, %v, %v; want b1, false", again.ID, created, err)
	}
	_, _, err = s.CreateBatch(ctx, batchOf("b3", "key-1", hash("req-2"), nil), nil)
	is(t, "other request, same key", err, fleet.ErrConflict)
	other := batchOf("b4", "key-1", hash("req-2"), nil)
	other.OperatorID = "op-2"
	if _, created, err := s.CreateBatch(ctx, other, nil); err != nil || !created {
		t.Errorf("another operator's key-1: %v, %v; want a new batch", created, err)
	}
	byKey, err := s.BatchByKey(ctx, "op-1", "key-1")
	if err != nil || byKey.ID != "b1" || !slices.Equal(byKey.RequestHash, hash("req-1")) {
		t.Errorf("by key: %+v, %v", byKey, err)
	}
	_, err = s.BatchByKey(ctx, "op-2", "key-9")
	is(t, "unknown key", err, fleet.ErrNotFound)

	// Never-sent commands wait for a claim, not for the reconciliation.
	pend, err := s.PendingCommands(ctx, t0.Add(-time.Hour), 100)
	if err != nil || len(pend) != 0 {
		t.Errorf("pending before any send: %d, %v; want none", len(pend), err)
	}
	got, err := s.ClaimUnsentCommands(ctx, t0.Add(time.Second), 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim 2: %d, %v", len(got), err)
	}
	rest, err := s.ClaimUnsentCommands(ctx, t0.Add(2*time.Second), 10)
	if err != nil || len(rest) != 1 || rest[0].ID == got[0].ID || rest[0].ID == got[1].ID {
		t.Fatalf("claim the rest: %+v, %v", rest, err)
	}
	if !rest[0].FirstSentAt.Equal(t0.Add(2*time.Second)) || rest[0].BatchID != "b1" {
		t.Errorf("claimed %+v, want first sent at its claim", rest[0])
	}
	if none, _ := s.ClaimUnsentCommands(ctx, t0.Add(3*time.Second), 10); len(none) != 0 {
		t.Errorf("claimed %d commands twice", len(none))
	}
	pend, _ = s.PendingCommands(ctx, t0.Add(-time.Hour), 100)
	if len(pend) != 3 {
		t.Errorf("%d pending after the claims, want 3", len(pend))
	}

	if err := s.AcceptCommands(ctx, []fleet.CommandAck{{ID: "b1-s1", Seq: 7, At: t0.Add(4 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.FailCommands(ctx, []string{"b1-s2", "b1-s1"}, t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		cur.Results = []fleet.CommandResult{{CommandID: "b1-s1", Outcome: fleet.OutcomeApplied}}
		cur.AcknowledgedAt = t0.Add(5 * time.Second)
		return cur, true
	}); err != nil {
		t.Fatal(err)
	}
	full, err := s.Batch(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	want := fleet.BatchCounts{Pending: 1, Accepted: 1, Failed: 1, Acknowledged: 1}
	if diff := cmp.Diff(want, full.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if full.Total != 3 || full.Action != fleet.ActionStart || full.CreatedBy != "ops" || !full.CreatedAt.Equal(t0) || !slices.Equal(full.TenantIDs, []string{"acme"}) {
		t.Errorf("batch %+v", full)
	}
	if n, _ := s.ExpireCommands(ctx, t0.Add(time.Hour)); n != 1 {
		t.Errorf("expired %d, want the one pending", n)
	}
	full, _ = s.Batch(ctx, "b1")
	if full.Counts.Expired != 1 || full.Counts.Pending != 0 {
		t.Errorf("after expiry %+v", full.Counts)
	}
	_, err = s.Batch(ctx, "ghost")
	is(t, "unknown batch", err, fleet.ErrNotFound)

	// An expired command is never claimed.
	late := batchCommands("b5", "s3")
	if _, _, err := s.CreateBatch(ctx, batchOf("b5", "", hash("req-5"), late), late); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ClaimUnsentCommands(ctx, t0.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("claimed %d expired commands", len(got))
	}
}

// testBatchConcurrent: identical requests at once leave one batch, and
// concurrent claims never hand out a command twice.
func testBatchConcurrent(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	var sensors []string
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		enrolled(t, s, "acme", id, fmt.Sprintf("e%02d", i))
		sensors = append(sensors, id)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  = map[string]int{}
		news int
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("b%d", i)
			cmds := batchCommands(id, sensors...)
			b, created, err := s.CreateBatch(ctx, batchOf(id, "same-key", hash("same"), cmds), cmds)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[b.ID]++
			if created {
				news++
			}
		}()
	}
	wg.Wait()
	if len(ids) != 1 || news != 1 {
		t.Fatalf("batches %v, %d created; want one", ids, news)
	}
	claimed := map[string]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimUnsentCommands(ctx, t0.Add(time.Second), 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					claimed[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimed) != 20 {
		t.Errorf("%d commands claimed, want 20", len(claimed))
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times", id, n)
		}
	}
}
