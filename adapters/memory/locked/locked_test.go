package locked_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/locked"
)

var errNotFound = errors.New("not found")

// lockSpy is a sync.Locker that records whether it is held.
type lockSpy struct {
	mu   sync.Mutex
	held bool
}

func (l *lockSpy) Lock()   { l.mu.Lock(); l.held = true }
func (l *lockSpy) Unlock() { l.held = false; l.mu.Unlock() }

func TestGetUpdateApply(t *testing.T) {
	var mu lockSpy
	m := map[string]*int{"a": new(int)}
	*m["a"] = 1

	// A missing key answers the caller's not-found error and the zero
	// value, without calling back.
	called := false
	if v, err := locked.Get(&mu, m, "b", errNotFound, func(p *int) int { called = true; return *p }); !errors.Is(err, errNotFound) || v != 0 {
		t.Fatalf("Get(missing) = %d, %v; want 0, not found", v, err)
	}
	if err := locked.Update(&mu, m, "b", errNotFound, func(*int) error { called = true; return nil }); !errors.Is(err, errNotFound) {
		t.Fatalf("Update(missing) = %v; want not found", err)
	}
	if called || mu.held {
		t.Fatalf("a missing key called back (%v) or left the lock held (%v)", called, mu.held)
	}

	// A present key is read and changed with the lock held, and the
	// callback's error is answered as it is.
	v, err := locked.Get(&mu, m, "a", errNotFound, func(p *int) int {
		if !mu.held {
			t.Error("Get called back without the lock")
		}
		return *p
	})
	if err != nil || v != 1 {
		t.Fatalf("Get(a) = %d, %v; want 1", v, err)
	}
	refused := errors.New("refused")
	if err := locked.Update(&mu, m, "a", errNotFound, func(p *int) error { *p = 2; return refused }); !errors.Is(err, refused) {
		t.Fatalf("Update's own error = %v; want refused", err)
	}
	if got, err := locked.Apply(&mu, m, "a", errNotFound, func(p *int) (int, error) { return *p * 10, nil }); err != nil || got != 20 {
		t.Fatalf("Apply(a) = %d, %v; want 20", got, err)
	}
	if mu.held {
		t.Fatal("the lock is still held")
	}
}

func TestPrune(t *testing.T) {
	var mu lockSpy
	m := map[int]int{}
	for i := range 10 {
		m[i] = i
	}
	even := func(v int) bool {
		if !mu.held {
			t.Error("Prune called back without the lock")
		}
		return v%2 == 0
	}
	if n := locked.Prune(&mu, m, 3, even); n != 3 || len(m) != 7 {
		t.Fatalf("Prune(limit 3) deleted %d, left %d; want 3, 7", n, len(m))
	}
	if n := locked.Prune(&mu, m, 10, even); n != 2 || len(m) != 5 {
		t.Fatalf("Prune(the rest) deleted %d, left %d; want 2, 5", n, len(m))
	}
	for k := range m {
		if k%2 == 0 {
			t.Fatalf("%d survived its prune", k)
		}
	}
	if n := locked.Prune(&mu, m, 0, func(int) bool { return true }); n != 0 || len(m) != 5 {
		t.Fatalf("Prune(limit 0) deleted %d; want none", n)
	}
}

type rec struct {
	id string
	at time.Time
}

func TestListOrders(t *testing.T) {
	var mu lockSpy
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := map[string]rec{
		"b": {"b", t0}, "a": {"a", t0}, "c": {"c", t0.Add(time.Second)},
		// The same instant in another zone is the same time.
		"d": {"d", t0.In(time.FixedZone("x", 3600))}, "skip": {"skip", t0},
	}
	at := func(r rec) time.Time { return r.at }
	id := func(r rec) string { return r.id }
	keep := func(r rec) bool {
		if !mu.held {
			t.Error("List called back without the lock")
		}
		return r.id != "skip"
	}
	ids := func(rs []rec) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	view := func(r rec) rec { return r }
	if got := ids(locked.List(&mu, m, keep, view, locked.OldestFirst(at, id))); !slices.Equal(got, []string{"a", "b", "d", "c"}) {
		t.Errorf("oldest first: %v", got)
	}
	if got := ids(locked.List(&mu, m, keep, view, locked.NewestFirst(at, id))); !slices.Equal(got, []string{"c", "a", "b", "d"}) {
		t.Errorf("newest first: %v", got)
	}
	if got := locked.List(&mu, m, func(rec) bool { return false }, view, locked.OldestFirst(at, id)); got != nil {
		t.Errorf("nothing kept: %v, want nil", got)
	}
	if mu.held {
		t.Fatal("the lock is still held")
	}
}
