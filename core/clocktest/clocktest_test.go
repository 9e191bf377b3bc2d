package clocktest

import (
	"testing"
	"time"
)

func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	time.Sleep(time.Millisecond)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("the clock moved on its own: %v", got)
	}
	c.Advance(90 * time.Second)
	c.Advance(-30 * time.Second)
	if got, want := c.Now(), start.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
}
