package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/adapters/postgres/pgserver"
	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/internal/logbuf"
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
	clearServeEnv(t)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for k, v := range map[string]string{
		"PG_DSN": restored, "OPERATOR_SEED_PATH": seedCopy, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key,
		"BACKEND_SHARED_SECRET": "restore-secret-0123456789", "LISTEN_ADDR": addr, "NATS_URL": "nats://127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	var logs logbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- app.Run(sctx, []string{"serve"}, &logs, &logs) }()
	var got string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/jwt/v1/accounts/" + control)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				got = strings.TrimSpace(string(body))
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve on the restored database exited with %d: %s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored provisioner did not answer within 60s: %s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != controlJWT {
		t.Fatalf("restored resolver answers %q for CONTROL, want the backed-up JWT", got)
	}
	stop()
	<-done

	// A seed file from another operator does not start on this backup.
	other := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	clearServeEnv(t)
	for k, v := range map[string]string{
		"PG_DSN": restored, "OPERATOR_SEED_PATH": other.seed, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key,
		"BACKEND_SHARED_SECRET": "restore-secret-0123456789", "LISTEN_ADDR": "127.0.0.1:0", "NATS_URL": "nats://127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
	if code, _, errs := runCLI("serve"); code != 1 || errs == "" {
		t.Fatalf("serve with another operator's seed on the backup: %d %s", code, errs)
	}
}
