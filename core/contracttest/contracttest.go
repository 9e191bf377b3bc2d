// Package contracttest runs the store contract suites beside core's ports
// (fleettest, operatorstest, audittest, eventstest, storetest,
// analyticstest): every case as a parallel subtest on a fresh store, so
// each implementation (PostgreSQL, in-memory) runs the same cases the same
// way. It also holds the few helpers those suites and core's use-case
// tests share.
package contracttest

import (
	"slices"
	"testing"
)

// Cases are a suite's contracts in order: each its name and the check it
// runs on a fresh S. The elements are written unkeyed, {"Name", check}.
type Cases[S any] []struct {
	Name string
	Fn   func(t *testing.T, s S)
}

// Run runs every case as a parallel subtest on the S fresh makes for it.
func Run[S any](t *testing.T, fresh func(t *testing.T) S, cases Cases[S]) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatal("contracttest: no cases; the suite would pass vacuously")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Fn(t, fresh(t))
		})
	}
}

// Prune checks a store's batched prune: called with limit until a call
// removes fewer than limit, it removes want per call, and a second pass
// removes nothing.
func Prune(t *testing.T, limit int, want []int, prune func(limit int) (int, error)) {
	t.Helper()
	var removed []int
	for range len(want) + 1 {
		n, err := prune(limit)
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, n)
		if n < limit {
			break
		}
	}
	if !slices.Equal(want, removed) {
		t.Errorf("removed per call, limit %d = %v, want %v", limit, removed, want)
	}
	if n, err := prune(limit); err != nil || n != 0 {
		t.Errorf("second pass = %d, %v; want nothing", n, err)
	}
}

// Keys lists key(x) for every x in xs, in xs's order; nil when xs is
// empty, so a comparison with a nil want holds.
func Keys[T any](xs []T, key func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, key(x))
	}
	return out
}

// SortedKeys is Keys in sorted order.
func SortedKeys[T any](xs []T, key func(T) string) []string {
	out := Keys(xs, key)
	slices.Sort(out)
	return out
}

// Configured builds a fixture's service: it applies each of the test's
// changes to cfg in order, then builds with build, failing t when that
// fails.
func Configured[C, S any](t testing.TB, build func(C) (S, error), cfg C, changes ...func(*C)) S {
	t.Helper()
	for _, change := range changes {
		change(&cfg)
	}
	s, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
