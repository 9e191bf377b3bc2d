// Package storetest is the contract suite for the provisioner's store. Every
// implementation (PostgreSQL, in-memory) runs the same Run, so they stay
// interchangeable: create-or-return under concurrency, not-found errors,
// active and revoked users, atomic revocations, sealed seeds that round-trip
// byte-exact, the single operator record and push tracking. The cases sit
// by port: operator.go (the operator record), accounts.go, users.go,
// revocation.go and consumers.go (consumer names); this file holds Run and
// the fixtures they share.
package storetest

import (
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
		{"CreateUserRefusesIncomplete", testCreateUserRefusesIncomplete},
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
		{"ConsumerNodes", testConsumerNodes},
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

// atOnce runs call(i) for every i below n, each in its own goroutine, all
// released together, and waits for them.
func atOnce(n int, call func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			call(i)
		})
	}
	close(start)
	wg.Wait()
}

// createRace makes n creates at once, of the inputs build returns, and
// checks that every call succeeds, exactly one reports created and every
// call returns that winner's input. It returns the winner's input.
func createRace[T any](t *testing.T, what string, n int, build func() T, create func(context.Context, T) (T, bool, error)) T {
	t.Helper()
	var (
		inputs  = make([]T, n)
		results = make([]T, n)
		created = make([]bool, n)
		errs    = make([]error, n)
	)
	for i := range n {
		inputs[i] = build()
	}
	atOnce(n, func(i int) {
		results[i], created[i], errs[i] = create(context.Background(), inputs[i])
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("%s: call %d: %v", what, i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("%s: calls %d and %d both report created", what, winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no call reports created", what)
	}
	for i := range n {
		diff(t, fmt.Sprintf("%s: call %d result", what, i), inputs[winner], results[i])
	}
	return inputs[winner]
}

// wantStored checks that the store holds got, the account a change
// returned, and that its UpdatedAt moved past before.
func wantStored(t *testing.T, s Store, what string, got provisioning.Account, before time.Time) {
	t.Helper()
	stored, err := s.Account(ctx(t), got.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "stored account after "+what, got, stored)
	if !stored.UpdatedAt.After(before) {
		t.Errorf("%s: UpdatedAt = %v, want later than %v", what, stored.UpdatedAt, before)
	}
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

// Accounts.

// Users.

// Revocations.

// Push tracking.

func testPing(t *testing.T, s Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Errorf("Ping = %v, want nil", err)
	}
}
