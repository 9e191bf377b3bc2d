// Package nullable turns a Go zero value into "absent" at an edge: a nil
// pointer, which encoding/json writes as null and pgx stores as NULL. The
// operator API's JSON views and the PostgreSQL stores both keep "not set"
// as the zero value in their domain types and need the same conversion.
package nullable

import "time"

// String is nil for the empty string and a pointer to s otherwise.
func String(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Time is nil for the zero time and a pointer to t in UTC otherwise (the
// stores' columns are timestamptz, so UTC changes no stored instant).
func Time(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
