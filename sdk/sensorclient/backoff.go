package sensorclient

import "github.com/rxc-project/rxc/sdk/backoff"

// Backoff paces reconnections and retries: exponential from Min to Max with
// equal jitter, the rule every RXC client follows (package backoff). The
// zero value uses DefaultBackoffMin and DefaultBackoffMax.
type Backoff = backoff.Policy

// Default bounds of a Backoff.
const (
	DefaultBackoffMin = backoff.DefaultMin
	DefaultBackoffMax = backoff.DefaultMax
)
