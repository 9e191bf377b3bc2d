package controlplanestore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/fleet"
)

const sensorQuery = `
	SELECT s.id, s.tenant_id, s.name, s.hostname, s.state, s.last_seen_at,
	       s.nats_user_pub_key, s.nats_account_pub_key, s.created_at,
	       c.serial, c.not_after,
	       m.id, m.action, m.issued_at, m.issued_by, m.expires_at, m.acknowledged_at, m.failed_at
	FROM sensors s
	LEFT JOIN sensor_certificates c ON c.sensor_id = s.id AND c.active
	LEFT JOIN commands m ON m.id = s.last_command_id`

func scanSensor(row pgx.Row) (fleet.Sensor, error) {
	var (
		s                           fleet.Sensor
		lastSeen, notAfter          *time.Time
		serial, cmdID, action, by   *string
		issued, expires, ack, faild *time.Time
	)
	err := row.Scan(&s.ID, &s.TenantID, &s.Name, &s.Hostname, &s.State, &lastSeen,
		&s.NATSUserPubKey, &s.NATSAccountPubKey, &s.CreatedAt,
		&serial, &notAfter,
		&cmdID, &action, &issued, &by, &expires, &ack, &faild)
	if err != nil {
		return fleet.Sensor{}, err
	}
	s.CreatedAt, s.LastSeenAt = s.CreatedAt.UTC(), utc(lastSeen)
	if serial != nil {
		s.Certificate = fleet.Certificate{Serial: *serial, NotAfter: utc(notAfter)}
	}
	if cmdID != nil {
		s.LastCommand = &fleet.Command{
			ID: *cmdID, TenantID: s.TenantID, SensorID: s.ID, Action: fleet.Action(*action),
			IssuedAt: utc(issued), IssuedBy: *by, ExpiresAt: utc(expires),
			AcknowledgedAt: utc(ack), FailedAt: utc(faild),
		}
	}
	return s, nil
}

// Sensor implements fleet.SensorStore.
func (s *Store) Sensor(ctx context.Context, id string) (fleet.Sensor, error) {
	return sensorByID(ctx, s.pool, id)
}

func sensorByID(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (fleet.Sensor, error) {
	sensor, err := scanSensor(q.QueryRow(ctx, sensorQuery+` WHERE s.id = $1`, id))
	return sensor, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

// Sensors implements fleet.SensorStore.
func (s *Store) Sensors(ctx context.Context, f fleet.SensorFilter) ([]fleet.Sensor, error) {
	rows, err := s.pool.Query(ctx, sensorQuery+`
		WHERE ($1 = '' OR s.tenant_id = $1) AND ($2 = '' OR s.state = $2)
		ORDER BY s.created_at, s.id`, f.TenantID, string(f.State))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Sensor, error) { return scanSensor(r) })
}

// UpdateSensorStatus implements fleet.StatusStore. The row lock orders
// concurrent reports of one sensor, so the staleness check holds.
func (s *Store) UpdateSensorStatus(ctx context.Context, tenantID, sensorID string, apply func(fleet.SensorStatus) (fleet.SensorStatus, error)) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			cur              fleet.SensorStatus
			seen, lastStatus *time.Time
		)
		err := tx.QueryRow(ctx, `
			SELECT state, last_seen_at, last_status_at FROM sensors
			WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, sensorID, tenantID).Scan(&cur.State, &seen, &lastStatus)
		if err != nil {
			return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
		}
		cur.LastSeenAt, cur.LastStatusAt = utc(seen), utc(lastStatus)
		next, err := apply(cur)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE sensors SET state = $2, last_seen_at = $3, last_status_at = $4 WHERE id = $1`,
			sensorID, next.State, nullTime(next.LastSeenAt), nullTime(next.LastStatusAt)); err != nil {
			return err
		}
		if next.AcknowledgeCommandID == "" {
			return nil
		}
		_, err = tx.Exec(ctx, `
			UPDATE commands SET acknowledged_at = $3
			WHERE id = $1 AND sensor_id = $2 AND acknowledged_at IS NULL`,
			next.AcknowledgeCommandID, sensorID, next.AcknowledgedAt)
		return err
	})
}

// MarkSilent implements fleet.StatusStore.
func (s *Store) MarkSilent(ctx context.Context, seenBefore time.Time, from []fleet.State, to fleet.State) (int, error) {
	states := make([]string, len(from))
	for i, st := range from {
		states[i] = string(st)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE sensors SET state = $3
		WHERE state = ANY($2) AND (last_seen_at IS NULL OR last_seen_at < $1)`,
		seenBefore, states, string(to))
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// RevokeSensor implements fleet.RevokeStore.
func (s *Store) RevokeSensor(ctx context.Context, sensorID, by string, at time.Time) (fleet.Sensor, error) {
	var sensor fleet.Sensor
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE sensors SET state = 'revoked', revoked_at = COALESCE(revoked_at, $2), revoked_by = COALESCE(revoked_by, $3)
			WHERE id = $1`, sensorID, at, by)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fleet.ErrNotFound
		}
		if _, err := tx.Exec(ctx, `UPDATE sensor_certificates SET active = false WHERE sensor_id = $1 AND active`, sensorID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE sensor_tokens SET revoked_at = $2
			WHERE sensor_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, sensorID, at); err != nil {
			return err
		}
		sensor, err = sensorByID(ctx, tx, sensorID)
		return err
	})
	return sensor, err
}
