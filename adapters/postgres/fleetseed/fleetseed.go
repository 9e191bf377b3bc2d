// Package fleetseed fills a control-plane database with simulated sensors,
// for demos, browser tests and benchmarks that need a large fleet without
// enrolling it: rows in the sensors table with varied names, hostnames,
// states and times, written by one INSERT … SELECT from generate_series (10,000
// sensors take well under a second). The sensors have no certificate, NATS
// user or agent behind them: they never report, and commands sent to them
// stay unacknowledged. Their ids are Prefix followed by a six-digit number,
// so seeding again (a resumed demo) adds only the missing ones.
package fleetseed

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPrefix starts every seeded sensor's id.
const DefaultPrefix = "seed-"

// MaxCount bounds one seeding.
const MaxCount = 1_000_000

// DB is the part of a pgx connection or pool the seeding uses.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Spec says what to seed.
type Spec struct {
	// TenantID must name an existing tenant.
	TenantID string
	// Count sensors are numbered 1…Count.
	Count int
	// Prefix of the ids (default DefaultPrefix); letters, digits, '-' and
	// '_' only.
	Prefix string
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,40}$`)

func (s *Spec) check() error {
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(s.Prefix) {
		return fmt.Errorf("fleetseed: prefix %q: letters, digits, '-' and '_' only", s.Prefix)
	}
	if s.TenantID == "" {
		return errors.New("fleetseed: a tenant is required")
	}
	if s.Count < 0 || s.Count > MaxCount {
		return fmt.Errorf("fleetseed: count %d out of 0…%d", s.Count, MaxCount)
	}
	return nil
}

// seedSQL writes sensors 1…$3 of tenant $1 with ids $2 || nnnnnn. The
// state follows the number (per 100: 60 running, 15 stopped, 10 offline,
// 7 online, 4 error, 2 revoked, 2 pending), so every filter and sort of the
// console has something to show. A sensor that exists already gets its
// seeded state and times back (the control plane marks silent sensors
// offline), unless it is revoked: revocation is for good. Enrolled ones
// have an agent version and a 10.x.y.z address.
const seedSQL = `
INSERT INTO sensors (id, tenant_id, name, hostname, state, last_seen_at, last_status_at, created_at, revoked_at, revoked_by,
                     agent_version, address)
SELECT $2 || lpad(g.i::text, 6, '0'), $1,
       (ARRAY['edge','core','dmz','lab','branch','dc'])[1 + g.i % 6] || '-' ||
       (ARRAY['fra','ams','nyc','sgp','syd','gru','jnb'])[1 + (g.i / 6) % 7] || '-' || lpad(g.i::text, 5, '0'),
       'ids-' || substr(md5(g.i::text), 1, 10) || '.' || (ARRAY['fra','ams','nyc','sgp','syd','gru','jnb'])[1 + (g.i / 6) % 7] || '.example.net',
       st.state,
       CASE WHEN st.state = 'pending' THEN NULL
            WHEN st.state IN ('offline', 'revoked') THEN now() - make_interval(hours => 1 + g.i % 72)
            ELSE now() - make_interval(secs => g.i % 30) END,
       CASE WHEN st.state IN ('pending', 'offline', 'revoked') THEN NULL ELSE now() - make_interval(secs => g.i % 30) END,
       now() - make_interval(mins => g.i),
       CASE WHEN st.state = 'revoked' THEN now() END,
       CASE WHEN st.state = 'revoked' THEN 'seed' END,
       CASE WHEN st.state = 'pending' THEN '' ELSE (ARRAY['1.4.2','1.5.0','1.5.1','2.0.0-rc.1'])[1 + g.i % 4] END,
       CASE WHEN st.state = 'pending' THEN '' ELSE '10.' || (g.i / 65536) % 256 || '.' || (g.i / 256) % 256 || '.' || g.i % 256 END
FROM generate_series(1, $3::int) AS g(i),
     LATERAL (SELECT CASE WHEN g.i % 100 < 60 THEN 'running'
                          WHEN g.i % 100 < 75 THEN 'stopped'
                          WHEN g.i % 100 < 85 THEN 'offline'
                          WHEN g.i % 100 < 92 THEN 'online'
                          WHEN g.i % 100 < 96 THEN 'error'
                          WHEN g.i % 100 < 98 THEN 'revoked'
                          ELSE 'pending' END AS state) AS st
ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, last_seen_at = EXCLUDED.last_seen_at, last_status_at = EXCLUDED.last_status_at,
    agent_version = EXCLUDED.agent_version, address = EXCLUDED.address
WHERE sensors.tenant_id = EXCLUDED.tenant_id AND sensors.state <> 'revoked' AND EXCLUDED.state <> 'revoked'`

// Seed writes spec.Count simulated sensors into spec.TenantID and returns
// how many rows it inserted or restored.
func Seed(ctx context.Context, db DB, spec Spec) (int64, error) {
	if err := spec.check(); err != nil {
		return 0, err
	}
	if spec.Count == 0 {
		return 0, nil
	}
	tag, err := db.Exec(ctx, seedSQL, spec.TenantID, spec.Prefix, spec.Count)
	if err != nil {
		return 0, fmt.Errorf("fleetseed: %w", err)
	}
	return tag.RowsAffected(), nil
}

// KeepAlive refreshes the last sign of life of the seeded sensors of spec
// that are in a live state, as their status reports would; run it more
// often than the control plane's offline timeout to keep them live.
func KeepAlive(ctx context.Context, db DB, spec Spec) (int64, error) {
	if err := spec.check(); err != nil {
		return 0, err
	}
	tag, err := db.Exec(ctx, `
		UPDATE sensors SET last_seen_at = now()
		WHERE tenant_id = $1 AND starts_with(id, $2) AND state IN ('online', 'running', 'stopped', 'error')`,
		spec.TenantID, spec.Prefix)
	if err != nil {
		return 0, fmt.Errorf("fleetseed: %w", err)
	}
	return tag.RowsAffected(), nil
}
