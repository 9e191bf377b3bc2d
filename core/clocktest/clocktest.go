// Package clocktest is the clock tests move by hand: every service takes
// its time as a func() time.Time, and tests pass Clock.Now and Advance it
// to reach expiries, lockouts and rate limits without waiting.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a controllable time source, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time; pass it as a service's Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
