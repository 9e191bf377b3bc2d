// Package waitfor is the one polling wait of the tests: a condition checked
// every few milliseconds until it holds, failing the test with what it
// waited for once the limit has passed.
package waitfor

import "time"

// TB is the part of testing.TB a wait needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Interval is the pause between two checks.
const Interval = 10 * time.Millisecond

// Until checks ok until it holds, and fails t ("timed out after <limit>
// waiting for <what>") when limit passes first. ok runs at least once.
func Until(t TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(Interval)
	}
}
