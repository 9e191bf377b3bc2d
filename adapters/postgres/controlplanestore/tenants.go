package controlplanestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/core/fleet"
)

const tenantColumns = `id, name, nats_account_pub_key, nats_status, created_at`

func scanTenant(row pgx.Row) (fleet.Tenant, error) {
	var t fleet.Tenant
	if err := row.Scan(&t.ID, &t.Name, &t.NATSAccountPubKey, &t.NATSStatus, &t.CreatedAt); err != nil {
		return fleet.Tenant{}, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

// CreateTenant implements fleet.TenantStore: insert unless the id exists.
func (s *Store) CreateTenant(ctx context.Context, t fleet.Tenant) (fleet.Tenant, bool, error) {
	stored, err := scanTenant(s.pool.QueryRow(ctx, `
		INSERT INTO tenants (id, name, nats_account_pub_key, nats_status, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+tenantColumns, t.ID, t.Name, t.NATSAccountPubKey, t.NATSStatus, t.CreatedAt))
	if err == nil {
		return stored, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fleet.Tenant{}, false, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
	}
	stored, err = s.Tenant(ctx, t.ID)
	if errors.Is(err, fleet.ErrNotFound) {
		// The id belonged to a deleted tenant: never reused.
		return fleet.Tenant{}, false, fmt.Errorf("tenant %s was deleted; its id is not reused: %w", t.ID, fleet.ErrConflict)
	}
	return stored, false, err
}

// Tenant implements fleet.TenantStore.
func (s *Store) Tenant(ctx context.Context, id string) (fleet.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1 AND deleted_at IS NULL`, id))
	return t, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

// ListTenants implements fleet.TenantStore.
func (s *Store) ListTenants(ctx context.Context) ([]fleet.Tenant, error) {
	return s.tenants(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE deleted_at IS NULL ORDER BY created_at, id`)
}

// PendingTenants implements fleet.TenantProvisioningStore.
func (s *Store) PendingTenants(ctx context.Context) ([]fleet.Tenant, error) {
	return s.tenants(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE nats_status = 'pending' AND deleted_at IS NULL ORDER BY created_at, id`)
}

func (s *Store) tenants(ctx context.Context, query string) ([]fleet.Tenant, error) {
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Tenant, error) { return scanTenant(r) })
}

// DeleteTenant implements fleet.TenantStore. The tenant's row is locked
// first, so a claim code redeemed or a sensor created meanwhile (both
// check the tenant's row by foreign key, taking a key-share lock) is
// either counted or waits and then finds the tenant deleted.
func (s *Store) DeleteTenant(ctx context.Context, id, by string, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1 AND deleted_at IS NULL FOR UPDATE`, id).Scan(&one)
		if err != nil {
			return classify(err, fleet.ErrNotFound, fleet.ErrConflict)
		}
		var live int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sensors WHERE tenant_id = $1 AND decommissioned_at IS NULL`, id).Scan(&live); err != nil {
			return err
		}
		if live > 0 {
			return &fleet.TenantHasSensorsError{Live: live}
		}
		if _, err := tx.Exec(ctx, `UPDATE claim_codes SET revoked_at = $2 WHERE tenant_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, id, at); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE tenants SET deleted_at = $2, deleted_by = $3 WHERE id = $1`, id, at, by)
		return err
	})
}

// SetTenantAccount implements fleet.TenantProvisioningStore.
func (s *Store) SetTenantAccount(ctx context.Context, tenantID, accountPubKey string) error {
	return changeOne(ctx, s.pool, fleet.ErrNotFound, `
		UPDATE tenants SET nats_account_pub_key = $2, nats_status = 'provisioned' WHERE id = $1`,
		tenantID, accountPubKey)
}
