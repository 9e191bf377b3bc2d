package devstack

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
)

// seedKeepAlive is how often the seeded live sensors are refreshed: well
// inside the control plane's 90-s offline timeout.
const seedKeepAlive = 30 * time.Second

// seedSensors creates the seed tenant through the API (so it has its NATS
// account, like any tenant), writes the fake sensors into the control
// plane's database and keeps their live ones live until the stack stops.
func (s *Stack) seedSensors(ctx context.Context, st *state, pg *postgres) error {
	if _, err := s.tenantAPI(ctx, st, s.cfg.SeedTenant, "Seeded fleet"); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, pg.dsn("controlplane"))
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	spec := fleetseed.Spec{TenantID: s.cfg.SeedTenant, Count: s.cfg.SeedSensors}
	start := time.Now()
	n, err := fleetseed.Seed(ctx, pool, spec)
	if err != nil {
		pool.Close()
		return err
	}
	s.say("seed: %d fake sensors in tenant %q (%d written in %s; they never report, commands to them stay unacknowledged)",
		spec.Count, spec.TenantID, n, time.Since(start).Round(time.Millisecond))
	s.info.SeedTenant, s.info.SeededSensors = spec.TenantID, spec.Count

	r := run(func(ctx context.Context) error {
		t := time.NewTicker(seedKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				// A failure (PostgreSQL restarting) is retried at the next
				// tick; the sensors may go offline meanwhile, as real ones would.
				_, _ = fleetseed.KeepAlive(ctx, pool, spec)
			}
		}
	})
	s.onStop("seeded sensors", func(ctx context.Context) error {
		defer pool.Close()
		return r.stop(ctx)
	})
	return nil
}
