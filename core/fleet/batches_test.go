package fleet_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// batchFleet is two tenants: acme with two enrolled sensors, one pending
// and one revoked; beta with one enrolled sensor.
type batchFleet struct {
	*fixture
	e1, e2, pending, revoked, b1 string
}

func newBatchFleet(t *testing.T) *batchFleet {
	t.Helper()
	f := &batchFleet{fixture: acmeFixture(t, "beta")}
	r1, _ := f.enrolled(t, "acme")
	r2, _ := f.enrolled(t, "acme")
	rv, _ := f.enrolled(t, "acme")
	f.revoke(t, rv.SensorID)
	b1, _ := f.enrolled(t, "beta")
	f.e1, f.e2, f.pending, f.revoked, f.b1 = r1.SensorID, r2.SensorID, f.redeemed(t, "acme").SensorID, rv.SensorID, b1.SensorID
	return f
}

func (f *batchFleet) request(scope []string, ids ...string) fleet.BatchRequest {
	return fleet.BatchRequest{Action: fleet.ActionStop, SensorIDs: ids, Scope: scope, IssuedBy: "ops@example.com", OperatorID: "op-1"}
}

// publishedTo lists the sensors the published commands address, sorted.
func (f *fixture) publishedTo(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range f.pub.Messages() {
		out = append(out, c.TenantID+"/"+c.SensorID)
	}
	slices.Sort(out)
	return out
}

func TestBatchNamedSensors(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	b, created, err := f.svc.CreateBatch(f.ctx, f.request([]string{"acme"}, f.e1, f.e2, f.pending, f.revoked, f.e1))
	if err != nil || !created {
		t.Fatalf("CreateBatch = %v, %v", created, err)
	}
	if b.Matched != 4 || b.Total != 2 || b.SkippedNotEnrolled != 1 || b.SkippedRevoked != 1 || !slices.Equal(b.TenantIDs, []string{"acme"}) {
		t.Errorf("batch %+v; want 4 matched (the repeat once), 2 commands, 1 pending and 1 revoked skipped, tenant acme", b)
	}
	select {
	case <-f.svc.PublisherWake():
	default:
		t.Error("recording a batch did not wake the publisher")
	}
	// Recorded, not yet published: the publisher loop does that.
	if n := len(f.pub.Messages()); n != 0 {
		t.Errorf("%d messages before PublishQueued", n)
	}
	if got, _ := f.svc.Batch(f.ctx, b.ID); got.Counts.Pending != 2 {
		t.Errorf("counts before publication %+v, want 2 pending", got.Counts)
	}
	n, err := f.svc.PublishQueued(f.ctx)
	if err != nil || n != 2 {
		t.Fatalf("PublishQueued = %d, %v; want 2", n, err)
	}
	want := []string{"acme/" + f.e1, "acme/" + f.e2}
	slices.Sort(want)
	if got := f.publishedTo(t); !slices.Equal(got, want) {
		t.Errorf("published to %v, want %v (never the pending or the revoked sensor)", got, want)
	}
	got, err := f.svc.Batch(f.ctx, b.ID)
	if err != nil || got.Counts.Accepted != 2 || got.Counts.Pending != 0 {
		t.Errorf("counts after publication %+v, %v; want 2 accepted", got.Counts, err)
	}
	// Published once: a second pass finds nothing.
	if n, err := f.svc.PublishQueued(f.ctx); err != nil || n != 0 {
		t.Errorf("second PublishQueued = %d, %v; want 0", n, err)
	}
	for _, id := range []string{f.e1, f.e2} {
		if last := f.sensor(t, id).LastCommand; last == nil || last.BatchID != b.ID || last.Action != fleet.ActionStop {
			t.Errorf("sensor %s last command %+v, want the batch's", id, last)
		}
	}
	_, err = f.svc.Batch(f.ctx, "no such batch!")
	wantErr(t, err, fleet.ErrNotFound)
}

// A batch naming a sensor of a tenant outside the caller's scope is
// refused as a whole, exactly as one naming a sensor that does not exist,
// and records nothing.
func TestBatchAcrossTenantsIsRefused(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	_, _, errForeign := f.svc.CreateBatch(f.ctx, f.request([]string{"acme"}, f.e1, f.b1))
	wantErr(t, errForeign, fleet.ErrNotFound)
	_, _, errUnknown := f.svc.CreateBatch(f.ctx, f.request([]string{"acme"}, f.e1, "s-0000000000000000"))
	wantErr(t, errUnknown, fleet.ErrNotFound)
	if errForeign.Error() != errUnknown.Error() {
		t.Errorf("a foreign sensor (%q) is told apart from a missing one (%q)", errForeign, errUnknown)
	}
	if strings.Contains(errForeign.Error(), f.b1) {
		t.Errorf("the refusal names the foreign sensor: %v", errForeign)
	}
	_, _, err := f.svc.CreateBatch(f.ctx, f.request([]string{}, f.e1))
	wantErr(t, err, fleet.ErrNotFound) // an empty scope sees nothing
	filter := f.request([]string{"acme"})
	filter.SensorIDs, filter.Filter = nil, &fleet.SensorMatch{Tenants: []string{"beta"}}
	_, _, err = f.svc.CreateBatch(f.ctx, filter)
	wantErr(t, err, fleet.ErrNotFound)
	if n, _ := f.svc.PublishQueued(f.ctx); n != 0 || len(f.pub.Messages()) != 0 {
		t.Fatalf("refused batches published %d commands", n)
	}
	if last := f.sensor(t, f.e1).LastCommand; last != nil {
		t.Errorf("a refused batch left a command on %s: %+v", f.e1, last)
	}

	// Controls: the caller's own sensors alone, and an unscoped caller (an
	// admin) across both tenants.
	if _, _, err := f.svc.CreateBatch(f.ctx, f.request([]string{"acme"}, f.e1)); err != nil {
		t.Errorf("own sensor: %v", err)
	}
	b, _, err := f.svc.CreateBatch(f.ctx, f.request(nil, f.e2, f.b1))
	if err != nil || !slices.Equal(b.TenantIDs, []string{"acme", "beta"}) {
		t.Errorf("unscoped batch over two tenants = %+v, %v", b, err)
	}
}

func TestBatchByFilterStaysInScope(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	req := f.request([]string{"acme"})
	req.SensorIDs, req.Filter = nil, &fleet.SensorMatch{}
	b, _, err := f.svc.CreateBatch(f.ctx, req)
	if err != nil || b.Total != 2 || b.Matched != 4 || !slices.Equal(b.TenantIDs, []string{"acme"}) {
		t.Fatalf("filter over the caller's scope = %+v, %v; want acme's 2 enrolled of 4", b, err)
	}
	if _, err := f.svc.PublishQueued(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.publishedTo(t); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "beta/") }) {
		t.Errorf("a filter scoped to acme reached beta: %v", got)
	}
	// A state filter narrows further; online matches none of the offline sensors.
	req.Filter = &fleet.SensorMatch{State: fleet.StateOnline}
	req.IdempotencyKey = ""
	if b, _, err := f.svc.CreateBatch(f.ctx, req); err != nil || b.Matched != 0 || b.Total != 0 {
		t.Errorf("filter on online = %+v, %v; want nothing matched", b, err)
	}
}

func TestBatchIdempotency(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	req := f.request(nil, f.e1, f.b1)
	req.IdempotencyKey = "deploy-42"
	first, created, err := f.svc.CreateBatch(f.ctx, req)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	// The same request again: the same batch, nothing new recorded.
	again, created, err := f.svc.CreateBatch(f.ctx, req)
	if err != nil || created || again.ID != first.ID {
		t.Errorf("repeat = %s, created %v, %v; want %s, not created", again.ID, created, err, first.ID)
	}
	// The same ids in another order are the same request.
	reordered := req
	reordered.SensorIDs = []string{f.b1, f.e1}
	if again, _, err := f.svc.CreateBatch(f.ctx, reordered); err != nil || again.ID != first.ID {
		t.Errorf("reordered repeat = %s, %v", again.ID, err)
	}
	// The key reused for another request is a conflict.
	other := req
	other.Action = fleet.ActionStart
	_, _, err = f.svc.CreateBatch(f.ctx, other)
	wantErr(t, err, fleet.ErrConflict)
	// The same operator's key, asked by a narrower caller (a token on
	// acme only): the batch touched beta, so it is not theirs to see.
	narrow := req
	narrow.Scope = []string{"acme"}
	_, _, err = f.svc.CreateBatch(f.ctx, narrow)
	wantErr(t, err, fleet.ErrNotFound)
	// Another operator's same key is their own batch.
	theirs := req
	theirs.OperatorID = "op-2"
	if b, created, err := f.svc.CreateBatch(f.ctx, theirs); err != nil || !created || b.ID == first.ID {
		t.Errorf("another operator's key = %s, created %v, %v; want a new batch", b.ID, created, err)
	}
	if n, _ := f.svc.PublishQueued(f.ctx); n != 4 {
		t.Errorf("published %d commands, want 4 (two batches of two)", n)
	}
}

func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	many := make([]string, fleet.MaxBatchSensorIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("s-%016x", i)
	}
	for name, tc := range map[string]struct {
		change func(*fleet.BatchRequest)
		want   error
	}{
		"unknown action":   {func(r *fleet.BatchRequest) { r.Action = "reboot" }, fleet.ErrInvalidInput},
		"no operator":      {func(r *fleet.BatchRequest) { r.OperatorID = "" }, fleet.ErrInvalidInput},
		"ids and filter":   {func(r *fleet.BatchRequest) { r.Filter = &fleet.SensorMatch{} }, fleet.ErrInvalidInput},
		"neither":          {func(r *fleet.BatchRequest) { r.SensorIDs = nil }, fleet.ErrInvalidInput},
		"empty ids":        {func(r *fleet.BatchRequest) { r.SensorIDs = []string{} }, fleet.ErrInvalidInput},
		"invalid id":       {func(r *fleet.BatchRequest) { r.SensorIDs = []string{"a.b"} }, fleet.ErrInvalidInput},
		"too many ids":     {func(r *fleet.BatchRequest) { r.SensorIDs = many }, fleet.ErrBatchTooLarge},
		"key with a space": {func(r *fleet.BatchRequest) { r.IdempotencyKey = "a b" }, fleet.ErrInvalidInput},
		"filter, two tenants": {func(r *fleet.BatchRequest) {
			r.SensorIDs, r.Filter = nil, &fleet.SensorMatch{Tenants: []string{"acme", "beta"}}
		}, fleet.ErrInvalidInput},
		"control char, issuer": {func(r *fleet.BatchRequest) { r.IssuedBy = "ops\x00" }, fleet.ErrInvalidInput},
	} {
		req := f.request(nil, f.e1)
		tc.change(&req)
		_, _, err := f.svc.CreateBatch(f.ctx, req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateBatch error = %v, want %v", name, err, tc.want)
		}
	}
	if n, _ := f.svc.PublishQueued(f.ctx); n != 0 {
		t.Errorf("refused batches published %d commands", n)
	}
}

// Each batch command settles like a command to one sensor: accepted,
// failed when provably not stored, pending (and republished with the same
// message id by the reconciliation) when unconfirmed.
func TestBatchPublicationOutcomes(t *testing.T) {
	t.Parallel()
	f := newBatchFleet(t)
	b, _, err := f.svc.CreateBatch(f.ctx, f.request(nil, f.e1, f.e2, f.b1))
	if err != nil {
		t.Fatal(err)
	}
	cmdOf := func(sensorID string) string {
		t.Helper()
		last := f.sensor(t, sensorID).LastCommand
		if last == nil {
			t.Fatalf("sensor %s has no command", sensorID)
		}
		return last.ID
	}
	lost, unsure := cmdOf(f.e2), cmdOf(f.b1)
	f.pub.FailIf(func(msgID string) error {
		switch msgID {
		case lost:
			return fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrNotPublished)
		case unsure:
			return fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown)
		}
		return nil
	})
	if _, err := f.svc.PublishQueued(f.ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := f.svc.Batch(f.ctx, b.ID)
	if got.Counts.Accepted != 1 || got.Counts.Failed != 1 || got.Counts.Pending != 1 {
		t.Fatalf("counts %+v; want 1 accepted, 1 failed, 1 pending", got.Counts)
	}
	// The reconciliation republishes the unconfirmed one with the same
	// message id once its first publication had time to settle; never the
	// failed one.
	f.pub.FailIf(nil)
	f.clock.Advance(20 * time.Second)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileCommands = %d, %v; want 1", n, err)
	}
	msgs := f.pub.Messages()
	if last := msgs[len(msgs)-1]; last.ID != unsure {
		t.Errorf("republished %q, want the unconfirmed command %q", last.ID, unsure)
	}
	for _, m := range msgs {
		if m.ID == lost {
			t.Errorf("the failed command was published")
		}
	}
	if got, _ := f.svc.Batch(f.ctx, b.ID); got.Counts.Accepted != 2 || got.Counts.Failed != 1 || got.Counts.Pending != 0 {
		t.Errorf("counts after reconciliation %+v; want 2 accepted, 1 failed", got.Counts)
	}
}
