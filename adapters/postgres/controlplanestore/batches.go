package controlplanestore

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
)

const batchColumns = `b.id, b.action, b.created_at, b.created_by, b.operator_id, COALESCE(b.idempotency_key, ''),
	b.request_hash, b.tenant_ids, b.matched, b.total, b.skipped_revoked, b.skipped_not_enrolled`

func scanBatch(row pgx.Row, extra ...any) (fleet.Batch, error) {
	var b fleet.Batch
	dest := append([]any{&b.ID, &b.Action, &b.CreatedAt, &b.CreatedBy, &b.OperatorID, &b.IdempotencyKey,
		&b.RequestHash, &b.TenantIDs, &b.Matched, &b.Total, &b.SkippedRevoked, &b.SkippedNotEnrolled}, extra...)
	if err := row.Scan(dest...); err != nil {
		return fleet.Batch{}, err
	}
	b.CreatedAt = b.CreatedAt.UTC()
	return b, nil
}

// SensorTargets implements fleet.BatchStore.
func (s *Store) SensorTargets(ctx context.Context, ids []string) ([]fleet.SensorTarget, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id, state FROM sensors WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[fleet.SensorTarget])
}

// MatchSensors implements fleet.BatchStore.
func (s *Store) MatchSensors(ctx context.Context, m fleet.SensorMatch, limit int) ([]fleet.SensorTarget, error) {
	where, args := whereMatch(m, nil)
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, `SELECT s.id, s.tenant_id, s.state FROM sensors s WHERE `+where+` LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[fleet.SensorTarget])
}

// CreateBatch implements fleet.BatchStore. The unique index on (operator,
// idempotency key) makes concurrent identical requests leave one batch:
// the later insert waits for the first transaction and then finds its
// batch. The commands' sensors are share-locked in id order first (the
// order status updates lock them in: the foreign-key checks of the insert
// would otherwise take the same locks in any order and could deadlock with
// them) and re-checked, so a sensor revoked before gets no command. The
// sensors' rows are not written: a sensor's last command is read as the
// one recorded last.
func (s *Store) CreateBatch(ctx context.Context, b fleet.Batch, cmds []fleet.Command) (fleet.Batch, bool, error) {
	var (
		out     fleet.Batch
		created bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO command_batches (id, action, created_at, created_by, operator_id, idempotency_key, request_hash,
				tenant_ids, matched, total, skipped_revoked, skipped_not_enrolled)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (operator_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`,
			b.ID, string(b.Action), b.CreatedAt, b.CreatedBy, b.OperatorID, nullable.String(b.IdempotencyKey), b.RequestHash,
			nonNil(b.TenantIDs), b.Matched, b.Total, b.SkippedRevoked, b.SkippedNotEnrolled)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			out, err = batchByKey(ctx, tx, b.OperatorID, b.IdempotencyKey)
			if err != nil {
				return err
			}
			if !bytes.Equal(out.RequestHash, b.RequestHash) {
				return errors.Join(fleet.ErrConflict, errors.New("the idempotency key was used for another batch request"))
			}
			return nil
		}
		out, created = b, true
		if len(cmds) == 0 {
			return nil
		}
		ids, tenants, sensors := make([]string, len(cmds)), make([]string, len(cmds)), make([]string, len(cmds))
		for i, c := range cmds {
			ids[i], tenants[i], sensors[i] = c.ID, c.TenantID, c.SensorID
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM sensors WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, sensors); err != nil {
			return err
		}
		c := cmds[0]
		tag, err = tx.Exec(ctx, `
			INSERT INTO commands (id, tenant_id, sensor_id, action, issued_at, issued_by, expires_at, status, batch_id)
			SELECT u.id, u.tenant_id, u.sensor_id, $4, $5, $6, $7, 'pending', $8
			FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, tenant_id, sensor_id)
			JOIN sensors s ON s.id = u.sensor_id AND s.tenant_id = u.tenant_id AND s.state NOT IN ('revoked', 'pending')`,
			ids, tenants, sensors, string(c.Action), c.IssuedAt, c.IssuedBy, c.ExpiresAt, b.ID)
		if err != nil {
			return err
		}
		if dropped := len(cmds) - int(tag.RowsAffected()); dropped > 0 {
			// Revoked since they were looked up (a sensor never goes back
			// to pending).
			out.Total -= dropped
			out.SkippedRevoked += dropped
			if _, err := tx.Exec(ctx, `UPDATE command_batches SET total = $2, skipped_revoked = $3 WHERE id = $1`,
				b.ID, out.Total, out.SkippedRevoked); err != nil {
				return err
			}
		}
		return nil
	})
	return out, created, err
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// BatchByKey implements fleet.BatchStore.
func (s *Store) BatchByKey(ctx context.Context, operatorID, key string) (fleet.Batch, error) {
	return batchByKey(ctx, s.pool, operatorID, key)
}

func batchByKey(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, operatorID, key string) (fleet.Batch, error) {
	b, err := scanBatch(q.QueryRow(ctx, `SELECT `+batchColumns+` FROM command_batches b
		WHERE b.operator_id = $1 AND b.idempotency_key = $2`, operatorID, key))
	return b, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

// batchCounted selects a batch with its counts; batchCountsFrom joins them.
const (
	batchCounted    = batchColumns + `, n.pending, n.accepted, n.failed, n.expired, n.acknowledged, n.refused`
	batchCountsFrom = `FROM command_batches b,
		LATERAL (SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
		                count(*) FILTER (WHERE status = 'accepted') AS accepted,
		                count(*) FILTER (WHERE status = 'failed') AS failed,
		                count(*) FILTER (WHERE status = 'expired') AS expired,
		                count(*) FILTER (WHERE outcome = 'applied') AS acknowledged,
		                count(*) FILTER (WHERE outcome = 'refused') AS refused
		         FROM commands WHERE batch_id = b.id) AS n`
)

func scanCountedBatch(row pgx.Row) (fleet.Batch, error) {
	var c fleet.BatchCounts
	b, err := scanBatch(row, &c.Pending, &c.Accepted, &c.Failed, &c.Expired, &c.Acknowledged, &c.Refused)
	if err != nil {
		return fleet.Batch{}, err
	}
	b.Counts = c
	return b, nil
}

// Batch implements fleet.BatchStore.
func (s *Store) Batch(ctx context.Context, id string) (fleet.Batch, error) {
	b, err := scanCountedBatch(s.pool.QueryRow(ctx, `SELECT `+batchCounted+` `+batchCountsFrom+` WHERE b.id = $1`, id))
	if err != nil {
		return fleet.Batch{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	return b, nil
}

// ListBatches implements fleet.BatchLister: newest first along
// command_batches_created_idx, counting only the page's batches.
func (s *Store) ListBatches(ctx context.Context, q fleet.BatchQuery) ([]fleet.Batch, error) {
	var (
		afterAt *time.Time
		afterID string
	)
	if q.After != nil {
		afterAt, afterID = &q.After.Time, q.After.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+batchCounted+` `+batchCountsFrom+`
		WHERE ($1::text[] IS NULL OR (b.tenant_ids <@ $1 AND (cardinality(b.tenant_ids) > 0 OR b.operator_id = $2)))
		  AND ($3::timestamptz IS NULL OR (b.created_at, b.id COLLATE "C") < ($3, $4::text COLLATE "C"))
		ORDER BY b.created_at DESC, b.id COLLATE "C" DESC
		LIMIT $5`, q.Tenants, q.OperatorID, afterAt, afterID, q.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Batch, error) { return scanCountedBatch(r) })
}

// ClaimUnsentCommands implements fleet.BatchStore. SKIP LOCKED lets every
// replica claim at once without waiting for or doubling another's claim.
// The claimed ids are updated by primary key (= ANY of the array), so the
// claim reads only the rows it takes however many commands the table
// holds (a join with the subquery made PostgreSQL scan the whole table).
func (s *Store) ClaimUnsentCommands(ctx context.Context, at time.Time, limit int) ([]fleet.Command, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE commands AS m SET first_sent_at = $1
		WHERE m.id = ANY(ARRAY(
		      SELECT id FROM commands
		      WHERE first_sent_at IS NULL AND status = 'pending' AND expires_at > $1
		      ORDER BY issued_at, id LIMIT $2 FOR UPDATE SKIP LOCKED))
		RETURNING `+commandColumns, at, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Command, error) { return scanCommand(r) })
}

// AcceptCommands implements fleet.BatchStore.
func (s *Store) AcceptCommands(ctx context.Context, acks []fleet.CommandAck) error {
	ids, seqs, ats := make([]string, len(acks)), make([]int64, len(acks)), make([]time.Time, len(acks))
	for i, a := range acks {
		ids[i], seqs[i], ats[i] = a.ID, int64(a.Seq), a.At
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE commands AS c SET status = 'accepted', stream_seq = COALESCE(c.stream_seq, u.seq), accepted_at = COALESCE(c.accepted_at, u.at)
		FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) AS u(id, seq, at)
		WHERE c.id = u.id AND c.status IN ('pending', 'accepted')`, ids, seqs, ats)
	return err
}

// FailCommands implements fleet.BatchStore.
func (s *Store) FailCommands(ctx context.Context, ids []string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE commands SET status = 'failed', failed_at = $2
		WHERE id = ANY($1) AND status = 'pending' AND acknowledged_at IS NULL`, ids, at)
	return err
}
