package controlplanestore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPruneBatchesWalksPinnedBatchesOncePerPass (attack, fixed): an old
// batch holding some sensor's last command is kept whole (the rule), and a
// sensor that never gets another command (decommissioned, revoked; their
// rows are kept for ever) pins its last batch for ever. Every PruneBatches
// call walks the old batches from the oldest, checking each under its lock
// (reading its commands), until it has deleted limit of them; the pass
// calls again while a call deleted its full limit (10 batches). So each
// pass re-checks every pinned batch once per 10 batches it deletes, and
// the pinned batches only accumulate over the years (50 pinned and 100
// removable: 650 checks in 11 calls). Each old batch is now checked about
// once per pass: a call goes on where the call before it in the same pass
// stopped.
func TestPruneBatchesWalksPinnedBatchesOncePerPass(t *testing.T) {
	const pinned, prunable, limit = 50, 100, 10
	pool := newPool(t)
	ctx := context.Background()
	old := time.Now().Add(-200 * 24 * time.Hour).UTC().Truncate(time.Second)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", strings.Fields(sql)[0:3], err)
		}
	}
	exec(`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'acme', $1)`, old)
	batch := func(id, sensor string, at time.Time) {
		t.Helper()
		exec(`INSERT INTO command_batches (id, action, created_at, created_by, operator_id, request_hash, matched, total, skipped_revoked, skipped_not_enrolled)
			VALUES ($1, 'stop', $2, 'ops', 'op-1', sha256(convert_to($3::text, 'UTF8')), 1, 1, 0, 0)`, id, at, id)
		exec(`INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, failed_at, batch_id)
			VALUES ($1, 'acme', $2, 'stop', $3, 'ops', $4, 'failed', $3, $5)`, id+"-c", sensor, at, at.Add(10*time.Minute), id)
	}
	// Pinned: each the last command of a sensor that gets no other, the
	// oldest batches of all.
	for i := range pinned {
		exec(`INSERT INTO sensors (id, tenant_id, name, state, created_at) VALUES ($1, 'acme', $1, 'offline', $2)`, fmt.Sprintf("p%d", i), old)
		batch(fmt.Sprintf("bp%03d", i), fmt.Sprintf("p%d", i), old.Add(time.Duration(i)*time.Second))
	}
	// Removable: old batches to a sensor that got a later command.
	exec(`INSERT INTO sensors (id, tenant_id, name, state, created_at) VALUES ('x', 'acme', 'x', 'online', $1)`, old)
	for i := range prunable {
		batch(fmt.Sprintf("bx%03d", i), "x", old.Add(time.Hour+time.Duration(i)*time.Second))
	}
	batch("bx-recent", "x", time.Now().UTC())

	store, counter := tracedStore(t, pool)
	// One pass, as core/retention drains it.
	cut := time.Now().Add(-90 * 24 * time.Hour)
	counter.record(true)
	removed, calls := 0, 0
	for {
		b, _, err := store.PruneBatches(ctx, cut, limit)
		if err != nil {
			t.Fatal(err)
		}
		removed, calls = removed+b, calls+1
		if b < limit {
			break
		}
	}
	checks := 0
	for _, s := range counter.record(false) {
		if strings.Contains(s, "FROM command_batches b WHERE b.id") {
			checks++
		}
	}
	if removed != prunable {
		t.Fatalf("removed %d batches in %d calls, want %d", removed, calls, prunable)
	}
	if checks == 0 {
		t.Fatal("no batch check traced: the guard would pass whatever the cost")
	}
	t.Logf("%d batch checks in %d calls (%d pinned, %d removed)", checks, calls, pinned, removed)
	if most := 2 * (pinned + prunable); checks > most {
		t.Errorf("one pass checked old batches %d times in %d calls for %d pinned and %d removable batches, want at most %d",
			checks, calls, pinned, prunable, most)
	}
}
