package storetest

// Tenant accounts: create-or-return, sealed seeds, listing, push tracking
// and re-signing.

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/provisioning"
)

func testAccountNotFound(t *testing.T, s Store) {
	createAccount(t, s, "acme")
	_, err := s.Account(ctx(t), key("A"))
	wantErr(t, "Account(unknown)", err, provisioning.ErrNotFound)
	_, err = s.TenantAccount(ctx(t), "globex")
	wantErr(t, "TenantAccount(unknown)", err, provisioning.ErrNotFound)
	err = s.MarkPushed(ctx(t), key("A"), "jwt")
	wantErr(t, "MarkPushed(unknown)", err, provisioning.ErrNotFound)
}

func testCreateTenantAccount(t *testing.T, s Store) {
	want := tenantAccount("acme")
	got, created, err := s.CreateTenantAccount(ctx(t), want)
	if err != nil || !created {
		t.Fatalf("first CreateTenantAccount = created %v, err %v; want created", created, err)
	}
	diff(t, "created account", want, got)

	again := tenantAccount("acme")
	got, created, err = s.CreateTenantAccount(ctx(t), again)
	if err != nil {
		t.Fatalf("second CreateTenantAccount: %v", err)
	}
	if created {
		t.Errorf("second CreateTenantAccount reported created, want the existing account")
	}
	diff(t, "second CreateTenantAccount result", want, got)
	if _, err := s.Account(ctx(t), again.PubKey); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("losing account key was stored: Account error = %v, want ErrNotFound", err)
	}

	byTenant, err := s.TenantAccount(ctx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "TenantAccount", want, byTenant)
	byKey, err := s.Account(ctx(t), want.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Account", want, byKey)

	other := createAccount(t, s, "globex")
	if other.PubKey == want.PubKey {
		t.Errorf("second tenant got the first tenant's account")
	}
}

func testCreateTenantAccountConcurrent(t *testing.T, s Store) {
	createRace(t, "CreateTenantAccount", 100, func() provisioning.Account { return tenantAccount("acme") }, s.CreateTenantAccount)
	all, err := s.ListAccounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Errorf("ListAccounts has %d accounts after 100 identical creates, want 1", len(all))
	}
}

func testSeedsRoundTrip(t *testing.T, s Store) {
	seeds := map[string][]byte{
		"nkeys-like": []byte("SAAJ7UBUKIUDJHWNQAA3WVGJ3AVVMBBBSJGRS5XSKGJF6HCW7VMUKDZUTQ"),
		"binary":     {0, 1, 2, 0xfe, 0xff, 0, 0x80},
		"one-byte":   {0},
	}
	for name, sd := range seeds {
		a := tenantAccount("t-" + name)
		a.Seed = bytes.Clone(sd)
		if _, created, err := s.CreateTenantAccount(ctx(t), a); err != nil || !created {
			t.Fatalf("CreateTenantAccount = created %v, err %v", created, err)
		}
		a.Seed[0] ^= 0xff // the store must have copied, not kept, the slice
		got, err := s.Account(ctx(t), a.PubKey)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Seed, sd) {
			t.Errorf("%s: account seed = %x, want %x", name, got.Seed, sd)
		}
		got.Seed[0] ^= 0xff // nor hand out its own
		again, _ := s.Account(ctx(t), a.PubKey)
		if !bytes.Equal(again.Seed, sd) {
			t.Errorf("%s: mutating a returned seed changed the stored one", name)
		}

		u := sensorUser(got, "s-"+name)
		u.Seed = bytes.Clone(sd)
		createUser(t, s, u)
		gotU, err := s.ActiveSensorUser(ctx(t), got.TenantID, "s-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotU.Seed, sd) {
			t.Errorf("%s: user seed = %x, want %x", name, gotU.Seed, sd)
		}
	}
}

func pubKeys(as []provisioning.Account) []string {
	return contracttest.SortedKeys(as, func(a provisioning.Account) string { return a.PubKey })
}

func sorted(ks ...string) []string {
	ks = slices.Clone(ks)
	slices.Sort(ks)
	return ks
}

func testPushTracking(t *testing.T, s Store) {
	f := initOperator(t, s)
	acct := createAccount(t, s, "acme")
	unpushed := func() []string {
		t.Helper()
		as, err := s.UnpushedAccounts(ctx(t))
		if err != nil {
			t.Fatalf("UnpushedAccounts: %v", err)
		}
		return pubKeys(as)
	}
	diff(t, "unpushed after creation", sorted(f.sys.PubKey, f.control.PubKey, acct.PubKey), unpushed())

	for _, a := range []provisioning.Account{f.sys, f.control, acct} {
		if err := s.MarkPushed(ctx(t), a.PubKey, a.JWT); err != nil {
			t.Fatalf("MarkPushed(%s): %v", a.Name, err)
		}
	}
	diff(t, "unpushed after pushing all", []string(nil), unpushed())

	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	_, revoked, err := s.Revoke(ctx(t), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0}, (&resignRecorder{}).resign)
	if err != nil {
		t.Fatal(err)
	}
	as, err := s.UnpushedAccounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].JWT != revoked.JWT || !bytes.Equal(as[0].Seed, acct.Seed) {
		t.Fatalf("unpushed after Revoke = %+v, want only %s with its new JWT", as, acct.PubKey)
	}

	// A push of the old JWT finishing late must not hide the new one.
	if err := s.MarkPushed(ctx(t), acct.PubKey, acct.JWT); err != nil {
		t.Fatalf("MarkPushed(stale JWT): %v", err)
	}
	diff(t, "unpushed after marking a stale JWT", []string{acct.PubKey}, unpushed())

	if err := s.MarkPushed(ctx(t), acct.PubKey, revoked.JWT); err != nil {
		t.Fatal(err)
	}
	diff(t, "unpushed after marking the current JWT", []string(nil), unpushed())
}

func testListAccounts(t *testing.T, s Store) {
	if as, err := s.ListAccounts(ctx(t)); err != nil || len(as) != 0 {
		t.Fatalf("ListAccounts on an empty store = %d accounts, %v; want none", len(as), err)
	}
	f := initOperator(t, s)
	acme := createAccount(t, s, "acme")
	globex := createAccount(t, s, "globex")
	got, err := s.ListAccounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]provisioning.Account{}
	for _, a := range got {
		byKey[a.PubKey] = a
	}
	want := map[string]provisioning.Account{f.sys.PubKey: f.sys, f.control.PubKey: f.control, acme.PubKey: acme, globex.PubKey: globex}
	diff(t, "ListAccounts", want, byKey)
	if len(got) != len(want) {
		t.Errorf("ListAccounts returned %d accounts, want %d", len(got), len(want))
	}
}

// resignWith returns a Resign callback that records what it was given and
// answers jwt.
func resignWith(rec *resignRecorder, jwt string) func(provisioning.Account, []provisioning.Revocation) (string, error) {
	return func(a provisioning.Account, all []provisioning.Revocation) (string, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.calls++
		rec.acct, rec.all = a, all
		return jwt, nil
	}
}

func testResign(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	if err := s.MarkPushed(ctx(t), acct.PubKey, acct.JWT); err != nil {
		t.Fatal(err)
	}
	u := createUser(t, s, sensorUser(acct, "sensor-1"))
	r := provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0.Add(time.Hour)}
	_, revoked, err := s.Revoke(ctx(t), r, (&resignRecorder{}).resign)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPushed(ctx(t), acct.PubKey, revoked.JWT); err != nil {
		t.Fatal(err)
	}

	rec := &resignRecorder{}
	got, changed, err := s.Resign(ctx(t), acct.PubKey, resignWith(rec, "refreshed-jwt"))
	if err != nil || !changed {
		t.Fatalf("Resign = changed %v, err %v; want changed", changed, err)
	}
	if rec.calls != 1 {
		t.Fatalf("resign called %d times, want 1", rec.calls)
	}
	diff(t, "account given to resign", revoked, rec.acct)
	diff(t, "revocations given to resign", []provisioning.Revocation{r}, rec.all)
	if got.JWT != "refreshed-jwt" || got.PubKey != acct.PubKey || !bytes.Equal(got.Seed, acct.Seed) {
		t.Errorf("Resign returned %+v, want %s with the new JWT and its seed", got, acct.PubKey)
	}
	wantStored(t, s, "Resign", got, revoked.UpdatedAt)
	unpushed, err := s.UnpushedAccounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(unpushed) != 1 || unpushed[0].JWT != "refreshed-jwt" {
		t.Errorf("unpushed after Resign = %v, want only %s with its new JWT", pubKeys(unpushed), acct.PubKey)
	}
	if _, err := s.ActiveSensorUser(ctx(t), "acme", "sensor-1"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("Resign brought a revoked user back: %v", err)
	}
}

func testResignUnchanged(t *testing.T, s Store) {
	f := initOperator(t, s)
	for _, a := range []provisioning.Account{f.sys, f.control} {
		if err := s.MarkPushed(ctx(t), a.PubKey, a.JWT); err != nil {
			t.Fatal(err)
		}
	}
	rec := &resignRecorder{}
	got, changed, err := s.Resign(ctx(t), f.control.PubKey, resignWith(rec, ""))
	if err != nil || changed {
		t.Fatalf("Resign answering \"\" = changed %v, err %v; want unchanged", changed, err)
	}
	if len(rec.all) != 0 {
		t.Errorf("revocations given to resign = %v, want none", rec.all)
	}
	diff(t, "Resign result when unchanged", f.control, got)
	stored, err := s.Account(ctx(t), f.control.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "stored account when unchanged", f.control, stored)
	if as, err := s.UnpushedAccounts(ctx(t)); err != nil || len(as) != 0 {
		t.Errorf("unpushed after an unchanged Resign = %v, %v; want none", pubKeys(as), err)
	}
}

func testResignFailure(t *testing.T, s Store) {
	acct := createAccount(t, s, "acme")
	boom := errors.New("signer broken")
	_, changed, err := s.Resign(ctx(t), acct.PubKey, func(provisioning.Account, []provisioning.Revocation) (string, error) { return "other", boom })
	wantErr(t, "Resign with a failing resign", err, boom)
	if changed {
		t.Error("Resign reported a change although resign failed")
	}
	got, err := s.Account(ctx(t), acct.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "account after failed Resign", acct, got)
}

func testResignUnknownAccount(t *testing.T, s Store) {
	createAccount(t, s, "acme")
	rec := &resignRecorder{}
	_, _, err := s.Resign(ctx(t), key("A"), resignWith(rec, "x"))
	wantErr(t, "Resign of an unknown account", err, provisioning.ErrNotFound)
	if rec.calls != 0 {
		t.Errorf("resign called %d times for an unknown account, want 0", rec.calls)
	}
}
