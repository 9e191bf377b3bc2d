// Package eventseed gives tests the `events` table event ingestion writes
// (the control plane's migrations, 002_events.sql: partitioned by day) and
// seeds it with plain SQL, creating each day's partition as the event
// writer does. Should the migrations lack the table, it creates an
// equivalent one with a default partition.
package eventseed

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/migrations"
)

// ddl mirrors the ingestion migration. A default partition takes every
// day, so tests need not create daily partitions.
const ddl = `
CREATE TABLE events (
	tenant_id    text        NOT NULL,
	sensor_id    text        NOT NULL,
	event_id     text        NOT NULL,
	event_time   timestamptz NOT NULL,
	received_at  timestamptz NOT NULL DEFAULT now(),
	kind         text        NOT NULL,
	src_ip       inet,
	src_port     int,
	dest_ip      inet,
	dest_port    int,
	protocol     text        NOT NULL DEFAULT '',
	signature_id bigint,
	signature    text        NOT NULL DEFAULT '',
	category     text        NOT NULL DEFAULT '',
	severity     int,
	cves         text[]      NOT NULL DEFAULT '{}',
	raw          jsonb,
	PRIMARY KEY (tenant_id, event_time, sensor_id, event_id)
) PARTITION BY RANGE (event_time);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX ON events (tenant_id, event_time);`

// EnsureTable applies the control plane's migrations and creates the
// events table unless they did.
func EnsureTable(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	if _, err := migrate.Apply(ctx, pool, "controlplane", migrations.ControlPlane); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('events') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		return
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("create events table: %v", err)
	}
}

// Event is one row to seed; zero values become NULL or defaults.
type Event struct {
	Tenant, Sensor, ID string
	Time               time.Time
	Kind               string
	Src, Dest          string
	SignatureID        int64
	Signature          string
	Category           string
	Severity           int
	CVEs               []string
}

// Seed inserts events; ids default to a unique sequence.
func Seed(t testing.TB, pool *pgxpool.Pool, events ...Event) {
	t.Helper()
	ctx := context.Background()
	var partitioned bool
	if err := pool.QueryRow(ctx, `SELECT to_regprocedure('events_ensure_partition(date)') IS NOT NULL`).Scan(&partitioned); err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if partitioned {
			if _, err := pool.Exec(ctx, `SELECT events_ensure_partition($1::date)`, e.Time.UTC().Format(time.DateOnly)); err != nil {
				t.Fatalf("partition for event %d: %v", i, err)
			}
		}
		if e.ID == "" {
			e.ID = fmt.Sprintf("ev-%d-%d", time.Now().UnixNano(), i)
		}
		if e.Kind == "" {
			e.Kind = "alert"
		}
		if e.CVEs == nil {
			e.CVEs = []string{}
		}
		_, err := pool.Exec(ctx, `INSERT INTO events
			(tenant_id, sensor_id, event_id, event_time, received_at, kind, src_ip, dest_ip, protocol, signature_id, signature, category, severity, cves)
			VALUES ($1, $2, $3, $4, $4, $5, $6::inet, $7::inet, 'TCP', $8, $9, $10, $11, $12)`,
			e.Tenant, e.Sensor, e.ID, e.Time, e.Kind, inet(e.Src), inet(e.Dest),
			nullInt(e.SignatureID), e.Signature, e.Category, nullInt(int64(e.Severity)), e.CVEs)
		if err != nil {
			t.Fatalf("seed event %d: %v", i, err)
		}
	}
}

func inet(s string) *string {
	if s == "" {
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		panic("eventstest: bad address " + s)
	}
	return &s
}

func nullInt(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
