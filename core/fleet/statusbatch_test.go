package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// recordingApply answers each message by its payload ("ok", "stale",
// anything else is invalid) and records the batches it was given.
type recordingApply struct {
	mu      sync.Mutex
	batches [][]string
	called  chan struct{}
}

func newRecordingApply() *recordingApply {
	return &recordingApply{called: make(chan struct{}, 100)}
}

func (r *recordingApply) apply(_ context.Context, msgs []fleet.StatusUpdate) []error {
	errs := make([]error, len(msgs))
	var batch []string
	for i, m := range msgs {
		batch = append(batch, m.Report.Detail)
		switch m.Report.Detail {
		case "ok":
		case "stale":
			errs[i] = fmt.Errorf("report of %s: %w", m.Sensor.SensorID, fleet.ErrStale)
		default:
			errs[i] = fmt.Errorf("%w: bad report", fleet.ErrInvalidInput)
		}
	}
	r.mu.Lock()
	r.batches = append(r.batches, batch)
	r.mu.Unlock()
	r.called <- struct{}{}
	return errs
}

func (r *recordingApply) got() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches
}

// statusOf is a report whose detail tells recordingApply what to answer.
func statusOf(detail string) fleet.StatusUpdate {
	return fleet.StatusUpdate{Sensor: fleet.SensorRef{TenantID: "t1", SensorID: "s1"}, Report: fleet.StatusReport{Detail: detail}}
}

func newBatcher(t *testing.T, cfg fleet.StatusBatcherConfig) *fleet.StatusBatcher {
	t.Helper()
	b, err := fleet.NewStatusBatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runUntil(t *testing.T, b *fleet.StatusBatcher) (cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	return func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

func wait(t *testing.T, c <-chan struct{}, n int) {
	t.Helper()
	for range n {
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Fatal("apply was not called")
		}
	}
}

// Messages queued together are applied in batches of at most MaxBatch, in
// order, and every outcome is counted.
func TestStatusBatcherAppliesInBatches(t *testing.T) {
	rec := newRecordingApply()
	b := newBatcher(t, fleet.StatusBatcherConfig{Apply: rec.apply, MaxBatch: 2, MaxWait: time.Hour})
	for _, p := range []string{"ok", "stale", "bad", "ok", "ok"} {
		b.Handle(context.Background(), statusOf(p))
	}
	stop := runUntil(t, b)
	wait(t, rec.called, 2)
	// The fifth message waits for a batch to fill; the end of Run applies it.
	stop()
	if diff := cmp.Diff([][]string{{"ok", "stale"}, {"bad", "ok"}, {"ok"}}, rec.got()); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fleet.StatusStats{Applied: 3, Stale: 1, Rejected: 1}, b.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// A batch that does not fill is applied after MaxWait.
func TestStatusBatcherAppliesAfterMaxWait(t *testing.T) {
	rec := newRecordingApply()
	b := newBatcher(t, fleet.StatusBatcherConfig{Apply: rec.apply, MaxBatch: 100, MaxWait: 10 * time.Millisecond})
	stop := runUntil(t, b)
	defer stop()
	b.Handle(context.Background(), statusOf("ok"))
	wait(t, rec.called, 1)
	if diff := cmp.Diff([][]string{{"ok"}}, rec.got()); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
}

// Handle never blocks: with the queue full, messages are dropped and
// counted, and what was queued is still applied when Run ends.
func TestStatusBatcherDropsWhenFull(t *testing.T) {
	rec := newRecordingApply()
	b := newBatcher(t, fleet.StatusBatcherConfig{Apply: rec.apply, Queue: 2})
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		for range 5 {
			b.Handle(context.Background(), statusOf("ok"))
		}
	}()
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("Handle blocked on a full queue")
	}
	if got := b.Stats().Dropped; got != 3 {
		t.Errorf("dropped = %d, want 3", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)
	var applied []string
	for _, batch := range rec.got() {
		applied = append(applied, batch...)
	}
	if diff := cmp.Diff([]string{"ok", "ok"}, applied); diff != "" {
		t.Errorf("messages applied at the end (-want +got):\n%s", diff)
	}
	if got := b.Stats().Applied; got != 2 {
		t.Errorf("applied = %d, want 2", got)
	}
}

func TestStatusBatcherNeedsApply(t *testing.T) {
	if _, err := fleet.NewStatusBatcher(fleet.StatusBatcherConfig{}); err == nil {
		t.Error("NewStatusBatcher without Apply: no error")
	}
}

// Handle keeps an update's Confirm: the confirmation of its results is
// sent after the batch is applied, as the transport asked.
func TestStatusBatcherKeepsConfirm(t *testing.T) {
	var confirmed []string
	apply := func(_ context.Context, msgs []fleet.StatusUpdate) []error {
		for _, m := range msgs {
			if m.Confirm != nil {
				m.Confirm(fleet.ResultsConfirmation{SensorID: m.Sensor.SensorID, Recorded: []string{m.Report.Detail}})
			}
		}
		return make([]error, len(msgs))
	}
	b := newBatcher(t, fleet.StatusBatcherConfig{Apply: apply})
	with := statusOf("c1")
	with.Confirm = func(c fleet.ResultsConfirmation) { confirmed = append(confirmed, c.Recorded...) }
	b.Handle(context.Background(), with)
	b.Handle(context.Background(), statusOf("c2"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)
	if diff := cmp.Diff([]string{"c1"}, confirmed); diff != "" {
		t.Errorf("confirmed (-want +got):\n%s", diff)
	}
}

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
