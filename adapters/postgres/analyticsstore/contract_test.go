package analyticsstore_test

import (
	"context"
	"testing"

	"github.com/rxc-project/rxc/adapters/postgres/eventstore"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/analytics/analyticstest"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/migrations"
)

// TestContract reads, through this store, events the event writer's store
// (eventstore) wrote to the control plane's migrated schema.
func TestContract(t *testing.T) {
	t.Parallel()
	analyticstest.Run(t, func(t *testing.T) (events.Store, analytics.EventStore) {
		r, pool := newStore(t)
		if _, err := migrate.Apply(context.Background(), pool, "controlplane", migrations.ControlPlane); err != nil {
			t.Fatal(err)
		}
		w, err := eventstore.New(eventstore.Config{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return w, r
	})
}
