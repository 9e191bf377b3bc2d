package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

func TestIssueCommandIdempotency(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, _ := f.enrolled(t, "acme")
	other, _ := f.enrolled(t, "acme")
	first, created, err := f.svc.IssueCommand(f.ctx, r.SensorID, fleet.ActionStart, "ops", "k1")
	if err != nil || !created || first.Status != fleet.CommandAccepted {
		t.Fatalf("IssueCommand = %+v, %v, %v", first, created, err)
	}
	again, created, err := f.svc.IssueCommand(f.ctx, r.SensorID, fleet.ActionStart, "ops", "k1")
	if err != nil || created || again.ID != first.ID {
		t.Errorf("repeat = %s, created %v, %v; want %s", again.ID, created, err, first.ID)
	}
	if n := len(f.pub.Messages()); n != 1 {
		t.Errorf("%d publications, want 1: an accepted command is not sent again", n)
	}
	_, _, err = f.svc.IssueCommand(f.ctx, r.SensorID, fleet.ActionStop, "ops", "k1")
	wantErr(t, err, fleet.ErrConflict)
	// The key is the sensor's: another sensor's same key is a new command.
	if c, created, err := f.svc.IssueCommand(f.ctx, other.SensorID, fleet.ActionStart, "ops", "k1"); err != nil || !created || c.ID == first.ID {
		t.Errorf("same key, other sensor = %+v, %v, %v", c, created, err)
	}

	// A pending command repeated within the window is published again
	// with its id: the stream's deduplication keeps one.
	f.pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
	pending, _, err := f.svc.IssueCommand(f.ctx, r.SensorID, fleet.ActionStop, "ops", "k2")
	if err != nil || pending.Status != fleet.CommandPending {
		t.Fatalf("unconfirmed = %+v, %v", pending, err)
	}
	f.pub.Fail(nil)
	f.clock.Advance(time.Second)
	settled, created, err := f.svc.IssueCommand(f.ctx, r.SensorID, fleet.ActionStop, "ops", "k2")
	if err != nil || created || settled.ID != pending.ID || settled.Status != fleet.CommandAccepted {
		t.Errorf("repeat of a pending command = %+v, created %v, %v; want it accepted", settled, created, err)
	}
	msgs := f.pub.Messages()
	if last := msgs[len(msgs)-1]; last.ID != pending.ID {
		t.Errorf("republished with id %q, want %q", last.ID, pending.ID)
	}
}

func TestReconcileCommands(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, _ := f.enrolled(t, "acme")
	f.pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
	young, err := issue(f, r.SensorID, fleet.ActionStart, "ops")
	if err != nil || young.Status != fleet.CommandPending {
		t.Fatalf("unconfirmed = %+v, %v", young, err)
	}
	// Within its first seconds the first publication may still answer: not republished.
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 0 {
		t.Errorf("ReconcileCommands at once = %d, %v; want 0", n, err)
	}
	published := len(f.pub.Messages())
	// Still failing: stays pending.
	f.clock.Advance(20 * time.Second)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 0 {
		t.Errorf("ReconcileCommands while messaging is down = %d, %v; want 0", n, err)
	}
	if last := f.sensor(t, r.SensorID).LastCommand; last.Status != fleet.CommandPending {
		t.Errorf("a repeat that failed settled the command: %+v", last)
	}
	// Messaging back: the same message id is published again and accepted.
	f.pub.Fail(nil)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileCommands = %d, %v; want 1", n, err)
	}
	msgs := f.pub.Messages()
	if len(msgs) != published+1 || msgs[len(msgs)-1].ID != young.ID {
		t.Errorf("publications %d (was %d), last %q; want one more with id %s", len(msgs), published, msgs[len(msgs)-1].ID, young.ID)
	}
	if last := f.sensor(t, r.SensorID).LastCommand; last.Status != fleet.CommandAccepted {
		t.Errorf("command after reconciliation %+v, want accepted", last)
	}

	// A command never confirmed before its expiry (plus the skew
	// allowance) expires, and so does the accepted one its sensor never
	// reported on.
	f.pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
	old, _ := issue(f, r.SensorID, fleet.ActionStop, "ops")
	f.clock.Advance(fleet.DefaultCommandTTL + fleet.DefaultMaxClockSkew + time.Second)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 2 {
		t.Fatalf("ReconcileCommands past expiry = %d, %v; want 2", n, err)
	}
	if last := f.sensor(t, r.SensorID).LastCommand; last.ID != old.ID || last.Status != fleet.CommandExpired {
		t.Errorf("command past its expiry %+v, want expired", last)
	}
	page, err := f.svc.SensorCommands(f.ctx, r.SensorID, fleet.CommandCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page {
		if c.ID == young.ID && (c.Status != fleet.CommandExpired || c.AcceptedAt.IsZero()) {
			t.Errorf("accepted command never reported on, past its expiry: %+v, want expired", c)
		}
	}
}

func TestSensorCommandsHistory(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r, _ := f.enrolled(t, "acme")
	var ids []string
	for i := range 5 {
		f.clock.Advance(time.Second)
		a := fleet.ActionStart
		if i%2 == 1 {
			a = fleet.ActionStop
		}
		c := f.issued(t, r.SensorID, a)
		ids = append([]string{c.ID}, ids...) // newest first
	}
	var got []string
	var after fleet.CommandCursor
	for {
		page, err := f.svc.SensorCommands(f.ctx, r.SensorID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			got = append(got, c.ID)
		}
		last := page[len(page)-1]
		after = fleet.CommandCursor{IssuedAt: last.IssuedAt, ID: last.ID}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("history %v, want newest first %v", got, ids)
	}
	for name, tc := range map[string]struct {
		sensor string
		limit  int
		want   error
	}{
		"unknown sensor": {"s-0000000000000000", 10, fleet.ErrNotFound},
		"limit 0":        {r.SensorID, 0, fleet.ErrInvalidInput},
		"limit too high": {r.SensorID, fleet.MaxCommandPage + 1, fleet.ErrInvalidInput},
	} {
		_, err := f.svc.SensorCommands(f.ctx, tc.sensor, fleet.CommandCursor{}, tc.limit)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// batchPublisher is fleettest's publisher that also publishes pipelined,
// keeping the size of each pipelined call.
type batchPublisher struct {
	*fleettest.Publisher
	mu    sync.Mutex
	calls []int
}

func (p *batchPublisher) PublishCommands(ctx context.Context, msgs []fleet.Command, _ int) []fleet.PublishResult {
	p.mu.Lock()
	p.calls = append(p.calls, len(msgs))
	p.mu.Unlock()
	out := make([]fleet.PublishResult, len(msgs))
	for i, m := range msgs {
		out[i].Ack, out[i].Err = p.PublishCommand(ctx, m)
	}
	return out
}

func (p *batchPublisher) pipelined() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// A stream slow to confirm leaves many commands pending at once (a
// work-queue fan-out to thousands of sensors): the reconciliation
// republishes them together, pipelined, not one after another each
// waiting out the publisher's timeout, so none passes the republish window
// for want of a turn. A republication that fails leaves its command
// pending, never failed: the first publication may be stored.
func TestReconcileRepublishesPendingCommandsTogether(t *testing.T) {
	t.Parallel()
	pub := &batchPublisher{Publisher: &fleettest.Publisher{}}
	f := newFixture(t, func(c *fleet.Config) { c.Publisher = pub })
	f.provisionedTenant(t, "acme")
	pub.Fail(fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
	var cmds []fleet.Command
	for range 5 {
		r, _ := f.enrolled(t, "acme")
		c, err := issue(f, r.SensorID, fleet.ActionStart, "ops")
		if err != nil || c.Status != fleet.CommandPending {
			t.Fatalf("unconfirmed command = %+v, %v; want pending", c, err)
		}
		cmds = append(cmds, c)
	}
	published := len(pub.Messages())

	// The stream answers again, except for one republication, which
	// provably did not reach it.
	pub.Fail(nil)
	pub.FailIf(func(id string) error {
		if id == cmds[0].ID {
			return fmt.Errorf("nats: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrNotPublished)
		}
		return nil
	})
	f.clock.Advance(20 * time.Second)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 4 {
		t.Fatalf("ReconcileCommands = %d, %v; want 4 settled", n, err)
	}
	if got := pub.pipelined(); !slices.Equal(got, []int{5}) {
		t.Errorf("pipelined publications %v; want the 5 pending commands in one", got)
	}
	if got := len(pub.Messages()) - published; got != 4 {
		t.Errorf("%d commands stored by the reconciliation, want 4", got)
	}
	for i, c := range cmds {
		got := f.sensor(t, c.SensorID).LastCommand
		want := fleet.CommandAccepted
		if i == 0 {
			want = fleet.CommandPending
		}
		if got.ID != c.ID || got.Status != want {
			t.Errorf("command %d after reconciliation: %s %s; want %s %s", i, got.ID, got.Status, c.ID, want)
		}
	}

	// The next pass settles the one left, with the same message id.
	pub.FailIf(nil)
	if n, err := f.svc.ReconcileCommands(f.ctx); err != nil || n != 1 {
		t.Fatalf("second ReconcileCommands = %d, %v; want 1", n, err)
	}
	msgs := pub.Messages()
	if last := msgs[len(msgs)-1]; last.ID != cmds[0].ID {
		t.Errorf("republished with id %q, want %q", last.ID, cmds[0].ID)
	}
	if got := f.sensor(t, cmds[0].SensorID).LastCommand; got.Status != fleet.CommandAccepted {
		t.Errorf("command after the second pass: %s, want accepted", got.Status)
	}
}
