package sensorclient

import (
	"context"
	"math/rand/v2"
	"time"
)

// Default bounds of a Backoff.
const (
	DefaultBackoffMin = 500 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// Backoff is the delay policy between reconnection attempts: exponential
// from Min up to Max with "equal jitter" (half of each step fixed, half
// random). The fixed half keeps a failing peer from being hammered; the
// random half keeps a fleet that lost the same server from coming back in
// lockstep.
type Backoff struct {
	Min time.Duration
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBackoffMin
	}
	if b.Max < b.Min {
		b.Max = max(DefaultBackoffMax, b.Min)
	}
	return b
}

// Delay is the pause before retry number attempt (0 for the first retry).
// It lies in [step/2, step] where step = min(Max, Min·2^attempt).
func (b Backoff) Delay(attempt int) time.Duration {
	return b.delay(attempt, rand.Float64())
}

// delay is Delay with the random draw r in [0, 1) given.
func (b Backoff) delay(attempt int, r float64) time.Duration {
	b = b.withDefaults()
	step := b.Max
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 40 {
		if s := b.Min << attempt; s > 0 && s < b.Max {
			step = s
		}
	}
	half := step / 2
	return half + time.Duration(r*float64(step-half))
}

// Wait pauses for Delay(attempt) or until ctx ends; it reports whether the
// full delay passed.
func (b Backoff) Wait(ctx context.Context, attempt int) bool {
	return sleep(ctx, b.Delay(attempt))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
