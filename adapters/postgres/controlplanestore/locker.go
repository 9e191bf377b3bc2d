package controlplanestore

import (
	"context"

	"github.com/rxc-project/rxc/adapters/postgres/pglock"
)

// TryLock implements fleet.Locker with a session-level advisory lock
// (pglock).
func (s *Store) TryLock(ctx context.Context, name string) (func(), bool, error) {
	return pglock.TryLock(ctx, s.pool, name)
}
