package controlplanestore

import (
	"context"
	"errors"

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
	return stored, false, err
}

// Tenant implements fleet.TenantStore.
func (s *Store) Tenant(ctx context.Context, id string) (fleet.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, id))
	return t, classify(err, fleet.ErrNotFound, fleet.ErrConflict)
}

// ListTenants implements fleet.TenantStore.
func (s *Store) ListTenants(ctx context.Context) ([]fleet.Tenant, error) {
	return s.tenants(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY created_at, id`)
}

// PendingTenants implements fleet.TenantProvisioningStore.
func (s *Store) PendingTenants(ctx context.Context) ([]fleet.Tenant, error) {
	return s.tenants(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE nats_status = 'pending' ORDER BY created_at, id`)
}

func (s *Store) tenants(ctx context.Context, query string) ([]fleet.Tenant, error) {
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleet.Tenant, error) { return scanTenant(r) })
}

// SetTenantAccount implements fleet.TenantProvisioningStore.
func (s *Store) SetTenantAccount(ctx context.Context, tenantID, accountPubKey string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE tenants SET nats_account_pub_key = $2, nats_status = 'provisioned' WHERE id = $1`,
		tenantID, accountPubKey)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fleet.ErrNotFound
	}
	return nil
}
