package controlplanestore_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
)

// upTo is the control plane's schema files before version (e.g. "005").
func upTo(t *testing.T, version string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.ControlPlane, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Compare(e.Name(), version) < 0 {
			data, err := fs.ReadFile(migrations.ControlPlane, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	return out
}

// seededBefore is a fresh database with the control plane's schema before
// version holding the rows the seed statements write; migrateAll applies
// the rest.
func seededBefore(t *testing.T, version string, seed ...string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	if _, err := migrate.Apply(ctx, pool, "controlplane", upTo(t, version)); err != nil {
		t.Fatal(err)
	}
	for _, q := range seed {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return pool
}

// migrateAll applies the control plane's migrations not yet applied.
func migrateAll(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := migrate.Apply(context.Background(), pool, "controlplane", migrations.ControlPlane); err != nil {
		t.Fatal(err)
	}
}

// TestMigration005KeepsEachSensorsLastCommand: commands recorded before
// 005 keep their sensor's last command (the one last_command_id named,
// whatever the issue times say), and a command recorded after comes last.
func TestMigration005KeepsEachSensorsLastCommand(t *testing.T) {
	ctx := context.Background()
	pool := seededBefore(t, "005",
		`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', now())`,
		`INSERT INTO sensors (id, tenant_id, name, state, created_at) VALUES ('s1', 'acme', 's1', 'running', now()), ('s2', 'acme', 's2', 'running', now())`,
		// s1's last command is c1b although c1a was issued later (clocks of
		// two replicas); s2's is c2a.
		`INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status) VALUES
			('c1a', 'acme', 's1', 'start', now(), 'ops', now() + interval '1 hour', 'accepted'),
			('c1b', 'acme', 's1', 'stop', now() - interval '1 second', 'ops', now() + interval '1 hour', 'accepted'),
			('c2a', 'acme', 's2', 'stop', now(), 'ops', now() + interval '1 hour', 'accepted'),
			('c2b', 'acme', 's2', 'start', now() - interval '1 minute', 'ops', now() + interval '1 hour', 'accepted')`,
		`UPDATE sensors SET last_command_id = 'c1b' WHERE id = 's1'`,
		`UPDATE sensors SET last_command_id = 'c2a' WHERE id = 's2'`,
	)
	migrateAll(t, pool)
	store := storeOn(t, pool)
	for id, want := range map[string]string{"s1": "c1b", "s2": "c2a"} {
		s, err := store.Sensor(ctx, id)
		if err != nil || s.LastCommand == nil || s.LastCommand.ID != want {
			t.Errorf("%s after the migration: last command %+v, %v; want %s", id, s.LastCommand, err, want)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, first_sent_at)
		VALUES ('c1c', 'acme', 's1', 'start', now() - interval '1 hour', 'ops', now() + interval '1 hour', 'pending', now())`); err != nil {
		t.Fatal(err)
	}
	if s, _ := store.Sensor(ctx, "s1"); s.LastCommand == nil || s.LastCommand.ID != "c1c" {
		t.Errorf("after a new command: last command %+v, want c1c", s.LastCommand)
	}
	var unsent int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE first_sent_at IS NULL`).Scan(&unsent); err != nil || unsent != 0 {
		t.Errorf("%d commands from before 005 without a first send time (%v)", unsent, err)
	}
}

// TestMigration013ChecksSensorAndTenantAsAPair: commands recorded before
// 013 survive it; afterwards a command naming its sensor's tenant is
// recorded (the positive control), one naming another existing tenant or
// a sensor that does not exist is refused by the database, and a batch of
// the store still records its commands.
func TestMigration013ChecksSensorAndTenantAsAPair(t *testing.T) {
	ctx := context.Background()
	pool := seededBefore(t, "013",
		`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', now()), ('umbrella', 'Umbrella', now())`,
		`INSERT INTO sensors (id, tenant_id, name, state, created_at) VALUES ('s1', 'acme', 's1', 'running', now()), ('u1', 'umbrella', 'u1', 'running', now())`,
		`INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, first_sent_at) VALUES
			('old', 'acme', 's1', 'start', now(), 'ops', now() + interval '1 hour', 'accepted', now())`,
	)
	migrateAll(t, pool)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE id = 'old'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the command from before 013: %d rows, %v", n, err)
	}
	insert := func(id, tenant, sensor string) error {
		_, err := pool.Exec(ctx, `INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, first_sent_at)
			VALUES ($1, $2, $3, 'start', now(), 'ops', now() + interval '1 hour', 'pending', now())`, id, tenant, sensor)
		return err
	}
	if err := insert("ok", "acme", "s1"); err != nil {
		t.Fatalf("a command with its sensor's tenant: %v", err)
	}
	for _, c := range []struct{ id, tenant, sensor string }{
		{"cross", "umbrella", "s1"}, // another tenant's name on acme's sensor
		{"cross2", "acme", "u1"},    // acme's name on umbrella's sensor
		{"ghost", "acme", "nope"},   // no such sensor
		{"ghost2", "nope", "s1"},    // no such tenant
	} {
		var pgErr *pgconn.PgError
		if err := insert(c.id, c.tenant, c.sensor); !errors.As(err, &pgErr) || pgErr.Code != "23503" {
			t.Errorf("command %s (tenant %s, sensor %s): %v; want a foreign-key violation", c.id, c.tenant, c.sensor, err)
		}
	}
}
