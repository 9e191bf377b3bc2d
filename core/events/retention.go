package events

import (
	"context"
	"time"
)

// Pruner drops stored events by whole days (UTC), the unit the store
// keeps them in (history retention, core/retention). DropDaysBefore drops
// every day that ended at or before before (DayEnded) with all its events,
// and returns how many days it dropped; events of later days stay. It is
// idempotent and safe to run on two replicas at once.
type Pruner interface {
	DropDaysBefore(ctx context.Context, before time.Time) (int, error)
}

// Day is the UTC day an event time falls in (its midnight).
func Day(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// DayEnded reports whether the UTC day starting at day (a Day) ended at or
// before before: every event of it is older than before.
func DayEnded(day, before time.Time) bool {
	return !day.Add(24 * time.Hour).After(before)
}
