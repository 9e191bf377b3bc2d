// Command retention-bench measures the control plane's history retention
// pass on a throwaway PostgreSQL: it fills the audit trail, single
// commands, sensor tokens and a month and a half of event days with history
// older than the default retentions (and 50 finished command batches, the
// largest 50,000 commands), then runs the pass as the control
// plane does (core/retention on the PostgreSQL stores) and reports, per
// history, what it removed, how many bounded steps it took, the slowest
// step (the longest any statement held its rows) and a step that finds
// nothing (what every later pass costs).
package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/core/retention"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func main() {
	rows := flag.Int("rows", 1_000_000, "audit entries; commands are a fifth, tokens 3/10")
	out := flag.String("out", "docs/benchmarks-history.md", "append results here (empty: print only)")
	flag.Parse()
	t := &benchenv.T{}
	defer t.Close()
	if err := run(t, *rows, *out); err != nil {
		t.Fatal(err)
	}
}

func run(t *benchenv.T, n int, out string) error {
	fmt.Println("starting PostgreSQL…")
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	t.Cleanup(func() { pg.Stop() })
	pgtest.Use(pg.DSN("postgres"))
	pool := pgtest.ControlPlanePool(t)
	ctx := context.Background()
	fmt.Printf("filling: %d audit entries over 800 days, 50 batches (148,000 commands), %d failed commands over 200 days to 50,000 sensors, %d revoked tokens, 45 event days…\n", n, n/5, n*3/10)
	if err := fill(ctx, pool, n); err != nil {
		return err
	}
	store, err := controlplanestore.New(controlplanestore.Config{Pool: pool})
	if err != nil {
		return err
	}
	evs, err := eventstore.New(eventstore.Config{Pool: pool})
	if err != nil {
		return err
	}
	now := time.Now()
	var (
		b            strings.Builder
		measureSteps func(name string, limit int, step func() (int, error)) error
	)
	fmt.Fprintf(&b, "%d audit entries (800 days), %d failed single commands (200 days, 50,000 sensors), 50 finished batches (148,000 commands), %d revoked sensor tokens (300 days), 45 days of events; default retentions, steps of %d rows.\n\n", n, n/5, n*3/10, retention.DefaultBatch)
	fmt.Fprintln(&b, "| history | removed | steps | whole | slowest step | step finding nothing |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	measure := func(name string, step func() (int, error)) error {
		return measureSteps(name, retention.DefaultBatch, step)
	}
	measureSteps = func(name string, limit int, step func() (int, error)) error {
		var steps, total int
		var worst time.Duration
		start := time.Now()
		for {
			s0 := time.Now()
			k, err := step()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			worst, steps, total = max(worst, time.Since(s0)), steps+1, total+k
			if k < limit {
				break
			}
		}
		whole := time.Since(start)
		s0 := time.Now()
		if k, err := step(); err != nil || k != 0 {
			return fmt.Errorf("%s: a second pass removed %d, %v", name, k, err)
		}
		empty := time.Since(s0)
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f s | %d ms | %.1f ms |\n", name, total, steps, whole.Seconds(), worst.Milliseconds(), float64(empty.Microseconds())/1000)
		return nil
	}
	cut := func(d time.Duration) time.Time { return now.Add(-d) }
	var batchCommands int
	if err := measureSteps("command batches, one a step (49 of 2,000 commands, one of 50,000)", 1, func() (int, error) {
		b, c, err := store.PruneBatches(ctx, cut(retention.DefaultCommands), 1)
		batchCommands += c
		return b, err
	}); err != nil {
		return err
	}
	if batchCommands != 49*2000+50000 {
		return fmt.Errorf("batches removed %d commands, want %d", batchCommands, 49*2000+50000)
	}
	if err := measure("audit entries", func() (int, error) {
		return store.PruneAudit(ctx, cut(retention.DefaultAudit), retention.DefaultBatch)
	}); err != nil {
		return err
	}
	if err := measure("commands", func() (int, error) {
		return store.PruneCommands(ctx, cut(retention.DefaultCommands), retention.DefaultBatch)
	}); err != nil {
		return err
	}
	if err := measure("sensor tokens", func() (int, error) {
		return store.PruneTokens(ctx, cut(retention.DefaultCredentials), retention.DefaultBatch)
	}); err != nil {
		return err
	}
	if err := measure("event days (dropped whole)", func() (int, error) {
		return evs.DropDaysBefore(ctx, cut(retention.DefaultEvents))
	}); err != nil {
		return err
	}
	fmt.Print(b.String())
	if out == "" {
		return nil
	}
	return benchenv.AppendResults(out, "History retention pass (PostgreSQL)", b.String())
}

// fill writes the history in statements of at most 100,000 rows.
func fill(ctx context.Context, pool *pgxpool.Pool, n int) error {
	stmts := []string{
		`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'acme', now())`,
		`INSERT INTO sensors (id, tenant_id, name, state, created_at) SELECT 's' || i, 'acme', 's' || i, 'offline', now() FROM generate_series(1, 50000) i`,
	}
	// Finished batches 150 days old, recorded before the single commands
	// (so none holds a sensor's last command): 49 of 2,000 commands and
	// the largest a batch may be, 50,000.
	for k := 1; k <= 50; k++ {
		size := 2000
		if k == 50 {
			size = 50000
		}
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO command_batches (id, action, created_at, created_by, operator_id, request_hash, tenant_ids, matched, total, skipped_revoked, skipped_not_enrolled)
			VALUES ('b%d', 'start', now() - interval '150 days', 'ops', 'op', sha256('b%d'::bytea), '{acme}', %d, %d, 0, 0)`, k, k, size, size),
			fmt.Sprintf(`INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, failed_at, first_sent_at, batch_id)
			SELECT 'b%d-' || i, 'acme', 's' || i, 'start', now() - interval '150 days', 'ops', now() - interval '150 days' + interval '10 minutes', 'failed',
			       now() - interval '150 days', now() - interval '150 days', 'b%d' FROM generate_series(1, %d) i`, k, k, size))
	}
	for lo := 1; lo <= n; lo += 100_000 {
		hi := min(lo+99_999, n)
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO audit_log (at, action, outcome)
			SELECT now() - interval '800 days' + i * (interval '800 days' / %d), 'x', 'success' FROM generate_series(%d, %d) i`, n, lo, hi))
	}
	for lo := 1; lo <= n/5; lo += 100_000 {
		hi := min(lo+99_999, n/5)
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, failed_at, first_sent_at)
			SELECT 'c' || i, 'acme', 's' || (i %% 50000 + 1), 'start', t, 'ops', t + interval '10 minutes', 'failed', t, t
			FROM (SELECT i, now() - interval '200 days' + i * (interval '200 days' / %d) AS t FROM generate_series(%d, %d) i) g`, n/5, lo, hi))
	}
	// A recent command to every sensor after the batches and the single commands: its last.
	stmts = append(stmts, `INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, failed_at, first_sent_at)
		SELECT 'r' || i, 'acme', 's' || i, 'stop', now() - interval '1 day', 'ops', now() - interval '1 day' + interval '10 minutes', 'failed',
		       now() - interval '1 day', now() - interval '1 day' FROM generate_series(1, 50000) i`)
	for lo := 1; lo <= n*3/10; lo += 100_000 {
		hi := min(lo+99_999, n*3/10)
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO sensor_tokens (token_hash, sensor_id, kind, created_at, expires_at, revoked_at)
			SELECT sha256(('t' || i)::bytea), 's' || (i %% 1000 + 1), 'sensor', now() - interval '300 days', now() + interval '1 day',
			       now() - interval '300 days' + i * (interval '300 days' / %d) FROM generate_series(%d, %d) i`, n*3/10, lo, hi))
	}
	for d := range 45 {
		day := time.Now().UTC().AddDate(0, 0, -d).Format(time.DateOnly)
		stmts = append(stmts, fmt.Sprintf(`SELECT events_ensure_partition('%s')`, day),
			fmt.Sprintf(`INSERT INTO events (tenant_id, sensor_id, event_id, event_time, received_at, kind)
				SELECT 'acme', 's1', 'e' || i, '%s'::timestamptz + i * interval '1 second', now(), 'alert' FROM generate_series(1, 1000) i`, day))
	}
	stmts = append(stmts, `ANALYZE`)
	for _, q := range stmts {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("fill: %w\n%s", err, q)
		}
	}
	return nil
}
