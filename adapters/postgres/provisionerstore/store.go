// Package provisionerstore keeps the provisioner's records in PostgreSQL
// (schema: migrations/001_init.sql): the operator, accounts, users and
// revocations. Account and user seeds are sealed with AES-256-GCM using the
// record's public key as additional data, so a seed never sits in clear in
// the database and a sealed seed moved to another row does not open.
// Create-or-return is INSERT … ON CONFLICT DO NOTHING followed by a read, so
// concurrent identical requests leave one row and all see it; revocations
// lock the account row so each re-signed JWT covers every revocation.
package provisionerstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/adapters/postgres/pglock"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/core/provisioning"
)

// Config wires a Store.
type Config struct {
	Pool   *pgxpool.Pool
	Sealer *seal.Sealer
}

// Store is the PostgreSQL provisioning.Store. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	sealer *seal.Sealer
	lists  lists
}

// New returns a Store. The schema must already be applied (package migrate).
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil || cfg.Sealer == nil {
		return nil, errors.New("provisionerstore: pool and sealer are required")
	}
	return &Store{pool: cfg.Pool, sealer: cfg.Sealer, lists: lists{byAccount: map[string]cachedList{}, max: maxCachedRevocations, jwts: map[string]heldJWT{}}}, nil
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// createUserAttempts bounds the insert-then-read loop of CreateUser: a read
// can miss when the conflicting active user is revoked in between.
const createUserAttempts = 3

const (
	accountCols = `account_id, kind, tenant_id, name, seed_enc, jwt, created_at, updated_at`
	userCols    = `user_pub_key, account_id, kind, tenant_id, sensor_id, name, seed_enc, jwt, created_at, revoked_at, expiring`
)

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("provisionerstore: ping: %w", err)
	}
	return nil
}

// Operator returns the operator record, or an error matching both
// provisioning.ErrNoOperator and provisioning.ErrNotFound.
func (s *Store) Operator(ctx context.Context) (provisioning.Operator, error) {
	var op provisioning.Operator
	err := s.pool.QueryRow(ctx, `SELECT pub_key, name, jwt, system_account, control_account, created_at FROM nats_operator WHERE id = 1`).
		Scan(&op.PubKey, &op.Name, &op.JWT, &op.SystemAccount, &op.ControlAccount, &op.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return provisioning.Operator{}, fmt.Errorf("%w: %w", provisioning.ErrNoOperator, provisioning.ErrNotFound)
	}
	if err != nil {
		return provisioning.Operator{}, fmt.Errorf("provisionerstore: operator: %w", err)
	}
	op.CreatedAt = op.CreatedAt.UTC()
	return op, nil
}

// InitOperator stores the operator with its SYS and CONTROL accounts in one
// transaction, or returns provisioning.ErrOperatorExists and changes nothing.
func (s *Store) InitOperator(ctx context.Context, op provisioning.Operator, sys, control provisioning.Account) error {
	sys, control, err := provisioning.CheckOperator(op, sys, control)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO nats_operator (id, pub_key, name, jwt, system_account, control_account, created_at)
			VALUES (1, $1, $2, $3, $4, $5, COALESCE($6, now())) ON CONFLICT (id) DO NOTHING`,
			op.PubKey, op.Name, op.JWT, op.SystemAccount, op.ControlAccount, nullable.Time(op.CreatedAt))
		if err != nil {
			return fmt.Errorf("provisionerstore: insert operator: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return provisioning.ErrOperatorExists
		}
		for _, a := range []provisioning.Account{sys, control} {
			if _, err := s.insertAccount(ctx, tx, a, ""); err != nil {
				return err
			}
		}
		return nil
	})
}

// ErrOperatorChanged is ReplaceOperatorJWT finding another operator JWT
// than the one the caller read: someone changed it meanwhile.
var ErrOperatorChanged = provisioning.ErrOperatorChanged

// ReplaceOperatorJWT replaces the operator's JWT (its signing keys changed)
// when the stored one is still oldJWT.
func (s *Store) ReplaceOperatorJWT(ctx context.Context, pubKey, oldJWT, newJWT string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE nats_operator SET jwt = $3 WHERE id = 1 AND pub_key = $1 AND jwt = $2`, pubKey, oldJWT, newJWT)
	if err != nil {
		return fmt.Errorf("provisionerstore: replace operator JWT: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrOperatorChanged
	}
	return nil
}

// insertAccount inserts a and returns it as stored, or ErrNoRows when
// onConflict ("ON CONFLICT DO NOTHING") skipped it.
func (s *Store) insertAccount(ctx context.Context, q querier, a provisioning.Account, onConflict string) (provisioning.Account, error) {
	sealed, err := s.sealer.Seal(a.Seed, []byte(a.PubKey))
	if err != nil {
		return provisioning.Account{}, fmt.Errorf("provisionerstore: seal account seed: %w", err)
	}
	row := q.QueryRow(ctx, `INSERT INTO nats_accounts (account_id, kind, tenant_id, name, seed_enc, jwt, jwt_hash, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, now()), COALESCE($9, $8, now())) `+onConflict+`
		RETURNING `+accountCols,
		a.PubKey, string(a.Kind), nullable.String(a.TenantID), a.Name, sealed, a.JWT, jwtHash(a.JWT), nullable.Time(a.CreatedAt), nullable.Time(a.UpdatedAt))
	stored, err := s.scanAccount(row)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return provisioning.Account{}, fmt.Errorf("provisionerstore: insert account %s: %w", a.PubKey, err)
	}
	return stored, err
}

// Account returns the account with the public key, of any kind.
func (s *Store) Account(ctx context.Context, pubKey string) (provisioning.Account, error) {
	a, err := s.scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM nats_accounts WHERE account_id = $1`, pubKey))
	return a, notFound(err, "account "+pubKey)
}

// TenantAccount returns the tenant's account.
func (s *Store) TenantAccount(ctx context.Context, tenantID string) (provisioning.Account, error) {
	a, err := s.scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM nats_accounts WHERE tenant_id = $1`, tenantID))
	return a, notFound(err, "tenant "+tenantID+" account")
}

// CreateTenantAccount stores a unless the tenant has an account, which it
// returns instead.
func (s *Store) CreateTenantAccount(ctx context.Context, a provisioning.Account) (provisioning.Account, bool, error) {
	if a.Kind == "" {
		a.Kind = provisioning.KindTenant
	}
	if a.Kind != provisioning.KindTenant || a.TenantID == "" || a.PubKey == "" {
		return provisioning.Account{}, false, errors.New("provisionerstore: a tenant account needs kind tenant, a tenant id and a public key")
	}
	stored, err := s.insertAccount(ctx, s.pool, a, "ON CONFLICT DO NOTHING")
	if err == nil {
		return stored, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return provisioning.Account{}, false, err
	}
	stored, err = s.TenantAccount(ctx, a.TenantID)
	if errors.Is(err, provisioning.ErrNotFound) {
		return provisioning.Account{}, false, fmt.Errorf("provisionerstore: account key %s is already in use", a.PubKey)
	}
	return stored, false, err
}

// ListAccounts returns every account, oldest first.
func (s *Store) ListAccounts(ctx context.Context) ([]provisioning.Account, error) {
	return s.queryAccounts(ctx, `SELECT `+accountCols+` FROM nats_accounts ORDER BY created_at, account_id`)
}

// UnpushedAccounts returns the accounts whose current JWT has not been
// pushed, least recently changed first.
func (s *Store) UnpushedAccounts(ctx context.Context) ([]provisioning.Account, error) {
	return s.queryAccounts(ctx, `SELECT `+accountCols+` FROM nats_accounts WHERE pushed_at IS NULL ORDER BY updated_at, account_id`)
}

func (s *Store) queryAccounts(ctx context.Context, sql string) ([]provisioning.Account, error) {
	rows, err := s.pool.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: list accounts: %w", err)
	}
	defer rows.Close()
	var out []provisioning.Account
	for rows.Next() {
		a, err := s.scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("provisionerstore: list accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("provisionerstore: list accounts: %w", err)
	}
	return out, nil
}

// MarkPushed records that jwt reached NATS, unless the account's JWT has
// changed since (then the newer JWT still awaits its push).
func (s *Store) MarkPushed(ctx context.Context, pubKey, jwt string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE nats_accounts SET pushed_at = now() WHERE account_id = $1 AND jwt_hash = $2`, pubKey, jwtHash(jwt))
	if err != nil {
		return fmt.Errorf("provisionerstore: mark pushed %s: %w", pubKey, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM nats_accounts WHERE account_id = $1)`, pubKey).Scan(&exists); err != nil {
		return fmt.Errorf("provisionerstore: mark pushed %s: %w", pubKey, err)
	}
	if !exists {
		return fmt.Errorf("account %s: %w", pubKey, provisioning.ErrNotFound)
	}
	return nil
}

// ActiveSensorUser returns the sensor's unrevoked user.
func (s *Store) ActiveSensorUser(ctx context.Context, tenantID, sensorID string) (provisioning.User, error) {
	u, err := s.scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM nats_users
		WHERE kind = 'sensor' AND tenant_id = $1 AND sensor_id = $2 AND revoked_at IS NULL`, tenantID, sensorID))
	return u, notFound(err, "sensor user "+tenantID+"/"+sensorID)
}

// ReplaceUserJWT replaces the JWT of an unrevoked user.
func (s *Store) ReplaceUserJWT(ctx context.Context, userPubKey, jwt string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE nats_users SET jwt = $2 WHERE user_pub_key = $1 AND revoked_at IS NULL`, userPubKey, jwt)
	if err != nil {
		return fmt.Errorf("provisionerstore: replace user JWT: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("active user %s: %w", userPubKey, provisioning.ErrNotFound)
	}
	return nil
}

// ActiveBackendUser returns the named unrevoked backend user.
func (s *Store) ActiveBackendUser(ctx context.Context, name string) (provisioning.User, error) {
	u, err := s.scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM nats_users
		WHERE kind = 'backend' AND name = $1 AND revoked_at IS NULL`, name))
	return u, notFound(err, "backend user "+name)
}

// CreateUser stores u unless an active user with the same identity exists
// (same account and sensor, or same backend name), which it returns instead.
func (s *Store) CreateUser(ctx context.Context, u provisioning.User) (provisioning.User, bool, error) {
	if err := provisioning.CheckUser(u); err != nil {
		return provisioning.User{}, false, fmt.Errorf("provisionerstore: %w", err)
	}
	sealed, err := s.sealer.Seal(u.Seed, []byte(u.PubKey))
	if err != nil {
		return provisioning.User{}, false, fmt.Errorf("provisionerstore: seal user seed: %w", err)
	}
	for range createUserAttempts {
		stored, err := s.scanUser(s.pool.QueryRow(ctx, `INSERT INTO nats_users (user_pub_key, account_id, kind, tenant_id, sensor_id, name, seed_enc, jwt, created_at, expiring)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9, now()), $10) ON CONFLICT DO NOTHING RETURNING `+userCols,
			u.PubKey, u.AccountPubKey, string(u.Kind), nullable.String(u.TenantID), nullable.String(u.SensorID), u.Name, sealed, u.JWT, nullable.Time(u.CreatedAt), u.Expiring))
		if err == nil {
			return stored, true, nil
		}
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23503" {
			return provisioning.User{}, false, fmt.Errorf("account %s: %w", u.AccountPubKey, provisioning.ErrNotFound)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return provisioning.User{}, false, fmt.Errorf("provisionerstore: insert user %s: %w", u.PubKey, err)
		}
		stored, err = s.activeUserLike(ctx, u)
		if err == nil {
			return stored, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return provisioning.User{}, false, fmt.Errorf("provisionerstore: read back user: %w", err)
		}
	}
	return provisioning.User{}, false, fmt.Errorf("provisionerstore: user %s conflicts with a stored user (key already in use?)", u.PubKey)
}

// activeUserLike reads the active user with u's identity, as the partial
// unique indexes define it.
func (s *Store) activeUserLike(ctx context.Context, u provisioning.User) (provisioning.User, error) {
	if u.Kind == provisioning.UserSensor {
		return s.scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM nats_users
			WHERE kind = 'sensor' AND account_id = $1 AND sensor_id = $2 AND revoked_at IS NULL`, u.AccountPubKey, u.SensorID))
	}
	return s.scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM nats_users
		WHERE kind = 'backend' AND name = $1 AND revoked_at IS NULL`, u.Name))
}

// Revoke records the revocation (keeping the earliest time), marks the user
// revoked if it belongs to the account, and stores the JWT resign returns for
// the account's full revocation list, in one transaction. resign runs while
// the account row is locked, so concurrent revocations in one account
// serialise and none is left out of the final JWT.
func (s *Store) Revoke(ctx context.Context, r provisioning.Revocation, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Revocation, provisioning.Account, error) {
	stored, acct, err := s.RevokeMany(ctx, r.AccountPubKey, []provisioning.Revocation{r}, resign)
	if err != nil {
		return provisioning.Revocation{}, provisioning.Account{}, err
	}
	return stored[0], acct, nil
}

// RevokeMany is Revoke for several users of one account with one re-signing.
// The list handed to resign is the one this store last read or wrote for
// the account with what this transaction changed applied, when the
// account's revocations_gen says nobody changed it since; otherwise it is
// read again (see lists).
func (s *Store) RevokeMany(ctx context.Context, accountPubKey string, rs []provisioning.Revocation, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) ([]provisioning.Revocation, provisioning.Account, error) {
	var (
		acct   provisioning.Account
		stored []provisioning.Revocation
		all    []provisioning.Revocation
		gen    string
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a, held, err := s.lockAccount(ctx, tx, accountPubKey)
		if err != nil {
			return err
		}
		base, cached := s.lists.get(accountPubKey, held)
		var deleted []string
		if stored, deleted, err = recordRevocations(ctx, tx, accountPubKey, rs); err != nil {
			return err
		}
		if cached && len(stored)+len(deleted) <= maxIncremental {
			all = applyChanges(base, stored, deleted)
		} else if all, err = revocations(ctx, tx, accountPubKey); err != nil {
			return err
		}
		acct, _, gen, err = s.resignLocked(ctx, tx, a, all, resign)
		return err
	})
	if err != nil {
		return nil, provisioning.Account{}, err
	}
	s.lists.put(accountPubKey, gen, all)
	return stored, acct, nil
}

// recordRevocations stores rs (keeping each key's earliest time and latest
// expiry), marks their users revoked, retires the claims rs asks to and
// deletes the entries that expired by the latest of rs's times. It returns
// the entries as stored and the keys of the entries it deleted: what it
// changed in the list. The caller holds the account's lock.
func recordRevocations(ctx context.Context, tx pgx.Tx, accountPubKey string, rs []provisioning.Revocation) ([]provisioning.Revocation, []string, error) {
	stored := make([]provisioning.Revocation, len(rs))
	var latest time.Time
	for i, r := range rs {
		if r.AccountPubKey != accountPubKey {
			return nil, nil, fmt.Errorf("provisionerstore: revocation of %s names account %s, not %s", r.UserPubKey, r.AccountPubKey, accountPubKey)
		}
		var exp *time.Time
		if err := tx.QueryRow(ctx, `INSERT INTO nats_revocations (account_id, user_pub_key, revoked_at, expires_at) VALUES ($1, $2, COALESCE($3, now()), $4)
			ON CONFLICT (account_id, user_pub_key) DO UPDATE SET revoked_at = LEAST(nats_revocations.revoked_at, EXCLUDED.revoked_at),
				expires_at = CASE WHEN nats_revocations.expires_at IS NULL OR EXCLUDED.expires_at IS NULL THEN NULL
					ELSE GREATEST(nats_revocations.expires_at, EXCLUDED.expires_at) END
			RETURNING revoked_at, expires_at`, accountPubKey, r.UserPubKey, nullable.Time(r.RevokedAt), nullable.Time(r.ExpiresAt)).Scan(&r.RevokedAt, &exp); err != nil {
			return nil, nil, fmt.Errorf("provisionerstore: record revocation: %w", err)
		}
		r.RevokedAt, r.ExpiresAt = r.RevokedAt.UTC(), time.Time{}
		if exp != nil {
			r.ExpiresAt = exp.UTC()
		}
		if r.RevokedAt.After(latest) {
			latest = r.RevokedAt
		}
		if _, err := tx.Exec(ctx, `UPDATE nats_users SET revoked_at = $3
			WHERE user_pub_key = $2 AND account_id = $1 AND (revoked_at IS NULL OR revoked_at > $3)`,
			accountPubKey, r.UserPubKey, r.RevokedAt); err != nil {
			return nil, nil, fmt.Errorf("provisionerstore: mark user revoked: %w", err)
		}
		if r.RetireSensor {
			if _, err := tx.Exec(ctx, `UPDATE nats_consumer_names c SET retired_at = COALESCE(c.retired_at, now())
				FROM nats_users u
				WHERE u.user_pub_key = $2 AND u.account_id = $1 AND u.kind = 'sensor'
				  AND c.tenant_id = u.tenant_id AND c.sensor_id = u.sensor_id
				  AND NOT EXISTS (SELECT 1 FROM nats_users a WHERE a.kind = 'sensor' AND a.revoked_at IS NULL
				                  AND a.tenant_id = u.tenant_id AND a.sensor_id = u.sensor_id)`,
				accountPubKey, r.UserPubKey); err != nil {
				return nil, nil, fmt.Errorf("provisionerstore: retire consumer claim: %w", err)
			}
		}
		r.RetireSensor = false
		stored[i] = r
	}
	var deleted []string
	if !latest.IsZero() {
		rows, err := tx.Query(ctx, `DELETE FROM nats_revocations WHERE account_id = $1 AND expires_at IS NOT NULL AND expires_at <= $2
			RETURNING user_pub_key`, accountPubKey, latest)
		if err == nil {
			deleted, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return nil, nil, fmt.Errorf("provisionerstore: drop expired revocations: %w", err)
		}
	}
	return stored, deleted, nil
}

// Reissue revokes every user of the account with one AllUsers entry.
func (s *Store) Reissue(ctx context.Context, all provisioning.Revocation, rs []provisioning.Revocation, dropThrough time.Time, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Account, int, error) {
	if all.UserPubKey != provisioning.AllUsers || all.RevokedAt.IsZero() {
		return provisioning.Account{}, 0, fmt.Errorf("provisionerstore: reissue needs an %q entry with a time", provisioning.AllUsers)
	}
	var (
		acct provisioning.Account
		n    int
		list []provisioning.Revocation
		gen  string
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a, _, err := s.lockAccount(ctx, tx, all.AccountPubKey)
		if err != nil {
			return err
		}
		if _, _, err := recordRevocations(ctx, tx, all.AccountPubKey, rs); err != nil {
			return err
		}
		var at time.Time
		if err := tx.QueryRow(ctx, `INSERT INTO nats_revocations (account_id, user_pub_key, revoked_at) VALUES ($1, $2, $3)
			ON CONFLICT (account_id, user_pub_key) DO UPDATE SET revoked_at = GREATEST(nats_revocations.revoked_at, EXCLUDED.revoked_at), expires_at = NULL
			RETURNING revoked_at`, all.AccountPubKey, provisioning.AllUsers, all.RevokedAt).Scan(&at); err != nil {
			return fmt.Errorf("provisionerstore: record tenant-wide revocation: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM nats_revocations WHERE account_id = $1 AND user_pub_key <> $2 AND revoked_at <= $3`,
			all.AccountPubKey, provisioning.AllUsers, dropThrough); err != nil {
			return fmt.Errorf("provisionerstore: drop covered revocations: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE nats_users SET revoked_at = $2
			WHERE account_id = $1 AND revoked_at IS NULL AND created_at < $3`, all.AccountPubKey, at, at.Add(time.Second))
		if err != nil {
			return fmt.Errorf("provisionerstore: revoke the account's users: %w", err)
		}
		n = int(tag.RowsAffected())
		// What is left after the drop is short: read it.
		if list, err = revocations(ctx, tx, all.AccountPubKey); err != nil {
			return err
		}
		acct, _, gen, err = s.resignLocked(ctx, tx, a, list, resign)
		return err
	})
	if err != nil {
		return provisioning.Account{}, 0, err
	}
	s.lists.put(all.AccountPubKey, gen, list)
	return acct, n, nil
}

// User returns the user with the key, revoked or not, without its seed.
func (s *Store) User(ctx context.Context, pubKey string) (provisioning.User, error) {
	var (
		u                  provisioning.User
		kind               string
		tenantID, sensorID *string
		revokedAt          *time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT user_pub_key, account_id, kind, tenant_id, sensor_id, name, jwt, created_at, revoked_at, expiring
		FROM nats_users WHERE user_pub_key = $1`, pubKey).Scan(&u.PubKey, &u.AccountPubKey, &kind, &tenantID, &sensorID, &u.Name, &u.JWT, &u.CreatedAt, &revokedAt, &u.Expiring)
	if err != nil {
		return provisioning.User{}, notFound(err, "user "+pubKey)
	}
	u.Kind, u.TenantID, u.SensorID, u.CreatedAt = provisioning.UserKind(kind), deref(tenantID), deref(sensorID), u.CreatedAt.UTC()
	if revokedAt != nil {
		u.RevokedAt = revokedAt.UTC()
	}
	return u, nil
}

// RetiredClaims lists retired claims whose pair has no active user.
func (s *Store) RetiredClaims(ctx context.Context) ([]provisioning.ConsumerClaim, error) {
	return s.consumerClaims(ctx, "list retired claims", `SELECT c.consumer, c.tenant_id, c.sensor_id FROM nats_consumer_names c
		WHERE c.retired_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM nats_users u WHERE u.kind = 'sensor' AND u.revoked_at IS NULL
			AND u.tenant_id = c.tenant_id AND u.sensor_id = c.sensor_id)
		ORDER BY c.consumer COLLATE "C"`)
}

// ClaimConsumer records that consumer belongs to (tenantID, sensorID)
// unless it already does; another owner gives ErrConsumerNameTaken.
func (s *Store) ClaimConsumer(ctx context.Context, consumer, tenantID, sensorID string) error {
	// One round trip claims the name or reads its owner. A claim committed
	// by a concurrent call after this statement's snapshot is invisible to
	// it (the insert waits, then does nothing, and the read sees no row):
	// the owner is then read again.
	var t, sid string
	err := s.pool.QueryRow(ctx, `
		WITH claimed AS (
			INSERT INTO nats_consumer_names (consumer, tenant_id, sensor_id) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING RETURNING tenant_id, sensor_id
		), unretired AS (
			UPDATE nats_consumer_names SET retired_at = NULL
			WHERE consumer = $1 AND tenant_id = $2 AND sensor_id = $3 AND retired_at IS NOT NULL
		)
		SELECT tenant_id, sensor_id FROM claimed
		UNION ALL
		SELECT tenant_id, sensor_id FROM nats_consumer_names WHERE consumer = $1
		LIMIT 1`, consumer, tenantID, sensorID).Scan(&t, &sid)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.pool.QueryRow(ctx, `SELECT tenant_id, sensor_id FROM nats_consumer_names WHERE consumer = $1`, consumer).Scan(&t, &sid)
	}
	if err != nil {
		return fmt.Errorf("provisionerstore: claim consumer %s: %w", consumer, err)
	}
	if t != tenantID || sid != sensorID {
		return fmt.Errorf("consumer %s: %w", consumer, provisioning.ErrConsumerNameTaken)
	}
	return nil
}

// claimSensorSQL reads the tenant's account, claims the consumer name only
// when the account exists, and reads the name's owner and the sensor's
// active user, in one statement. Every part sees the statement's
// snapshot, as ClaimConsumer's one statement does: a claim committed by a
// concurrent call after it is invisible (the insert waits, then does
// nothing, and no owner is read), and the owner is then read again.
const claimSensorSQL = `
	WITH account AS (
		SELECT ` + accountCols + ` FROM nats_accounts WHERE tenant_id = $2
	), claimed AS (
		INSERT INTO nats_consumer_names (consumer, tenant_id, sensor_id)
		SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM account)
		ON CONFLICT DO NOTHING RETURNING tenant_id, sensor_id
	), unretired AS (
		UPDATE nats_consumer_names SET retired_at = NULL
		WHERE consumer = $1 AND tenant_id = $2 AND sensor_id = $3 AND retired_at IS NOT NULL
		  AND EXISTS (SELECT 1 FROM account)
	), owner AS (
		SELECT tenant_id, sensor_id FROM claimed
		UNION ALL
		SELECT tenant_id, sensor_id FROM nats_consumer_names WHERE consumer = $1
		LIMIT 1
	), active AS (
		SELECT ` + userCols + ` FROM nats_users
		WHERE kind = 'sensor' AND tenant_id = $2 AND sensor_id = $3 AND revoked_at IS NULL
	)
	SELECT a.account_id, a.kind, a.tenant_id, a.name, a.seed_enc, a.jwt, a.created_at, a.updated_at,
	       o.tenant_id, o.sensor_id,
	       u.user_pub_key, u.account_id, u.kind, u.tenant_id, u.sensor_id, u.name, u.seed_enc, u.jwt, u.created_at, u.revoked_at, u.expiring
	FROM account a LEFT JOIN owner o ON true LEFT JOIN active u ON true`

// ClaimSensor reads the tenant's account, claims the consumer name for
// (tenantID, sensorID) and reads the sensor's active user in one round
// trip (see claimSensorSQL), where it took three.
func (s *Store) ClaimSensor(ctx context.Context, consumer, tenantID, sensorID string) (provisioning.SensorClaim, error) {
	var (
		ar         accountRow
		ur         userRow
		owner, sid *string
	)
	dest := append(append(ar.dest(), &owner, &sid), ur.dest()...)
	if err := s.pool.QueryRow(ctx, claimSensorSQL, consumer, tenantID, sensorID).Scan(dest...); err != nil {
		return provisioning.SensorClaim{}, notFound(err, "tenant "+tenantID+" account")
	}
	if owner == nil {
		var t, id string
		if err := s.pool.QueryRow(ctx, `SELECT tenant_id, sensor_id FROM nats_consumer_names WHERE consumer = $1`, consumer).Scan(&t, &id); err != nil {
			return provisioning.SensorClaim{}, fmt.Errorf("provisionerstore: claim consumer %s: %w", consumer, err)
		}
		owner, sid = &t, &id
	}
	if *owner != tenantID || *sid != sensorID {
		return provisioning.SensorClaim{}, fmt.Errorf("consumer %s: %w", consumer, provisioning.ErrConsumerNameTaken)
	}
	a, err := s.openAccount(&ar)
	if err != nil {
		return provisioning.SensorClaim{}, err
	}
	claim := provisioning.SensorClaim{Account: a}
	if ur.pubKey != nil {
		u, err := s.openUser(&ur)
		if err != nil {
			return provisioning.SensorClaim{}, err
		}
		claim.User = &u
	}
	return claim, nil
}

// ConsumerClaims lists every claimed consumer name and its owner.
func (s *Store) ConsumerClaims(ctx context.Context) ([]provisioning.ConsumerClaim, error) {
	return s.consumerClaims(ctx, "list consumer claims", `SELECT consumer, tenant_id, sensor_id FROM nats_consumer_names`)
}

// consumerClaims runs sql, a query of (consumer, tenant_id, sensor_id)
// rows, and collects the claims; what names the list in its errors.
func (s *Store) consumerClaims(ctx context.Context, what, sql string, args ...any) ([]provisioning.ConsumerClaim, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: %s: %w", what, err)
	}
	claims, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (provisioning.ConsumerClaim, error) {
		var c provisioning.ConsumerClaim
		return c, row.Scan(&c.Consumer, &c.TenantID, &c.SensorID)
	})
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: %s: %w", what, err)
	}
	return claims, nil
}

// ActiveUserCounts counts the unrevoked users of each kind.
func (s *Store) ActiveUserCounts(ctx context.Context) (map[provisioning.UserKind]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, count(*) FROM nats_users WHERE revoked_at IS NULL GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: count active users: %w", err)
	}
	out := map[provisioning.UserKind]int{}
	var (
		kind string
		n    int
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &n}, func() error {
		out[provisioning.UserKind(kind)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: count active users: %w", err)
	}
	return out, nil
}

// ActiveUsers lists every unrevoked user without its seed.
func (s *Store) ActiveUsers(ctx context.Context) ([]provisioning.User, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_pub_key, account_id, kind, tenant_id, sensor_id, name, jwt, created_at
		FROM nats_users WHERE revoked_at IS NULL ORDER BY created_at, user_pub_key`)
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: list active users: %w", err)
	}
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (provisioning.User, error) {
		var (
			u                  provisioning.User
			kind               string
			tenantID, sensorID *string
		)
		err := row.Scan(&u.PubKey, &u.AccountPubKey, &kind, &tenantID, &sensorID, &u.Name, &u.JWT, &u.CreatedAt)
		u.Kind, u.TenantID, u.SensorID, u.CreatedAt = provisioning.UserKind(kind), deref(tenantID), deref(sensorID), u.CreatedAt.UTC()
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: list active users: %w", err)
	}
	return users, nil
}

// Resign lets resign replace the account's JWT, under the same row lock as
// Revoke so a concurrent revocation is never signed away.
func (s *Store) Resign(ctx context.Context, pubKey string, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Account, bool, error) {
	var (
		acct    provisioning.Account
		changed bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a, gen, err := s.lockAccount(ctx, tx, pubKey)
		if err != nil {
			return err
		}
		all, cached := s.lists.get(pubKey, gen)
		if !cached {
			if all, err = revocations(ctx, tx, pubKey); err != nil {
				return err
			}
			// Only read: the list is the one of generation gen, whatever
			// becomes of this transaction.
			s.lists.put(pubKey, gen, all)
		}
		acct, changed, _, err = s.resignLocked(ctx, tx, a, all, resign)
		return err
	})
	if err != nil {
		return provisioning.Account{}, false, err
	}
	return acct, changed, nil
}

// lockAccount reads the account and locks its row FOR NO KEY UPDATE: that
// serialises the account's re-signings without blocking inserts of users
// that reference it. It returns the generation of the account's
// revocations too.
func (s *Store) lockAccount(ctx context.Context, tx pgx.Tx, pubKey string) (provisioning.Account, string, error) {
	// The JWT (up to the bound, a quarter MiB) comes back only when it is
	// not the one this store holds for the account (same hash).
	held, heldHash := s.lists.jwt(pubKey)
	var (
		r   accountRow
		tok *string
		gen string
	)
	err := tx.QueryRow(ctx, `SELECT account_id, kind, tenant_id, name, seed_enc, CASE WHEN jwt_hash = $2 THEN NULL ELSE jwt END,
			created_at, updated_at, revocations_gen
		FROM nats_accounts WHERE account_id = $1 FOR NO KEY UPDATE`, pubKey, heldHash).
		Scan(&r.a.PubKey, &r.kind, &r.tenantID, &r.a.Name, &r.sealed, &tok, &r.a.CreatedAt, &r.a.UpdatedAt, &gen)
	if err != nil {
		return provisioning.Account{}, "", notFound(err, "account "+pubKey)
	}
	r.a.JWT = held
	if tok != nil {
		r.a.JWT = *tok
	}
	a, err := s.openAccount(&r)
	return a, gen, err
}

// resignLocked hands a, whose row the caller has locked, and its full
// revocation list all to resign, and stores the JWT it returns as not yet
// pushed; "" keeps the account as it is. It returns the generation of the
// account's revocations after the transaction's changes, "" when it kept
// the account as it is.
func (s *Store) resignLocked(ctx context.Context, tx pgx.Tx, a provisioning.Account, all []provisioning.Revocation, resign func(provisioning.Account, []provisioning.Revocation) (string, error)) (provisioning.Account, bool, string, error) {
	jwt, err := resign(a, all)
	if err != nil {
		return a, false, "", fmt.Errorf("re-sign account %s: %w", a.PubKey, err)
	}
	if jwt == "" {
		return a, false, "", nil
	}
	a.JWT = jwt
	var gen string
	hash := jwtHash(jwt)
	if err := tx.QueryRow(ctx, `UPDATE nats_accounts SET jwt = $2, jwt_hash = $3, updated_at = now(), pushed_at = NULL
		WHERE account_id = $1 RETURNING updated_at, revocations_gen`, a.PubKey, jwt, hash).Scan(&a.UpdatedAt, &gen); err != nil {
		return a, false, "", fmt.Errorf("provisionerstore: store re-signed JWT: %w", err)
	}
	// Held by its hash, which only the row's jwt_hash can select: should
	// the transaction not commit, it is never used.
	s.lists.putJWT(a.PubKey, jwt, hash)
	a.UpdatedAt = a.UpdatedAt.UTC()
	return a, true, gen, nil
}

func revocations(ctx context.Context, q querier, accountPubKey string) ([]provisioning.Revocation, error) {
	rows, err := q.Query(ctx, `SELECT user_pub_key, revoked_at, expires_at FROM nats_revocations WHERE account_id = $1 ORDER BY user_pub_key COLLATE "C"`, accountPubKey)
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: list revocations: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (provisioning.Revocation, error) {
		r := provisioning.Revocation{AccountPubKey: accountPubKey}
		var exp *time.Time
		err := row.Scan(&r.UserPubKey, &r.RevokedAt, &exp)
		r.RevokedAt = r.RevokedAt.UTC()
		if exp != nil {
			r.ExpiresAt = exp.UTC()
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("provisionerstore: list revocations: %w", err)
	}
	return all, nil
}

// accountRow receives accountCols.
type accountRow struct {
	a        provisioning.Account
	kind     string
	tenantID *string
	sealed   []byte
}

func (r *accountRow) dest() []any {
	return []any{&r.a.PubKey, &r.kind, &r.tenantID, &r.a.Name, &r.sealed, &r.a.JWT, &r.a.CreatedAt, &r.a.UpdatedAt}
}

func (s *Store) scanAccount(row pgx.Row) (provisioning.Account, error) {
	return scanOpen(row, (*accountRow).dest, s.openAccount)
}

// scanOpen scans row into a new R through its dest and completes it with
// open.
func scanOpen[R, T any](row pgx.Row, dest func(*R) []any, open func(*R) (T, error)) (T, error) {
	var r R
	if err := row.Scan(dest(&r)...); err != nil {
		var zero T
		return zero, err
	}
	return open(&r)
}

// openAccount completes a scanned account, opening its sealed seed.
func (s *Store) openAccount(r *accountRow) (provisioning.Account, error) {
	a := r.a
	a.Kind, a.TenantID = provisioning.AccountKind(r.kind), deref(r.tenantID)
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	seed, err := s.sealer.Open(r.sealed, []byte(a.PubKey))
	if err != nil {
		return provisioning.Account{}, fmt.Errorf("open seed of account %s (is ACCOUNT_SEED_ENCRYPTION_KEY the one it was stored with?): %w", a.PubKey, err)
	}
	a.Seed = seed
	return a, nil
}

// userRow receives userCols; every column may be NULL (an outer join that
// found no user: pubKey is nil).
type userRow struct {
	pubKey, accountID, kind, tenantID, sensorID, name, jwt *string
	sealed                                                 []byte
	createdAt, revokedAt                                   *time.Time
	expiring                                               *bool
}

func (r *userRow) dest() []any {
	return []any{&r.pubKey, &r.accountID, &r.kind, &r.tenantID, &r.sensorID, &r.name, &r.sealed, &r.jwt, &r.createdAt, &r.revokedAt, &r.expiring}
}

func (s *Store) scanUser(row pgx.Row) (provisioning.User, error) {
	return scanOpen(row, (*userRow).dest, s.openUser)
}

// openUser completes a scanned user, opening its sealed seed.
func (s *Store) openUser(r *userRow) (provisioning.User, error) {
	u := provisioning.User{
		PubKey: deref(r.pubKey), AccountPubKey: deref(r.accountID), Kind: provisioning.UserKind(deref(r.kind)),
		TenantID: deref(r.tenantID), SensorID: deref(r.sensorID), Name: deref(r.name), JWT: deref(r.jwt),
	}
	if r.createdAt != nil {
		u.CreatedAt = r.createdAt.UTC()
	}
	if r.revokedAt != nil {
		u.RevokedAt = r.revokedAt.UTC()
	}
	u.Expiring = r.expiring != nil && *r.expiring
	seed, err := s.sealer.Open(r.sealed, []byte(u.PubKey))
	if err != nil {
		return provisioning.User{}, fmt.Errorf("open seed of user %s (is ACCOUNT_SEED_ENCRYPTION_KEY the one it was stored with?): %w", u.PubKey, err)
	}
	u.Seed = seed
	return u, nil
}

// notFound maps "no rows" to provisioning.ErrNotFound.
func notFound(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", what, provisioning.ErrNotFound)
	default:
		return fmt.Errorf("provisionerstore: %s: %w", what, err)
	}
}

// jwtHash is the hex SHA-256 of a JWT, stored beside it.
func jwtHash(jwt string) string {
	h := sha256.Sum256([]byte(jwt))
	return hex.EncodeToString(h[:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Lock waits until this replica holds the lock called name (a session-level
// advisory lock, pglock), or until ctx ends: replicas take turns at a job
// that must not run twice at once. A replica that dies releases it.
func (s *Store) Lock(ctx context.Context, name string) (unlock func(), err error) {
	return pglock.Lock(ctx, s.pool, name, 250*time.Millisecond)
}
