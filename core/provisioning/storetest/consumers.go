package storetest

// Consumer names: each (tenant, sensor) pair claims its consumer name once,
// across tenants and under concurrency, and a revoked sensor retires it.

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
)

// wantClaims checks that the store's consumer-name claims are want (in
// the order of their names).
func wantClaims(t *testing.T, s Store, want []provisioning.ConsumerClaim) {
	t.Helper()
	claims, err := s.ConsumerClaims(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(claims, func(a, b provisioning.ConsumerClaim) int { return strings.Compare(a.Consumer, b.Consumer) })
	diff(t, "claims", want, claims)
}

func testClaimConsumer(t *testing.T, s Store) {
	c := ctx(t)
	if err := s.ClaimConsumer(c, "cmd-acme-eu-s1", "acme", "eu-s1"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := s.ClaimConsumer(c, "cmd-acme-eu-s1", "acme", "eu-s1"); err != nil {
		t.Errorf("repeated claim by the owner: %v", err)
	}
	wantErr(t, "claim of the same name by acme-eu/s1", s.ClaimConsumer(c, "cmd-acme-eu-s1", "acme-eu", "s1"), provisioning.ErrConsumerNameTaken)
	if err := s.ClaimConsumer(c, "cmd-acme-eu-s2", "acme-eu", "s2"); err != nil {
		t.Errorf("unrelated claim: %v", err)
	}
	wantClaims(t, s, []provisioning.ConsumerClaim{
		{Consumer: "cmd-acme-eu-s1", TenantID: "acme", SensorID: "eu-s1"},
		{Consumer: "cmd-acme-eu-s2", TenantID: "acme-eu", SensorID: "s2"},
	})
}

// raceForOneName has 2×20 callers claim the consumer name cmd-acme-eu-s1
// for the two pairs that spell it (acme/eu-s1, acme-eu/s1) with claim: one
// pair owns it, every call of that pair succeeds and every call of the
// other gets ErrConsumerNameTaken.
func raceForOneName(t *testing.T, s Store, claim func(tenantID, sensorID string) error) {
	t.Helper()
	const n = 20
	pairs := [2][2]string{{"acme", "eu-s1"}, {"acme-eu", "s1"}}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			p := pairs[i%2]
			errs[i] = claim(p[0], p[1])
		})
	}
	wg.Wait()
	claims, err := s.ConsumerClaims(ctx(t))
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims = %+v, %v; want exactly one", claims, err)
	}
	for i, err := range errs {
		p := pairs[i%2]
		owns := claims[0].TenantID == p[0] && claims[0].SensorID == p[1]
		if owns && err != nil {
			t.Errorf("owner %v got %v", p, err)
		}
		if !owns && !errors.Is(err, provisioning.ErrConsumerNameTaken) {
			t.Errorf("non-owner %v got %v, want ErrConsumerNameTaken", p, err)
		}
	}
}

// testClaimConsumerConcurrent races the two pairs that spell one name:
// exactly one pair owns it afterwards, and every call of the other fails.
func testClaimConsumerConcurrent(t *testing.T, s Store) {
	raceForOneName(t, s, func(tenantID, sensorID string) error {
		return s.ClaimConsumer(ctx(t), "cmd-acme-eu-s1", tenantID, sensorID)
	})
}

// testClaimSensor: the one call before minting a sensor's user reads the
// tenant's account as TenantAccount does (seed byte-exact), claims the
// consumer name as ClaimConsumer does, and returns the sensor's active
// user as ActiveSensorUser does: never a revoked one, never one of another
// tenant or sensor. Without an account it claims nothing.
func testClaimSensor(t *testing.T, s Store) {
	c := ctx(t)
	_, err := s.ClaimSensor(c, "cmd-acme-eu-s1", "acme", "eu-s1")
	wantErr(t, "claim without an account", err, provisioning.ErrNotFound)
	if claims, err := s.ConsumerClaims(c); err != nil || len(claims) != 0 {
		t.Fatalf("claims after a refusal for lack of an account: %+v, %v; want none", claims, err)
	}

	acme := createAccount(t, s, "acme")
	globex := createAccount(t, s, "globex")
	got, err := s.ClaimSensor(c, "cmd-acme-eu-s1", "acme", "eu-s1")
	if err != nil {
		t.Fatalf("first claim: %v", err)
	}
	diff(t, "account", acme, got.Account)
	if got.User != nil {
		t.Errorf("user of a sensor that has none: %+v", got.User)
	}
	// Users of the same sensor id in another tenant, and of another
	// sensor in the tenant, are not this sensor's.
	createUser(t, s, sensorUser(globex, "eu-s1"))
	createUser(t, s, sensorUser(acme, "eu-s2"))
	if got, err := s.ClaimSensor(c, "cmd-acme-eu-s1", "acme", "eu-s1"); err != nil || got.User != nil {
		t.Errorf("claim again with only others' users: user %+v, %v; want none", got.User, err)
	}
	mine := createUser(t, s, sensorUser(acme, "eu-s1"))
	got, err = s.ClaimSensor(c, "cmd-acme-eu-s1", "acme", "eu-s1")
	if err != nil || got.User == nil {
		t.Fatalf("claim with an active user: %+v, %v", got.User, err)
	}
	diff(t, "active user", mine, *got.User)
	diff(t, "account", acme, got.Account)

	if _, _, err := s.Revoke(c, provisioning.Revocation{AccountPubKey: acme.PubKey, UserPubKey: mine.PubKey, RevokedAt: t0}, resignWith(&resignRecorder{}, "acme-jwt-2")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimSensor(c, "cmd-acme-eu-s1", "acme", "eu-s1"); err != nil || got.User != nil {
		t.Errorf("claim after the user's revocation: user %+v, %v; want none", got.User, err)
	}

	// acme-eu/s1 spells the same name: refused, whatever it holds.
	createAccount(t, s, "acme-eu")
	_, err = s.ClaimSensor(c, "cmd-acme-eu-s1", "acme-eu", "s1")
	wantErr(t, "claim of acme/eu-s1's name by acme-eu/s1", err, provisioning.ErrConsumerNameTaken)
	wantClaims(t, s, []provisioning.ConsumerClaim{{Consumer: "cmd-acme-eu-s1", TenantID: "acme", SensorID: "eu-s1"}})
}

// testClaimSensorConcurrent races the two pairs that spell one name
// through ClaimSensor: one pair owns it, every call of the other fails.
func testClaimSensorConcurrent(t *testing.T, s Store) {
	createAccount(t, s, "acme")
	createAccount(t, s, "acme-eu")
	raceForOneName(t, s, func(tenantID, sensorID string) error {
		_, err := s.ClaimSensor(ctx(t), "cmd-acme-eu-s1", tenantID, sensorID)
		return err
	})
}

// testClaimSensorAcrossTenants: one sensor id in two tenants is two
// sensors. Each claims its own consumer name and reads its own tenant's
// account and its own user, never the other's, before and after either is
// revoked and replaced; a revoked user is never returned, its replacement
// is. A tenant without an account claims nothing even when others with the
// same sensor id have accounts and users.
func testClaimSensorAcrossTenants(t *testing.T, s Store) {
	c := ctx(t)
	acme := createAccount(t, s, "acme")
	globex := createAccount(t, s, "globex")
	mine := createUser(t, s, sensorUser(acme, "s1"))
	theirs := createUser(t, s, sensorUser(globex, "s1"))
	claim := func(tenant string) provisioning.SensorClaim {
		t.Helper()
		got, err := s.ClaimSensor(c, "cmd-"+tenant+"-s1", tenant, "s1")
		if err != nil {
			t.Fatalf("claim of %s/s1: %v", tenant, err)
		}
		return got
	}
	wantUser := func(what string, got *provisioning.User, want provisioning.User) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: no user, want %s", what, want.PubKey)
			return
		}
		diff(t, what, want, *got)
	}
	for range 2 {
		a, g := claim("acme"), claim("globex")
		diff(t, "acme's account", acme, a.Account)
		diff(t, "globex's account", globex, g.Account)
		wantUser("acme/s1's user", a.User, mine)
		wantUser("globex/s1's user", g.User, theirs)
	}

	if _, _, err := s.Revoke(c, provisioning.Revocation{AccountPubKey: acme.PubKey, UserPubKey: mine.PubKey, RevokedAt: t0}, resignWith(&resignRecorder{}, "acme-jwt-2")); err != nil {
		t.Fatal(err)
	}
	if got := claim("acme"); got.User != nil {
		t.Errorf("BROKEN: acme/s1 after its user's revocation: user %s (%s), want none", got.User.PubKey, got.User.AccountPubKey)
	}
	wantUser("globex/s1's user after acme/s1's revocation", claim("globex").User, theirs)
	replacement := createUser(t, s, sensorUser(acme, "s1"))
	wantUser("acme/s1's replacement user", claim("acme").User, replacement)
	wantUser("globex/s1's user after acme/s1's replacement", claim("globex").User, theirs)

	_, err := s.ClaimSensor(c, "cmd-initech-s1", "initech", "s1")
	wantErr(t, "claim of initech/s1 (no account)", err, provisioning.ErrNotFound)
	wantClaims(t, s, []provisioning.ConsumerClaim{
		{Consumer: "cmd-acme-s1", TenantID: "acme", SensorID: "s1"},
		{Consumer: "cmd-globex-s1", TenantID: "globex", SensorID: "s1"},
	})
}

// testClaimSensorConcurrentOnePair: many claims of one sensor at once (an
// enrolment retried, renewals through several replicas), interleaved with
// claims of the same sensor id in another tenant: every call succeeds with
// its own tenant's account and user, and each name is claimed once.
func testClaimSensorConcurrentOnePair(t *testing.T, s Store) {
	acme := createAccount(t, s, "acme")
	globex := createAccount(t, s, "globex")
	mine := createUser(t, s, sensorUser(acme, "s1"))
	theirs := createUser(t, s, sensorUser(globex, "s1"))
	const n = 30
	got := make([]provisioning.SensorClaim, n)
	errs := make([]error, n)
	tenants := [2]string{"acme", "globex"}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tn := tenants[i%3%2]
			got[i], errs[i] = s.ClaimSensor(ctx(t), "cmd-"+tn+"-s1", tn, "s1")
		})
	}
	wg.Wait()
	for i := range n {
		acct, user := acme, mine
		if i%3%2 == 1 {
			acct, user = globex, theirs
		}
		switch {
		case errs[i] != nil:
			t.Errorf("claim %d of %s/s1: %v", i, acct.TenantID, errs[i])
		case got[i].Account.PubKey != acct.PubKey || got[i].User == nil || got[i].User.PubKey != user.PubKey:
			t.Errorf("BROKEN: claim %d of %s/s1 read account %s and user %+v, want %s and %s", i, acct.TenantID, got[i].Account.PubKey, got[i].User, acct.PubKey, user.PubKey)
		}
	}
	claims, err := s.ConsumerClaims(ctx(t))
	if err != nil || len(claims) != 2 {
		t.Fatalf("claims = %+v, %v; want one for each tenant's s1", claims, err)
	}
}

// A revocation with RetireSensor retires the pair's claim when the pair is
// left without an active user; RetiredClaims lists it until the pair
// claims its name again; the name stays the pair's.
func testRetireSensorClaim(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	createAccount(t, s, "acme-eu")
	const name = "cmd-acme-eu-s1"
	if _, err := s.ClaimSensor(ctx(t), name, "acme", "eu-s1"); err != nil {
		t.Fatal(err)
	}
	u := createUser(t, s, sensorUser(acct, "eu-s1"))
	if _, err := s.ClaimSensor(ctx(t), "cmd-acme-s2", "acme", "s2"); err != nil {
		t.Fatal(err)
	}
	u2 := createUser(t, s, sensorUser(acct, "s2"))
	// Without RetireSensor nothing is retired (an upgrade replacing a user).
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u2.PubKey, RevokedAt: t0.Add(time.Hour)}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RetiredClaims(ctx(t)); err != nil || len(got) != 0 {
		t.Fatalf("RetiredClaims after a plain revocation = %v, %v; want none", got, err)
	}
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour), RetireSensor: true}
	stored, _, err := s.Revoke(ctx(t), r, (&resignRecorder{}).resign)
	if err != nil {
		t.Fatal(err)
	}
	if stored.RetireSensor {
		t.Error("the stored revocation reads back RetireSensor")
	}
	want := []provisioning.ConsumerClaim{{Consumer: name, TenantID: "acme", SensorID: "eu-s1"}}
	got, err := s.RetiredClaims(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "RetiredClaims", want, got)
	// Retired, the name still belongs to its pair.
	if _, err := s.ClaimSensor(ctx(t), name, "acme-eu", "s1"); !errors.Is(err, provisioning.ErrConsumerNameTaken) {
		t.Errorf("another pair claims a retired name: %v", err)
	}
	if err := s.ClaimConsumer(ctx(t), name, "acme-eu", "s1"); !errors.Is(err, provisioning.ErrConsumerNameTaken) {
		t.Errorf("another pair claims a retired name with ClaimConsumer: %v", err)
	}
	// The pair claiming again ends the retirement.
	if _, err := s.ClaimSensor(ctx(t), name, "acme", "eu-s1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RetiredClaims(ctx(t)); err != nil || len(got) != 0 {
		t.Errorf("RetiredClaims after the pair claimed again = %v, %v; want none", got, err)
	}
	// Retiring with another active user of the sensor left retires nothing.
	fresh := createUser(t, s, sensorUser(acct, "eu-s1"))
	old := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(2 * time.Hour), RetireSensor: true}
	if _, _, err := s.Revoke(ctx(t), old, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RetiredClaims(ctx(t)); err != nil || len(got) != 0 {
		t.Errorf("RetiredClaims with an active user left = %v, %v; want none", got, err)
	}
	// ClaimConsumer by the pair also ends a retirement.
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: fresh.PubKey, RevokedAt: t0.Add(3 * time.Hour), RetireSensor: true}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RetiredClaims(ctx(t)); len(got) != 1 {
		t.Fatalf("RetiredClaims = %v; want the sensor", got)
	}
	if err := s.ClaimConsumer(ctx(t), name, "acme", "eu-s1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RetiredClaims(ctx(t)); len(got) != 0 {
		t.Errorf("RetiredClaims after ClaimConsumer = %v; want none", got)
	}
}
