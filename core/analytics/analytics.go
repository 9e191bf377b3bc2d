// Package analytics answers operators' questions about a tenant's stored
// sensor events: an overview of a time range (counts over time, top
// addresses, signatures and CVEs) and a chat with an OpenAI-compatible model
// whose answer is grounded in what the operator is looking at and enriched
// with threat intelligence (MISP), the tenant's own history of each
// indicator and the team's playbooks. It declares the ports those use cases
// need (event store, model provider, threat intelligence, playbook library)
// and never touches SQL or HTTP. Every query is scoped to one tenant.
package analytics

import (
	"errors"
	"fmt"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// Sentinel errors; edges map them to their protocol.
var (
	ErrInvalidInput = errors.New("invalid input")
	// ErrChatDisabled means the chat is switched off or not configured.
	ErrChatDisabled = errors.New("analytics chat is disabled")
	// ErrModelUnavailable means the model provider failed or timed out.
	ErrModelUnavailable = errors.New("model provider unavailable")
	// ErrEventsUnavailable means no event table exists to query yet.
	ErrEventsUnavailable = errors.New("no stored events")
)

// Limits of the overview query.
const (
	MaxRange     = 31 * 24 * time.Hour
	MaxLimit     = 100
	DefaultLimit = 10
)

// Query selects a tenant's events in [From, To).
type Query struct {
	TenantID string
	From, To time.Time
	// SensorID narrows the query to one sensor when set.
	SensorID string
	Limit    int
}

// Validate checks ids, range and limit, and fills the default limit.
func (q *Query) Validate() error {
	if err := ids.Validate(q.TenantID); err != nil {
		return fmt.Errorf("%w: tenantId: %w", ErrInvalidInput, err)
	}
	if q.SensorID != "" {
		if err := ids.Validate(q.SensorID); err != nil {
			return fmt.Errorf("%w: sensorId: %w", ErrInvalidInput, err)
		}
	}
	switch {
	case q.From.IsZero() || q.To.IsZero():
		return fmt.Errorf("%w: from and to are required (RFC 3339)", ErrInvalidInput)
	case !q.To.After(q.From):
		return fmt.Errorf("%w: to must be after from", ErrInvalidInput)
	case q.To.Sub(q.From) > MaxRange:
		return fmt.Errorf("%w: the range must not exceed 31 days", ErrInvalidInput)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit < 1 || q.Limit > MaxLimit {
		return fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalidInput, MaxLimit)
	}
	return nil
}

// BucketFor picks the series resolution for a range so that a chart has at
// most a few hundred points: 1 minute up to 6 hours, 5 minutes up to 2
// days, 1 hour up to 14 days, 1 day beyond.
func BucketFor(r time.Duration) time.Duration {
	switch {
	case r <= 6*time.Hour:
		return time.Minute
	case r <= 48*time.Hour:
		return 5 * time.Minute
	case r <= 14*24*time.Hour:
		return time.Hour
	default:
		return 24 * time.Hour
	}
}

// Totals counts a range's events.
type Totals struct {
	Events, Alerts, Sensors int64
}

// Point is one bucket of the series, starting at T.
type Point struct {
	T              time.Time
	Events, Alerts int64
}

// AddressCount is an address and how many events carry it.
type AddressCount struct {
	IP    string
	Count int64
}

// SignatureCount is an alert signature and how often it fired.
type SignatureCount struct {
	SignatureID int64
	Signature   string
	Category    string
	Severity    int
	Count       int64
}

// CVECount is a CVE id, how many events name it and when it was last seen.
type CVECount struct {
	ID       string
	Count    int64
	LastSeen time.Time
}

// Overview is the analytics screen's data for one query.
type Overview struct {
	Query           Query
	Bucket          time.Duration
	Totals          Totals
	Series          []Point
	TopSources      []AddressCount
	TopDestinations []AddressCount
	TopSignatures   []SignatureCount
	CVEs            []CVECount
}

// fillSeries returns one point per bucket from the bucket containing from
// up to to, taking counts from got (keyed by bucket start) and zero
// elsewhere, so charts show quiet periods as quiet.
func fillSeries(from, to time.Time, bucket time.Duration, got []Point) []Point {
	byT := make(map[int64]Point, len(got))
	for _, p := range got {
		byT[p.T.Unix()] = p
	}
	start := from.UTC().Truncate(bucket)
	out := make([]Point, 0, int(to.Sub(start)/bucket)+1)
	for t := start; t.Before(to); t = t.Add(bucket) {
		p, ok := byT[t.Unix()]
		if !ok {
			p = Point{T: t}
		}
		p.T = t
		out = append(out, p)
	}
	return out
}
