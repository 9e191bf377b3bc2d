package eventmem_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/eventmem"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/analytics/analyticstest"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/events/eventstest"
)

func TestEventsContract(t *testing.T) {
	eventstest.Run(t, func(t *testing.T) eventstest.Harness {
		var (
			mu      sync.Mutex
			revoked = map[[2]string]time.Time{}
		)
		s, err := eventmem.New(eventmem.Config{RevokedAt: func(tenant, sensor string) (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			at, ok := revoked[[2]string{tenant, sensor}]
			return at, ok
		}})
		if err != nil {
			t.Fatal(err)
		}
		return eventstest.Harness{Store: s, Revoke: func(_ *testing.T, tenant, sensor string, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			revoked[[2]string{tenant, sensor}] = at
		}}
	})
}

func TestAnalyticsContract(t *testing.T) {
	analyticstest.Run(t, func(t *testing.T) (events.Store, analytics.EventStore) {
		s, err := eventmem.New(eventmem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s, s
	})
}
