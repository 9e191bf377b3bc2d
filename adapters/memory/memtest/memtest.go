// Package memtest holds what the in-memory stores' tests share: the
// per-test store factory the core contract suites take.
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
