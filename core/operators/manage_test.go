package operators_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/operators"
)

// Scopes: what a principal of one tenant may do on another. An object of
// a tenant the principal does not see is answered as if it did not exist.
func TestScopesAcrossTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operator(t, "admin@example.com", operators.RoleAdmin)
	f.operator(t, "op@example.com", operators.RoleOperator, "acme")
	f.operator(t, "viewer@example.com", operators.RoleViewer, "acme", "beta")
	admin, _ := f.login(t, "admin@example.com")
	op, _ := f.login(t, "op@example.com")
	viewer, _ := f.login(t, "viewer@example.com")

	tests := []struct {
		name   string
		p      operators.Principal
		perm   operators.Permission
		tenant string
		want   bool
	}{
		{"operator views own tenant", op, operators.PermView, "acme", true},
		{"operator operates own tenant", op, operators.PermOperate, "acme", true},
		{"operator views another tenant", op, operators.PermView, "beta", false},
		{"operator operates another tenant", op, operators.PermOperate, "beta", false},
		{"operator administers", op, operators.PermAdmin, "", false},
		{"operator, empty tenant", op, operators.PermView, "", false},
		{"viewer views both tenants", viewer, operators.PermView, "beta", true},
		{"viewer operates", viewer, operators.PermOperate, "acme", false},
		{"viewer, a tenant not granted", viewer, operators.PermView, "gamma", false},
		{"admin views any tenant", admin, operators.PermView, "gamma", true},
		{"admin operates any tenant", admin, operators.PermOperate, "gamma", true},
		{"admin administers", admin, operators.PermAdmin, "", true},
	}
	for _, tt := range tests {
		if got := tt.p.Can(tt.perm, tt.tenant); got != tt.want {
			t.Errorf("%s: Can = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A tenant id is matched exactly, never as a prefix or pattern.
	for _, id := range []string{"acm", "acme-eu", "ACME", "acme ", "*", ""} {
		if op.Sees(id) {
			t.Errorf("operator of acme sees %q", id)
		}
	}
}

func TestManagingOperatorsNeedsAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin, bob, carol := f.staff(t, operators.RoleViewer)

	// Refused for a non-admin, each next to the admin doing the same.
	_, err := f.svc.ListOperators(f.ctx, bob.p)
	wantErr(t, "operator lists operators", err, operators.ErrForbidden)
	if list, err := f.svc.ListOperators(f.ctx, admin.p); err != nil || len(list) != 3 {
		t.Errorf("admin lists %d operators, %v; want 3", len(list), err)
	}
	if o, err := f.svc.Operator(f.ctx, admin.p, carol.op.ID); err != nil || o.ID != carol.op.ID {
		t.Errorf("admin reads carol = %+v, %v", o, err)
	}
	_, err = f.svc.Operator(f.ctx, bob.p, carol.op.ID)
	wantErr(t, "operator reads another operator", err, operators.ErrNotFound)
	if o, err := f.svc.Operator(f.ctx, bob.p, bob.op.ID); err != nil || o.ID != bob.op.ID {
		t.Errorf("operator reads self = %+v, %v", o, err)
	}
	_, err = f.svc.AddOperator(f.ctx, bob.p, operators.NewOperator{Email: "eve@example.com", Password: password, Role: operators.RoleAdmin})
	wantErr(t, "operator adds an admin", err, operators.ErrForbidden)
	if _, _, err := f.store.OperatorByEmail(f.ctx, "eve@example.com"); !errors.Is(err, operators.ErrNotFound) {
		t.Errorf("a refused AddOperator stored eve: %v", err)
	}
	if eve, err := f.svc.AddOperator(f.ctx, admin.p, operators.NewOperator{Email: "eve@example.com", Password: password, Role: operators.RoleViewer, Tenants: []string{"acme"}}); err != nil || eve.Role != operators.RoleViewer {
		t.Errorf("admin adds a viewer = %+v, %v", eve, err)
	}
	adminRole, beta := operators.RoleAdmin, []string{"acme", "beta"}
	_, err = f.svc.UpdateOperator(f.ctx, bob.p, bob.op.ID, operators.Update{Role: &adminRole})
	wantErr(t, "operator promotes self", err, operators.ErrForbidden)
	_, err = f.svc.UpdateOperator(f.ctx, bob.p, bob.op.ID, operators.Update{Tenants: &beta})
	wantErr(t, "operator widens own tenants", err, operators.ErrForbidden)
	if o, _ := f.store.OperatorByID(f.ctx, bob.op.ID); o.Role != operators.RoleOperator || len(o.Tenants) != 1 {
		t.Errorf("refused updates changed bob: %+v", o)
	}
	_, err = f.svc.SignOutEverywhere(f.ctx, bob.p, carol.op.ID)
	wantErr(t, "operator signs another out", err, operators.ErrNotFound)
	if _, err := f.svc.Authenticate(f.ctx, carol.session); err != nil {
		t.Errorf("carol's session after a refused sign-out: %v", err)
	}
	if n, err := f.svc.SignOutEverywhere(f.ctx, admin.p, carol.op.ID); err != nil || n != 1 {
		t.Errorf("admin signs carol out = %d, %v; want 1", n, err)
	}
	_, err = f.svc.Authenticate(f.ctx, carol.session)
	wantErr(t, "session after sign-out", err, operators.ErrUnauthenticated)

	// Disabling ends the sessions at once and refuses the next login.
	_, bobSession := f.login(t, "bob@example.com")
	disabled := true
	if _, err := f.svc.UpdateOperator(f.ctx, admin.p, bob.op.ID, operators.Update{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Authenticate(f.ctx, bobSession)
	wantErr(t, "session of a disabled operator", err, operators.ErrUnauthenticated)
	_, _, _, err = f.svc.Login(f.ctx, "bob@example.com", password, "192.0.2.1")
	wantErr(t, "login of a disabled operator", err, operators.ErrInvalidCredentials)

	// A demoted admin starts with no tenants.
	other := f.operator(t, "other-admin@example.com", operators.RoleAdmin)
	viewerRole := operators.RoleViewer
	if o, err := f.svc.UpdateOperator(f.ctx, admin.p, other.ID, operators.Update{Role: &viewerRole}); err != nil || o.Role != operators.RoleViewer || len(o.Tenants) != 0 {
		t.Errorf("demoted admin = %+v, %v; want a viewer with no tenants", o, err)
	}
	// The last enabled admin stays.
	_, err = f.svc.UpdateOperator(f.ctx, admin.p, admin.op.ID, operators.Update{Role: &viewerRole})
	wantErr(t, "demote the last admin", err, operators.ErrLastAdmin)
	_, err = f.svc.UpdateOperator(f.ctx, admin.p, admin.op.ID, operators.Update{Disabled: &disabled})
	wantErr(t, "disable the last admin", err, operators.ErrLastAdmin)
	if _, err := f.svc.ListOperators(f.ctx, admin.p); err != nil {
		t.Errorf("the admin after refused self-demotion: %v", err)
	}
}

func TestPasswordChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin, bob, carol := f.staff(t, operators.RoleOperator)
	const next = "a much better passphrase"

	// One's own password needs the current one.
	for name, tc := range map[string]struct {
		current, next string
		want          error
	}{
		"no current password":     {"", next, operators.ErrWrongPassword},
		"wrong current password":  {password + "!", next, operators.ErrWrongPassword},
		"new password too short":  {password, "short", operators.ErrInvalidInput},
		"new password over-long":  {password, string(make([]byte, operators.MaxPasswordBytes+1)), operators.ErrInvalidInput},
		"another operator's (op)": {password, next, operators.ErrNotFound},
	} {
		id := bob.op.ID
		if name == "another operator's (op)" {
			id = carol.op.ID
		}
		wantErr(t, name, f.svc.ResetPassword(f.ctx, bob.p, id, tc.current, tc.next), tc.want)
	}
	if _, err := f.svc.Authenticate(f.ctx, carol.session); err != nil {
		t.Errorf("carol's session after bob's refused attempt on her password: %v", err)
	}
	if _, _, _, err := f.svc.Login(f.ctx, "carol@example.com", password, "192.0.2.9"); err != nil {
		t.Errorf("carol's password after bob's refused attempt: %v", err)
	}

	// Control: with the current password it changes, every session ends,
	// the old password stops working and the new one works.
	if err := f.svc.ResetPassword(f.ctx, bob.p, bob.op.ID, password, next); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Authenticate(f.ctx, bob.session)
	wantErr(t, "session after password change", err, operators.ErrUnauthenticated)
	_, _, _, err = f.svc.Login(f.ctx, "bob@example.com", password, "192.0.2.1")
	wantErr(t, "old password", err, operators.ErrInvalidCredentials)
	if _, _, _, err := f.svc.Login(f.ctx, "bob@example.com", next, "192.0.2.1"); err != nil {
		t.Errorf("new password: %v", err)
	}

	// An admin sets another's password without knowing it.
	if err := f.svc.ResetPassword(f.ctx, admin.p, carol.op.ID, "", next); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Authenticate(f.ctx, carol.session)
	wantErr(t, "carol's session after the admin's reset", err, operators.ErrUnauthenticated)
	wantErr(t, "reset an unknown operator", f.svc.ResetPassword(f.ctx, admin.p, "op-unknown", "", next), operators.ErrNotFound)
}

// Wrong current passwords count as failed logins of the account: a stolen
// session cannot guess its way to the password.
func TestPasswordChangeGuessesAreThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, bob, _ := f.staff(t, operators.RoleViewer)
	for i := range operators.DefaultThrottle.AccountFailures {
		wantErr(t, "guess", f.svc.ResetPassword(f.ctx, bob.p, bob.op.ID, "guess "+string(rune('a'+i))+" wrong", "a much better passphrase"), operators.ErrWrongPassword)
	}
	before := f.hasher.Verifies()
	err := f.svc.ResetPassword(f.ctx, bob.p, bob.op.ID, password, "a much better passphrase")
	var throttled *operators.ThrottledError
	if !errors.As(err, &throttled) || throttled.RetryAfter <= 0 {
		t.Fatalf("change after %d wrong guesses: %v; want held back", operators.DefaultThrottle.AccountFailures, err)
	}
	if n := f.hasher.Verifies() - before; n != 0 {
		t.Errorf("%d password verifications while held back, want none", n)
	}
	// The same hold covers the login form.
	_, _, _, err = f.svc.Login(f.ctx, "bob@example.com", password, "198.51.100.1")
	if !errors.As(err, &throttled) {
		t.Errorf("login while the account is held back: %v", err)
	}
	f.clock.Advance(throttled.RetryAfter)
	if err := f.svc.ResetPassword(f.ctx, bob.p, bob.op.ID, password, "a much better passphrase"); err != nil {
		t.Errorf("change once the hold ended: %v", err)
	}
}

func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *operators.Config) {
		c.Throttle = operators.ThrottlePolicy{PairFailures: 3, AccountFailures: 6, AddressFailures: 10, BaseDelay: time.Second, MaxDelay: 8 * time.Second, Window: time.Hour}
	})
	f.operator(t, "alice@example.com", operators.RoleAdmin)
	f.operator(t, "bob@example.com", operators.RoleViewer, "acme")
	login := func(email, pw, addr string) error {
		_, _, _, err := f.svc.Login(f.ctx, email, pw, addr)
		return err
	}
	var throttled *operators.ThrottledError

	// Pair: the third failure of alice from one address starts a 1 s hold
	// there; the right password is held back too, without hashing.
	for range 3 {
		wantErr(t, "wrong password", login("alice@example.com", "wrong password!", "192.0.2.1"), operators.ErrInvalidCredentials)
	}
	before := f.hasher.Verifies()
	if err := login("alice@example.com", password, "192.0.2.1"); !errors.As(err, &throttled) || throttled.RetryAfter != time.Second {
		t.Fatalf("login during the pair's hold: %v; want held back 1s", err)
	}
	if n := f.hasher.Verifies() - before; n != 0 {
		t.Errorf("%d verifications during the hold, want none", n)
	}
	// Positive controls: another account from the same address, and the
	// same account from another address, are not held by the pair.
	if err := login("bob@example.com", password, "192.0.2.1"); err != nil {
		t.Errorf("another account from the address during alice's hold: %v", err)
	}
	if err := login("alice@example.com", password, "192.0.2.2"); err != nil {
		t.Errorf("alice from another address during the pair's hold: %v", err)
	}

	// Account: failures of alice spread over addresses hold alice back
	// from every address once they reach the account's threshold.
	for i := range 6 {
		wantErr(t, "spread guess", login("alice@example.com", "wrong password!", fmt.Sprintf("198.51.100.%d", i+1)), operators.ErrInvalidCredentials)
	}
	if err := login("alice@example.com", password, "203.0.113.99"); !errors.As(err, &throttled) || throttled.RetryAfter != time.Second {
		t.Fatalf("alice from a fresh address after spread guesses: %v; want held back 1s", err)
	}
	// Each further failure doubles the hold, up to the maximum.
	for want := 2 * time.Second; want <= 16*time.Second; want *= 2 {
		f.clock.Advance(throttled.RetryAfter)
		wantErr(t, "wrong password after the hold", login("alice@example.com", "wrong password!", "192.0.2.3"), operators.ErrInvalidCredentials)
		if err := login("alice@example.com", password, "192.0.2.4"); !errors.As(err, &throttled) || throttled.RetryAfter != min(want, 8*time.Second) {
			t.Fatalf("hold = %v, want %v", err, min(want, 8*time.Second))
		}
	}
	// A success once the hold ended resets the account's count.
	f.clock.Advance(throttled.RetryAfter)
	if err := login("alice@example.com", password, "192.0.2.4"); err != nil {
		t.Fatalf("login after the hold: %v", err)
	}
	wantErr(t, "first failure after a success", login("alice@example.com", "wrong password!", "192.0.2.4"), operators.ErrInvalidCredentials)
	if err := login("alice@example.com", password, "192.0.2.4"); err != nil {
		t.Errorf("one failure after a reset holds back: %v", err)
	}

	// Address: failures spread over other accounts from one address never
	// hold back bob there below the ceiling...
	for i := range 9 {
		wantErr(t, "spray", login(fmt.Sprintf("user%d@example.com", i), "wrong password!", "203.0.113.7"), operators.ErrInvalidCredentials)
	}
	if err := login("bob@example.com", password, "203.0.113.7"); err != nil {
		t.Errorf("bob from an address below its ceiling: %v", err)
	}
	// ...and at the ceiling the address is held for everyone there.
	wantErr(t, "spray", login("user9@example.com", "wrong password!", "203.0.113.7"), operators.ErrInvalidCredentials)
	if err := login("bob@example.com", password, "203.0.113.7"); !errors.As(err, &throttled) {
		t.Errorf("login from a spraying address at its ceiling: %v; want held back", err)
	}
	if err := login("bob@example.com", password, "203.0.113.8"); err != nil {
		t.Errorf("the same account from another address: %v", err)
	}

	// Housekeeping forgets stale counts once their hold is over.
	f.clock.Advance(2 * time.Hour)
	if n, err := f.svc.PurgeLoginFailures(f.ctx); err != nil || n == 0 {
		t.Errorf("PurgeLoginFailures = %d, %v; want the stale counts gone", n, err)
	}
}

// The shared-address case of issue 24, with the default policy: 50
// failures on other accounts from one address (a corporate proxy), then
// the admin's correct password from that address signs in at once; and 50
// failures on one account from 50 addresses slow that account down.
func TestLoginThrottleSharedAddressDefaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operator(t, "admin@example.com", operators.RoleAdmin)
	f.operator(t, "victim@example.com", operators.RoleViewer, "acme")
	for i := range 50 {
		// Every one is a counted failure (none held back before hashing).
		email := fmt.Sprintf("colleague%d@example.com", i)
		if i < 4 {
			email = "victim@example.com"
		}
		_, _, _, err := f.svc.Login(f.ctx, email, "wrong password!", "127.0.0.1")
		wantErr(t, "failure of another account", err, operators.ErrInvalidCredentials)
	}
	if _, _, _, err := f.svc.Login(f.ctx, "admin@example.com", password, "127.0.0.1"); err != nil {
		t.Fatalf("admin's correct login from the shared address after 50 failures of others: %v", err)
	}

	f.clock.Advance(2 * time.Hour) // the counts above are forgotten
	for i := range 50 {
		_, _, _, err := f.svc.Login(f.ctx, "admin@example.com", "wrong password!", fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250))
		var throttled *operators.ThrottledError
		if err != nil && !errors.Is(err, operators.ErrInvalidCredentials) && !errors.As(err, &throttled) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	var throttled *operators.ThrottledError
	if _, _, _, err := f.svc.Login(f.ctx, "admin@example.com", password, "203.0.113.200"); !errors.As(err, &throttled) {
		t.Fatalf("admin from a fresh address after 50 guesses from 50 addresses: %v; want held back", err)
	}
	// Positive control: another account from that fresh address signs in.
	if _, _, _, err := f.svc.Login(f.ctx, "victim@example.com", password, "203.0.113.200"); err != nil {
		t.Errorf("another account from the fresh address: %v", err)
	}
}

// Too many password hashes at once answer ErrBusy instead of queueing
// without bound.
func TestLoginsBeyondTheHashingBoundAreBusy(t *testing.T) {
	t.Parallel()
	gate := &gatedHasher{entered: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, func(c *operators.Config) { c.MaxConcurrentHashes = 1 })
	f.operator(t, "alice@example.com", operators.RoleAdmin)
	// Swap in the gated hasher after the operator exists.
	f2 := f.another(t, func(c *operators.Config) { c.Hasher, c.MaxConcurrentHashes = gate.wrap(f.hasher), 1 })
	done := make(chan error, 1)
	go func() {
		_, _, _, err := f2.Login(f.ctx, "alice@example.com", password, "192.0.2.1")
		done <- err
	}()
	<-gate.entered // the first login holds the only slot
	_, _, _, err := f2.Login(f.ctx, "alice@example.com", password, "192.0.2.2")
	wantErr(t, "second login while the slot is taken", err, operators.ErrBusy)
	close(gate.release)
	if err := <-done; err != nil {
		t.Errorf("the first login: %v", err)
	}
	if _, _, _, err := f2.Login(f.ctx, "alice@example.com", password, "192.0.2.2"); err != nil {
		t.Errorf("login once the slot is free: %v", err)
	}
}

// gatedHasher blocks the first Verify until release is closed.
type gatedHasher struct {
	entered, release chan struct{}
	first            bool
	inner            operators.PasswordHasher
}

func (g *gatedHasher) wrap(h operators.PasswordHasher) *gatedHasher { g.inner = h; return g }

func (g *gatedHasher) Hash(pw string) (string, error) { return g.inner.Hash(pw) }

func (g *gatedHasher) Verify(hash, pw string) (bool, error) {
	if !g.first {
		g.first = true
		close(g.entered)
		<-g.release
	}
	return g.inner.Verify(hash, pw)
}
