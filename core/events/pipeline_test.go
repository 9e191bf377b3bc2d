package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/memory/eventmem"
	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/core/events"
)

// memLog records appended events; full makes it refuse every append.
type memLog struct {
	got  []events.Event
	full bool
}

func (l *memLog) Appender(string, string) events.Appender { return &memAppender{l: l} }

type memAppender struct {
	l   *memLog
	res events.AppendResult
}

func (a *memAppender) Append(_ context.Context, ev events.Event) error {
	if a.l.full {
		a.res.Failed++
		return events.ErrLogFull
	}
	a.l.got = append(a.l.got, ev)
	a.res.Acked++
	return nil
}

func (a *memAppender) Close(context.Context) (events.AppendResult, error) {
	if a.res.Failed > 0 {
		return a.res, events.ErrLogFull
	}
	return a.res, nil
}

func TestIngestStampsIdentityAndTime(t *testing.T) {
	t.Parallel()
	log := &memLog{}
	in, err := events.NewIngest(events.IngestConfig{Log: log, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s := in.Open("acme", "s1")
	ev := valid()
	ev.TenantID, ev.SensorID = "other", "victim" // a payload cannot claim an identity
	if err := s.Add(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	// Without its own time a resend could not be recognised: refused, not
	// stamped with the receipt time.
	untimed := valid()
	untimed.ID, untimed.Time = "untimed", time.Time{}
	if err := s.Add(context.Background(), untimed); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("event without time: %v, want ErrInvalidEvent", err)
	}
	bad := valid()
	bad.Kind = ""
	if err := s.Add(context.Background(), bad); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("invalid event: %v, want ErrInvalidEvent", err)
	}
	n, err := s.Close(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Close = %d, %v; want 1, nil", n, err)
	}
	for _, got := range log.got {
		if got.TenantID != "acme" || got.SensorID != "s1" || !got.ReceivedAt.Equal(now) || !got.Time.Equal(ev.Time) {
			t.Errorf("logged %s as %s/%s at %s received %s", got.ID, got.TenantID, got.SensorID, got.Time, got.ReceivedAt)
		}
	}
	if diff := cmp.Diff(events.IngestStats{Accepted: 1, Invalid: 2}, in.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestIngestFullLog(t *testing.T) {
	t.Parallel()
	in, _ := events.NewIngest(events.IngestConfig{Log: &memLog{full: true}, Now: func() time.Time { return now }})
	s := in.Open("acme", "s1")
	if err := s.Add(context.Background(), valid()); !errors.Is(err, events.ErrLogFull) {
		t.Fatalf("Add: %v, want ErrLogFull", err)
	}
	if _, err := s.Close(context.Background()); !errors.Is(err, events.ErrLogFull) {
		t.Fatalf("Close: %v, want ErrLogFull", err)
	}
	if got := in.Stats().Refused; got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
}

type memBatch struct {
	evs        []events.Event
	acked, nak int
}

func (b *memBatch) Events() []events.Event { return b.evs }
func (b *memBatch) Ack(ctx context.Context) error {
	// Like a NATS flush, an ack needs a bound.
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("ack without a deadline")
	}
	b.acked++
	return nil
}
func (b *memBatch) Nak(context.Context) error { b.nak++; return nil }
func (s *memSource) Fetch(context.Context, int) (events.Batch, error) {
	b := s.batches[0]
	s.batches = s.batches[1:]
	return b, nil
}

type memSource struct{ batches []*memBatch }

// newStore is the in-memory event store (adapters/memory/eventmem), which
// passes the same contract suite (eventstest.Run) as the PostgreSQL store.
func newStore(t *testing.T, cfg eventmem.Config) *eventmem.Store {
	t.Helper()
	return memtest.Store(t, eventmem.New, cfg)
}

// failAfterCommit makes the next Write store its rows and still report an
// error, as a crash between commit and ack would.
type failAfterCommit struct {
	*eventmem.Store
	fail bool
}

func (m *failAfterCommit) Write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	res, err := m.Store.Write(ctx, evs)
	if err == nil && m.fail {
		m.fail = false
		return events.WriteResult{}, errors.New("connection lost after commit")
	}
	return res, err
}

// s1Event is a valid event of acme's sensor s1 with id.
func s1Event(id string) events.Event {
	ev := valid()
	ev.TenantID, ev.SensorID, ev.ID = "acme", "s1", id
	return ev
}

// stepping is a Writer over batches into store, for tests that Step it.
func stepping(t *testing.T, store events.Store, batches ...*memBatch) *events.Writer {
	t.Helper()
	w, err := events.NewWriter(events.WriterConfig{Source: &memSource{batches: batches}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWriterRedeliveryIsStoredOnce(t *testing.T) {
	t.Parallel()
	ev := s1Event(valid().ID)
	first := &memBatch{evs: []events.Event{ev}}
	again := &memBatch{evs: []events.Event{ev}}
	store := &failAfterCommit{Store: newStore(t, eventmem.Config{}), fail: true}
	w := stepping(t, store, first, again)
	if _, err := w.Step(context.Background()); err == nil {
		t.Fatal("Step with a failing store: nil error")
	}
	if first.acked != 0 || first.nak != 1 {
		t.Fatalf("failed batch acked %d, nak %d; want 0, 1", first.acked, first.nak)
	}
	if _, err := w.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again.acked != 1 || len(store.Events()) != 1 {
		t.Fatalf("redelivered batch acked %d, rows %d; want 1, 1", again.acked, len(store.Events()))
	}
	for _, row := range store.Events() {
		if diff := cmp.Diff([]string{"CVE-2021-44228"}, row.CVEs); diff != "" {
			t.Errorf("CVEs (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff(events.WriterStats{Written: 0, Duplicates: 1, Batches: 1}, w.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// pickyStore refuses, as a whole, any batch holding the event "bad".
type pickyStore struct{ *eventmem.Store }

func (p *pickyStore) Write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	for _, ev := range evs {
		if ev.ID == "bad" {
			return events.WriteResult{}, fmt.Errorf("store: %w", events.ErrInvalidEvent)
		}
	}
	return p.Store.Write(ctx, evs)
}

func TestWriterSkipsAnEventTheStoreRefuses(t *testing.T) {
	t.Parallel()
	var evs []events.Event
	for _, id := range []string{"a", "bad", "c"} {
		evs = append(evs, s1Event(id))
	}
	b := &memBatch{evs: evs}
	store := &pickyStore{newStore(t, eventmem.Config{})}
	w := stepping(t, store, b)
	if _, err := w.Step(context.Background()); err != nil {
		t.Fatalf("Step: %v", err)
	}
	if b.acked != 1 || len(store.Events()) != 2 {
		t.Fatalf("batch acked %d, rows %d; want 1, 2", b.acked, len(store.Events()))
	}
	if diff := cmp.Diff(events.WriterStats{Written: 2, Batches: 1, Rejected: 1}, w.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// chanSource hands out the batches sent on it; Fetch waits for one.
type chanSource chan *memBatch

func (c chanSource) Fetch(ctx context.Context, _ int) (events.Batch, error) {
	select {
	case b := <-c:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// signalStore reports each write on done.
type signalStore struct {
	*eventmem.Store
	done chan int
}

func (s *signalStore) Write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	n, err := s.Store.Write(ctx, evs)
	s.done <- len(evs)
	return n, err
}

// runningWriter is a Writer running on a chanSource into a signalStore.
type runningWriter struct {
	src   chanSource
	store *signalStore
	w     *events.Writer
	stop  func() // ends Run and waits for it
}

// startWriter runs a Writer with cfg on a fresh chanSource and
// signalStore until stop.
func startWriter(t *testing.T, cfg events.WriterConfig) *runningWriter {
	t.Helper()
	r := &runningWriter{src: make(chanSource), store: &signalStore{newStore(t, eventmem.Config{}), make(chan int, 10)}}
	cfg.Source, cfg.Store = r.src, r.store
	var err error
	if r.w, err = events.NewWriter(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.w.Run(ctx); close(stopped) }()
	r.stop = func() { cancel(); <-stopped }
	return r
}

// written waits for n writes, failing after 10s.
func (r *runningWriter) written(t *testing.T, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-r.store.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not written within 10s", what)
		}
	}
}

func TestWriterRunWritesEveryBatchOnce(t *testing.T) {
	t.Parallel()
	r := startWriter(t, events.WriterConfig{})
	var batches []*memBatch
	for i := range 3 {
		b := &memBatch{evs: []events.Event{s1Event(fmt.Sprintf("e%d", i))}}
		batches = append(batches, b)
		r.src <- b
	}
	r.written(t, 3, "batches")
	r.stop()
	for i, b := range batches {
		if b.acked != 1 || b.nak != 0 {
			t.Errorf("batch %d acked %d, nak %d; want 1, 0", i, b.acked, b.nak)
		}
	}
	if got := r.w.Stats().Written; got != 3 {
		t.Errorf("written %d, want 3", got)
	}
}

// TestWriterIdleIsNoFailure: empty fetches (nothing arrived within the
// wait) are neither failures nor batches, and are acked with a deadline.
func TestWriterIdleIsNoFailure(t *testing.T) {
	t.Parallel()
	r := startWriter(t, events.WriterConfig{RetryDelay: time.Millisecond})
	var idle []*memBatch
	for range 5 {
		b := &memBatch{}
		idle = append(idle, b)
		r.src <- b
	}
	// One real batch after the idle ones proves the writer went past them.
	r.src <- &memBatch{evs: []events.Event{s1Event("after-idle")}}
	r.written(t, 1, "batch after the idle fetches")
	r.stop()
	for i, b := range idle {
		if b.acked != 1 {
			t.Errorf("idle batch %d acked %d times, want 1", i, b.acked)
		}
	}
	if st := r.w.Stats(); st.Failures != 0 || st.Batches != 1 {
		t.Errorf("stats %+v, want no failures and 1 batch", st)
	}
}

// TestWriterCountsRevokedApart: events skipped because their sensor was
// revoked are not counted as duplicates.
func TestWriterCountsRevokedApart(t *testing.T) {
	t.Parallel()
	ev := s1Event(valid().ID)
	b := &memBatch{evs: []events.Event{ev, ev}}
	// s1 was revoked before the events were received.
	revoked := newStore(t, eventmem.Config{RevokedAt: func(tenant, sensor string) (time.Time, bool) {
		return ev.ReceivedAt.Add(-time.Second), tenant == "acme" && sensor == "s1"
	}})
	w := stepping(t, revoked, b)
	if _, err := w.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events.WriterStats{Batches: 1, Revoked: 2}, w.Stats()); diff != "" || b.acked != 1 {
		t.Errorf("stats (-want +got):\n%s; acked %d", diff, b.acked)
	}
}
