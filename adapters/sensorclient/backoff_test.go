package sensorclient

import (
	"context"
	"testing"
	"time"
)

func TestBackoffDelayStaysWithinBounds(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: 100 * time.Millisecond, Max: 3 * time.Second}
	tests := []struct {
		name     string
		attempt  int
		low, top time.Duration
	}{
		{"first retry", 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{"second retry doubles", 1, 100 * time.Millisecond, 200 * time.Millisecond},
		{"fifth retry", 4, 800 * time.Millisecond, 1600 * time.Millisecond},
		{"capped at Max", 5, 1500 * time.Millisecond, 3 * time.Second},
		{"far beyond the cap", 62, 1500 * time.Millisecond, 3 * time.Second},
		{"negative attempt counts as first", -3, 50 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []float64{0, 0.25, 0.5, 0.999999} {
				if got := b.delay(tc.attempt, r); got < tc.low || got > tc.top {
					t.Errorf("delay(%d, %v) = %v, want within [%v, %v]", tc.attempt, r, got, tc.low, tc.top)
				}
			}
			for range 200 {
				if got := b.Delay(tc.attempt); got < tc.low || got > tc.top {
					t.Fatalf("Delay(%d) = %v, want within [%v, %v]", tc.attempt, got, tc.low, tc.top)
				}
			}
		})
	}
}

func TestBackoffJitterSpreadsDelays(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: time.Second, Max: time.Minute}
	if lo, hi := b.delay(3, 0), b.delay(3, 0.999); hi-lo < 3*time.Second {
		t.Fatalf("jitter range at attempt 3 is %v..%v; want about half the 8s step", lo, hi)
	}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[b.Delay(3)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 delays took only %d distinct values; jitter is missing", len(seen))
	}
}

func TestBackoffDefaults(t *testing.T) {
	t.Parallel()
	var b Backoff
	if got := b.delay(0, 0.999999); got > DefaultBackoffMin || got < DefaultBackoffMin/2 {
		t.Fatalf("zero Backoff first delay %v, want about %v", got, DefaultBackoffMin)
	}
	if got := b.delay(100, 0.999999); got > DefaultBackoffMax {
		t.Fatalf("zero Backoff capped delay %v, want ≤ %v", got, DefaultBackoffMax)
	}
}

func TestBackoffWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if (Backoff{Min: time.Hour, Max: time.Hour}).Wait(ctx, 0) {
		t.Fatal("Wait reported a full delay on a cancelled context")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Wait on a cancelled context took %v", d)
	}
}
