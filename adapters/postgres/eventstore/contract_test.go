package eventstore_test

import (
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/events/eventstest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	eventstest.Run(t, func(t *testing.T) eventstest.Harness {
		s, pool := newStore(t)
		return eventstest.Harness{Store: s, Revoke: func(t *testing.T, tenant, sensor string, at time.Time) {
			ctx := testCtx(t)
			if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, now()) ON CONFLICT DO NOTHING`, tenant); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO sensors (id, tenant_id, name, state, created_at, revoked_at, revoked_by) VALUES ($1, $2, $1, 'revoked', now(), $3, 'ops')`, sensor, tenant, at); err != nil {
				t.Fatal(err)
			}
		}}
	})
}
