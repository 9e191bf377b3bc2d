package backoff

import (
	"context"
	"testing"
	"time"
)

func TestPolicyDelayStaysWithinBounds(t *testing.T) {
	t.Parallel()
	b := Policy{Min: 100 * time.Millisecond, Max: 3 * time.Second}
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

func TestPolicyJitterSpreadsDelays(t *testing.T) {
	t.Parallel()
	b := Policy{Min: time.Second, Max: time.Minute}
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

func TestPolicyDefaults(t *testing.T) {
	t.Parallel()
	var b Policy
	if got := b.delay(0, 0.999999); got > DefaultMin || got < DefaultMin/2 {
		t.Fatalf("zero Policy first delay %v, want about %v", got, DefaultMin)
	}
	if got := b.delay(100, 0.999999); got > DefaultMax {
		t.Fatalf("zero Policy capped delay %v, want ≤ %v", got, DefaultMax)
	}
}

func TestPolicyWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if (Policy{Min: time.Hour, Max: time.Hour}).Wait(ctx, 0) {
		t.Fatal("Wait reported a full delay on a cancelled context")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Wait on a cancelled context took %v", d)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep on a live context reported an early end")
	}
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Policy
		want Policy
	}{
		{"zero", Policy{}, Policy{DefaultMin, DefaultMax}},
		{"set", Policy{time.Second, time.Minute}, Policy{time.Second, time.Minute}},
		{"max below min", Policy{time.Hour, time.Second}, Policy{time.Hour, time.Hour}},
		{"min only", Policy{Min: time.Second}, Policy{time.Second, DefaultMax}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.WithDefaults(); got != tc.want {
				t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}
