package provisioning_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

// The use-case tests of this package run the Service on the in-memory
// store (adapters/memory/provisionmem), which passes the same contract
// suite (storetest.Run) as the PostgreSQL store, and on the fakes of
// provisioningtest for the signer, the pusher and the consumer creator.

type fixture struct {
	ctx       context.Context
	store     *provisionmem.Store
	svc       *provisioning.Service
	signer    *provisioningtest.Signer
	pusher    *provisioningtest.Pusher
	consumers *provisioningtest.Consumers
	now       time.Time
	op        provisioning.Operator
}

func newFixture(t *testing.T, configure ...func(*provisioning.Config)) *fixture {
	t.Helper()
	store := memtest.Store(t, provisionmem.New, provisionmem.Config{})
	f := &fixture{
		ctx: context.Background(), store: store, signer: &provisioningtest.Signer{}, pusher: &provisioningtest.Pusher{},
		consumers: &provisioningtest.Consumers{}, now: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC),
	}
	// The operator with its SYS and CONTROL accounts, as init-operator leaves it.
	var accts [2]provisioning.Account
	for i, k := range []provisioning.AccountKind{provisioning.KindSystem, provisioning.KindControl} {
		pub, seed, _ := f.signer.NewAccountKey()
		name := map[provisioning.AccountKind]string{provisioning.KindSystem: "SYS", provisioning.KindControl: "CONTROL"}[k]
		jwt, _ := f.signer.SignAccount(provisioning.AccountSpec{PubKey: pub, Name: name, Kind: k})
		accts[i] = provisioning.Account{PubKey: pub, Kind: k, Name: name, Seed: seed, JWT: jwt}
	}
	f.op = provisioning.Operator{PubKey: "O-test", Name: "rxc", JWT: "operator jwt", SystemAccount: accts[0].PubKey, ControlAccount: accts[1].PubKey}
	if err := store.InitOperator(f.ctx, f.op, accts[0], accts[1]); err != nil {
		t.Fatal(err)
	}
	f.svc = contracttest.Configured(t, provisioning.New, f.config(), configure...)
	return f
}

// config is the Service's configuration on the fixture's store, fakes and
// clock, before a test's changes.
func (f *fixture) config() provisioning.Config {
	return provisioning.Config{
		Store: f.store, Signer: f.signer, Claims: f.signer, Pusher: f.pusher, Consumers: f.consumers,
		Stream: topology.DefaultStream, Clock: func() time.Time { return f.now },
	}
}

// another is a second Service on the fixture's store, fakes and clock,
// with changes: another replica, or the provisioner restarted with other
// settings.
func (f *fixture) another(t *testing.T, changes ...func(*provisioning.Config)) *provisioning.Service {
	t.Helper()
	return contracttest.Configured(t, provisioning.New, f.config(), changes...)
}

func (f *fixture) tenant(t *testing.T, id string) provisioning.Account {
	t.Helper()
	a, _, err := f.svc.EnsureTenantAccount(f.ctx, id, "Tenant "+id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) sensorUser(t *testing.T, tenant, sensor string) provisioning.SensorUser {
	t.Helper()
	u, _, err := f.svc.EnsureSensorUser(f.ctx, tenant, sensor)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// revokedIn is whether the account's current JWT revokes user.
func (f *fixture) revokedIn(t *testing.T, accountPubKey, user string) bool {
	t.Helper()
	jwt, err := f.svc.AccountJWT(f.ctx, accountPubKey)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := provisioningtest.AccountClaims(jwt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range spec.Revocations {
		if r.UserPubKey == user {
			return true
		}
	}
	return false
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}
