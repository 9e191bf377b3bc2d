package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// TenantStore persists tenants.
type TenantStore interface {
	// CreateTenant inserts t unless a tenant with its id exists, and returns
	// the stored tenant and whether it inserted. It holds under concurrency.
	CreateTenant(ctx context.Context, t Tenant) (stored Tenant, created bool, err error)
	Tenant(ctx context.Context, id string) (Tenant, error)
	ListTenants(ctx context.Context) ([]Tenant, error)
	// DeleteTenant, in one transaction, refuses a tenant with sensors not
	// decommissioned (a *TenantHasSensorsError), else marks it deleted
	// (by, at) and revokes its unused claim codes. Tenant, ListTenants and
	// PendingTenants leave a deleted tenant out (ErrNotFound); CreateTenant
	// of its id is ErrConflict; DeleteTenant of it ErrNotFound.
	DeleteTenant(ctx context.Context, id, by string, at time.Time) error
}

// ErrTenantHasSensors refuses to delete a tenant with live sensors.
var ErrTenantHasSensors = errors.New("tenant has live sensors")

// TenantHasSensorsError says how many sensors stand in the way.
type TenantHasSensorsError struct{ Live int }

func (e *TenantHasSensorsError) Error() string {
	return fmt.Sprintf("the tenant has %d sensors that are not decommissioned; decommission them first", e.Live)
}

// Unwrap makes it ErrTenantHasSensors.
func (e *TenantHasSensorsError) Unwrap() error { return ErrTenantHasSensors }

// DeleteTenant deletes a tenant without live sensors: every sensor must be
// decommissioned first (ErrTenantHasSensors otherwise, nothing changed).
// The tenant and its history stay on record, hidden.
func (s *Tenants) DeleteTenant(ctx context.Context, id, by string) error {
	if err := validateID("tenant id", id); err != nil {
		return err
	}
	if err := s.store.DeleteTenant(ctx, id, by, s.now()); err != nil {
		return fmt.Errorf("delete tenant %s: %w", id, err)
	}
	s.log.InfoContext(ctx, "tenant deleted", logkey.Tenant, id, "by", by)
	return nil
}

// TenantProvisioningStore is what tenant reconciliation reads and writes.
type TenantProvisioningStore interface {
	PendingTenants(ctx context.Context) ([]Tenant, error)
	// SetTenantAccount records the tenant's NATS account and marks it provisioned.
	SetTenantAccount(ctx context.Context, tenantID, accountPubKey string) error
}

// Provisioner is the NATS credential authority (the provisioner service).
// Errors wrap ErrProvisionerUnavailable or ErrProvisionerDisabled.
type Provisioner interface {
	EnsureAccount(ctx context.Context, tenantID, name string) (accountPubKey string, err error)
	EnsureSensorUser(ctx context.Context, tenantID, sensorID string) (NATSCredentials, error)
	RevokeUser(ctx context.Context, accountPubKey, userPubKey string) error
}

// Locker is a cluster-wide mutual exclusion. TryLock returns ok=false
// without waiting when another holder has the lock.
type Locker interface {
	TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error)
}

const maxTenantName = 200

// CreateTenant creates a tenant with NATS status pending, or returns the
// existing one (created=false) when the same id and name exist. The same
// id with another name is ErrConflict. An empty name defaults to the id.
func (s *Tenants) CreateTenant(ctx context.Context, id, name string) (Tenant, bool, error) {
	if err := validateID("tenant id", id); err != nil {
		return Tenant{}, false, err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = id
	}
	if err := validateLabel("tenant name", name, maxTenantName); err != nil {
		return Tenant{}, false, err
	}
	t, created, err := s.store.CreateTenant(ctx, Tenant{ID: id, Name: name, NATSStatus: NATSPending, CreatedAt: s.now()})
	if err != nil {
		return Tenant{}, false, fmt.Errorf("create tenant %s: %w", id, err)
	}
	if !created && t.Name != name {
		return Tenant{}, false, fmt.Errorf("%w: tenant %s exists with another name", ErrConflict, id)
	}
	if created {
		s.log.InfoContext(ctx, "tenant created", logkey.Tenant, id)
	}
	return t, created, nil
}

// Tenant returns one tenant.
func (s *Tenants) Tenant(ctx context.Context, id string) (Tenant, error) {
	return readValid(ctx, "tenant id", id, s.store.Tenant)
}

// TenantReader reads one tenant (TenantStore's Tenant).
type TenantReader interface {
	Tenant(ctx context.Context, id string) (Tenant, error)
}

// ListTenants returns every tenant, oldest first.
func (s *Tenants) ListTenants(ctx context.Context) ([]Tenant, error) {
	return s.store.ListTenants(ctx)
}

// ReconcileTenants gives every pending tenant its NATS account. Only one
// replica runs a cycle at a time; the others skip theirs (0, nil). The
// first provisioner error ends the cycle and is returned with the count done
// so far; the next cycle retries. With provisioning disabled nothing is
// called and ErrProvisionerDisabled is returned.
func (s *Tenants) ReconcileTenants(ctx context.Context) (int, error) {
	if !s.provisioning {
		return 0, ErrProvisionerDisabled
	}
	unlock, ok, err := s.locker.TryLock(ctx, TenantReconcileLock)
	if err != nil {
		return 0, fmt.Errorf("reconcile tenants: lock: %w", err)
	}
	if !ok {
		return 0, nil
	}
	defer unlock()
	pending, err := s.store.PendingTenants(ctx)
	if err != nil {
		return 0, fmt.Errorf("reconcile tenants: %w", err)
	}
	done := 0
	for _, t := range pending {
		pub, err := s.provisioner.EnsureAccount(ctx, t.ID, t.Name)
		if err != nil {
			return done, fmt.Errorf("reconcile tenant %s: %w", t.ID, err)
		}
		if pub == "" {
			return done, fmt.Errorf("reconcile tenant %s: %w: empty account key", t.ID, ErrProvisionerUnavailable)
		}
		if err := s.store.SetTenantAccount(ctx, t.ID, pub); err != nil {
			return done, fmt.Errorf("reconcile tenant %s: %w", t.ID, err)
		}
		done++
		s.log.InfoContext(ctx, "tenant provisioned", logkey.Tenant, t.ID, "account", pub)
	}
	return done, nil
}

// errIsNotFound reports whether err means "no such record".
func errIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
