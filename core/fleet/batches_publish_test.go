package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// claimStore hands out queued commands and records how they were settled.
// Only what PublishQueued uses is implemented.
type claimStore struct {
	Store
	mu       sync.Mutex
	queued   []Command
	accepted map[string]uint64
	failed   []string
}

func (s *claimStore) ClaimUnsentCommands(_ context.Context, at time.Time, limit int) ([]Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(limit, len(s.queued))
	out := s.queued[:n]
	s.queued = s.queued[n:]
	for i := range out {
		out[i].FirstSentAt = at
	}
	return out, nil
}

func (s *claimStore) AcceptCommands(_ context.Context, acks []CommandAck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range acks {
		s.accepted[a.ID] = a.Seq
	}
	return nil
}

func (s *claimStore) FailCommands(_ context.Context, ids []string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, ids...)
	return nil
}

// batchPublisher answers by message id: "fail-…" provably not stored,
// "lost-…" unconfirmed, anything else stored. short drops the last outcome.
type batchPublisher struct {
	mu      sync.Mutex
	windows []int
	single  int
	short   bool
}

func (p *batchPublisher) PublishCommand(context.Context, Command) (PublishAck, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.single++
	return PublishAck{}, ErrPublishUnknown
}

func (p *batchPublisher) PublishCommands(_ context.Context, msgs []Command, window int) []PublishResult {
	p.mu.Lock()
	p.windows = append(p.windows, window)
	p.mu.Unlock()
	out := make([]PublishResult, len(msgs))
	for i, m := range msgs {
		switch {
		case len(m.ID) > 5 && m.ID[:5] == "fail-":
			out[i].Err = fmt.Errorf("refused: %w: %w", ErrMessagingUnavailable, ErrNotPublished)
		case len(m.ID) > 5 && m.ID[:5] == "lost-":
			out[i].Err = fmt.Errorf("no answer: %w: %w", ErrMessagingUnavailable, ErrPublishUnknown)
		default:
			out[i].Ack = PublishAck{Sequence: uint64(1000 + i)}
		}
	}
	if p.short {
		out = out[:len(out)-1]
	}
	return out
}

func queuedCommands(ids ...string) []Command {
	out := make([]Command, len(ids))
	for i, id := range ids {
		out[i] = Command{ID: id, TenantID: "t1", SensorID: fmt.Sprintf("s%d", i), Action: ActionStart, Status: CommandPending, BatchID: "b1"}
	}
	return out
}

// TestPublishQueuedThroughABatchPublisher: a publisher that pipelines gets
// the claimed commands in one call per claim with the configured window
// (none goes through the one-at-a-time path); stored ones are accepted
// with their sequence, provably unsent ones failed, unconfirmed ones left
// pending for the reconciliation; and an answer that does not give one
// outcome per command accepts and fails nothing.
func TestPublishQueuedThroughABatchPublisher(t *testing.T) {
	t.Parallel()
	ids := []string{"c1", "fail-2", "c3", "lost-4", "c5"}
	for i := range batchClaim {
		ids = append(ids, fmt.Sprintf("more-%d", i))
	}
	store := &claimStore{queued: queuedCommands(ids...), accepted: map[string]uint64{}}
	pub := &batchPublisher{}
	s, err := New(Config{Store: store, CA: nilCA{}, Publisher: pub, Terminator: nopTerminator{}, Locker: nopLocker{}, BatchConcurrency: 77})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PublishQueued(t.Context())
	if err != nil || n != len(ids) {
		t.Fatalf("PublishQueued: %d, %v; want %d", n, err, len(ids))
	}
	if !slices.Equal(pub.windows, []int{77, 77}) || pub.single != 0 {
		t.Errorf("batch calls with windows %v and %d single publications; want two claims, window 77, none single", pub.windows, pub.single)
	}
	if seq, ok := store.accepted["c3"]; !ok || seq != 1002 {
		t.Errorf("c3 accepted with sequence %d (%v), want 1002", seq, ok)
	}
	if len(store.accepted) != len(ids)-2 {
		t.Errorf("%d accepted, want %d", len(store.accepted), len(ids)-2)
	}
	if _, ok := store.accepted["lost-4"]; ok || slices.Contains(store.failed, "lost-4") {
		t.Error("an unconfirmed command was settled; it must stay pending")
	}
	if !slices.Equal(store.failed, []string{"fail-2"}) {
		t.Errorf("failed %v, want [fail-2]", store.failed)
	}

	short := &claimStore{queued: queuedCommands("d1", "d2", "fail-3"), accepted: map[string]uint64{}}
	s, err = New(Config{Store: short, CA: nilCA{}, Publisher: &batchPublisher{short: true}, Terminator: nopTerminator{}, Locker: nopLocker{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PublishQueued(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(short.accepted) != 0 || len(short.failed) != 0 {
		t.Errorf("an answer short of one outcome settled commands: accepted %v, failed %v", short.accepted, short.failed)
	}
}

type nilCA struct{}

func (nilCA) SignCSR(CertRequest) (IssuedCertificate, error) {
	return IssuedCertificate{}, ErrInvalidCSR
}
func (nilCA) CACertificatePEM() []byte                         { return nil }
func (nilCA) VerifyCSRPossession([]byte, []byte, []byte) error { return ErrInvalidProof }
func (nilCA) VerifyPossession([]byte, []byte, []byte, time.Time) (CertIdentity, error) {
	return CertIdentity{}, ErrInvalidProof
}

type nopTerminator struct{}

func (nopTerminator) Terminate(string, string) {}

type nopLocker struct{}

func (nopLocker) TryLock(context.Context, string) (func(), bool, error) { return func() {}, true, nil }

// countingClaims counts claims and lets a test act on each.
type countingClaims struct {
	*claimStore
	claims  chan int // the number of each claim, as it is taken
	n       int
	onClaim func(n int)
}

func (s *countingClaims) ClaimUnsentCommands(ctx context.Context, at time.Time, limit int) ([]Command, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if s.onClaim != nil {
		s.onClaim(n)
	}
	out, err := s.claimStore.ClaimUnsentCommands(ctx, at, limit)
	s.claims <- n
	return out, err
}

// hookPublisher runs before(call) at the start of each batch call.
type hookPublisher struct {
	batchPublisher
	calls  int
	before func(call int)
}

func (p *hookPublisher) PublishCommands(ctx context.Context, msgs []Command, window int) []PublishResult {
	p.mu.Lock()
	p.calls++
	call := p.calls
	p.mu.Unlock()
	p.before(call)
	return p.batchPublisher.PublishCommands(ctx, msgs, window)
}

// TestPublishQueuedClaimsAhead: the next claim is taken while a claim is
// published (one ahead, never two), so the publisher does not wait for a
// claim's round trip between claims; and when ctx ends, the claim already
// taken ahead is still published and recorded (none is left claimed and
// unsent) and no further claim is taken.
func TestPublishQueuedClaimsAhead(t *testing.T) {
	t.Parallel()
	var ids []string
	for i := range 3*batchClaim + 1 {
		ids = append(ids, fmt.Sprintf("c%d", i))
	}
	// awaitClaim waits until claim want was taken (claims arrive in order).
	awaitClaim := func(store *countingClaims, want int) bool {
		for {
			select {
			case n := <-store.claims:
				if n == want {
					return true
				}
			case <-time.After(time.Minute):
				return false
			}
		}
	}

	store := &countingClaims{claimStore: &claimStore{queued: queuedCommands(ids...), accepted: map[string]uint64{}}, claims: make(chan int, 16)}
	pub := &hookPublisher{}
	pub.before = func(call int) {
		if !awaitClaim(store, call+1) {
			t.Errorf("publishing claim %d: claim %d was not taken meanwhile", call, call+1)
			return
		}
		store.mu.Lock()
		taken := store.n
		store.mu.Unlock()
		if taken != call+1 {
			t.Errorf("publishing claim %d: %d claims taken, want %d (one ahead, never more)", call, taken, call+1)
		}
	}
	s, err := New(Config{Store: store, CA: nilCA{}, Publisher: pub, Terminator: nopTerminator{}, Locker: nopLocker{}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PublishQueued(t.Context())
	if err != nil || n != len(ids) {
		t.Fatalf("PublishQueued: %d, %v; want %d", n, err, len(ids))
	}
	if pub.calls != 4 || len(store.accepted) != len(ids) {
		t.Errorf("%d batch calls, %d accepted; want 4 and %d", pub.calls, len(store.accepted), len(ids))
	}

	// ctx ends while claim 1 is published, claim 2 already taken.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store = &countingClaims{claimStore: &claimStore{queued: queuedCommands(ids...), accepted: map[string]uint64{}}, claims: make(chan int, 16)}
	pub = &hookPublisher{}
	pub.before = func(call int) {
		if call == 1 {
			if !awaitClaim(store, 2) {
				t.Error("claim 2 was not taken while claim 1 was published")
			}
			cancel()
		}
	}
	s, err = New(Config{Store: store, CA: nilCA{}, Publisher: pub, Terminator: nopTerminator{}, Locker: nopLocker{}})
	if err != nil {
		t.Fatal(err)
	}
	n, err = s.PublishQueued(ctx)
	if err != nil || n != 2*batchClaim {
		t.Fatalf("PublishQueued after ctx ended: %d, %v; want %d (both claims taken), nil", n, err, 2*batchClaim)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if pub.calls != 2 || len(store.accepted) != 2*batchClaim || store.n != 2 {
		t.Errorf("%d batch calls, %d accepted, %d claims; want 2, %d, 2: a claimed command was left unsent or a claim was taken after ctx ended",
			pub.calls, len(store.accepted), store.n, 2*batchClaim)
	}
}
