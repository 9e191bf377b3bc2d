// Package pglock holds named locks across processes with PostgreSQL's
// session-level advisory locks: replicas sharing one database take turns at
// a job that must not run twice at once. A lock is held on a connection
// taken out of the pool until unlock; if the process dies the connection
// closes and PostgreSQL releases the lock.
package pglock

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TryLock takes the lock called name if no one holds it: ok false (and no
// unlock) when someone does.
func TryLock(ctx context.Context, pool *pgxpool.Pool, name string) (unlock func(), ok bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, name).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, err
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var released bool
			err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, name).Scan(&released)
			if err != nil || !released {
				// Closing the session is the other way to drop the lock; the
				// pool discards a closed connection on release.
				_ = conn.Conn().Close(ctx)
			}
			conn.Release()
		})
	}, true, nil
}

// Lock waits until it holds the lock called name, trying every poll, or
// until ctx ends (its error). It holds no connection while it waits.
func Lock(ctx context.Context, pool *pgxpool.Pool, name string, poll time.Duration) (unlock func(), err error) {
	for {
		unlock, ok, err := TryLock(ctx, pool, name)
		if err != nil || ok {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}
