package fleet_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
)

func TestCreateTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first, created, err := f.svc.CreateTenant(f.ctx, "acme", "Acme Corp")
	if err != nil || !created {
		t.Fatalf("CreateTenant = %v, %v; want created", created, err)
	}
	want := fleet.Tenant{ID: "acme", Name: "Acme Corp", NATSStatus: fleet.NATSPending, CreatedAt: f.clock.Now()}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("created tenant (-want +got):\n%s", diff)
	}
	tests := []struct {
		name        string
		id, tName   string
		wantCreated bool
		wantErr     error
	}{
		{name: "same id and name returns existing", id: "acme", tName: "Acme Corp"},
		{name: "same id, other name", id: "acme", tName: "Other", wantErr: fleet.ErrConflict},
		{name: "invalid id", id: "acme.corp", tName: "x", wantErr: ids.ErrInvalidID},
		{name: "id starting with dash", id: "-acme", tName: "x", wantErr: fleet.ErrInvalidInput},
		{name: "control character in name", id: "ok", tName: "a\x00b", wantErr: fleet.ErrInvalidInput},
		{name: "empty name defaults to id", id: "beta", wantCreated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, created, err := f.svc.CreateTenant(f.ctx, tt.id, tt.tName)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("CreateTenant(%q, %q) error = %v, want %v", tt.id, tt.tName, err, tt.wantErr)
				}
				return
			}
			if err != nil || created != tt.wantCreated {
				t.Fatalf("CreateTenant(%q, %q) = created %v, %v; want created %v", tt.id, tt.tName, created, err, tt.wantCreated)
			}
			if got.ID != tt.id || got.Name == "" {
				t.Errorf("got %+v", got)
			}
		})
	}
	list, err := f.svc.ListTenants(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range list {
		names = append(names, tn.ID+"="+tn.Name)
	}
	if diff := cmp.Diff([]string{"acme=Acme Corp", "beta=beta"}, names); diff != "" {
		t.Errorf("ListTenants (-want +got):\n%s", diff)
	}
	if _, err := f.svc.Tenant(f.ctx, "nope"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Tenant(nope) error = %v, want ErrNotFound", err)
	}
}

func TestCreateTenantConcurrentLeavesOneRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	created, errs := race(20, nil, func() (bool, error) {
		_, c, err := f.svc.CreateTenant(f.ctx, "race", "Race")
		return c, err
	})
	if len(errs) > 0 || created != 1 {
		t.Fatalf("created %d times with errors %v; want exactly once, no errors", created, errs)
	}
	if list, err := f.svc.ListTenants(f.ctx); err != nil || len(list) != 1 {
		t.Errorf("tenants %v, %v; want the one", list, err)
	}
}

func TestReconcileProvisionsPendingTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"t1", "t2"} {
		if _, _, err := f.svc.CreateTenant(f.ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	n, err := f.svc.ReconcileTenants(f.ctx)
	if err != nil || n != 2 {
		t.Fatalf("ReconcileTenants = %d, %v; want 2, nil", n, err)
	}
	for _, id := range []string{"t1", "t2"} {
		tn, _ := f.svc.Tenant(f.ctx, id)
		if tn.NATSStatus != fleet.NATSProvisioned || tn.NATSAccountPubKey != "A-"+id {
			t.Errorf("tenant %s = %+v, want provisioned with A-%s", id, tn, id)
		}
	}
	n, err = f.svc.ReconcileTenants(f.ctx)
	if err != nil || n != 0 {
		t.Fatalf("second ReconcileTenants = %d, %v; want 0, nil", n, err)
	}
	if diff := cmp.Diff([]string{"EnsureAccount t1", "EnsureAccount t2"}, f.prov.Calls()); diff != "" {
		t.Errorf("provisioner calls (-want +got):\n%s", diff)
	}
}

func TestReconcileDisabledMakesNoCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *fleet.Config) { c.ProvisioningEnabled = false })
	if _, _, err := f.svc.CreateTenant(f.ctx, "t1", "t1"); err != nil {
		t.Fatal(err)
	}
	n, err := f.svc.ReconcileTenants(f.ctx)
	if !errors.Is(err, fleet.ErrProvisionerDisabled) || n != 0 {
		t.Fatalf("ReconcileTenants = %d, %v; want 0, ErrProvisionerDisabled", n, err)
	}
	if calls := f.prov.Calls(); len(calls) != 0 || f.locker.Attempts() != 0 {
		t.Errorf("provisioner calls %v, lock attempts %d; want none", calls, f.locker.Attempts())
	}
	tn, _ := f.svc.Tenant(f.ctx, "t1")
	if tn.NATSStatus != fleet.NATSPending {
		t.Errorf("tenant status %s, want pending", tn.NATSStatus)
	}
}

func TestReconcileSkipsWhileAnotherReplicaHoldsTheLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, _, err := f.svc.CreateTenant(f.ctx, "t1", "t1"); err != nil {
		t.Fatal(err)
	}
	unlock, ok, err := f.store.TryLock(f.ctx, fleet.TenantReconcileLock)
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	n, err := f.svc.ReconcileTenants(f.ctx)
	if err != nil || n != 0 || len(f.prov.Calls()) != 0 {
		t.Fatalf("ReconcileTenants while locked = %d, %v, calls %v; want a skipped cycle", n, err, f.prov.Calls())
	}
	unlock()
	if n, err := f.svc.ReconcileTenants(f.ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileTenants after unlock = %d, %v; want 1", n, err)
	}
}

func TestReconcileStopsAtProvisionerError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.prov.AccountErr = errors.Join(fleet.ErrProvisionerUnavailable, errors.New("circuit open"))
	for _, id := range []string{"t1", "t2"} {
		if _, _, err := f.svc.CreateTenant(f.ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	n, err := f.svc.ReconcileTenants(f.ctx)
	if !errors.Is(err, fleet.ErrProvisionerUnavailable) || n != 0 {
		t.Fatalf("ReconcileTenants = %d, %v; want 0, ErrProvisionerUnavailable", n, err)
	}
	if calls := f.prov.Calls(); len(calls) != 1 {
		t.Errorf("provisioner calls %v; want the cycle to stop after the first", calls)
	}
	// The lock was released: the next cycle runs and succeeds.
	f.prov.AccountErr = nil
	if n, err := f.svc.ReconcileTenants(f.ctx); err != nil || n != 2 {
		t.Fatalf("retry = %d, %v; want 2", n, err)
	}
}
