// Package analyticsstore reads sensor events from the control plane's
// PostgreSQL `events` table (written by event ingestion) for the analytics
// use cases: the overview aggregates and an indicator's history. Every query
// filters by tenant_id first, so one tenant's numbers never include
// another's.
package analyticsstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/core/analytics"
)

// Config wires a Store.
type Config struct {
	Pool *pgxpool.Pool
}

// Store implements analytics.EventStore.
type Store struct {
	pool *pgxpool.Pool
}

var _ analytics.EventStore = (*Store)(nil)

// New returns a Store on cfg.Pool.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("analyticsstore: pool is required")
	}
	return &Store{pool: cfg.Pool}, nil
}

// EventsStored reports whether the events table exists.
func (s *Store) EventsStored(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('events') IS NOT NULL`).Scan(&ok); err != nil {
		return false, fmt.Errorf("analyticsstore: %w", err)
	}
	return ok, nil
}

// scope is the WHERE clause every overview query shares: tenant first,
// then the range and the optional sensor. $1 tenant, $2 from, $3 to,
// $4 sensor (empty for all).
const scope = `tenant_id = $1 AND event_time >= $2 AND event_time < $3 AND ($4 = '' OR sensor_id = $4)`

// Overview runs the aggregates of one query in one read-only snapshot.
func (s *Store) Overview(ctx context.Context, q analytics.Query, bucket time.Duration) (analytics.Overview, error) {
	var ov analytics.Overview
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return ov, fmt.Errorf("analyticsstore: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	args := []any{q.TenantID, q.From, q.To, q.SensorID}

	err = tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE kind = 'alert'), count(DISTINCT sensor_id) FROM events WHERE `+scope, args...).
		Scan(&ov.Totals.Events, &ov.Totals.Alerts, &ov.Totals.Sensors)
	if err != nil {
		return ov, classify(err)
	}
	rows, _ := tx.Query(ctx, `SELECT date_bin($5::interval, event_time, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS t,
		count(*), count(*) FILTER (WHERE kind = 'alert')
		FROM events WHERE `+scope+` GROUP BY t ORDER BY t`, append(args, bucket)...)
	if ov.Series, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.Point, error) {
		var p analytics.Point
		err := r.Scan(&p.T, &p.Events, &p.Alerts)
		p.T = p.T.UTC()
		return p, err
	}); err != nil {
		return ov, classify(err)
	}
	for _, side := range []struct {
		col string
		dst *[]analytics.AddressCount
	}{{"src_ip", &ov.TopSources}, {"dest_ip", &ov.TopDestinations}} {
		rows, _ := tx.Query(ctx, `SELECT host(`+side.col+`), count(*) FROM events WHERE `+scope+` AND `+side.col+` IS NOT NULL
			GROUP BY `+side.col+` ORDER BY count(*) DESC, `+side.col+` LIMIT $5`, append(args, q.Limit)...)
		if *side.dst, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.AddressCount, error) {
			var a analytics.AddressCount
			return a, r.Scan(&a.IP, &a.Count)
		}); err != nil {
			return ov, classify(err)
		}
	}
	rows, _ = tx.Query(ctx, `SELECT coalesce(signature_id, 0), signature, max(category), coalesce(max(severity), 0), count(*)
		FROM events WHERE `+scope+` AND kind = 'alert' AND (signature_id IS NOT NULL OR signature <> '')
		GROUP BY signature_id, signature ORDER BY count(*) DESC, signature LIMIT $5`, append(args, q.Limit)...)
	if ov.TopSignatures, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.SignatureCount, error) {
		var c analytics.SignatureCount
		return c, r.Scan(&c.SignatureID, &c.Signature, &c.Category, &c.Severity, &c.Count)
	}); err != nil {
		return ov, classify(err)
	}
	rows, _ = tx.Query(ctx, `SELECT upper(c), count(*), max(event_time) FROM events, unnest(cves) AS c
		WHERE `+scope+` GROUP BY upper(c) ORDER BY count(*) DESC, upper(c) LIMIT $5`, append(args, q.Limit)...)
	if ov.CVEs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (analytics.CVECount, error) {
		var c analytics.CVECount
		err := r.Scan(&c.ID, &c.Count, &c.LastSeen)
		c.LastSeen = c.LastSeen.UTC()
		return c, err
	}); err != nil {
		return ov, classify(err)
	}
	return ov, nil
}

// History counts each indicator's events in the tenant's whole store: an
// address as source or destination (an event with both counts once), a
// CVE id in the cves column.
func (s *Store) History(ctx context.Context, tenantID string, addrs []netip.Addr, cves []string) ([]analytics.Sighting, error) {
	var out []analytics.Sighting
	scan := func(r pgx.CollectableRow) (analytics.Sighting, error) {
		var x analytics.Sighting
		err := r.Scan(&x.Indicator, &x.Count, &x.FirstSeen, &x.LastSeen)
		x.FirstSeen, x.LastSeen = x.FirstSeen.UTC(), x.LastSeen.UTC()
		return x, err
	}
	if len(addrs) > 0 {
		texts := make([]string, len(addrs))
		for i, a := range addrs {
			texts[i] = a.String()
		}
		rows, _ := s.pool.Query(ctx, `SELECT host(ind), count(*), min(e.event_time), max(e.event_time)
			FROM unnest($2::inet[]) AS ind JOIN events e ON e.tenant_id = $1 AND (e.src_ip = ind OR e.dest_ip = ind)
			GROUP BY ind`, tenantID, texts)
		got, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return nil, classify(err)
		}
		out = append(out, got...)
	}
	if len(cves) > 0 {
		rows, _ := s.pool.Query(ctx, `SELECT c, count(*), min(e.event_time), max(e.event_time)
			FROM unnest($2::text[]) AS c JOIN events e ON e.tenant_id = $1 AND e.cves @> ARRAY[c]
			GROUP BY c`, tenantID, cves)
		got, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return nil, classify(err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// undefinedTable is PostgreSQL's code for a missing relation.
const undefinedTable = "42P01"

func classify(err error) error {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == undefinedTable {
		return fmt.Errorf("%w: the events table does not exist yet", analytics.ErrEventsUnavailable)
	}
	return fmt.Errorf("analyticsstore: %w", err)
}
