package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// Health checks arriving together are recorded in batches, each caller
// getting the answer for its own sensor.
func TestCheckInBatcherBatchesAndAnswersEachCaller(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	b := fleet.NewCheckInBatcher(fleet.CheckInBatcherConfig{MaxBatch: 10, MaxWait: time.Hour /* only a full batch is written */, Apply: func(_ context.Context, in []fleet.CheckIn) []error {
		mu.Lock()
		sizes = append(sizes, len(in))
		mu.Unlock()
		errs := make([]error, len(in))
		for i, s := range in {
			// The answer follows each caller's own certificate serial.
			if s.Serial == "dead" {
				errs[i] = fleet.ErrRevoked
			}
		}
		return errs
	}})
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			serial := "aa01"
			if i == 7 || i == 23 {
				serial = "dead"
			}
			errs[i] = b.CheckIn(t.Context(), "acme", fmt.Sprintf("s-%d", i), serial, fleet.Contact{Address: "192.0.2.1"})
		})
	}
	wg.Wait()
	for i, err := range errs {
		revoked := i == 7 || i == 23
		if revoked != errors.Is(err, fleet.ErrRevoked) || (!revoked && err != nil) {
			t.Errorf("sensor s-%d: %v", i, err)
		}
	}
	if len(sizes) != n/10 {
		t.Errorf("batches %v, want %d of 10", sizes, n/10)
	}
	for _, s := range sizes {
		if s != 10 {
			t.Errorf("batches %v, want %d of 10", sizes, n/10)
			break
		}
	}
}

// A lone health check is written after maxWait; a caller whose context
// ends stops waiting; a failed write is every caller's error.
func TestCheckInBatcherFlushesAfterMaxWait(t *testing.T) {
	t.Parallel()
	down := errors.New("database down")
	var fail bool
	var mu sync.Mutex
	release := make(chan struct{})
	b := fleet.NewCheckInBatcher(fleet.CheckInBatcherConfig{MaxWait: 20 * time.Millisecond, Apply: func(_ context.Context, in []fleet.CheckIn) []error {
		mu.Lock()
		f := fail
		mu.Unlock()
		errs := make([]error, len(in))
		if in[0].Ref.SensorID == "slow" {
			<-release
		}
		if f {
			for i := range errs {
				errs[i] = down
			}
		}
		return errs
	}})
	if err := b.CheckIn(t.Context(), "acme", "s-1", "aa01", fleet.Contact{}); err != nil {
		t.Fatalf("lone health check: %v", err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if err := b.CheckIn(t.Context(), "acme", "s-1", "aa01", fleet.Contact{}); !errors.Is(err, down) {
		t.Fatalf("health check while the database is down: %v, want its error", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := b.CheckIn(ctx, "acme", "slow", "aa01", fleet.Contact{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("health check whose caller gave up: %v, want its context's error", err)
	}
	close(release)
}
