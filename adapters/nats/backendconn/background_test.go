package backendconn

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Start runs the loop once; Close cancels it and returns only after the
// loop did; nothing starts after Close.
func TestBackgroundRunsOnceAndCloseWaits(t *testing.T) {
	var b Background
	var runs atomic.Int32
	var returned atomic.Bool
	loop := func(ctx context.Context) {
		runs.Add(1)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // a loop that takes a moment to wind down
		returned.Store(true)
	}
	b.Start(context.Background(), loop)
	b.Start(context.Background(), loop)
	b.Close()
	if !returned.Load() {
		t.Fatal("Close returned before the loop did")
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("loop ran %d times, want 1", n)
	}
	b.Close() // again: nothing to do
	b.Start(context.Background(), loop)
	if n := runs.Load(); n != 1 {
		t.Fatalf("Start after Close ran the loop (%d runs)", n)
	}
}

// Close before Start has nothing to wait for, and Start then does nothing.
func TestBackgroundClosedBeforeStart(t *testing.T) {
	var b Background
	b.Close()
	ran := make(chan struct{}, 1)
	b.Start(context.Background(), func(context.Context) { ran <- struct{}{} })
	select {
	case <-ran:
		t.Fatal("Start after Close ran the loop")
	case <-time.After(50 * time.Millisecond): // bounded: Start would have run it at once
	}
}

// The loop's context also ends with the context given to Start.
func TestBackgroundEndsWithItsContext(t *testing.T) {
	var b Background
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Start(ctx, func(ctx context.Context) { <-ctx.Done(); close(done) })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop outlived Start's context")
	}
	b.Close()
}

func TestCheckWithoutConnection(t *testing.T) {
	if err := Check(context.Background(), nil, time.Second); err == nil {
		t.Fatal("Check without a connection succeeded")
	}
}
