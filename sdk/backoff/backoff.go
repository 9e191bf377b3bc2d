// Package backoff is RXC's one retry pacing rule, used wherever a client
// waits before trying again: sensors reconnecting to NATS and gRPC, the
// control plane redialling NATS and its PostgreSQL listener, and the
// provisioner client retrying a call. Delays grow exponentially from Min to
// Max with "equal jitter": half of each step is fixed, half random. The fixed
// half keeps a failing peer from being hammered; the random half keeps a
// fleet (or a set of replicas) that lost the same server from coming back in
// lockstep.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Default bounds of a Policy whose Min or Max is unset.
const (
	DefaultMin = 500 * time.Millisecond
	DefaultMax = 30 * time.Second
)

// Policy is a back-off between Min and Max. The zero Policy uses DefaultMin
// and DefaultMax.
type Policy struct {
	Min time.Duration
	Max time.Duration
}

// WithDefaults returns p with unset or inconsistent bounds replaced: Min
// defaults to DefaultMin, and a Max below Min to the larger of DefaultMax
// and Min.
func (p Policy) WithDefaults() Policy {
	if p.Min <= 0 {
		p.Min = DefaultMin
	}
	if p.Max < p.Min {
		p.Max = max(DefaultMax, p.Min)
	}
	return p
}

// Delay is the pause before retry number attempt (0 for the first retry).
// It lies in [step/2, step] where step = min(Max, Min·2^attempt).
func (p Policy) Delay(attempt int) time.Duration {
	return p.delay(attempt, rand.Float64())
}

// delay is Delay with the random draw r in [0, 1) given.
func (p Policy) delay(attempt int, r float64) time.Duration {
	p = p.WithDefaults()
	step := p.Max
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 40 {
		if s := p.Min << attempt; s > 0 && s < p.Max {
			step = s
		}
	}
	half := step / 2
	return half + time.Duration(r*float64(step-half))
}

// Wait pauses for Delay(attempt) or until ctx ends; it reports whether the
// full delay passed.
func (p Policy) Wait(ctx context.Context, attempt int) bool {
	return Sleep(ctx, p.Delay(attempt))
}

// Sleep pauses for d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
