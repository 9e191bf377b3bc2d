package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/pglock"
	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/retention"
)

// TestHistoryRetentionAcrossReplicas runs two replicas pruning every
// 100 ms on one database: while the retention lock is held elsewhere
// neither removes anything (both skip); once it is free, the old audit
// entries, the old day of events, the ended claim codes and API tokens go, each
// removed by exactly one replica (the replicas' counters add up to what
// was there), and the recent and the live stay.
func TestHistoryRetentionAcrossReplicas(t *testing.T) {
	none := &provisionertest.Stack{}
	cfg := func(c *app.ServeConfig) {
		c.Provisioner.Enabled, c.Messaging.Enabled, c.Events.Enabled = false, false, false
		c.Events.RetentionDays, c.AuditRetentionDays = 30, 400
		c.CommandHistoryRetentionDays, c.CredentialHistoryRetentionDays = 90, 90
		c.HistoryPruneInterval = 100 * time.Millisecond
	}
	a := startPlane(t, none, cfg)
	bcfg := a.Config
	bcfg.ListenAddr, bcfg.MetricsListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	bcfg.GRPCListenAddr = "127.0.0.1:0"
	b := startPlane(t, none, func(c *app.ServeConfig) { *c = bcfg })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := a.Pool()
	unlock, err := pglock.Lock(ctx, db, retention.Lock, 5*time.Millisecond) // between the replicas' passes
	if err != nil {
		t.Fatalf("take the retention lock: %v", err)
	}
	defer unlock() // before db.Close, which waits for the lock's connection
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	const oldAudit, oldCodes = 3000, 500
	exec(`INSERT INTO audit_log (at, action, outcome) SELECT now() - interval '500 days' + i * interval '1 second', 'old', 'success' FROM generate_series(1, $1) i`, oldAudit)
	exec(`INSERT INTO audit_log (at, action, outcome) SELECT now() - interval '1 day', 'recent', 'success' FROM generate_series(1, 50)`)
	exec(`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', now() - interval '1 year')`)
	exec(`INSERT INTO claim_codes (id, tenant_id, code_hash, created_at, created_by, expires_at)
		SELECT 'old-' || i, 'acme', sha256(('old ' || i)::bytea), now() - interval '101 days', 'ops', now() - interval '100 days' FROM generate_series(1, $1) i`, oldCodes)
	exec(`INSERT INTO claim_codes (id, tenant_id, code_hash, created_at, created_by, expires_at)
		VALUES ('live', 'acme', sha256('live'::bytea), now() - interval '200 days', 'ops', now() + interval '1 day')`)
	exec(`INSERT INTO api_tokens (id, operator_id, token_hash, name, role, created_by, created_at, expires_at)
		SELECT 'old-' || i, (SELECT min(id) FROM operators), sha256(('tok ' || i)::bytea), 'ci', 'viewer', 'ops', now() - interval '101 days', now() - interval '100 days'
		FROM generate_series(1, 7) i`)
	oldDay := time.Now().UTC().AddDate(0, 0, -60)
	for _, at := range []time.Time{oldDay, time.Now().UTC()} {
		exec(`SELECT events_ensure_partition($1::date)`, at.Format(time.DateOnly))
		exec(`INSERT INTO events (tenant_id, sensor_id, event_id, event_time, received_at, kind) VALUES ('acme', 's1', $1, $2, $2, 'alert')`, at.Format(time.DateOnly), at)
	}

	// Locked elsewhere: both replicas try, skip, and remove nothing.
	skipped := func(p *plane) int {
		return metric(t, p, `rxc_controlplane_history_prune_passes_total{outcome="skipped"}`)
	}
	sa, sb := skipped(a), skipped(b)
	deadline := time.Now().Add(20 * time.Second)
	for skipped(a) < sa+2 || skipped(b) < sb+2 {
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not try the pass while the lock was held: skipped %d→%d and %d→%d", sa, skipped(a), sb, skipped(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'old'`); n != oldAudit {
		t.Fatalf("%d old audit entries left while the lock was held elsewhere, want all %d", n, oldAudit)
	}

	unlock()
	for count(`SELECT count(*) FROM audit_log WHERE action = 'old'`)+count(`SELECT count(*) FROM claim_codes WHERE id LIKE 'old-%'`)+
		count(`SELECT count(*) FROM api_tokens`)+
		count(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass`) > 1 {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("the old history was not removed once the lock was free")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'recent'`); n != 50 {
		t.Errorf("recent audit entries left: %d, want 50", n)
	}
	if n := count(`SELECT count(*) FROM claim_codes WHERE id = 'live'`); n != 1 {
		t.Error("the live claim code was removed")
	}
	if n := count(`SELECT count(*) FROM events`); n != 1 {
		t.Errorf("events left: %d, want today's one", n)
	}
	removed := func(history string) int {
		name := `rxc_controlplane_history_pruned_total{history="` + history + `"}`
		return metric(t, a, name) + metric(t, b, name)
	}
	for history, want := range map[string]int{"audit_entries": oldAudit, "claim_codes": oldCodes, "event_days": 1, "api_tokens": 7} {
		if got := removed(history); got != want {
			t.Errorf("%s removed by the two replicas together: %d, want %d (each once)", history, got, want)
		}
	}
}

// Retention settings that are neither 0 (keep forever) nor a number of
// days from 1 to 36,500 stop the start with the variable's name.
func TestRetentionConfigRefused(t *testing.T) {
	refusedAtStart(t, map[string]func(*app.ServeConfig){
		"EVENTS_RETENTION_DAYS=-1":                  func(c *app.ServeConfig) { c.Events.RetentionDays = -1 },
		"AUDIT_RETENTION_DAYS=36501":                func(c *app.ServeConfig) { c.AuditRetentionDays = 36501 },
		"COMMAND_HISTORY_RETENTION_DAYS=-90":        func(c *app.ServeConfig) { c.CommandHistoryRetentionDays = -90 },
		"CREDENTIAL_HISTORY_RETENTION_DAYS=-1":      func(c *app.ServeConfig) { c.CredentialHistoryRetentionDays = -1 },
		"HISTORY_PRUNE_INTERVAL=-1m0s: must not be": func(c *app.ServeConfig) { c.HistoryPruneInterval = -time.Minute },
	})
	// The positive control: 0 (keep forever) and the bounds start.
	startPlane(t, &provisionertest.Stack{}, func(c *app.ServeConfig) {
		c.Provisioner.Enabled, c.Messaging.Enabled = false, false
		c.Events.RetentionDays, c.AuditRetentionDays, c.CommandHistoryRetentionDays, c.CredentialHistoryRetentionDays = 0, 36500, 1, 0
	})
}

// refusedAtStart applies each mutation to a control plane's config (no
// provisioner, no messaging) and wants NewServer to refuse it with an
// error that contains the map key (the variable and its value).
func refusedAtStart(t *testing.T, cases map[string]func(*app.ServeConfig)) {
	t.Helper()
	for name, mutate := range cases {
		cfg := controlplanetest.Config(t, &provisionertest.Stack{})
		cfg.Provisioner.Enabled, cfg.Messaging.Enabled = false, false
		mutate(&cfg)
		srv, err := app.NewServer(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			stopped(srv)
			t.Errorf("%s: started", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %q does not name it", name, err)
		}
	}
}

// stopped runs srv with a context already ended, which closes what it
// bound.
func stopped(srv *app.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv.Run(ctx)
}
