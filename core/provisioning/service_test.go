package provisioning_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

func TestEnsureTenantAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, created, err := f.svc.EnsureTenantAccount(f.ctx, "acme", "Acme Corp")
	if err != nil || !created || a.Kind != provisioning.KindTenant || a.TenantID != "acme" || a.Name != "Acme Corp" {
		t.Fatalf("EnsureTenantAccount = %+v, %v, %v", a, created, err)
	}
	spec, err := provisioningtest.AccountClaims(a.JWT)
	if err != nil || spec.Name != "acme" || spec.Kind != provisioning.KindTenant || spec.PubKey != a.PubKey {
		t.Errorf("account JWT says %+v, %v; want named after the tenant id", spec, err)
	}
	if jwt, err := f.svc.AccountJWT(f.ctx, a.PubKey); err != nil || jwt != a.JWT {
		t.Errorf("resolver answer %q, %v", jwt, err)
	}
	again, created, err := f.svc.EnsureTenantAccount(f.ctx, "acme", "Other name")
	if err != nil || created || again.PubKey != a.PubKey {
		t.Errorf("second EnsureTenantAccount = %s, created %v, %v; want the same account", again.PubKey, created, err)
	}
	for name, tc := range map[string]struct {
		id, name string
		want     error
	}{
		"subject wildcard in id": {"acme.*", "x", nil},
		"empty id":               {"", "x", nil},
		"control char in name":   {"ok", "a\x00b", provisioning.ErrInvalidName},
		"name too long":          {"ok", strings.Repeat("x", 257), provisioning.ErrInvalidName},
	} {
		_, _, err := f.svc.EnsureTenantAccount(f.ctx, tc.id, tc.name)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want a refusal (%v)", name, err, tc.want)
		}
	}
	if _, err := f.svc.AccountJWT(f.ctx, "A-unknown"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("resolver on an unknown key: %v", err)
	}
}

func TestEnsureTenantAccountConcurrentlyLeavesOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		keys = map[string]bool{}
		news int
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, created, err := f.svc.EnsureTenantAccount(f.ctx, "race", "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			keys[a.PubKey] = true
			if created {
				news++
			}
		}()
	}
	wg.Wait()
	if len(keys) != 1 || news != 1 {
		t.Errorf("%d distinct accounts, %d created; want one", len(keys), news)
	}
}

func TestEnsureSensorUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	_, _, err := f.svc.EnsureSensorUser(f.ctx, "nobody", "s1")
	wantErr(t, "tenant without account", err, provisioning.ErrNoAccount)

	su, created, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || !created {
		t.Fatalf("EnsureSensorUser = %v, %v", created, err)
	}
	user, issuer, perms, err := provisioningtest.UserClaims(su.User.JWT)
	if err != nil || user != su.User.PubKey || issuer != acme.PubKey {
		t.Fatalf("user JWT of %s signed by %s (%v); want the sensor's key signed by acme's account", user, issuer, err)
	}
	want := topology.Sensor{Stream: topology.DefaultStream, TenantID: "acme", SensorID: "s1"}
	if ok, _ := f.signer.HasPermissions(su.User.JWT, want.Permissions()); !ok {
		t.Errorf("permissions %+v, want the topology's for acme/s1", perms)
	}
	if su.Sensor != want || !strings.Contains(string(su.Creds), su.User.JWT) {
		t.Errorf("sensor %+v, creds %q", su.Sensor, su.Creds)
	}
	if names, _ := f.consumers.ConsumerNames(f.ctx); !slices.Equal(names, []string{"cmd-acme-s1"}) {
		t.Errorf("consumers %v, want cmd-acme-s1", names)
	}
	// Asked again (a renewal): the same user, not a new one.
	again, created, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || created || again.User.PubKey != su.User.PubKey {
		t.Errorf("second EnsureSensorUser = %s, created %v, %v; want the same user", again.User.PubKey, created, err)
	}
	// The new user's creds (formatted when it was minted) are the stored
	// user's, as its later hand-outs format them.
	if want, err := f.signer.Creds(again.User.JWT, again.User.Seed); err != nil || !bytes.Equal(su.Creds, want) || !bytes.Equal(again.Creds, want) {
		t.Errorf("creds of the new user %q, handed out again %q; want the stored user's %q (%v)", su.Creds, again.Creds, want, err)
	}
	// Another tenant's sensor of the same name is another user in another account.
	beta := f.tenant(t, "beta")
	other := f.sensorUser(t, "beta", "s1")
	if other.User.PubKey == su.User.PubKey || other.User.AccountPubKey != beta.PubKey {
		t.Errorf("beta/s1 = %+v; want its own user in beta's account", other.User)
	}
	for name, tc := range map[string][2]string{"bad tenant": {"ac.me", "s1"}, "bad sensor": {"acme", "s>"}} {
		if _, _, err := f.svc.EnsureSensorUser(f.ctx, tc[0], tc[1]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Consumer names are cmd-<tenant>-<sensor>, and '-' is allowed in ids:
// acme/eu-s1 and acme-eu/s1 spell the same name. The first pair keeps it;
// the second gets nothing, not even a user.
func TestEnsureSensorUserConsumerNameCollision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	f.tenant(t, "acme-eu")
	first := f.sensorUser(t, "acme", "eu-s1")
	_, _, err := f.svc.EnsureSensorUser(f.ctx, "acme-eu", "s1")
	wantErr(t, "the colliding pair", err, provisioning.ErrConsumerNameTaken)
	if _, err := f.store.ActiveSensorUser(f.ctx, "acme-eu", "s1"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("the refused pair got a user: %v", err)
	}
	// The owner keeps working.
	if again := f.sensorUser(t, "acme", "eu-s1"); again.User.PubKey != first.User.PubKey {
		t.Errorf("the owner's user changed")
	}
}

func TestEnsureSensorUserWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	f.consumers.Fail(errors.New("connection refused"))
	_, _, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	wantErr(t, "consumer creation failing", err, provisioning.ErrNATSUnavailable)
	kept, err := f.store.ActiveSensorUser(f.ctx, "acme", "s1")
	if err != nil {
		t.Fatalf("the user was not kept: %v", err)
	}
	f.consumers.Fail(fmt.Errorf("stream: %w", provisioning.ErrConsumerLimit))
	_, _, err = f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	wantErr(t, "consumer limit", err, provisioning.ErrConsumerLimit)
	// NATS back: the retry finishes with the same user.
	f.consumers.Fail(nil)
	su, _, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || su.User.PubKey != kept.PubKey {
		t.Errorf("retry = %s, %v; want the kept user %s", su.User.PubKey, err, kept.PubKey)
	}
	// A consumer lost with its stream is repaired.
	f.consumers.Drop("cmd-acme-s1")
	r, err := f.svc.RepairConsumers(f.ctx, 2)
	if err != nil || r.Missing != 1 || r.Repaired != 1 || r.Err != nil {
		t.Errorf("RepairConsumers = %+v, %v; want 1 missing, 1 repaired", r, err)
	}
}

func TestSensorUserLifetime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *provisioning.Config) { c.SensorUserTTL = time.Hour })
	f.tenant(t, "acme")
	first := f.sensorUser(t, "acme", "s1")
	exp, _ := f.signer.UserExpiry(first.User.JWT)
	if !exp.Equal(f.now.Add(time.Hour)) {
		t.Fatalf("expiry %s, want an hour from now", exp)
	}
	// Within a minute: the same credentials (a retried request).
	f.now = f.now.Add(30 * time.Second)
	if again := f.sensorUser(t, "acme", "s1"); again.User.JWT != first.User.JWT {
		t.Errorf("JWT signed again within a minute")
	}
	// Later: the same key, signed again to expire an hour from now.
	f.now = f.now.Add(10 * time.Minute)
	later := f.sensorUser(t, "acme", "s1")
	exp, _ = f.signer.UserExpiry(later.User.JWT)
	if later.User.PubKey != first.User.PubKey || later.User.JWT == first.User.JWT || !exp.Equal(f.now.Add(time.Hour)) {
		t.Errorf("renewed user %s expiring %s; want the same key, a new JWT expiring %s", later.User.PubKey, exp, f.now.Add(time.Hour))
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	beta := f.tenant(t, "beta")
	su := f.sensorUser(t, "acme", "s1")
	betaUser := f.sensorUser(t, "beta", "s1")

	rev, acct, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey)
	if err != nil || rev.UserPubKey != su.User.PubKey || acct.PubKey != acme.PubKey {
		t.Fatalf("Revoke = %+v, %+v, %v", rev, acct, err)
	}
	if !f.revokedIn(t, acme.PubKey, su.User.PubKey) {
		t.Error("the account JWT does not revoke the user")
	}
	if pushed := f.pusher.Pushed(acme.PubKey); len(pushed) != 1 || pushed[0] != acct.JWT {
		t.Errorf("pushed %d JWTs, want the new account JWT once", len(pushed))
	}
	// A repeat keeps the first time and pushes again.
	f.now = f.now.Add(time.Hour)
	again, _, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey)
	if err != nil || !again.RevokedAt.Equal(rev.RevokedAt) {
		t.Errorf("repeat = %+v, %v; want the first time %s", again, err, rev.RevokedAt)
	}
	// The revoked sensor gets a new user next time.
	fresh := f.sensorUser(t, "acme", "s1")
	if fresh.User.PubKey == su.User.PubKey {
		t.Error("a revoked user was handed out again")
	}

	// Naming beta's user in acme's account revokes nothing of beta's.
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, betaUser.User.PubKey); err != nil {
		t.Fatal(err)
	}
	if u, err := f.store.ActiveSensorUser(f.ctx, "beta", "s1"); err != nil || u.PubKey != betaUser.User.PubKey {
		t.Errorf("beta's user after a revocation in acme's account: %+v, %v; want still active", u, err)
	}
	if f.revokedIn(t, beta.PubKey, betaUser.User.PubKey) {
		t.Error("beta's account JWT revokes its user after a revocation in acme's account")
	}
	_, _, err = f.svc.Revoke(f.ctx, "A-unknown", su.User.PubKey)
	wantErr(t, "unknown account", err, provisioning.ErrNotFound)
}

// A revocation while NATS is unreachable is stored and signed; the push
// follows once NATS is back.
func TestRevokeWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	su := f.sensorUser(t, "acme", "s1")
	f.pusher.Fail(errors.New("no servers available"))
	_, acct, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey)
	wantErr(t, "push failing", err, provisioning.ErrNATSUnavailable)
	if !f.revokedIn(t, acme.PubKey, su.User.PubKey) {
		t.Fatal("the revocation was not kept")
	}
	f.pusher.Fail(nil)
	n, err := f.svc.PushPending(f.ctx)
	if err != nil || n < 1 {
		t.Fatalf("PushPending = %d, %v", n, err)
	}
	if pushed := f.pusher.Pushed(acme.PubKey); len(pushed) == 0 || pushed[len(pushed)-1] != acct.JWT {
		t.Errorf("the revoking JWT was not pushed: %d pushes", len(pushed))
	}
	if n, _ := f.svc.PushPending(f.ctx); n != 0 {
		t.Errorf("second PushPending pushed %d, want 0", n)
	}
}

// A user whose JWT grants other permissions than the topology gives it now
// (an upgrade changed them) is revoked and replaced, at start-up for
// everyone and on the next request for the sensor asking.
func TestOutdatedUsersAreReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	su := f.sensorUser(t, "acme", "s1")
	other := f.sensorUser(t, "acme", "s2")
	wide := topology.Permissions{Publish: []string{"rxc.>"}, Subscribe: []string{">"}}
	if err := f.store.ReplaceUserJWT(f.ctx, su.User.PubKey, f.signer.UserJWTWith(su.User.PubKey, acme.PubKey, wide)); err != nil {
		t.Fatal(err)
	}
	revoked, err := f.svc.RevokeOutdatedUsers(f.ctx)
	if err != nil || len(revoked) != 1 || revoked[0].PubKey != su.User.PubKey {
		t.Fatalf("RevokeOutdatedUsers = %+v, %v; want only the outdated user", revoked, err)
	}
	if !f.revokedIn(t, acme.PubKey, su.User.PubKey) || f.revokedIn(t, acme.PubKey, other.User.PubKey) {
		t.Error("the account JWT must revoke the outdated user and only it")
	}
	fresh := f.sensorUser(t, "acme", "s1")
	if fresh.User.PubKey == su.User.PubKey {
		t.Error("the outdated user was handed out again")
	}

	// The same on request, without the start-up pass.
	if err := f.store.ReplaceUserJWT(f.ctx, other.User.PubKey, f.signer.UserJWTWith(other.User.PubKey, acme.PubKey, wide)); err != nil {
		t.Fatal(err)
	}
	replaced, created, err := f.svc.EnsureSensorUser(f.ctx, "acme", "s2")
	if err != nil || !created || replaced.User.PubKey == other.User.PubKey {
		t.Errorf("EnsureSensorUser of an outdated user = %s, created %v, %v; want a new user", replaced.User.PubKey, created, err)
	}
	if !f.revokedIn(t, acme.PubKey, other.User.PubKey) {
		t.Error("the outdated user is not revoked")
	}
}

func TestRefreshAccounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	su := f.sensorUser(t, "acme", "s1")
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey); err != nil {
		t.Fatal(err)
	}
	// Everything current: nothing re-signed.
	if got, err := f.svc.RefreshAccounts(f.ctx); err != nil || len(got) != 0 {
		t.Fatalf("RefreshAccounts on current accounts = %v, %v", got, err)
	}
	// An account signed under an older layout (here: under another name)
	// is re-signed, keeping its revocations.
	stale, _ := f.signer.SignAccount(provisioning.AccountSpec{PubKey: acme.PubKey, Name: "old", Kind: provisioning.KindTenant, TenantID: "acme"})
	if _, _, err := f.store.Resign(f.ctx, acme.PubKey, func(provisioning.Account, []provisioning.Revocation) (string, error) { return stale, nil }); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.RefreshAccounts(f.ctx)
	if err != nil || !slices.Equal(got, []string{acme.PubKey}) {
		t.Fatalf("RefreshAccounts = %v, %v; want acme's account", got, err)
	}
	jwt, _ := f.svc.AccountJWT(f.ctx, acme.PubKey)
	spec, _ := provisioningtest.AccountClaims(jwt)
	if spec.Name != "acme" || !f.revokedIn(t, acme.PubKey, su.User.PubKey) {
		t.Errorf("re-signed account %+v; want its name back and the revocation kept", spec)
	}
}

func TestBackendUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b, created, err := f.svc.EnsureBackendUser(f.ctx, "")
	if err != nil || !created || b.User.Name != "backend" || b.User.AccountPubKey != f.op.ControlAccount {
		t.Fatalf("EnsureBackendUser = %+v, %v, %v", b.User, created, err)
	}
	if ok, _ := f.signer.HasPermissions(b.User.JWT, topology.BackendPermissions()); !ok {
		t.Error("backend user without the backend permissions")
	}
	if again, created, _ := f.svc.EnsureBackendUser(f.ctx, "backend"); created || again.User.PubKey != b.User.PubKey {
		t.Error("second EnsureBackendUser made another user")
	}
	if _, _, err := f.svc.EnsureBackendUser(f.ctx, "a.b"); !errors.Is(err, provisioning.ErrInvalidName) {
		t.Errorf("invalid name: %v", err)
	}
}

// downStore fails every account read while down is set, as PostgreSQL
// does in an outage.
type downStore struct {
	provisioning.Store
	down atomic.Bool
}

func (d *downStore) failing() error {
	if d.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func (d *downStore) Account(ctx context.Context, pubKey string) (provisioning.Account, error) {
	if err := d.failing(); err != nil {
		return provisioning.Account{}, err
	}
	return d.Store.Account(ctx, pubKey)
}

func (d *downStore) Operator(ctx context.Context) (provisioning.Operator, error) {
	if err := d.failing(); err != nil {
		return provisioning.Operator{}, err
	}
	return d.Store.Operator(ctx)
}

// The resolver answers from the last known JWTs while the store is down,
// never for an account that does not exist, and never without a copy.
func TestResolverThroughAStoreOutage(t *testing.T) {
	t.Parallel()
	last := &provisioningtest.LastKnown{}
	var store *downStore
	f := newFixture(t, func(c *provisioning.Config) {
		store = &downStore{Store: c.Store}
		c.Store, c.LastKnown = store, last
	})
	sys, err := f.svc.SystemAccountJWT(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if spec, _ := provisioningtest.AccountClaims(sys); spec.Kind != provisioning.KindSystem {
		t.Fatalf("system account JWT %+v", spec)
	}
	acme := f.tenant(t, "acme")
	beta := f.tenant(t, "beta")
	if _, err := f.svc.AccountJWT(f.ctx, beta.PubKey); err != nil {
		t.Fatal(err)
	}
	su := f.sensorUser(t, "acme", "s1")
	_, revoked, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey)
	if err != nil {
		t.Fatal(err)
	}

	store.down.Store(true)
	if got, err := f.svc.SystemAccountJWT(f.ctx); err != nil || got != sys {
		t.Errorf("system account during the outage = %v; want the last known JWT", err)
	}
	// The newest JWT of acme is the one with the revocation.
	if got, err := f.svc.AccountJWT(f.ctx, acme.PubKey); err != nil || got != revoked.JWT {
		t.Errorf("acme during the outage: %v; want the revoking JWT", err)
	}
	if _, err := f.svc.AccountJWT(f.ctx, "A-never-seen"); err == nil {
		t.Error("an account never seen was answered during the outage")
	}
	store.down.Store(false)
	if _, err := f.svc.AccountJWT(f.ctx, "A-never-seen"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("unknown account after the outage: %v", err)
	}
}
