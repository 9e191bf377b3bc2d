package controlplanestore

import (
	"context"
	"sync"
	"time"
)

// TryLock implements fleet.Locker with a session-level advisory lock held on
// a connection taken out of the pool until unlock. If the process dies the
// connection closes and PostgreSQL releases the lock.
func (s *Store) TryLock(ctx context.Context, name string) (func(), bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, name).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, err
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	var once sync.Once
	unlock := func() {
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
	}
	return unlock, true, nil
}
