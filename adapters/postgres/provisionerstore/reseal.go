package provisionerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/seal"
)

// ResealResult counts what Reseal did.
type ResealResult struct {
	// Accounts and Users were re-encrypted under the new key.
	Accounts, Users int
	// AlreadyNew records already opened with the new key (a repeated run,
	// or a row a replica with the new key wrote) and were left alone.
	AlreadyNew int
}

// Reseal re-encrypts every account and user seed from old to next in one
// transaction: either every record opens with next afterwards, or nothing
// changed. The tables are locked against writers for its duration (stop
// the provisioner replicas first: a replica still on the old key would
// keep writing old-key records after the commit, which a later run
// reseals). A record neither key opens stops it with the record named.
func Reseal(ctx context.Context, pool interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}, old, next *seal.Sealer) (ResealResult, error) {
	var res ResealResult
	if old == nil || next == nil {
		return res, errors.New("reseal: both keys are required")
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return res, fmt.Errorf("reseal: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE nats_accounts, nats_users IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return res, fmt.Errorf("reseal: lock: %w", err)
	}
	for _, table := range []struct {
		name, key string
		count     *int
	}{{"nats_accounts", "account_id", &res.Accounts}, {"nats_users", "user_pub_key", &res.Users}} {
		rows, err := tx.Query(ctx, `SELECT `+table.key+`, seed_enc FROM `+table.name+` ORDER BY `+table.key)
		if err != nil {
			return res, fmt.Errorf("reseal: read %s: %w", table.name, err)
		}
		type record struct {
			id     string
			sealed []byte
		}
		var records []record
		for rows.Next() {
			var r record
			if err := rows.Scan(&r.id, &r.sealed); err != nil {
				rows.Close()
				return res, fmt.Errorf("reseal: read %s: %w", table.name, err)
			}
			records = append(records, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("reseal: read %s: %w", table.name, err)
		}
		for _, r := range records {
			aad := []byte(r.id)
			plain, err := old.Open(r.sealed, aad)
			if err != nil {
				if _, nerr := next.Open(r.sealed, aad); nerr == nil {
					res.AlreadyNew++
					continue
				}
				return res, fmt.Errorf("reseal: the seed of %s %s opens with neither key (nothing was changed)", table.name, r.id)
			}
			sealed, err := next.Seal(plain, aad)
			clear(plain)
			if err != nil {
				return res, fmt.Errorf("reseal: %w", err)
			}
			if _, err := tx.Exec(ctx, `UPDATE `+table.name+` SET seed_enc = $1 WHERE `+table.key+` = $2`, sealed, r.id); err != nil {
				return res, fmt.Errorf("reseal: update %s %s: %w", table.name, r.id, err)
			}
			*table.count++
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("reseal: commit: %w", err)
	}
	return res, nil
}
