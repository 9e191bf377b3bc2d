// Package memtest holds what tests on the in-memory stores share: the
// per-test store factory that the core contract suites and core's use-case
// fixtures take.
package memtest

import "testing"

// Store returns a new store made by newStore from cfg, failing t when it
// cannot be made.
func Store[C, S any](t testing.TB, newStore func(C) (S, error), cfg C) S {
	t.Helper()
	s, err := newStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
