package controlplanestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
)

// LiveToken implements fleet.EnrollStore.
func (s *Store) LiveToken(ctx context.Context, sensorID string, kind fleet.TokenKind) (fleet.Token, error) {
	t := fleet.Token{SensorID: sensorID, Kind: kind}
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT token_hash, expires_at FROM sensor_tokens
		WHERE sensor_id = $1 AND kind = $2 AND used_at IS NULL AND revoked_at IS NULL`,
		sensorID, string(kind)).Scan(&t.Hash, &expires)
	if err != nil {
		return fleet.Token{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	t.ExpiresAt = utc(expires)
	return t, nil
}

// SensorCredential implements fleet.EnrollStore: one statement, the sensor
// as Sensor reads it with its live token and its tenant's NATS status.
func (s *Store) SensorCredential(ctx context.Context, sensorID string, kind fleet.TokenKind) (fleet.SensorCredential, error) {
	c := fleet.SensorCredential{Token: fleet.Token{SensorID: sensorID, Kind: kind}}
	var expires *time.Time
	sensor, err := scanSensor(s.pool.QueryRow(ctx, `SELECT`+sensorColumns+`, tok.token_hash, tok.expires_at, tn.nats_status`+sensorFrom+`
		JOIN tenants tn ON tn.id = s.tenant_id
		LEFT JOIN LATERAL (
			SELECT token_hash, expires_at FROM sensor_tokens
			WHERE sensor_id = s.id AND kind = $2 AND used_at IS NULL AND revoked_at IS NULL
			LIMIT 1) tok ON true
		WHERE s.id = $1`, sensorID, string(kind)),
		&c.Token.Hash, &expires, &c.TenantNATSStatus)
	if err != nil {
		return fleet.SensorCredential{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	c.Sensor, c.Token.ExpiresAt = sensor, utc(expires)
	return c, nil
}

// completeEnrollmentSQL is CompleteEnrollment as one statement. It locks
// the sensor row (against a concurrent revocation) and consumes the
// enrolment token only when the sensor is not revoked; every write after
// that is made only for the consumed token, so a refusal writes nothing.
// The token's UPDATE re-reads a row another transaction changed meanwhile
// (READ COMMITTED): of concurrent uses of one token exactly one consumes
// it. An unused enrolment token means the sensor was never enrolled (it is
// made with the sensor, by Redeem, and is the only one the sensor ever
// gets), so no other transaction can have given this sensor a certificate
// or sensor token that this statement's snapshot misses; the old ones are
// still retired first, as renewal does, and the reads of old_cert and
// old_token make those updates run before the inserts they would clash
// with. The announcement goes out only when the enrolment is stored. An
// enrolment whose agent proved its CSR's key keeps the CSR's digest, the
// proof's signedAt and the token with the certificate (ActiveEnrolment).
// Sensor tokens are never "used" (used_at is the enrolment token's), so
// "used_at IS NULL" changes nothing but lets the old sensor token be found
// through sensor_tokens_one_live_idx: without it PostgreSQL read the whole
// table, every enrolment, a cost growing with the fleet.
const completeEnrollmentSQL = `
	WITH sensor AS (
		SELECT id, tenant_id, state FROM sensors WHERE id = $1 FOR UPDATE
	), token AS (
		UPDATE sensor_tokens SET used_at = $3
		WHERE token_hash = $2 AND sensor_id = $1 AND kind = 'enrollment'
		  AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $3
		  AND EXISTS (SELECT 1 FROM sensor WHERE state <> 'revoked')
		RETURNING sensor_id
	), old_cert AS (
		UPDATE sensor_certificates SET active = false
		WHERE sensor_id = (SELECT sensor_id FROM token) AND active
		RETURNING serial
	), cert AS (
		INSERT INTO sensor_certificates (serial, sensor_id, active, not_after, issued_at, csr_sha256, proven_signed_at, enrolment_token_hash)
		SELECT $4, sensor_id, true, $5, $3, $13::bytea, $14::timestamptz, CASE WHEN $13::bytea IS NOT NULL THEN $2::bytea END
		FROM token WHERE (SELECT count(*) FROM old_cert) >= 0
	), old_token AS (
		UPDATE sensor_tokens SET revoked_at = $3
		WHERE sensor_id = (SELECT sensor_id FROM token) AND kind = 'sensor' AND used_at IS NULL AND revoked_at IS NULL
		RETURNING token_hash
	), new_token AS (
		INSERT INTO sensor_tokens (token_hash, sensor_id, kind, created_at, expires_at)
		SELECT $6, sensor_id, 'sensor', $3, $7 FROM token WHERE (SELECT count(*) FROM old_token) >= 0
	), enrolled AS (
		UPDATE sensors SET state = $8, nats_user_pub_key = $9, nats_account_pub_key = $10, labels = COALESCE($12::jsonb, labels)
		WHERE id = (SELECT sensor_id FROM token)
	)
	SELECT sensor.state, token.sensor_id IS NOT NULL,
	       CASE WHEN token.sensor_id IS NOT NULL THEN pg_notify($11, sensor.tenant_id || '/' || sensor.id) END IS NOT NULL
	FROM sensor LEFT JOIN token ON true`

// CompleteEnrollment implements fleet.EnrollStore in one statement
// (completeEnrollmentSQL): one round trip, atomic without a transaction
// block, where it used to take ten statements (BEGIN, eight, COMMIT).
func (s *Store) CompleteEnrollment(ctx context.Context, e fleet.EnrollmentRecord) error {
	var (
		state              fleet.State
		consumed, notified bool
	)
	err := s.pool.QueryRow(ctx, completeEnrollmentSQL,
		e.SensorID, e.EnrollmentTokenHash, e.At, e.Certificate.Serial, e.Certificate.NotAfter,
		e.SensorTokenHash, nullable.Time(e.SensorTokenExpiresAt), string(e.State), e.NATSUserPubKey, e.NATSAccountPubKey,
		credentialsChannel, jsonOrNull(e.Labels), e.CSRSHA256, nullable.Time(e.ProvenSignedAt)).Scan(&state, &consumed, &notified)
	switch {
	case err != nil:
		return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	case state == fleet.StateRevoked:
		return fleet.ErrRevoked
	case !consumed:
		return fleet.ErrInvalidToken
	}
	return nil
}

// jsonOrNull passes labels as a jsonb parameter, SQL NULL when nil.
func jsonOrNull(l map[string]string) any {
	if l == nil {
		return nil
	}
	return l
}

// RenewCertificate implements fleet.EnrollStore.
func (s *Store) RenewCertificate(ctx context.Context, r fleet.RenewalRecord) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockLiveSensor(ctx, tx, r.SensorID); err != nil {
			return err
		}
		var active string
		err := tx.QueryRow(ctx, `SELECT serial FROM sensor_certificates WHERE sensor_id = $1 AND active`, r.SensorID).Scan(&active)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if active != r.ReplacesSerial {
			return fmt.Errorf("certificate %s is no longer the active one: %w", r.ReplacesSerial, fleet.ErrInvalidToken)
		}
		if r.NATS.UserPubKey != "" {
			if _, err := tx.Exec(ctx, `UPDATE sensors SET nats_user_pub_key = $2, nats_account_pub_key = $3 WHERE id = $1`,
				r.SensorID, r.NATS.UserPubKey, r.NATS.AccountPubKey); err != nil {
				return err
			}
		}
		if err := replaceCertificate(ctx, tx, r.SensorID, r.Certificate, r.At); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE sensor_certificates SET csr_sha256 = $2, proven_serial = $3, proven_token_hash = $4, proven_signed_at = $5,
				enrolment_token_hash = $6
			WHERE serial = $1`,
			r.Certificate.Serial, r.CSRSHA256, nullable.String(r.ProvenSerial), r.ProvenTokenHash, nullable.Time(r.ProvenSignedAt),
			r.EnrolmentTokenHash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE sensor_tokens SET revoked_at = $2
			WHERE sensor_id = $1 AND kind = 'sensor' AND used_at IS NULL AND revoked_at IS NULL`, r.SensorID, r.At); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO sensor_tokens (token_hash, sensor_id, kind, created_at, expires_at) VALUES ($1, $2, 'sensor', $3, $4)`,
			r.SensorTokenHash, r.SensorID, r.At, nullable.Time(r.SensorTokenExpiresAt)); err != nil {
			return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
		}
		// Superseded certificates past the latest few are of no use: a
		// stream on one is ended, and a renewal needs the active one.
		_, err = tx.Exec(ctx, `
			DELETE FROM sensor_certificates WHERE sensor_id = $1 AND NOT active AND serial NOT IN (
				SELECT serial FROM sensor_certificates WHERE sensor_id = $1 AND NOT active ORDER BY issued_at DESC LIMIT $2)`,
			r.SensorID, keptSupersededCertificates)
		return err
	})
}

// ActiveRenewal implements fleet.EnrollStore.
func (s *Store) ActiveRenewal(ctx context.Context, sensorID string) (fleet.ActiveRenewal, error) {
	var (
		r        fleet.ActiveRenewal
		signedAt *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT serial, csr_sha256, proven_serial, proven_token_hash, proven_signed_at FROM sensor_certificates
		WHERE sensor_id = $1 AND active AND proven_serial IS NOT NULL`, sensorID).
		Scan(&r.Serial, &r.CSRSHA256, &r.ProvenSerial, &r.ProvenTokenHash, &signedAt)
	if err != nil {
		return fleet.ActiveRenewal{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	r.ProvenSignedAt = utc(signedAt)
	return r, nil
}

// ActiveEnrolment implements fleet.EnrollStore: the active certificate's
// enrolment record with the state of the enrolment token it consumed.
func (s *Store) ActiveEnrolment(ctx context.Context, sensorID string) (fleet.ActiveEnrolment, error) {
	var (
		e                 fleet.ActiveEnrolment
		signedAt, expires *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT c.serial, c.enrolment_token_hash, c.csr_sha256, c.proven_signed_at, t.expires_at, t.revoked_at IS NOT NULL
		FROM sensor_certificates c
		JOIN sensor_tokens t ON t.token_hash = c.enrolment_token_hash AND t.sensor_id = c.sensor_id AND t.kind = 'enrollment'
		WHERE c.sensor_id = $1 AND c.active AND c.enrolment_token_hash IS NOT NULL`, sensorID).
		Scan(&e.Serial, &e.TokenHash, &e.CSRSHA256, &signedAt, &expires, &e.TokenRevoked)
	if err != nil {
		return fleet.ActiveEnrolment{}, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	e.ProvenSignedAt, e.TokenExpiresAt = utc(signedAt), utc(expires)
	return e, nil
}

// keptSupersededCertificates is how many replaced certificates a sensor
// keeps on record (for the operator's questions about recent serials).
const keptSupersededCertificates = 3

// CertificateCount returns how many certificate rows the sensor holds.
func (s *Store) CertificateCount(ctx context.Context, sensorID string) int {
	var n int
	_ = s.pool.QueryRow(ctx, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, sensorID).Scan(&n)
	return n
}

// lockLiveSensorSQL locks the sensor row against a concurrent revocation
// and reads its state.
const lockLiveSensorSQL = `SELECT state FROM sensors WHERE id = $1 FOR UPDATE`

// lockLiveSensor locks the sensor row against a concurrent revocation and
// refuses revoked sensors.
func lockLiveSensor(ctx context.Context, tx pgx.Tx, sensorID string) error {
	return readLiveSensor(tx.QueryRow(ctx, lockLiveSensorSQL, sensorID))
}

// readLiveSensor reads lockLiveSensorSQL's answer: revoked and unknown
// sensors are refused.
func readLiveSensor(row pgx.Row) error {
	var state fleet.State
	if err := row.Scan(&state); err != nil {
		return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	if state == fleet.StateRevoked {
		return fleet.ErrRevoked
	}
	return nil
}

// queueReplaceCertificate queues what replaceCertificate does;
// readReplaceCertificate reads its results.
func queueReplaceCertificate(b *pgx.Batch, sensorID string, c fleet.IssuedCertificate, at time.Time) {
	b.Queue(`UPDATE sensor_certificates SET active = false WHERE sensor_id = $1 AND active`, sensorID)
	b.Queue(`
		INSERT INTO sensor_certificates (serial, sensor_id, active, not_after, issued_at) VALUES ($1, $2, true, $3, $4)`,
		c.Serial, sensorID, c.NotAfter, at)
	b.Queue(notifyCredentialsSQL, credentialsChannel, sensorID)
}

func readReplaceCertificate(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	_, err := br.Exec()
	return err
}

func replaceCertificate(ctx context.Context, tx pgx.Tx, sensorID string, c fleet.IssuedCertificate, at time.Time) error {
	b := &pgx.Batch{}
	queueReplaceCertificate(b, sensorID, c, at)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if err := readReplaceCertificate(br); err != nil {
		return err
	}
	return br.Close()
}
