// Package locked holds what the in-memory stores share for records kept in
// a map behind the store's one mutex: read or change the record with a key,
// answering the store's not-found error when there is none, list the
// records a filter keeps in a stated order, and delete the records that
// ended. Each function takes the store's mutex itself, so the
// whole read-check-change is one atomic step, as a PostgreSQL transaction
// makes it; the callbacks run with it held and must not take it again.
package locked

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Get returns view(m[key]) with mu held, or the zero T and notFound when m
// has no record with the key. view only reads; a change goes through Update
// or Apply.
func Get[K comparable, V, T any](mu sync.Locker, m map[K]V, key K, notFound error, view func(V) T) (T, error) {
	return Apply(mu, m, key, notFound, func(v V) (T, error) { return view(v), nil })
}

// Update runs change on m[key] with mu held and returns its error, or
// returns notFound when m has no record with the key.
func Update[K comparable, V any](mu sync.Locker, m map[K]V, key K, notFound error, change func(V) error) error {
	_, err := Apply(mu, m, key, notFound, func(v V) (struct{}, error) { return struct{}{}, change(v) })
	return err
}

// Apply runs f on m[key] with mu held and returns what it returns, or the
// zero T and notFound when m has no record with the key.
func Apply[K comparable, V, T any](mu sync.Locker, m map[K]V, key K, notFound error, f func(V) (T, error)) (T, error) {
	mu.Lock()
	defer mu.Unlock()
	v, ok := m[key]
	if !ok {
		var zero T
		return zero, notFound
	}
	return f(v)
}

// Prune deletes, with mu held, at most limit records of m for which ended
// reports true, and returns how many it deleted. Which ones, when more have
// ended, follows map order.
func Prune[K comparable, V any](mu sync.Locker, m map[K]V, limit int, ended func(V) bool) int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for k, v := range m {
		if n < limit && ended(v) {
			delete(m, k)
			n++
		}
	}
	return n
}

// List returns view(v) for each record v of m that keep accepts, read with
// mu held, in the order compare gives (nil when none is kept).
func List[K comparable, V, T any](mu sync.Locker, m map[K]V, keep func(V) bool, view func(V) T, compare func(a, b T) int) []T {
	mu.Lock()
	defer mu.Unlock()
	var out []T
	for _, v := range m {
		if keep(v) {
			out = append(out, view(v))
		}
	}
	slices.SortFunc(out, compare)
	return out
}

// OldestFirst orders records by the time at gives, earliest first, and
// records of the same time by id: the PostgreSQL stores' ORDER BY at, id.
func OldestFirst[T any](at func(T) time.Time, id func(T) string) func(a, b T) int {
	return func(a, b T) int { return cmp.Or(at(a).Compare(at(b)), strings.Compare(id(a), id(b))) }
}

// NewestFirst orders records by the time at gives, latest first, and
// records of the same time by id: ORDER BY at DESC, id.
func NewestFirst[T any](at func(T) time.Time, id func(T) string) func(a, b T) int {
	return func(a, b T) int { return cmp.Or(at(b).Compare(at(a)), strings.Compare(id(a), id(b))) }
}
