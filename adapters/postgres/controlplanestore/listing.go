package controlplanestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rxc-project/rxc/core/fleet"
)

// sortKeys are the SQL expressions of the sorts' fields, exactly as the
// page indexes of migration 005 spell them (so the planner uses them).
var sortKeys = map[string]string{
	"name":      `s.name COLLATE "C"`,
	"state":     `s.state COLLATE "C"`,
	"createdAt": `s.created_at`,
	"lastSeen":  `COALESCE(s.last_seen_at, '-infinity'::timestamptz)`,
}

// likeEscape makes q a plain-text ILIKE substring pattern.
func likeEscape(q string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(q) + "%"
}

// whereMatch is the SQL condition selecting m, with its arguments
// numbered from len(args)+1.
func whereMatch(m fleet.SensorMatch, args []any) (string, []any) {
	conds := []string{"TRUE"}
	switch {
	case m.Tenants == nil:
	case len(m.Tenants) == 1:
		args = append(args, m.Tenants[0])
		conds = append(conds, fmt.Sprintf("s.tenant_id = $%d", len(args)))
	default:
		args = append(args, m.Tenants)
		conds = append(conds, fmt.Sprintf("s.tenant_id = ANY($%d)", len(args)))
	}
	if m.State != "" {
		args = append(args, string(m.State))
		conds = append(conds, fmt.Sprintf("s.state = $%d", len(args)))
	}
	if !m.IncludeDecommissioned {
		conds = append(conds, "s.decommissioned_at IS NULL")
	}
	if len(m.Labels) > 0 {
		args = append(args, m.Labels)
		conds = append(conds, fmt.Sprintf("s.labels @> $%d::jsonb", len(args)))
	}
	if m.Q != "" {
		args = append(args, likeEscape(m.Q))
		n := len(args)
		conds = append(conds, fmt.Sprintf("(s.name ILIKE $%d OR s.hostname ILIKE $%d OR s.id ILIKE $%d)", n, n, n))
	}
	return strings.Join(conds, " AND "), args
}

// ListSensors implements fleet.SensorLister with keyset pagination: the
// page starts strictly after the cursor's (key, id) in the sort's order.
func (s *Store) ListSensors(ctx context.Context, q fleet.SensorQuery) ([]fleet.Sensor, error) {
	key, ok := sortKeys[q.Sort.Field()]
	if !ok {
		return nil, fmt.Errorf("%w: sort %q", fleet.ErrInvalidSort, q.Sort)
	}
	where, args := whereMatch(q.SensorMatch, nil)
	dir, cmp := "ASC", ">"
	if q.Sort.Desc() {
		dir, cmp = "DESC", "<"
	}
	if a := q.After; a != nil {
		var v any = a.Text
		if q.Sort.ByTime() {
			v = pgtype.Timestamptz{Time: a.Time, Valid: true}
			if a.Time.IsZero() {
				v = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
			}
		}
		args = append(args, v, a.ID)
		where += fmt.Sprintf(` AND (%s, s.id COLLATE "C") %s ($%d, $%d)`, key, cmp, len(args)-1, len(args))
	}
	args = append(args, q.Limit)
	sql := fmt.Sprintf(`%s WHERE %s ORDER BY %s %s, s.id COLLATE "C" %s LIMIT $%d`, sensorQuery, where, key, dir, dir, len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Sensor, error) { return scanSensor(r) })
}

// CountSensors implements fleet.SensorLister.
func (s *Store) CountSensors(ctx context.Context, tenants []string) (map[fleet.State]int, error) {
	where, args := whereMatch(fleet.SensorMatch{Tenants: tenants}, nil)
	rows, err := s.pool.Query(ctx, `SELECT s.state, count(*) FROM sensors s WHERE `+where+` GROUP BY s.state`, args...)
	if err != nil {
		return nil, err
	}
	out := map[fleet.State]int{}
	var (
		st fleet.State
		n  int
	)
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		out[st] = n
		return nil
	})
	return out, err
}
