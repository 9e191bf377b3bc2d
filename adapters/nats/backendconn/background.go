package backendconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Background runs a client's connection loop in its own goroutine: Start
// runs it once, Close ends it and waits for it. The zero value is ready.
type Background struct {
	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start runs loop in the background until ctx ends or Close, and returns
// at once. Calls after the first, or after Close, do nothing.
func (b *Background) Start(ctx context.Context, loop func(ctx context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.closed {
		return
	}
	b.started = true
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		loop(ctx)
	}()
}

// Close cancels the loop's context and waits until it returns. Later calls
// do nothing; after Close, Start does nothing either.
func (b *Background) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Check is a round trip to the server on nc within ctx, or within timeout
// when ctx has no deadline: a socket open to a server that does not answer
// (hung, partitioned) fails it, which IsConnected alone cannot tell.
func Check(ctx context.Context, nc *nats.Conn, timeout time.Duration) error {
	if nc == nil || !nc.IsConnected() {
		return errors.New("not connected")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats round trip: %w", err)
	}
	return nil
}
