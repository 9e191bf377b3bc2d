package analytics

import (
	"context"
	"net/netip"
	"time"
)

// EventStore reads a tenant's stored events. Every method filters by tenant
// first; nothing ever mixes tenants.
type EventStore interface {
	// Overview aggregates q's events with the given series bucket. Series
	// holds only non-empty buckets; the service fills the gaps.
	Overview(ctx context.Context, q Query, bucket time.Duration) (Overview, error)
	// History says how often and when each indicator appeared in the
	// tenant's events (addresses as source or destination, CVE ids in the
	// cves column). Indicators never seen are left out.
	History(ctx context.Context, tenantID string, addrs []netip.Addr, cves []string) ([]Sighting, error)
	// EventsStored reports whether the events table exists.
	EventsStored(ctx context.Context) (bool, error)
}

// Sighting is an indicator's history in one tenant's events.
type Sighting struct {
	Indicator           string
	Count               int64
	FirstSeen, LastSeen time.Time
}

// Message is one chat message for the model.
type Message struct {
	Role    string // "system" or "user"
	Content string
}

// ModelProvider is an OpenAI-compatible chat model.
type ModelProvider interface {
	// Ping checks the provider answers with the configured credentials.
	Ping(ctx context.Context) error
	// Stream sends the conversation and calls onDelta with each piece of
	// the answer as it arrives. An error from onDelta stops the stream.
	Stream(ctx context.Context, model string, msgs []Message, onDelta func(string) error) error
}

// IntelHit is one threat-intelligence record about an indicator.
type IntelHit struct {
	Value    string
	Type     string
	Category string
	// Event is the title of the intelligence event the record belongs to.
	Event string
}

// ThreatIntel looks indicators up in a threat-intelligence platform.
type ThreatIntel interface {
	// Lookup returns the records matching indicator; none is not an error.
	Lookup(ctx context.Context, indicator string) ([]IntelHit, error)
}

// Playbook is a response procedure the team wrote down.
type Playbook struct {
	// Name identifies the playbook (its file name).
	Name  string
	Title string
	// Matched is the term that made it relevant.
	Matched string
	// Excerpt is the start of its text, for the model's context.
	Excerpt string
}

// PlaybookLibrary finds playbooks that mention any of the given terms.
type PlaybookLibrary interface {
	// Available reports whether the library holds at least one playbook.
	Available(ctx context.Context) bool
	// Match returns the playbooks mentioning any term (case-insensitive).
	Match(ctx context.Context, terms []string) ([]Playbook, error)
}
