package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/events"
)

var _ events.Pruner = (*Store)(nil)

// dropLockTimeout bounds how long dropping one day waits for the events
// table's lock (a long analytics query holds it): the day is then left for
// the next pass instead of queueing every insert behind the drop.
const dropLockTimeout = 5 * time.Second

// DropDaysBefore implements events.Pruner: each ended day's partition
// (events_YYYYMMDD) is dropped whole, in its own short transaction; no row
// is deleted one by one. Tables not named like a day partition are left
// alone. A writer that still believes a dropped day exists fails once and
// forgets what it knew (Write).
func (s *Store) DropDaysBefore(ctx context.Context, before time.Time) (int, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'events'::regclass ORDER BY c.relname`)
	if err != nil {
		return 0, fmt.Errorf("eventstore: list partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("eventstore: list partitions: %w", err)
	}
	dropped := 0
	for _, name := range names {
		day, err := time.Parse("events_20060102", name)
		if err != nil || !events.DayEnded(day, before) {
			continue
		}
		gone := false
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, dropLockTimeout.Milliseconds())); err != nil {
				return err
			}
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil || !exists {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{name}.Sanitize())
			gone = true
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("eventstore: drop %s: %w", name, err)
		}
		if gone {
			dropped++
		}
		s.mu.Lock()
		delete(s.days, day.Format(time.DateOnly))
		s.mu.Unlock()
	}
	return dropped, nil
}
