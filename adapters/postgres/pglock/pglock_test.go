package pglock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/pglock"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Two pools stand for two replicas: a held lock refuses the other until it
// is released; Lock waits for it, and gives up when its context ends; a
// replica that dies (its pool closed) releases what it held.
func TestLockAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, b := pgtest.Pool(t, dsn), pgtest.Pool(t, dsn)

	unlock, ok, err := pglock.TryLock(ctx, a, "job")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if _, ok, err := pglock.TryLock(ctx, b, "job"); err != nil || ok {
		t.Fatalf("the other replica's TryLock = %v, %v; want refused", ok, err)
	}
	if u, ok, err := pglock.TryLock(ctx, b, "other job"); err != nil || !ok {
		t.Fatalf("another name: TryLock = %v, %v", ok, err)
	} else {
		u()
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := pglock.Lock(short, b, "job", 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while held = %v, want the context's deadline", err)
	}

	got := make(chan error, 1)
	go func() {
		u, err := pglock.Lock(ctx, b, "job", 50*time.Millisecond)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Lock returned (%v) while the lock was held", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	unlock() // twice is harmless
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock did not get the lock after it was released")
	}

	// A replica that dies holding the lock: its session ends (here: ended
	// by the server, as when the process is killed), and PostgreSQL
	// releases the lock with it.
	held, ok, err := pglock.TryLock(ctx, a, "job")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if _, err := b.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	u, err := pglock.Lock(ctx, b, "job", 50*time.Millisecond)
	if err != nil {
		t.Fatalf("after the holder's session ended: %v", err)
	}
	u()
	held() // the dead session's connection goes back to its pool, closed
}
