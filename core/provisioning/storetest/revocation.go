package storetest

// Revocations: atomic with the account's re-signing, idempotent, keeping
// the earliest time, confined to one account, in bulk, and dropped once
// every JWT they match has expired (Revoke, RevokeMany, Reissue).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
)

func testRevokeSensorUser(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	sibling := createUser(t, s, sensorUser(acct, "sensor-2"))
	rec := &resignRecorder{}
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}
	gotRev, gotAcct, err := s.Revoke(ctx(t), r, rec.resign)
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	diff(t, "returned revocation", r, gotRev)
	if rec.calls != 1 {
		t.Fatalf("resign called %d times, want 1", rec.calls)
	}
	diff(t, "account given to resign", acct, rec.acct)
	diff(t, "revocations given to resign", []provisioning.Revocation{r}, rec.all)
	if !strings.HasPrefix(gotAcct.JWT, "resigned-1-") {
		t.Errorf("returned account JWT = %q, want the one resign returned", gotAcct.JWT)
	}
	if gotAcct.PubKey != acct.PubKey || !bytes.Equal(gotAcct.Seed, acct.Seed) || !gotAcct.CreatedAt.Equal(acct.CreatedAt) {
		t.Errorf("returned account = %+v, want %s with its seed and creation time", gotAcct, acct.PubKey)
	}
	wantStored(t, s, "Revoke", gotAcct, acct.UpdatedAt)

	if _, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("ActiveSensorUser of a revoked user: err = %v, want ErrNotFound", err)
	}
	if got, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-2"); err != nil || got.PubKey != sibling.PubKey {
		t.Errorf("sibling sensor after Revoke = %s, %v; want %s still active", got.PubKey, err, sibling.PubKey)
	}
	fresh := sensorUser(acct, "sensor-1")
	fresh.CreatedAt = t0.Add(2 * time.Hour)
	got, created, err := s.CreateUser(ctx(t), fresh)
	if err != nil || !created {
		t.Fatalf("CreateUser after revocation = created %v, err %v; want a new user", created, err)
	}
	diff(t, "new user after revocation", fresh, got)
	active, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ActiveSensorUser after re-create", fresh, active)
}

func testRevokeIdempotent(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	first := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}
	if _, _, err := s.Revoke(ctx(t), first, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Account(ctx(t), acct.PubKey)
	rec := &resignRecorder{}
	later := first
	later.RevokedAt = t0.Add(3 * time.Hour)
	gotRev, gotAcct, err := s.Revoke(ctx(t), later, rec.resign)
	if err != nil {
		t.Fatalf("repeated Revoke: %v", err)
	}
	diff(t, "repeated Revoke result", first, gotRev)
	diff(t, "resign list on repeat", []provisioning.Revocation{first}, rec.all)
	if gotAcct.JWT == before.JWT {
		t.Errorf("repeated Revoke kept the old JWT; want the freshly signed one")
	}
	if _, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("ActiveSensorUser after repeat: err = %v, want ErrNotFound", err)
	}
}

func testRevokeKeepsEarliest(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(3 * time.Hour)}
	if _, _, err := s.Revoke(ctx(t), r, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	earlier := r
	earlier.RevokedAt = t0.Add(time.Hour) // another replica's clock ran behind
	rec := &resignRecorder{}
	got, _, err := s.Revoke(ctx(t), earlier, rec.resign)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Revoke with an earlier time", earlier, got)
	diff(t, "resign list", []provisioning.Revocation{earlier}, rec.all)
}

func testRevokeFullList(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	var want []provisioning.Revocation
	for i := range 3 {
		u := createUser(t, s, sensorUser(acct, fmt.Sprintf("sensor-%d", i)))
		want = append(want, provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Duration(i+1) * time.Hour)})
	}
	// A key never stored as a user can still be revoked.
	want = append(want, provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0.Add(10 * time.Hour)})
	// Another account's revocations are not part of this account's list.
	other := createAccount(t, s, "globex")
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: other.PubKey, UserPubKey: key("U"), RevokedAt: t0}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	rec := &resignRecorder{}
	for i, r := range want {
		if _, _, err := s.Revoke(ctx(t), r, rec.resign); err != nil {
			t.Fatal(err)
		}
		diff(t, fmt.Sprintf("resign list after %d revocations", i+1), sortRevs(want[:i+1]), sortRevs(rec.all))
		if rec.acct.PubKey != acct.PubKey || rec.acct.Kind != provisioning.KindTenant || rec.acct.TenantID != "acme" {
			t.Errorf("resign got account %s/%s/%s, want %s/tenant/acme", rec.acct.PubKey, rec.acct.Kind, rec.acct.TenantID, acct.PubKey)
		}
	}
}

func testRevokeUnknownAccount(t *testing.T, s Store) {
	createAccount(t, s, "acme")
	rec := &resignRecorder{}
	_, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: key("A"), UserPubKey: key("U"), RevokedAt: t0}, rec.resign)
	wantErr(t, "Revoke in an unknown account", err, provisioning.ErrNotFound)
	if rec.calls != 0 {
		t.Errorf("resign called %d times for an unknown account, want 0", rec.calls)
	}
}

func testRevokeResignFailure(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	boom := errors.New("signer broken")
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}
	_, _, err := s.Revoke(ctx(t), r, func(provisioning.Account, []provisioning.Revocation) (string, error) { return "", boom })
	wantErr(t, "Revoke with a failing resign", err, boom)

	got, err := s.Account(ctx(t), acct.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "account after failed Revoke", acct, got)
	if _, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1"); err != nil {
		t.Errorf("user revoked although Revoke failed: %v", err)
	}
	rec := &resignRecorder{}
	later := r
	later.RevokedAt = t0.Add(2 * time.Hour)
	if _, _, err := s.Revoke(ctx(t), later, rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "revocation list after a failed then a good Revoke", []provisioning.Revocation{later}, rec.all)
}

func testRevokeOtherAccount(t *testing.T, s Store) {
	acme := createAccount(t, s, "acme")
	globex := createAccount(t, s, "globex")
	u := createUser(t, s, sensorUser(globex, "sensor-1"))
	if _, _, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acme.PubKey, UserPubKey: u.PubKey, RevokedAt: t0}, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ActiveSensorUser(ctx(t), "globex", "sensor-1"); err != nil {
		t.Errorf("revoking the key in another account revoked the user: %v", err)
	}
}

// Concurrent revocations in one account must serialise: the final JWT is
// signed over every revocation, none lost to a racing writer.
func testRevokeConcurrent(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	const n = 10
	errs := make([]error, n)
	users := make([]provisioning.User, n)
	for i := range n {
		users[i] = createUser(t, s, sensorUser(acct, fmt.Sprintf("sensor-%d", i)))
	}
	atOnce(n, func(i int) {
		_, _, errs[i] = s.Revoke(context.Background(), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: users[i].PubKey, RevokedAt: t0}, (&resignRecorder{}).resign)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Revoke %d: %v", i, err)
		}
	}
	got, err := s.Account(ctx(t), acct.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("resigned-%d-", n); !strings.HasPrefix(got.JWT, want) {
		t.Errorf("final JWT = %q, want one signed over all %d revocations (prefix %q)", got.JWT, n, want)
	}
}

func testRevokeMany(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u1 := createUser(t, s, sensorUser(acct, "sensor-1"))
	u2 := createUser(t, s, sensorUser(acct, "sensor-2"))
	keep := createUser(t, s, sensorUser(acct, "sensor-3"))
	early := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u1.PubKey, RevokedAt: t0.Add(time.Hour)}
	if _, _, err := s.Revoke(ctx(t), early, (&resignRecorder{}).resign); err != nil {
		t.Fatal(err)
	}
	rec := &resignRecorder{}
	at := t0.Add(2 * time.Hour)
	rs := []provisioning.Revocation{
		{AccountPubKey: acct.PubKey, UserPubKey: u1.PubKey, RevokedAt: at},
		{AccountPubKey: acct.PubKey, UserPubKey: u2.PubKey, RevokedAt: at},
	}
	got, a, err := s.RevokeMany(ctx(t), acct.PubKey, rs, rec.resign)
	if err != nil {
		t.Fatalf("RevokeMany: %v", err)
	}
	if rec.calls != 1 {
		t.Errorf("resign called %d times, want 1 for the whole batch", rec.calls)
	}
	want := []provisioning.Revocation{early, rs[1]}
	diff(t, "returned revocations (earliest time kept)", want, got)
	diff(t, "revocations given to resign", sortRevs(want), sortRevs(rec.all))
	if !strings.HasPrefix(a.JWT, "resigned-2-") {
		t.Errorf("account JWT = %q, want the re-signed one", a.JWT)
	}
	for _, id := range []string{"sensor-1", "sensor-2"} {
		if _, err := s.ActiveSensorUser(ctx(t), "acme", id); !errors.Is(err, provisioning.ErrNotFound) {
			t.Errorf("ActiveSensorUser(%s) after RevokeMany: err = %v, want ErrNotFound", id, err)
		}
	}
	if got, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-3"); err != nil || got.PubKey != keep.PubKey {
		t.Errorf("untouched sensor-3 = %s, %v; want still active", got.PubKey, err)
	}
	unpushed, err := s.UnpushedAccounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pubKeys(unpushed), acct.PubKey) {
		t.Errorf("account not awaiting its push after RevokeMany")
	}
}

func testRevokeManyOtherAccount(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	other := createAccount(t, s, "globex")
	u := createUser(t, s, sensorUser(other, "sensor-1"))
	rs := []provisioning.Revocation{{AccountPubKey: other.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}}
	if _, _, err := s.RevokeMany(ctx(t), acct.PubKey, rs, (&resignRecorder{}).resign); err == nil {
		t.Fatal("RevokeMany accepted a revocation naming another account")
	}
	if got, err := s.ActiveSensorUser(ctx(t), "globex", "sensor-1"); err != nil || got.PubKey != u.PubKey {
		t.Errorf("other account's user = %s, %v; want untouched", got.PubKey, err)
	}
}

// Entries whose ExpiresAt has passed by the latest revocation's time leave
// the list; entries without one stay; a repeat keeps the later expiry and
// "never" over any time.
func testRevokeDropsExpired(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	rec := &resignRecorder{}
	old := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0, ExpiresAt: t0.Add(10 * time.Hour)}
	never := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0}
	extended := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0, ExpiresAt: t0.Add(10 * time.Hour)}
	if _, _, err := s.RevokeMany(ctx(t), acct.PubKey, []provisioning.Revocation{old, never, extended}, rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "list with nothing expired", sortRevs([]provisioning.Revocation{old, never, extended}), rec.all)
	again := extended
	again.RevokedAt, again.ExpiresAt = t0.Add(time.Hour), t0.Add(20*time.Hour)
	if _, _, err := s.Revoke(ctx(t), again, rec.resign); err != nil {
		t.Fatal(err)
	}
	extended.ExpiresAt = again.ExpiresAt // the later expiry, the earlier time
	diff(t, "list after a repeat", sortRevs([]provisioning.Revocation{old, never, extended}), rec.all)

	later := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0.Add(10 * time.Hour)}
	if _, _, err := s.Revoke(ctx(t), later, rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "list once the first expired", sortRevs([]provisioning.Revocation{never, extended, later}), rec.all)
	// Gone from the store, not only from one list.
	if _, _, err := s.Resign(ctx(t), acct.PubKey, rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "list given to Resign", sortRevs([]provisioning.Revocation{never, extended, later}), rec.all)
}

// Reissue sets the account's AllUsers entry (a later time replaces an
// earlier one), drops the entries revoked at or before dropThrough, records
// the revocations given with it and marks every active user of the account
// (and of no other) revoked.
func testReissue(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	other := createAccount(t, s, "beta")
	u1 := createUser(t, s, sensorUser(acct, "s1"))
	u2 := createUser(t, s, sensorUser(acct, "s2"))
	ob := createUser(t, s, sensorUser(other, "s1"))
	// Created in the second after the re-issue's time: its JWT is issued
	// after the entry, so it stays active.
	young := sensorUser(acct, "s3")
	young.CreatedAt = t0.Add(2*time.Hour + time.Second)
	young = createUser(t, s, young)
	rec := &resignRecorder{}
	oldRev := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0}
	recent := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: t0.Add(90 * time.Minute)}
	if _, _, err := s.RevokeMany(ctx(t), acct.PubKey, []provisioning.Revocation{oldRev, recent}, rec.resign); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(2 * time.Hour)
	all := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: provisioning.AllUsers, RevokedAt: at}
	with := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u1.PubKey, RevokedAt: at.Add(time.Second)}
	a, n, err := s.Reissue(ctx(t), all, []provisioning.Revocation{with}, at.Add(-time.Hour), rec.resign)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Reissue revoked %d active users, want 1 (u2; u1 was revoked with it)", n)
	}
	if !strings.HasPrefix(a.JWT, "resigned-") {
		t.Errorf("account JWT %q, want the one resign returned", a.JWT)
	}
	diff(t, "list after the re-issue", sortRevs([]provisioning.Revocation{all, recent, with}), rec.all)
	if got, err := s.User(ctx(t), u2.PubKey); err != nil || !got.RevokedAt.Equal(at) {
		t.Errorf("active user after the re-issue = %+v, %v; want revoked at %s", got, err, at)
	}
	if _, err := s.ActiveSensorUser(ctx(t), "beta", "s1"); err != nil {
		t.Errorf("another tenant's user after the re-issue: %v; want still active (%s)", err, ob.PubKey)
	}
	if got, err := s.ActiveSensorUser(ctx(t), "acme", "s3"); err != nil || got.PubKey != young.PubKey {
		t.Errorf("a user created after the entry's second: %v; want still active", err)
	}
	// A later re-issue moves the entry on; an earlier one does not move it back.
	if _, _, err := s.Reissue(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: provisioning.AllUsers, RevokedAt: at.Add(-time.Minute)}, nil, t0, rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "list after an earlier re-issue", sortRevs([]provisioning.Revocation{all, recent, with}), rec.all)
	later := all
	later.RevokedAt = at.Add(3 * time.Hour)
	if _, _, err := s.Reissue(ctx(t), later, nil, later.RevokedAt.Add(-time.Hour), rec.resign); err != nil {
		t.Fatal(err)
	}
	diff(t, "list after a later re-issue", []provisioning.Revocation{later}, rec.all)
	_, _, err = s.Reissue(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: key("U"), RevokedAt: at}, nil, at, rec.resign)
	if err == nil {
		t.Error("Reissue without an AllUsers entry succeeded")
	}
	_, _, err = s.Reissue(ctx(t), provisioning.Revocation{AccountPubKey: key("A"), UserPubKey: provisioning.AllUsers, RevokedAt: at}, nil, at, rec.resign)
	wantErr(t, "Reissue of an unknown account", err, provisioning.ErrNotFound)
}

func testReissueResignFailure(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	u := createUser(t, s, sensorUser(acct, "s1"))
	boom := errors.New("boom")
	all := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: provisioning.AllUsers, RevokedAt: t0.Add(time.Hour)}
	_, _, err := s.Reissue(ctx(t), all, nil, t0.Add(time.Hour), func(provisioning.Account, []provisioning.Revocation) (string, error) { return "", boom })
	wantErr(t, "Reissue with a failing resign", err, boom)
	if got, err := s.ActiveSensorUser(ctx(t), "acme", "s1"); err != nil || got.PubKey != u.PubKey {
		t.Errorf("user after a failed re-issue: %v; want still active", err)
	}
	rec := &resignRecorder{}
	if _, _, err := s.Resign(ctx(t), acct.PubKey, rec.resign); err != nil {
		t.Fatal(err)
	}
	if len(rec.all) != 0 {
		t.Errorf("revocations after a failed re-issue: %+v", rec.all)
	}
}
