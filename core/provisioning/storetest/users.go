package storetest

// Sensor and backend users: create-or-return under concurrency, lookups,
// re-signed JWTs and the active users.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
)

func testCreateSensorUser(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	want := sensorUser(acct, "sensor-1")
	got := createUser(t, s, want)
	diff(t, "created user", want, got)

	active, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ActiveSensorUser", want, active)

	again, created, err := s.CreateUser(ctx(t), sensorUser(acct, "sensor-1"))
	if err != nil {
		t.Fatal(err)
	}
	if created {
		t.Errorf("second CreateUser for the same sensor reported created")
	}
	diff(t, "second CreateUser result", want, again)

	same, created, err := s.CreateUser(ctx(t), want)
	if err != nil || created {
		t.Errorf("repeating the identical CreateUser = created %v, err %v; want existing", created, err)
	}
	diff(t, "identical CreateUser result", want, same)

	other := createUser(t, s, sensorUser(acct, "sensor-2"))
	if other.PubKey == want.PubKey {
		t.Errorf("second sensor got the first sensor's user")
	}
}

func testCreateBackendUser(t *testing.T, s Store) {
	f := initOperator(t, s)
	want := backendUser(f.control, "backend")
	diff(t, "created backend user", want, createUser(t, s, want))
	got, err := s.ActiveBackendUser(ctx(t), "backend")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ActiveBackendUser", want, got)
	again, created, err := s.CreateUser(ctx(t), backendUser(f.control, "backend"))
	if err != nil || created {
		t.Errorf("second backend CreateUser = created %v, err %v; want existing", created, err)
	}
	diff(t, "second backend CreateUser result", want, again)
	if _, err := s.ActiveSensorUser(ctx(t), "", "backend"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("a backend user is returned as a sensor user: err = %v", err)
	}
	createUser(t, s, backendUser(f.control, "analytics"))
}

func testCreateUserConcurrent(t *testing.T, s Store) {
	f := initOperator(t, s)
	acct := createAccount(t, s, "acme")
	tests := []struct {
		name  string
		build func() provisioning.User
		find  func() (provisioning.User, error)
	}{
		{"sensor", func() provisioning.User { return sensorUser(acct, "sensor-1") },
			func() (provisioning.User, error) { return s.ActiveSensorUser(ctx(t), "acme", "sensor-1") }},
		{"backend", func() provisioning.User { return backendUser(f.control, "backend") },
			func() (provisioning.User, error) { return s.ActiveBackendUser(ctx(t), "backend") }},
	}
	for _, tc := range tests {
		winner := createRace(t, tc.name, 100, tc.build, s.CreateUser)
		got, err := tc.find()
		if err != nil {
			t.Fatal(err)
		}
		diff(t, tc.name+": active user", winner, got)
	}
}

func testCreateUserUnknownAccount(t *testing.T, s Store) {
	ghost := tenantAccount("ghost")
	_, _, err := s.CreateUser(ctx(t), sensorUser(ghost, "sensor-1"))
	wantErr(t, "CreateUser in an unknown account", err, provisioning.ErrNotFound)
	_, err = s.ActiveSensorUser(ctx(t), "ghost", "sensor-1")
	wantErr(t, "ActiveSensorUser after the refused create", err, provisioning.ErrNotFound)
}

// testCreateUserRefusesIncomplete: a user record provisioning.CheckUser
// refuses is not stored, and the store's error is CheckUser's text after
// its own prefix ("provisionmem: …", "provisionerstore: …"). The accounts
// exist, so CheckUser is the only refusal. Positive control: the complete
// users are then created.
func testCreateUserRefusesIncomplete(t *testing.T, s Store) {
	f := initOperator(t, s)
	acct := createAccount(t, s, "acme")
	before, err := s.ActiveUsers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	sensor, backend := sensorUser(acct, "sensor-1"), backendUser(f.control, "backend")
	for _, tc := range []struct {
		name   string
		user   provisioning.User
		change func(*provisioning.User)
	}{
		{"sensor without a public key", sensor, func(u *provisioning.User) { u.PubKey = "" }},
		{"backend without an account", backend, func(u *provisioning.User) { u.AccountPubKey = "" }},
		{"sensor without a tenant", sensor, func(u *provisioning.User) { u.TenantID = "" }},
		{"sensor without a sensor id", sensor, func(u *provisioning.User) { u.SensorID = "" }},
		{"backend without a name", backend, func(u *provisioning.User) { u.Name = "" }},
		{"no kind", backend, func(u *provisioning.User) { u.Kind = "" }},
		{"unknown kind", sensor, func(u *provisioning.User) { u.Kind = "admin" }},
	} {
		u := tc.user
		tc.change(&u)
		want := provisioning.CheckUser(u)
		if want == nil {
			t.Fatalf("%s: CheckUser lets it through; the case tests nothing", tc.name)
		}
		_, created, err := s.CreateUser(ctx(t), u)
		if err == nil || created || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
			t.Errorf("%s: CreateUser = created %v, err %v; want refused with %q", tc.name, created, err, want)
		}
	}
	after, err := s.ActiveUsers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused users were stored: %d active users before, %d after", len(before), len(after))
	}
	createUser(t, s, sensor)
	createUser(t, s, backend)
}

func testUsersNotFound(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	createUser(t, s, sensorUser(acct, "sensor-1"))
	tests := []struct {
		name string
		call func() error
	}{
		{"unknown sensor", func() error { _, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-2"); return err }},
		{"unknown tenant", func() error { _, err := s.ActiveSensorUser(ctx(t), "globex", "sensor-1"); return err }},
		{"unknown backend", func() error { _, err := s.ActiveBackendUser(ctx(t), "backend"); return err }},
		{"sensor name as backend", func() error { _, err := s.ActiveBackendUser(ctx(t), "sensor-1"); return err }},
	}
	for _, tc := range tests {
		wantErr(t, tc.name, tc.call(), provisioning.ErrNotFound)
	}
}

// ReplaceUserJWT changes only that active user's JWT; a revoked or unknown
// user is ErrNotFound.
func testReplaceUserJWT(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	sibling := createUser(t, s, sensorUser(acct, "sensor-2"))
	if err := s.ReplaceUserJWT(ctx(t), u.PubKey, "jwt-extended"); err != nil {
		t.Fatalf("ReplaceUserJWT: %v", err)
	}
	got, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1")
	if err != nil {
		t.Fatal(err)
	}
	want := u
	want.JWT = "jwt-extended"
	diff(t, "user after ReplaceUserJWT", want, got)
	if other, _ := s.ActiveSensorUser(ctx(t), "acme", "sensor-2"); other.JWT != sibling.JWT {
		t.Errorf("sibling's JWT changed to %q", other.JWT)
	}
	wantErr(t, "ReplaceUserJWT of an unknown user", s.ReplaceUserJWT(ctx(t), key("U"), "x"), provisioning.ErrNotFound)
	rec := &resignRecorder{}
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}, rec.resign); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "ReplaceUserJWT of a revoked user", s.ReplaceUserJWT(ctx(t), u.PubKey, "jwt-after-revocation"), provisioning.ErrNotFound)
}

func testActiveUsers(t *testing.T, s Store) {
	f := initOperator(t, s)
	acct := createAccount(t, s, "acme")
	u1 := createUser(t, s, sensorUser(acct, "sensor-1"))
	u2 := createUser(t, s, sensorUser(acct, "sensor-2"))
	b := createUser(t, s, backendUser(f.control, "backend"))
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u2.PubKey, RevokedAt: t0.Add(time.Hour)}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	got, err := s.ActiveUsers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range got {
		keys = append(keys, u.PubKey)
		if u.Seed != nil {
			t.Errorf("ActiveUsers returned the seed of %s", u.PubKey)
		}
		if u.JWT == "" || u.AccountPubKey == "" || u.Kind == "" {
			t.Errorf("ActiveUsers returned %+v without JWT, account or kind", u)
		}
		if u.PubKey == u1.PubKey && (u.TenantID != "acme" || u.SensorID != "sensor-1") {
			t.Errorf("sensor user = %+v, want tenant acme sensor sensor-1", u)
		}
	}
	diff(t, "active users", sorted(u1.PubKey, b.PubKey), sorted(keys...))
	// The counts agree with the list: the revoked user is not counted.
	counts, err := s.ActiveUserCounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[provisioning.UserSensor] != 1 || counts[provisioning.UserBackend] != 1 {
		t.Errorf("ActiveUserCounts = %v, want one sensor and one backend user (the revoked sensor user not counted)", counts)
	}
}

// User reads any user by key, revoked or not, without its seed.
func testUser(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "s1"))
	got, err := s.User(ctx(t), u.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	want := u
	want.Seed = nil
	diff(t, "User", want, got)
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}
	if _, _, err := s.Revoke(ctx(t), r, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	got, err = s.User(ctx(t), u.PubKey)
	if err != nil || !got.RevokedAt.Equal(r.RevokedAt) {
		t.Errorf("User of a revoked user = %+v, %v; want revoked at %s", got, err, r.RevokedAt)
	}
	_, err = s.User(ctx(t), key("U"))
	wantErr(t, "User of an unknown key", err, provisioning.ErrNotFound)
	// Expiring round-trips.
	e := sensorUser(acct, "s2")
	e.Expiring = true
	createUser(t, s, e)
	if got, err := s.User(ctx(t), e.PubKey); err != nil || !got.Expiring {
		t.Errorf("User of an expiring user = %+v, %v; want Expiring", got, err)
	}
	if got, err := s.ActiveSensorUser(ctx(t), "acme", "s2"); err != nil || !got.Expiring {
		t.Errorf("ActiveSensorUser of an expiring user = %+v, %v; want Expiring", got, err)
	}
	if claim, err := s.ClaimSensor(ctx(t), "cmd-acme-s2", "acme", "s2"); err != nil || claim.User == nil || !claim.User.Expiring {
		t.Errorf("ClaimSensor of an expiring user = %+v, %v; want Expiring", claim.User, err)
	}
}
