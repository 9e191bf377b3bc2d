package operators_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/adapters/memory/operatormem"
	"github.com/rxc-project/rxc/core/clocktest"
	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

// The use-case tests of this package run the Service on the in-memory
// store (adapters/memory/operatormem), which passes the same contract suite
// (operatorstest.Run) as the PostgreSQL store, and on operatorstest's fast
// fake password hasher.

type fixture struct {
	ctx    context.Context
	store  *operatormem.Store
	svc    *operators.Service
	hasher *operatorstest.Hasher
	clock  *clocktest.Clock
}

const password = "correct horse battery"

func newFixture(t testing.TB, configure ...func(*operators.Config)) *fixture {
	t.Helper()
	store := memtest.Store(t, operatormem.New, operatormem.Config{})
	f := &fixture{ctx: context.Background(), store: store, hasher: &operatorstest.Hasher{}, clock: clocktest.New(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))}
	f.svc = contracttest.Configured(t, operators.New, f.config(), configure...)
	return f
}

// config is the Service's configuration on the fixture's store, hasher and
// clock, before a test's changes.
func (f *fixture) config() operators.Config {
	return operators.Config{Store: f.store, Hasher: f.hasher, Clock: f.clock.Now}
}

// another is a second Service on the fixture's store, hasher and clock,
// with changes.
func (f *fixture) another(t testing.TB, changes ...func(*operators.Config)) *operators.Service {
	t.Helper()
	return contracttest.Configured(t, operators.New, f.config(), changes...)
}

// hashOf is the hasher's hash of pw.
func (f *fixture) hashOf(pw string) string {
	h, _ := f.hasher.Hash(pw)
	return h
}

// operator creates an operator with the shared password.
func (f *fixture) operator(t testing.TB, email string, role operators.Role, tenants ...string) operators.Operator {
	t.Helper()
	o, err := f.svc.CreateOperator(f.ctx, operators.NewOperator{Email: email, Password: password, Role: role, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// loggedIn creates an operator and logs it in.
func (f *fixture) loggedIn(t testing.TB, email string, role operators.Role, tenants ...string) operators.Principal {
	t.Helper()
	f.operator(t, email, role, tenants...)
	p, _ := f.login(t, email)
	return p
}

// apiToken creates the API token n as p: its record and the token.
func (f *fixture) apiToken(t testing.TB, p operators.Principal, n operators.NewAPIToken) (operators.APIToken, string) {
	t.Helper()
	rec, token, err := f.svc.CreateAPIToken(f.ctx, p, n)
	if err != nil {
		t.Fatal(err)
	}
	return rec, token
}

// member is an operator of a test, logged in.
type member struct {
	op      operators.Operator
	p       operators.Principal
	session string
}

// staff creates and logs in an admin, bob (operator of acme) and carol (of
// acme in carolRole), in that order.
func (f *fixture) staff(t testing.TB, carolRole operators.Role) (admin, bob, carol member) {
	t.Helper()
	admin.op = f.operator(t, "admin@example.com", operators.RoleAdmin)
	bob.op = f.operator(t, "bob@example.com", operators.RoleOperator, "acme")
	carol.op = f.operator(t, "carol@example.com", carolRole, "acme")
	admin.p, admin.session = f.login(t, "admin@example.com")
	bob.p, bob.session = f.login(t, "bob@example.com")
	carol.p, carol.session = f.login(t, "carol@example.com")
	return admin, bob, carol
}

// login signs email in with the shared password and returns the session's principal and token.
func (f *fixture) login(t testing.TB, email string) (operators.Principal, string) {
	t.Helper()
	_, token, _, err := f.svc.Login(f.ctx, email, password, "192.0.2.1")
	if err != nil {
		t.Fatalf("Login(%s): %v", email, err)
	}
	p, err := f.svc.Authenticate(f.ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	return p, token
}

// hashOf is the stored form of a session or API token.
func hashOf(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}
