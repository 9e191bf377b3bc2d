package controlplanestore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
)

// sensorQuery reads sensors with their active certificate and their last
// command: the one recorded last (one index probe each,
// commands_sensor_latest_idx), so a batch of thousands of commands need not
// write the sensors' rows.
const (
	sensorColumns = `
	       s.id, s.tenant_id, s.name, s.hostname, s.state, s.last_seen_at,
	       s.nats_user_pub_key, s.nats_account_pub_key, s.created_at, s.agent_version, s.address,
	       s.labels, s.decommissioned_at, COALESCE(s.decommissioned_by, ''),
	       c.serial, c.not_after, c.issued_at,
	       m.id, m.action, m.issued_at, m.issued_by, m.expires_at, m.idempotency_key, m.status,
	       m.accepted_at, m.stream_seq, m.failed_at, m.acknowledged_at, m.outcome, m.outcome_reason, m.outcome_detail,
	       m.batch_id, m.first_sent_at`
	sensorFrom = `
	FROM sensors s
	LEFT JOIN sensor_certificates c ON c.sensor_id = s.id AND c.active
	LEFT JOIN LATERAL (SELECT * FROM commands c WHERE c.sensor_id = s.id ORDER BY c.seq DESC LIMIT 1) m ON true`
	sensorQuery = `SELECT` + sensorColumns + sensorFrom
)

// scanSensor reads a sensorQuery row; extra receives columns selected
// after sensorQuery's.
func scanSensor(row pgx.Row, extra ...any) (fleet.Sensor, error) {
	var (
		s                                       fleet.Sensor
		lastSeen, notAfter, certIssued          *time.Time
		serial, cmdID, action, by               *string
		key, status, outcome, reason, detail    *string
		issued, expires, accepted, failed, ackd *time.Time
		batch                                   *string
		firstSent                               *time.Time
		seq                                     *int64
		decommissioned                          *time.Time
	)
	dest := append([]any{&s.ID, &s.TenantID, &s.Name, &s.Hostname, &s.State, &lastSeen,
		&s.NATSUserPubKey, &s.NATSAccountPubKey, &s.CreatedAt, &s.AgentVersion, &s.Address,
		&s.Labels, &decommissioned, &s.DecommissionedBy,
		&serial, &notAfter, &certIssued,
		&cmdID, &action, &issued, &by, &expires, &key, &status,
		&accepted, &seq, &failed, &ackd, &outcome, &reason, &detail, &batch, &firstSent}, extra...)
	err := row.Scan(dest...)
	if err != nil {
		return fleet.Sensor{}, err
	}
	s.CreatedAt, s.LastSeenAt, s.DecommissionedAt = s.CreatedAt.UTC(), utc(lastSeen), utc(decommissioned)
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if serial != nil {
		s.Certificate = fleet.Certificate{Serial: *serial, NotAfter: utc(notAfter), IssuedAt: utc(certIssued)}
	}
	if cmdID != nil {
		s.LastCommand = &fleet.Command{
			ID: *cmdID, TenantID: s.TenantID, SensorID: s.ID, Action: fleet.Action(*action),
			IssuedAt: utc(issued), IssuedBy: *by, ExpiresAt: utc(expires),
			IdempotencyKey: deref(key), Status: fleet.CommandStatus(deref(status)),
			AcceptedAt: utc(accepted), FailedAt: utc(failed), AcknowledgedAt: utc(ackd),
			Outcome: fleet.Outcome(deref(outcome)), OutcomeReason: deref(reason), OutcomeDetail: deref(detail),
			BatchID: deref(batch), FirstSentAt: utc(firstSent),
		}
		if seq != nil {
			s.LastCommand.StreamSeq = uint64(*seq)
		}
	}
	return s, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
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

// UpdateSensorStatuses implements fleet.StatusStore. Rows are locked in id
// order, so concurrent batches (several replicas) cannot deadlock, and the
// lock orders concurrent reports of one sensor, so the staleness check
// holds. The changes are written with one statement per table.
func (s *Store) UpdateSensorStatuses(ctx context.Context, refs []fleet.SensorRef, apply func(fleet.SensorRef, fleet.SensorStatus, bool) (fleet.SensorStatus, bool)) error {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b fleet.SensorRef) int { return strings.Compare(a.SensorID, b.SensorID) })
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.SensorID
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		type row struct {
			tenant string
			st     fleet.SensorStatus
		}
		cur := make(map[string]row, len(refs))
		rows, err := tx.Query(ctx, `
			SELECT id, tenant_id, state, last_seen_at, last_status_at, agent_version, address FROM sensors
			WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				id, tenant       string
				st               fleet.SensorStatus
				seen, lastStatus *time.Time
			)
			if err := rows.Scan(&id, &tenant, &st.State, &seen, &lastStatus, &st.AgentVersion, &st.Address); err != nil {
				rows.Close()
				return err
			}
			st.LastSeenAt, st.LastStatusAt = utc(seen), utc(lastStatus)
			cur[id] = row{tenant: tenant, st: st}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var (
			upIDs, upStates    []string
			upVersions, upAddr []string
			upSeen, upStatus   []*time.Time
			ackIDs, ackSensors []string
			ackOutcomes        []string
			ackReasons         []string
			ackDetails         []string
			ackAt              []time.Time
		)
		for _, ref := range refs {
			r, ok := cur[ref.SensorID]
			found := ok && r.tenant == ref.TenantID
			next, store := apply(ref, r.st, found)
			if !found || !store {
				continue
			}
			upIDs, upStates = append(upIDs, ref.SensorID), append(upStates, string(next.State))
			upSeen, upStatus = append(upSeen, nullable.Time(next.LastSeenAt)), append(upStatus, nullable.Time(next.LastStatusAt))
			upVersions, upAddr = append(upVersions, next.AgentVersion), append(upAddr, next.Address)
			for _, r := range next.Results {
				ackIDs, ackSensors, ackAt = append(ackIDs, r.CommandID), append(ackSensors, ref.SensorID), append(ackAt, next.AcknowledgedAt)
				ackOutcomes, ackReasons, ackDetails = append(ackOutcomes, string(r.Outcome)), append(ackReasons, r.Reason), append(ackDetails, r.Detail)
			}
		}
		if len(upIDs) > 0 {
			if _, err := tx.Exec(ctx, `
				UPDATE sensors AS s SET state = u.state, last_seen_at = u.seen, last_status_at = u.at,
					agent_version = u.version, address = u.address
				FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[])
					AS u(id, state, seen, at, version, address)
				WHERE s.id = u.id`, upIDs, upStates, upSeen, upStatus, upVersions, upAddr); err != nil {
				return err
			}
		}
		if len(ackIDs) > 0 {
			// The first report of a command wins; a report proves the
			// stream held it, so it is accepted too (whatever the publisher
			// heard), never failed.
			if _, err := tx.Exec(ctx, `
				UPDATE commands AS c SET acknowledged_at = a.at, outcome = a.outcome, outcome_reason = a.reason, outcome_detail = a.detail,
					status = 'accepted', accepted_at = COALESCE(c.accepted_at, a.at), failed_at = NULL
				FROM (SELECT DISTINCT ON (id) * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[])
				      WITH ORDINALITY AS u(id, sensor_id, at, outcome, reason, detail, n) ORDER BY id, n) AS a
				WHERE c.id = a.id AND c.sensor_id = a.sensor_id AND c.acknowledged_at IS NULL`,
				ackIDs, ackSensors, ackAt, ackOutcomes, ackReasons, ackDetails); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkInQuery authorises a batch of health checks and records them in one
// statement: ok is every check-in whose sensor is in its tenant, not
// revoked, with that serial as its active unexpired certificate (read like
// any call's authorisation, from the statement's snapshot); those that
// would change the row are locked in id order (lk, which sees a revocation
// committed since and drops the check-in) and written (up); the others
// are authorised without a write.
const checkInQuery = `
	WITH u AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
			WITH ORDINALITY AS u(id, tenant, serial, version, address, n)
	), ok AS MATERIALIZED (
		SELECT u.n, u.id, u.version, u.address,
			(s.state = 'offline' OR s.last_seen_at IS NULL OR s.last_seen_at < $7
			 OR (u.version <> '' AND u.version <> s.agent_version)
			 OR (u.address <> '' AND u.address <> s.address)) AS stale
		FROM u
		JOIN sensors s ON s.id = u.id AND s.tenant_id = u.tenant AND s.state <> 'revoked'
		JOIN sensor_certificates c ON c.serial = u.serial AND c.sensor_id = u.id AND c.active AND c.not_after > $6
	), lk AS MATERIALIZED (
		SELECT s.id FROM sensors s
		WHERE s.id IN (SELECT id FROM ok WHERE stale) AND s.state <> 'revoked'
		ORDER BY s.id FOR UPDATE
	), up AS (
		UPDATE sensors AS s SET
			last_seen_at = GREATEST(s.last_seen_at, $6),
			state = CASE WHEN s.state = 'offline' THEN 'online' ELSE s.state END,
			agent_version = CASE WHEN ok.version <> '' THEN ok.version ELSE s.agent_version END,
			address = CASE WHEN ok.address <> '' THEN ok.address ELSE s.address END
		FROM lk JOIN ok ON ok.id = lk.id AND ok.stale
		WHERE s.id = lk.id
		RETURNING ok.n
	)
	SELECT n FROM ok WHERE NOT stale
	UNION ALL
	SELECT n FROM up`

// CheckIn implements fleet.StatusStore.
func (s *Store) CheckIn(ctx context.Context, in []fleet.SensorCheckIn, now, fresh time.Time) ([]bool, error) {
	n := len(in)
	sensorIDs, tenants, serials, versions, addrs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, c := range in {
		sensorIDs[i], tenants[i], serials[i], versions[i], addrs[i] = c.Ref.SensorID, c.Ref.TenantID, c.Serial, c.AgentVersion, c.Address
	}
	rows, err := s.pool.Query(ctx, checkInQuery, sensorIDs, tenants, serials, versions, addrs, now, fresh)
	if err != nil {
		return nil, err
	}
	recorded := make([]bool, n)
	var i int64
	_, err = pgx.ForEachRow(rows, []any{&i}, func() error {
		if i >= 1 && i <= int64(n) {
			recorded[i-1] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

// MarkSilent implements fleet.StatusStore.
func (s *Store) MarkSilent(ctx context.Context, seenBefore time.Time, from []fleet.State, to fleet.State) (int, error) {
	states := make([]string, len(from))
	for i, st := range from {
		states[i] = string(st)
	}
	return rowsChanged(ctx, s.pool, `
		UPDATE sensors SET state = $3
		WHERE state = ANY($2) AND (last_seen_at IS NULL OR last_seen_at < $1)`,
		seenBefore, states, string(to))
}

// RevokeSensor implements fleet.RevokeStore.
func (s *Store) RevokeSensor(ctx context.Context, sensorID, by string, at time.Time) (fleet.Sensor, error) {
	var sensor fleet.Sensor
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := revokeTx(ctx, tx, sensorID, by, at); err != nil {
			return err
		}
		var err error
		sensor, err = sensorByID(ctx, tx, sensorID)
		return err
	})
	return sensor, err
}

// revokeTx revokes a sensor within tx: state, certificates, tokens, and
// the notification that ends its streams on every replica once tx commits.
func revokeTx(ctx context.Context, tx pgx.Tx, sensorID, by string, at time.Time) error {
	if err := changeOne(ctx, tx, fleet.ErrNotFound, `
		UPDATE sensors SET state = 'revoked', revoked_at = COALESCE(revoked_at, $2), revoked_by = COALESCE(revoked_by, $3)
		WHERE id = $1`, sensorID, at, by); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE sensor_certificates SET active = false WHERE sensor_id = $1 AND active`, sensorID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE sensor_tokens SET revoked_at = $2
		WHERE sensor_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, sensorID, at); err != nil {
		return err
	}
	return notifyCredentials(ctx, tx, sensorID)
}

// EditSensor implements fleet.LifecycleStore.
func (s *Store) EditSensor(ctx context.Context, sensorID string, edit func(fleet.Sensor) (fleet.SensorEdit, error)) (fleet.Sensor, error) {
	var sensor fleet.Sensor
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := lockSensorRow(ctx, tx, sensorID); err != nil {
			return err
		}
		cur, err := sensorByID(ctx, tx, sensorID)
		if err != nil {
			return err
		}
		e, err := edit(cur)
		if err != nil {
			return err
		}
		labels := e.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		if _, err := tx.Exec(ctx, `UPDATE sensors SET name = $2, labels = $3 WHERE id = $1`, sensorID, e.Name, labels); err != nil {
			return err
		}
		sensor, err = sensorByID(ctx, tx, sensorID)
		return err
	})
	return sensor, err
}

// lockSensorRow locks a sensor's row and returns when it was
// decommissioned (nil: never); ErrNotFound when there is none.
func lockSensorRow(ctx context.Context, tx pgx.Tx, sensorID string) (*time.Time, error) {
	var at *time.Time
	err := tx.QueryRow(ctx, `SELECT decommissioned_at FROM sensors WHERE id = $1 FOR UPDATE`, sensorID).Scan(&at)
	return at, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

// DecommissionSensor implements fleet.LifecycleStore.
func (s *Store) DecommissionSensor(ctx context.Context, sensorID, by string, at time.Time) (fleet.Sensor, bool, error) {
	var (
		sensor  fleet.Sensor
		already bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		done, err := lockSensorRow(ctx, tx, sensorID)
		if err != nil {
			return err
		}
		if already = done != nil; !already {
			if err := revokeTx(ctx, tx, sensorID, by, at); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE sensors SET decommissioned_at = $2, decommissioned_by = $3 WHERE id = $1`, sensorID, at, by); err != nil {
				return err
			}
			// Nothing will ever act on them: they are shown as expired.
			if _, err := tx.Exec(ctx, `
				UPDATE commands SET status = 'expired'
				WHERE sensor_id = $1 AND status = 'pending' AND acknowledged_at IS NULL`, sensorID); err != nil {
				return err
			}
		}
		sensor, err = sensorByID(ctx, tx, sensorID)
		return err
	})
	return sensor, already, err
}
