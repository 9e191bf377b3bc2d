package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

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
