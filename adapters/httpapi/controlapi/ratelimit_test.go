package controlapi

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiterRefusesABurstPerKey(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(RateLimit{PerMinute: 60, Burst: 3}, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := l.allow("203.0.113.1"); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	ok, wait := l.allow("203.0.113.1")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("4th attempt: allowed=%v wait=%v, want refused with a wait of at most 1s", ok, wait)
	}
	if ok, _ := l.allow("203.0.113.2"); !ok {
		t.Fatal("another address is limited by the first one's attempts")
	}
	now = now.Add(time.Second)
	if ok, _ := l.allow("203.0.113.1"); !ok {
		t.Fatal("a token did not come back after a second")
	}
}

// A caller holding as many addresses as the limiter keeps buckets, each
// drained, must not shut every new address out (it did: new addresses were
// refused for a minute at a time), and the table stays bounded.
func TestLimiterFullOfDrainedAddressesStillAdmitsANewOne(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(RateLimit{PerMinute: 1, Burst: 1}, func() time.Time { return now })
	l.max = 64
	for i := range l.max {
		key := fmt.Sprintf("2001:db8:%x::/64", i)
		if ok, _ := l.allow(key); !ok {
			t.Fatalf("first attempt of %s refused", key)
		}
		if ok, _ := l.allow(key); ok {
			t.Fatalf("second attempt of %s allowed: the bucket is not drained", key)
		}
	}
	now = now.Add(2 * time.Second) // past the prune interval, no bucket refilled
	for i := range 10 {
		key := fmt.Sprintf("198.51.100.%d", i)
		if ok, wait := l.allow(key); !ok {
			t.Fatalf("new address %s refused (wait %v) while the table is full of drained attackers", key, wait)
		}
		if len(l.buckets) > l.max {
			t.Fatalf("table holds %d buckets, bound %d", len(l.buckets), l.max)
		}
	}
	// Still limited: a drained address that kept its bucket is refused.
	refused := 0
	for i := range l.max {
		if ok, _ := l.allow(fmt.Sprintf("2001:db8:%x::/64", i)); !ok {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no drained address is limited any more")
	}
}
