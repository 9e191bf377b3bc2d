// Package eventstore is the PostgreSQL store of sensor events (the events
// table of migrations/controlplane/002_events.sql). It implements
// events.Store: a batch is copied into a session-local temporary table and
// moved into events with INSERT … ON CONFLICT DO NOTHING in one
// transaction, so a redelivered event is skipped, not duplicated. It
// creates the day partitions a batch needs before loading it.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/core/events"
)

// Config wires a Store.
type Config struct {
	Pool *pgxpool.Pool
}

// Store writes events to PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	days map[string]bool // partitions known to exist, by "YYYY-MM-DD"
}

// New returns a Store on cfg.Pool. The schema (migrations.ControlPlane)
// must have been applied.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("eventstore: pool is required")
	}
	return &Store{pool: cfg.Pool, days: map[string]bool{}}, nil
}

// columns in the order of the table; the load table has the same shape.
var columns = []string{
	"tenant_id", "sensor_id", "event_id", "event_time", "received_at", "kind",
	"src_ip", "src_port", "dest_ip", "dest_port", "protocol",
	"signature_id", "signature", "category", "severity", "cves", "raw",
}

const (
	createLoad = `CREATE TEMP TABLE IF NOT EXISTS events_load (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`
	// moveLoad skips events the stream received at or after their sensor's
	// revocation (a stream still open on another replica in the moment
	// before it is ended must not add anything to a revoked sensor's
	// record) and returns how many it inserted and how many it skipped so.
	moveLoad = `
		WITH revoked AS (
			SELECT l.tenant_id, l.sensor_id, l.event_id, l.event_time FROM events_load l
			JOIN sensors s ON s.id = l.sensor_id AND s.tenant_id = l.tenant_id
			WHERE s.revoked_at IS NOT NULL AND l.received_at >= s.revoked_at),
		moved AS (
			INSERT INTO events SELECT l.* FROM events_load l
			WHERE NOT EXISTS (SELECT 1 FROM revoked r
				WHERE r.tenant_id = l.tenant_id AND r.sensor_id = l.sensor_id AND r.event_id = l.event_id AND r.event_time = l.event_time)
			ON CONFLICT DO NOTHING RETURNING 1)
		SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM revoked)`
)

// write stores evs in one transaction and returns how many rows were new.
func (s *Store) write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	if len(evs) == 0 {
		return events.WriteResult{}, nil
	}
	if err := s.ensurePartitions(ctx, evs); err != nil {
		return events.WriteResult{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return events.WriteResult{}, fmt.Errorf("eventstore: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, createLoad); err != nil {
		return events.WriteResult{}, fmt.Errorf("eventstore: load table: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events_load"}, columns, &rows{evs: evs, i: -1}); err != nil {
		return events.WriteResult{}, fmt.Errorf("eventstore: copy %d events: %w", len(evs), classify(err))
	}
	var res events.WriteResult
	if err := tx.QueryRow(ctx, moveLoad).Scan(&res.Inserted, &res.Revoked); err != nil {
		return events.WriteResult{}, fmt.Errorf("eventstore: insert: %w", classify(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return events.WriteResult{}, fmt.Errorf("eventstore: commit: %w", err)
	}
	return res, nil
}

// Write wraps write and forgets the known partitions after a failure: one
// may have been dropped (expiring old days) since it was seen.
func (s *Store) Write(ctx context.Context, evs []events.Event) (events.WriteResult, error) {
	n, err := s.write(ctx, evs)
	if err != nil {
		s.mu.Lock()
		clear(s.days)
		s.mu.Unlock()
	}
	return n, err
}

// classify marks errors caused by the data itself (SQLSTATE class 22, data
// exception: text PostgreSQL cannot hold, JSON jsonb refuses) as
// events.ErrInvalidEvent: retrying the same rows cannot help. Anything else,
// a missing partition included, is worth retrying.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return fmt.Errorf("%w: %w", events.ErrInvalidEvent, err)
	}
	return err
}

// ensurePartitions creates the day partitions evs fall into, each in its
// own short transaction: creating a partition locks the parent table, which
// must not wait for a batch.
func (s *Store) ensurePartitions(ctx context.Context, evs []events.Event) error {
	var missing []string
	s.mu.Lock()
	for i := range evs {
		d := evs[i].Time.UTC().Format(time.DateOnly)
		if !s.days[d] && !slices.Contains(missing, d) {
			missing = append(missing, d)
		}
	}
	s.mu.Unlock()
	for _, d := range missing {
		if _, err := s.pool.Exec(ctx, `SELECT events_ensure_partition($1::date)`, d); err != nil {
			return fmt.Errorf("eventstore: partition for %s: %w", d, err)
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

// rows feeds CopyFrom without building all rows up front.
type rows struct {
	evs []events.Event
	i   int
	row [17]any
}

func (r *rows) Next() bool {
	r.i++
	return r.i < len(r.evs)
}

func (r *rows) Values() ([]any, error) {
	ev := &r.evs[r.i]
	var sigID, severity any
	sig, cat := "", ""
	if a := ev.Alert; a != nil {
		sigID, severity, sig, cat = a.SignatureID, a.Severity, a.Signature, a.Category
	}
	cves := ev.CVEs
	if cves == nil {
		cves = []string{}
	}
	// The raw record goes to the jsonb column as the bytes it arrived as
	// (pgx sends a []byte to json and jsonb unchanged); nil is NULL.
	var raw []byte
	if len(ev.RawJSON) > 0 {
		raw = ev.RawJSON
	}
	r.row = [17]any{
		ev.TenantID, ev.SensorID, ev.ID, ev.Time, ev.ReceivedAt, ev.Kind,
		addr(ev.SrcIP), port(ev.SrcPort), addr(ev.DestIP), port(ev.DestPort), ev.Protocol,
		sigID, sig, cat, severity, cves, raw,
	}
	return r.row[:], nil
}

func (r *rows) Err() error { return nil }
