// Package storetest is the contract suite for the provisioner's store. Every
// implementation (PostgreSQL, in-memory) runs the same Run, so they stay
// interchangeable: create-or-return under concurrency, not-found errors,
// active and revoked users, atomic revocations, sealed seeds that round-trip
// byte-exact, the single operator record and push tracking.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/provisioning"
)

// Store is what the provisioner's binaries need from a store: the core port
// plus operator initialisation, listing and a health check.
type Store interface {
	provisioning.Store
	// InitOperator stores the operator record with its SYS and CONTROL
	// accounts in one step, or returns provisioning.ErrOperatorExists.
	InitOperator(ctx context.Context, op provisioning.Operator, sys, control provisioning.Account) error
	// ReplaceOperatorJWT replaces the operator's JWT when the stored one
	// is still oldJWT (provisioning.SigningKeyRecords).
	ReplaceOperatorJWT(ctx context.Context, pubKey, oldJWT, newJWT string) error
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// Run runs the contract suite. newStore returns a fresh, empty store for
// each subtest; subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	contracttest.Run(t, newStore, contracttest.Cases[Store]{
		{"OperatorMissing", testOperatorMissing},
		{"InitOperator", testInitOperator},
		{"InitOperatorTwice", testInitOperatorTwice},
		{"InitOperatorRejectsMismatch", testInitOperatorRejectsMismatch},
		{"ReplaceOperatorJWT", testReplaceOperatorJWT},
		{"AccountNotFound", testAccountNotFound},
		{"CreateTenantAccount", testCreateTenantAccount},
		{"CreateTenantAccountConcurrent", testCreateTenantAccountConcurrent},
		{"SeedsRoundTripByteExact", testSeedsRoundTrip},
		{"CreateSensorUser", testCreateSensorUser},
		{"CreateBackendUser", testCreateBackendUser},
		{"CreateUserConcurrent", testCreateUserConcurrent},
		{"CreateUserUnknownAccount", testCreateUserUnknownAccount},
		{"UsersNotFound", testUsersNotFound},
		{"RevokeSensorUser", testRevokeSensorUser},
		{"ReplaceUserJWT", testReplaceUserJWT},
		{"RevokeIsIdempotentKeepingFirstTime", testRevokeIdempotent},
		{"RevokeKeepsEarliestTime", testRevokeKeepsEarliest},
		{"RevokeResignsWithFullList", testRevokeFullList},
		{"RevokeUnknownAccount", testRevokeUnknownAccount},
		{"RevokeResignFailureChangesNothing", testRevokeResignFailure},
		{"RevokeOnlyTouchesUsersOfThatAccount", testRevokeOtherAccount},
		{"RevokeConcurrent", testRevokeConcurrent},
		{"PushTracking", testPushTracking},
		{"ListAccounts", testListAccounts},
		{"ResignReplacesAndAwaitsPush", testResign},
		{"ResignKeepsWhenUnchanged", testResignUnchanged},
		{"ResignFailureChangesNothing", testResignFailure},
		{"ResignUnknownAccount", testResignUnknownAccount},
		{"Ping", testPing},
		{"RevokeManySignsOnce", testRevokeMany},
		{"RevokeManyRefusesOtherAccount", testRevokeManyOtherAccount},
		{"ActiveUsersWithoutSeeds", testActiveUsers},
		{"ClaimConsumer", testClaimConsumer},
		{"ClaimConsumerConcurrent", testClaimConsumerConcurrent},
		{"ClaimSensor", testClaimSensor},
		{"ClaimSensorConcurrent", testClaimSensorConcurrent},
		{"ClaimSensorAcrossTenants", testClaimSensorAcrossTenants},
		{"ClaimSensorConcurrentOnePair", testClaimSensorConcurrentOnePair},
		{"User", testUser},
		{"RevokeDropsExpiredEntries", testRevokeDropsExpired},
		{"Reissue", testReissue},
		{"ReissueResignFailureChangesNothing", testReissueResignFailure},
		{"RetireSensorClaim", testRetireSensorClaim},
	})
}

// Fixtures.

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// key returns a fresh, well-formed-looking NATS public key with the given
// prefix ('O' operator, 'A' account, 'U' user).
func key(prefix string) string {
	b := make([]byte, 35)
	_, _ = rand.Read(b)
	return prefix + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:55]
}

// seed returns random bytes shaped like an nkeys seed, with a zero byte and
// non-ASCII bytes mixed in to catch lossy encodings.
func seed() []byte {
	b := make([]byte, 58)
	_, _ = rand.Read(b)
	b[3], b[10] = 0, 0xff
	return b
}

func tenantAccount(tenantID string) provisioning.Account {
	return provisioning.Account{
		PubKey: key("A"), Kind: provisioning.KindTenant, TenantID: tenantID, Name: "Tenant " + tenantID,
		Seed: seed(), JWT: "jwt-of-" + tenantID + "-" + key(""), CreatedAt: t0, UpdatedAt: t0,
	}
}

func sensorUser(acct provisioning.Account, sensorID string) provisioning.User {
	return provisioning.User{
		PubKey: key("U"), AccountPubKey: acct.PubKey, Kind: provisioning.UserSensor,
		TenantID: acct.TenantID, SensorID: sensorID, Name: sensorID, Seed: seed(),
		JWT: "user-jwt-" + key(""), CreatedAt: t0.Add(time.Minute),
	}
}

func backendUser(acct provisioning.Account, name string) provisioning.User {
	return provisioning.User{
		PubKey: key("U"), AccountPubKey: acct.PubKey, Kind: provisioning.UserBackend, Name: name,
		Seed: seed(), JWT: "user-jwt-" + key(""), CreatedAt: t0.Add(time.Minute),
	}
}

type operatorFixture struct {
	op           provisioning.Operator
	sys, control provisioning.Account
}

func newOperator() operatorFixture {
	sys := provisioning.Account{PubKey: key("A"), Kind: provisioning.KindSystem, Name: "SYS", Seed: seed(), JWT: "sys-jwt", CreatedAt: t0, UpdatedAt: t0}
	control := provisioning.Account{PubKey: key("A"), Kind: provisioning.KindControl, Name: "CONTROL", Seed: seed(), JWT: "control-jwt", CreatedAt: t0, UpdatedAt: t0}
	op := provisioning.Operator{PubKey: key("O"), Name: "rxc", JWT: "op-jwt", SystemAccount: sys.PubKey, ControlAccount: control.PubKey, CreatedAt: t0}
	return operatorFixture{op: op, sys: sys, control: control}
}

func initOperator(t *testing.T, s Store) operatorFixture {
	t.Helper()
	f := newOperator()
	if err := s.InitOperator(ctx(t), f.op, f.sys, f.control); err != nil {
		t.Fatalf("InitOperator: %v", err)
	}
	return f
}

func createAccount(t *testing.T, s Store, tenantID string) provisioning.Account {
	t.Helper()
	a := tenantAccount(tenantID)
	got, created, err := s.CreateTenantAccount(ctx(t), a)
	if err != nil || !created {
		t.Fatalf("CreateTenantAccount(%s) = created %v, err %v; want created", tenantID, created, err)
	}
	return got
}

func createUser(t *testing.T, s Store, u provisioning.User) provisioning.User {
	t.Helper()
	got, created, err := s.CreateUser(ctx(t), u)
	if err != nil || !created {
		t.Fatalf("CreateUser(%s) = created %v, err %v; want created", u.Name, created, err)
	}
	return got
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// resignRecorder is a resign callback that records what it was given.
type resignRecorder struct {
	mu    sync.Mutex
	calls int
	acct  provisioning.Account
	all   []provisioning.Revocation
}

func (r *resignRecorder) resign(a provisioning.Account, all []provisioning.Revocation) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.acct, r.all = a, slices.Clone(all)
	return fmt.Sprintf("resigned-%d-%s", len(all), key("")), nil
}

func sortRevs(rs []provisioning.Revocation) []provisioning.Revocation {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b provisioning.Revocation) int { return strings.Compare(a.UserPubKey, b.UserPubKey) })
	return rs
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s mismatch:\n got: %+v\nwant: %+v", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s error = %v, want %v", what, err, want)
	}
}

// Operator.

func testOperatorMissing(t *testing.T, s Store) {
	_, err := s.Operator(ctx(t))
	wantErr(t, "Operator on an empty store", err, provisioning.ErrNoOperator)
	wantErr(t, "Operator on an empty store", err, provisioning.ErrNotFound)
}

func testInitOperator(t *testing.T, s Store) {
	f := initOperator(t, s)
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatalf("Operator: %v", err)
	}
	diff(t, "Operator", f.op, got)
	for _, want := range []provisioning.Account{f.sys, f.control} {
		got, err := s.Account(ctx(t), want.PubKey)
		if err != nil {
			t.Fatalf("Account(%s): %v", want.Name, err)
		}
		diff(t, "Account("+want.Name+")", want, got)
	}
	if _, err := s.TenantAccount(ctx(t), "SYS"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("TenantAccount(SYS) error = %v, want ErrNotFound: system accounts are not tenants", err)
	}
}

func testInitOperatorTwice(t *testing.T, s Store) {
	first := initOperator(t, s)
	second := newOperator()
	err := s.InitOperator(ctx(t), second.op, second.sys, second.control)
	wantErr(t, "second InitOperator", err, provisioning.ErrOperatorExists)
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Operator after a refused second init", first.op, got)
	if _, err := s.Account(ctx(t), second.sys.PubKey); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("refused init stored its SYS account: Account error = %v, want ErrNotFound", err)
	}
}

// testReplaceOperatorJWT: the JWT is replaced only while it is the one the
// caller read, and only for the stored operator.
func testReplaceOperatorJWT(t *testing.T, s Store) {
	f := initOperator(t, s)
	old := f.op.JWT
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, "not.the.stored.jwt", "eyJ.stale.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("ReplaceOperatorJWT from a stale JWT: %v, want ErrOperatorChanged", err)
	}
	if err := s.ReplaceOperatorJWT(ctx(t), key("O"), old, "eyJ.other.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("ReplaceOperatorJWT of another operator key: %v, want ErrOperatorChanged", err)
	}
	if got, err := s.Operator(ctx(t)); err != nil || got.JWT != old {
		t.Fatalf("after refused replacements the operator JWT is %q (%v), want the original", got.JWT, err)
	}
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, old, "eyJ.new.x"); err != nil {
		t.Fatalf("ReplaceOperatorJWT: %v", err)
	}
	want := f.op
	want.JWT = "eyJ.new.x"
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Operator after ReplaceOperatorJWT", want, got)
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, old, "eyJ.again.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("second ReplaceOperatorJWT from the replaced JWT: %v, want ErrOperatorChanged", err)
	}
}

func testInitOperatorRejectsMismatch(t *testing.T, s Store) {
	tests := []struct {
		name   string
		mutate func(f *operatorFixture)
	}{
		{"system account key differs", func(f *operatorFixture) { f.op.SystemAccount = key("A") }},
		{"control account key differs", func(f *operatorFixture) { f.op.ControlAccount = key("A") }},
		{"sys has tenant kind", func(f *operatorFixture) { f.sys.Kind = provisioning.KindTenant }},
		{"control has system kind", func(f *operatorFixture) { f.control.Kind = provisioning.KindSystem }},
		{"no operator key", func(f *operatorFixture) { f.op.PubKey = "" }},
	}
	for _, tc := range tests {
		f := newOperator()
		tc.mutate(&f)
		err := s.InitOperator(ctx(t), f.op, f.sys, f.control)
		wantErr(t, tc.name, err, provisioning.ErrInvalidOperator)
	}
	_, err := s.Operator(ctx(t))
	wantErr(t, "Operator after refused inits", err, provisioning.ErrNoOperator)
}

// Accounts.

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
	const n = 100
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]provisioning.Account, n)
		created = make([]bool, n)
		errs    = make([]error, n)
		inputs  = make([]provisioning.Account, n)
	)
	for i := range n {
		inputs[i] = tenantAccount("acme")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], created[i], errs[i] = s.CreateTenantAccount(context.Background(), inputs[i])
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("calls %d and %d both report created", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no call reports created")
	}
	for i := range n {
		diff(t, fmt.Sprintf("call %d result", i), inputs[winner], results[i])
	}
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

// Users.

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
		const n = 100
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			inputs  = make([]provisioning.User, n)
			results = make([]provisioning.User, n)
			created = make([]bool, n)
			errs    = make([]error, n)
		)
		for i := range n {
			inputs[i] = tc.build()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], created[i], errs[i] = s.CreateUser(context.Background(), inputs[i])
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("%s: call %d: %v", tc.name, i, errs[i])
			}
			if created[i] {
				if winner >= 0 {
					t.Fatalf("%s: calls %d and %d both report created", tc.name, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no call reports created", tc.name)
		}
		for i := range n {
			diff(t, fmt.Sprintf("%s: call %d result", tc.name, i), inputs[winner], results[i])
		}
		got, err := tc.find()
		if err != nil {
			t.Fatal(err)
		}
		diff(t, tc.name+": active user", inputs[winner], got)
	}
}

func testCreateUserUnknownAccount(t *testing.T, s Store) {
	ghost := tenantAccount("ghost")
	_, _, err := s.CreateUser(ctx(t), sensorUser(ghost, "sensor-1"))
	wantErr(t, "CreateUser in an unknown account", err, provisioning.ErrNotFound)
	_, err = s.ActiveSensorUser(ctx(t), "ghost", "sensor-1")
	wantErr(t, "ActiveSensorUser after the refused create", err, provisioning.ErrNotFound)
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

// Revocations.

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
	stored, err := s.Account(ctx(t), acct.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "stored account after Revoke", gotAcct, stored)
	if !stored.UpdatedAt.After(acct.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want later than %v", stored.UpdatedAt, acct.UpdatedAt)
	}

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
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		u := createUser(t, s, sensorUser(acct, fmt.Sprintf("sensor-%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i] = s.Revoke(context.Background(), provisioning.Revocation{AccountPubKey: acct.PubKey, UserPubKey: u.PubKey, RevokedAt: t0}, (&resignRecorder{}).resign)
		}()
	}
	close(start)
	wg.Wait()
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

// Push tracking.

func pubKeys(as []provisioning.Account) []string {
	var ks []string
	for _, a := range as {
		ks = append(ks, a.PubKey)
	}
	slices.Sort(ks)
	return ks
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
	stored, err := s.Account(ctx(t), acct.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "stored account after Resign", got, stored)
	if !stored.UpdatedAt.After(revoked.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want later than %v", stored.UpdatedAt, revoked.UpdatedAt)
	}
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

func testPing(t *testing.T, s Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Errorf("Ping = %v, want nil", err)
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
	claims, err := s.ConsumerClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(claims, func(a, b provisioning.ConsumerClaim) int { return strings.Compare(a.Consumer, b.Consumer) })
	diff(t, "claims", []provisioning.ConsumerClaim{
		{Consumer: "cmd-acme-eu-s1", TenantID: "acme", SensorID: "eu-s1"},
		{Consumer: "cmd-acme-eu-s2", TenantID: "acme-eu", SensorID: "s2"},
	}, claims)
}

// testClaimConsumerConcurrent races the two pairs that spell one name:
// exactly one pair owns it afterwards, and every call of the other fails.
func testClaimConsumerConcurrent(t *testing.T, s Store) {
	const n = 20
	pairs := [2][2]string{{"acme", "eu-s1"}, {"acme-eu", "s1"}}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pairs[i%2]
			errs[i] = s.ClaimConsumer(ctx(t), "cmd-acme-eu-s1", p[0], p[1])
		}()
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
	claims, err := s.ConsumerClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "claims", []provisioning.ConsumerClaim{{Consumer: "cmd-acme-eu-s1", TenantID: "acme", SensorID: "eu-s1"}}, claims)
}

// testClaimSensorConcurrent races the two pairs that spell one name
// through ClaimSensor: one pair owns it, every call of the other fails.
func testClaimSensorConcurrent(t *testing.T, s Store) {
	createAccount(t, s, "acme")
	createAccount(t, s, "acme-eu")
	const n = 20
	pairs := [2][2]string{{"acme", "eu-s1"}, {"acme-eu", "s1"}}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			p := pairs[i%2]
			_, errs[i] = s.ClaimSensor(ctx(t), "cmd-acme-eu-s1", p[0], p[1])
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
	claims, err := s.ConsumerClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(claims, func(a, b provisioning.ConsumerClaim) int { return strings.Compare(a.Consumer, b.Consumer) })
	diff(t, "claims", []provisioning.ConsumerClaim{
		{Consumer: "cmd-acme-s1", TenantID: "acme", SensorID: "s1"},
		{Consumer: "cmd-globex-s1", TenantID: "globex", SensorID: "s1"},
	}, claims)
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
