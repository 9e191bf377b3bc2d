package app_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/pgserver"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// The backup runbook (docs/operations.md) as commands: pg_dump -Fc of the
// provisioner's database, a copy of the operator seed file, and the
// encryption key; restored with pg_restore into an empty database on
// another server, `provisioner serve` with the copied seed and the same key
// answers the resolver with the accounts of the backup — and refuses to
// start with another seed file.
func TestBackupAndRestore(t *testing.T) {
	e := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	var control, controlJWT string
	if err := pool.QueryRow(ctx, `SELECT account_id, jwt FROM nats_accounts WHERE kind = 'control'`).Scan(&control, &controlJWT); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	bin, err := pgserver.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir()
	dump := filepath.Join(backup, "provisioner.dump")
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=custom", "--file="+dump, "--dbname="+e.dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	seedCopy := filepath.Join(backup, "operator.nk")
	data, err := os.ReadFile(e.seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seedCopy, data, 0o600); err != nil {
		t.Fatal(err)
	}

	// Restore on an empty database; the original is gone from the picture.
	restored := pgtest.DSN(t)
	if out, err := exec.Command(filepath.Join(bin, "pg_restore"), "--no-owner", "--exit-on-error", "--dbname="+restored, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	srv := startServe(t, map[string]string{
		"PG_DSN": restored, "OPERATOR_SEED_PATH": seedCopy, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key,
		"BACKEND_SHARED_SECRET": "restore-secret-0123456789", "NATS_URL": "nats://127.0.0.1:1",
	})
	got := strings.TrimSpace(srv.waitAnswer(t, "/jwt/v1/accounts/"+control, http.StatusOK, 60*time.Second))
	if got != controlJWT {
		t.Fatalf("restored resolver answers %q for CONTROL, want the backed-up JWT", got)
	}
	srv.stop()
	<-srv.done

	// A seed file from another operator does not start on this backup.
	other := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	setServeEnv(t, map[string]string{
		"PG_DSN": restored, "OPERATOR_SEED_PATH": other.seed, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key,
		"BACKEND_SHARED_SECRET": "restore-secret-0123456789", "LISTEN_ADDR": "127.0.0.1:0", "NATS_URL": "nats://127.0.0.1:1",
	})
	if code, _, errs := runCLI("serve"); code != 1 || errs == "" {
		t.Fatalf("serve with another operator's seed on the backup: %d %s", code, errs)
	}
}
