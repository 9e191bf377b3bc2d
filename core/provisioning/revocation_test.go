package provisioning_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
)

// Only what may be revoked is: any key of a tenant account and the CONTROL
// account's stored backend users. The SYS account's keys (the
// provisioner's system user) and CONTROL keys that are no backend user
// (the control-admin user) are refused and nothing is stored.
func TestRevokeOnlyWhatMayBeRevoked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	su := f.sensorUser(t, "acme", "s1")
	be, _, err := f.svc.EnsureBackendUser(f.ctx, "backend")
	if err != nil {
		t.Fatal(err)
	}
	sysBefore, _ := f.store.Account(f.ctx, f.op.SystemAccount)
	ctlBefore, _ := f.store.Account(f.ctx, f.op.ControlAccount)
	for _, c := range []struct{ name, account, user string }{
		{"a SYS key", f.op.SystemAccount, "U" + fmt.Sprintf("%055d", 999999)},
		{"a CONTROL key that is no stored user", f.op.ControlAccount, "U" + fmt.Sprintf("%055d", 999998)},
		{"a sensor's key named in the CONTROL account", f.op.ControlAccount, su.User.PubKey},
		{"the backend user named in the SYS account", f.op.SystemAccount, be.User.PubKey},
	} {
		_, _, err := f.svc.Revoke(f.ctx, c.account, c.user)
		wantErr(t, c.name, err, provisioning.ErrNotRevocable)
	}
	sysAfter, _ := f.store.Account(f.ctx, f.op.SystemAccount)
	ctlAfter, _ := f.store.Account(f.ctx, f.op.ControlAccount)
	if sysAfter.JWT != sysBefore.JWT || ctlAfter.JWT != ctlBefore.JWT {
		t.Error("a refused revocation re-signed the SYS or CONTROL account")
	}
	// Positive controls.
	if _, _, err := f.svc.Revoke(f.ctx, f.op.ControlAccount, be.User.PubKey); err != nil {
		t.Errorf("revoke the backend user: %v", err)
	}
	if !f.revokedIn(t, f.op.ControlAccount, be.User.PubKey) {
		t.Error("the backend user is not revoked in the CONTROL account's JWT")
	}
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, su.User.PubKey); err != nil {
		t.Errorf("revoke a sensor user: %v", err)
	}
	blind := "U" + fmt.Sprintf("%055d", 999997)
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, blind); err != nil || !f.revokedIn(t, acme.PubKey, blind) {
		t.Errorf("revoke an unknown key of a tenant account: %v", err)
	}
}

// The re-push of pending revocations tries every account: one that cannot
// be pushed delays no other. NATS refusing a JWT as too large is its own
// error (not ErrNATSUnavailable), listed by Undelivered until a push
// succeeds.
func TestPushPendingPerAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []provisioning.SensorUser
	for _, tenant := range []string{"a", "b", "c"} {
		f.tenant(t, tenant)
		users = append(users, f.sensorUser(t, tenant, "s1"))
	}
	if _, err := f.svc.PushPending(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.pusher.Fail(errors.New("no servers available"))
	for _, u := range users {
		if _, _, err := f.svc.Revoke(f.ctx, u.User.AccountPubKey, u.User.PubKey); !errors.Is(err, provisioning.ErrNATSUnavailable) {
			t.Fatalf("revoke while NATS is down: %v", err)
		}
	}
	f.pusher.Fail(nil)
	tooLarge := fmt.Errorf("%w: nats: maximum payload exceeded", provisioning.ErrUndeliverable)
	// The first account PushPending meets fails; the others go through.
	first := users[0].User.AccountPubKey
	f.pusher.FailAccount(first, tooLarge)
	n, err := f.svc.PushPending(f.ctx)
	if n != 2 || !errors.Is(err, provisioning.ErrUndeliverable) || errors.Is(err, provisioning.ErrNATSUnavailable) {
		t.Fatalf("PushPending = %d, %v; want 2 pushed and the undeliverable one reported as such", n, err)
	}
	for _, u := range users[1:] {
		if len(f.pusher.Pushed(u.User.AccountPubKey)) == 0 {
			t.Errorf("account %s waited for the failing one", u.User.AccountPubKey)
		}
	}
	if u := f.svc.Undelivered(); len(u) != 1 || u[first] == "" {
		t.Errorf("Undelivered = %v; want %s", u, first)
	}
	// A revocation in the refused account says so.
	f.tenant(t, "a")
	other := f.sensorUser(t, "a", "s2")
	_, _, err = f.svc.Revoke(f.ctx, other.User.AccountPubKey, other.User.PubKey)
	if !errors.Is(err, provisioning.ErrUndeliverable) || errors.Is(err, provisioning.ErrNATSUnavailable) {
		t.Errorf("revoke in an undeliverable account: %v; want ErrUndeliverable", err)
	}
	f.pusher.FailAccount(first, nil)
	if n, err := f.svc.PushPending(f.ctx); n != 1 || err != nil {
		t.Errorf("retry = %d, %v; want the one account pushed", n, err)
	}
	if u := f.svc.Undelivered(); len(u) != 0 {
		t.Errorf("Undelivered after a successful push = %v", u)
	}
}

// A tenant's account JWT stays under its bound however many revocations it
// has seen: when the next one would pass it, the tenant is re-issued with
// one AllUsers entry, every active user is marked revoked (each sensor gets
// a new user with its next request) and every revocation stays in force.
func TestRevocationListIsBounded(t *testing.T) {
	t.Parallel()
	const bound = 8 << 10
	f := newFixture(t, func(c *provisioning.Config) { c.AccountJWTMaxBytes = bound })
	acme := f.tenant(t, "acme")
	keep := f.sensorUser(t, "acme", "keep")
	var revoked []string
	reissues := 0
	var lastStar time.Time
	for i := range 600 {
		f.now = f.now.Add(time.Second)
		u := f.sensorUser(t, "acme", fmt.Sprintf("s%d", i))
		if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, u.User.PubKey); err != nil {
			t.Fatal(err)
		}
		revoked = append(revoked, u.User.PubKey)
		jwt, _ := f.svc.AccountJWT(f.ctx, acme.PubKey)
		if len(jwt) > bound {
			t.Fatalf("after %d revocations the account JWT is %d bytes, over its bound %d", i+1, len(jwt), bound)
		}
		spec, _ := provisioningtest.AccountClaims(jwt)
		for _, r := range spec.Revocations {
			if r.UserPubKey == provisioning.AllUsers && !r.RevokedAt.Equal(lastStar) {
				lastStar = r.RevokedAt
				reissues++
			}
		}
	}
	if reissues == 0 {
		t.Fatal("600 revocations never re-issued the tenant")
	}
	jwt, _ := f.svc.AccountJWT(f.ctx, acme.PubKey)
	spec, _ := provisioningtest.AccountClaims(jwt)
	// Every revoked key is refused: by its own entry or by the AllUsers
	// entry (all of its JWTs were issued before it).
	star := time.Time{}
	own := map[string]bool{}
	for _, r := range spec.Revocations {
		if r.UserPubKey == provisioning.AllUsers {
			star = r.RevokedAt
		}
		own[r.UserPubKey] = true
	}
	for _, k := range revoked {
		u, err := f.store.User(f.ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if !own[k] && !(u.CreatedAt.Before(star) || u.CreatedAt.Equal(star)) {
			t.Fatalf("revoked user %s (made %s) is covered by neither its entry nor the * entry at %s", k, u.CreatedAt, star)
		}
	}
	// The never-revoked sensor's old user was re-issued away; its next
	// request hands it a new user issued after the * entry.
	if _, err := f.store.ActiveSensorUser(f.ctx, "acme", "keep"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("the re-issue left the sensor's old user active: %v", err)
	}
	f.now = f.now.Add(time.Second)
	fresh := f.sensorUser(t, "acme", "keep")
	if fresh.User.PubKey == keep.User.PubKey || !fresh.User.CreatedAt.After(star) || own[fresh.User.PubKey] {
		t.Errorf("new user %s made %s; want a new key issued after the * entry at %s", fresh.User.PubKey, fresh.User.CreatedAt, star)
	}
	// The re-issue keeps the sensor's consumer: it is not a revocation of
	// the sensor.
	if !f.consumers.Has(consumerOf("acme", "keep")) {
		t.Error("the re-issue removed a live sensor's consumer")
	}
}

// With expiring sensor JWTs a revocation leaves the list once every JWT it
// can match has expired: SensorUserTTL after the revocation and its margin,
// and another margin for the servers' clocks.
func TestExpiredRevocationsLeaveTheList(t *testing.T) {
	t.Parallel()
	const ttl = 24 * time.Hour
	f := newFixture(t, func(c *provisioning.Config) { c.SensorUserTTL = ttl })
	acme := f.tenant(t, "acme")
	old := f.sensorUser(t, "acme", "old")
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, old.User.PubKey); err != nil {
		t.Fatal(err)
	}
	expiry := f.now.Truncate(time.Second).Add(ttl + 2*provisioning.RevocationMargin)
	f.now = expiry.Add(-time.Second)
	young := f.sensorUser(t, "acme", "young")
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, young.User.PubKey); err != nil {
		t.Fatal(err)
	}
	if !f.revokedIn(t, acme.PubKey, old.User.PubKey) {
		t.Fatal("a revocation left the list before every JWT it matches expired")
	}
	f.now = expiry
	later := f.sensorUser(t, "acme", "later")
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, later.User.PubKey); err != nil {
		t.Fatal(err)
	}
	if f.revokedIn(t, acme.PubKey, old.User.PubKey) {
		t.Error("an expired revocation is still in the account JWT")
	}
	if !f.revokedIn(t, acme.PubKey, young.User.PubKey) || !f.revokedIn(t, acme.PubKey, later.User.PubKey) {
		t.Error("a revocation in force left the list")
	}
	// A backend user's JWT never expires: its entry stays.
	be, _, err := f.svc.EnsureBackendUser(f.ctx, "backend")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Revoke(f.ctx, f.op.ControlAccount, be.User.PubKey); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(100 * ttl)
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, f.sensorUser(t, "acme", "x").User.PubKey); err != nil {
		t.Fatal(err)
	}
	if !f.revokedIn(t, f.op.ControlAccount, be.User.PubKey) {
		t.Error("the backend user's revocation expired")
	}
}

// Revoking a sensor's user removes its pending commands and its consumer;
// its name stays claimed by its pair (no other pair can take it); a
// failure is finished by RemoveRetiredConsumers; a revocation of a user
// the sensor no longer uses removes nothing; the same pair asking again
// gets a user and its consumer back.
func TestRevokedSensorLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	f.tenant(t, "acme-eu")
	s1 := f.sensorUser(t, "acme", "eu-s1")
	s2 := f.sensorUser(t, "acme", "s2")
	c1, c2 := s1.Sensor.Consumer(), s2.Sensor.Consumer()

	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, s1.User.PubKey); err != nil {
		t.Fatal(err)
	}
	if f.consumers.Has(c1) || !slices.Contains(f.consumers.Purged(), s1.Sensor.CommandSubject()) {
		t.Errorf("after the revocation: consumer kept %v, purged %v", f.consumers.Has(c1), f.consumers.Purged())
	}
	if !f.consumers.Has(c2) {
		t.Error("another sensor's consumer was removed")
	}
	// Idempotent.
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, s1.User.PubKey); err != nil {
		t.Errorf("repeat: %v", err)
	}
	// Another pair spelling the same name cannot take it.
	if _, _, err := f.svc.EnsureSensorUser(f.ctx, "acme-eu", "s1"); !errors.Is(err, provisioning.ErrConsumerNameTaken) {
		t.Errorf("another pair claims a revoked sensor's name: %v", err)
	}

	// A removal that fails is finished by the repair pass.
	f.consumers.FailRemove(errors.New("timeout"))
	_, _, err := f.svc.Revoke(f.ctx, acme.PubKey, s2.User.PubKey)
	wantErr(t, "removal failing", err, provisioning.ErrNATSUnavailable)
	if !f.consumers.Has(c2) || !f.svc.CleanupDue() {
		t.Fatal("a failed removal: want the consumer still there and a clean-up due")
	}
	if !f.revokedIn(t, acme.PubKey, s2.User.PubKey) {
		t.Fatal("a failed removal undid the revocation")
	}
	f.consumers.FailRemove(nil)
	if n, err := f.svc.RemoveRetiredConsumers(f.ctx); n != 1 || err != nil {
		t.Errorf("RemoveRetiredConsumers = %d, %v; want 1", n, err)
	}
	if f.consumers.Has(c2) || f.svc.CleanupDue() {
		t.Error("the repair pass left the consumer or the clean-up due")
	}
	if n, err := f.svc.RemoveRetiredConsumers(f.ctx); n != 0 || err != nil {
		t.Errorf("second pass = %d, %v; want nothing to do", n, err)
	}

	// Revoking a user the sensor replaced removes nothing.
	s3 := f.sensorUser(t, "acme", "s3")
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, s3.User.PubKey); err != nil {
		t.Fatal(err)
	}
	s3b := f.sensorUser(t, "acme", "s3")
	if !f.consumers.Has(s3.Sensor.Consumer()) {
		t.Fatal("a sensor asking again has no consumer")
	}
	if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, s3.User.PubKey); err != nil {
		t.Fatal(err)
	}
	if !f.consumers.Has(s3.Sensor.Consumer()) {
		t.Error("revoking an old user removed the consumer of the sensor's active user")
	}
	if n, _ := f.svc.RemoveRetiredConsumers(f.ctx); n != 0 || !f.consumers.Has(s3.Sensor.Consumer()) {
		t.Error("the repair pass removed the consumer of a sensor with an active user")
	}
	_ = s3b
}

// The repair pass reports the consumers still missing while it runs.
func TestRepairReportsProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	for i := range 5 {
		su := f.sensorUser(t, "acme", fmt.Sprintf("s%d", i))
		f.consumers.Drop(su.Sensor.Consumer())
	}
	var seen []int
	r, err := f.svc.RepairConsumersReporting(f.ctx, 1, func(n int) { seen = append(seen, n) })
	if err != nil || r.Missing != 5 || r.Repaired != 5 {
		t.Fatalf("repair = %+v, %v", r, err)
	}
	if want := []int{5, 4, 3, 2, 1, 0}; !slices.Equal(seen, want) {
		t.Errorf("reported %v, want %v", seen, want)
	}
}

// A bound lowered between restarts re-issues, at start, the tenants whose
// JWT is over it.
func TestLoweredBoundReissuesAtStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *provisioning.Config) { c.AccountJWTMaxBytes = -1 })
	acme := f.tenant(t, "acme")
	for i := range 100 {
		u := f.sensorUser(t, "acme", fmt.Sprintf("s%d", i))
		if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, u.User.PubKey); err != nil {
			t.Fatal(err)
		}
	}
	f.now = f.now.Add(time.Minute)
	const bound = 4 << 10
	if a, _ := f.store.Account(f.ctx, acme.PubKey); len(a.JWT) <= bound {
		t.Fatalf("JWT %d bytes before the restart; the test needs more than %d", len(a.JWT), bound)
	}
	svc := f.another(t, func(c *provisioning.Config) { c.AccountJWTMaxBytes = bound })
	resigned, err := svc.RefreshAccounts(f.ctx)
	if err != nil || !slices.Contains(resigned, acme.PubKey) {
		t.Fatalf("RefreshAccounts = %v, %v; want acme re-issued", resigned, err)
	}
	a, _ := f.store.Account(f.ctx, acme.PubKey)
	spec, _ := provisioningtest.AccountClaims(a.JWT)
	if len(a.JWT) > bound || len(spec.Revocations) != 1 || spec.Revocations[0].UserPubKey != provisioning.AllUsers {
		t.Errorf("after the restart: %d bytes, revocations %+v; want one * entry under %d bytes", len(a.JWT), spec.Revocations, bound)
	}
}

// A key first handed out without expiry keeps a JWT that never expires,
// even after a renewal signed it again with one: its revocation stays.
func TestRevocationOfAKeyOnceWithoutExpiryStays(t *testing.T) {
	t.Parallel()
	const ttl = 24 * time.Hour
	f := newFixture(t)
	acme := f.tenant(t, "acme")
	first := f.sensorUser(t, "acme", "s1") // no expiry
	svc := f.another(t, func(c *provisioning.Config) { c.SensorUserTTL = ttl })
	renewed, _, err := svc.EnsureSensorUser(f.ctx, "acme", "s1")
	if err != nil || renewed.User.PubKey != first.User.PubKey {
		t.Fatalf("renewal = %+v, %v; want the same key signed again", renewed.User, err)
	}
	if exp, _ := f.signer.UserExpiry(renewed.User.JWT); exp.IsZero() {
		t.Fatal("the renewal signed no expiry")
	}
	if _, _, err := svc.Revoke(f.ctx, acme.PubKey, first.User.PubKey); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(10 * ttl)
	if _, _, err := svc.Revoke(f.ctx, acme.PubKey, f.sensorUser(t, "acme", "s2").User.PubKey); err != nil {
		t.Fatal(err)
	}
	if !f.revokedIn(t, acme.PubKey, first.User.PubKey) {
		t.Error("the revocation of a key whose first JWT never expires left the list")
	}
}

// A revocation is pushed again a resolver-cache lifetime (and a second)
// after its push, for a nats-server that loaded the account from another
// replica's stale cache in between. A burst of revocations of one tenant
// is re-pushed once, after the last of them, with the JWT that carries
// them all: not once per revocation (each re-push is a JWT of up to the
// bound that every nats-server decodes).
func TestABurstOfRevocationsIsRepushedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *provisioning.Config) { c.ResolverCacheTTL = 100 * time.Millisecond })
	acme := f.tenant(t, "acme")
	other := f.tenant(t, "other")
	const burst = 5
	var last time.Time
	for i := range burst {
		if _, _, err := f.svc.Revoke(f.ctx, acme.PubKey, "U"+fmt.Sprintf("%055d", i)); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		time.Sleep(200 * time.Millisecond)
	}
	if _, _, err := f.svc.Revoke(f.ctx, other.PubKey, "U"+fmt.Sprintf("%055d", 99)); err != nil {
		t.Fatal(err)
	}
	otherAt := time.Now()
	// The first revocation's re-push was due 1.1 s after it, before the
	// burst ended: it waits for the last one.
	time.Sleep(time.Until(last.Add(800 * time.Millisecond)))
	if n := len(f.pusher.Pushed(acme.PubKey)); n != burst {
		t.Errorf("%d pushes of the tenant before the last revocation's re-push was due, want %d (no re-push yet)", n, burst)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.pusher.Pushed(acme.PubKey)) < burst+1 || len(f.pusher.Pushed(other.PubKey)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pushes: tenant %d, want %d; other tenant %d, want 2", len(f.pusher.Pushed(acme.PubKey)), burst+1, len(f.pusher.Pushed(other.PubKey)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if since := time.Since(last); since < 1100*time.Millisecond {
		t.Errorf("re-pushed %v after the last revocation, want at least the cache lifetime and a second", since)
	}
	if since := time.Since(otherAt); since < 1100*time.Millisecond {
		t.Errorf("other tenant re-pushed %v after its revocation, want at least 1.1 s", since)
	}
	pushed := f.pusher.Pushed(acme.PubKey)
	cur, err := f.store.Account(f.ctx, acme.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	if pushed[len(pushed)-1] != cur.JWT {
		t.Error("the re-push is not the tenant's current JWT")
	}
	for i := range burst {
		if !f.revokedIn(t, acme.PubKey, "U"+fmt.Sprintf("%055d", i)) {
			t.Errorf("revocation %d is not in the re-pushed JWT", i)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(f.pusher.Pushed(acme.PubKey)); n != burst+1 {
		t.Errorf("%d pushes of the tenant, want %d: one re-push for the burst", n, burst+1)
	}
}
