package operators_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/operators"
)

func TestParseGroupMap(t *testing.T) {
	t.Parallel()
	got, err := operators.ParseGroupMap(" rxc-admins=admin, noc=operator:acme|globex ,auditors=viewer:acme,")
	if err != nil {
		t.Fatal(err)
	}
	want := operators.GroupMap{
		{Group: "rxc-admins", Role: operators.RoleAdmin},
		{Group: "noc", Role: operators.RoleOperator, Tenants: []string{"acme", "globex"}},
		{Group: "auditors", Role: operators.RoleViewer, Tenants: []string{"acme"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseGroupMap (-want +got):\n%s", d)
	}
	for _, bad := range []string{"noc", "=admin", "noc=root", "noc=operator:bad tenant", "noc=operator:acme|", "noc=viewer:a.b"} {
		if _, err := operators.ParseGroupMap(bad); !errors.Is(err, operators.ErrInvalidInput) {
			t.Errorf("ParseGroupMap(%q) = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestGroupMapResolve(t *testing.T) {
	t.Parallel()
	m, err := operators.ParseGroupMap("admins=admin,noc=operator:acme,noc-eu=operator:globex|acme,audit=viewer:initech")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		groups      []string
		wantRole    operators.Role
		wantTenants []string
		wantOK      bool
	}{
		{"no group", nil, "", nil, false},
		{"unmapped groups", []string{"engineering", "Admins"}, "", nil, false},
		{"admin, tenants ignored", []string{"noc", "admins"}, operators.RoleAdmin, nil, true},
		{"operator of two rules", []string{"noc", "noc-eu"}, operators.RoleOperator, []string{"acme", "globex"}, true},
		{"the highest role wins; a lower role's tenants are not granted at the higher role", []string{"audit", "noc"}, operators.RoleOperator, []string{"acme"}, true},
		{"viewer", []string{"audit"}, operators.RoleViewer, []string{"initech"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role, tenants, ok := m.Resolve(tc.groups)
			if role != tc.wantRole || ok != tc.wantOK || !cmp.Equal(tenants, tc.wantTenants) {
				t.Errorf("Resolve = %q %v %v, want %q %v %v", role, tenants, ok, tc.wantRole, tc.wantTenants, tc.wantOK)
			}
		})
	}
}

// newRootFixture is a fixture with the admin root@example.com (the
// break-glass account of the SSO-only tests), signed in.
func newRootFixture(t *testing.T) (*fixture, operators.Principal) {
	t.Helper()
	f := newFixture(t)
	root := f.loggedIn(t, "root@example.com", operators.RoleAdmin)
	return f, root
}

// idpIdentity is a person the test identity provider vouches for: subject,
// a verified e-mail address and groups.
func idpIdentity(subject, email string, groups ...string) operators.Identity {
	return operators.Identity{Issuer: "https://idp.example", Subject: subject, Email: email, EmailVerified: true, Groups: groups}
}

func TestSignInFederated(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	groups, _ := operators.ParseGroupMap("admins=admin,noc=operator:acme")
	id := idpIdentity("u1", "Ada@Example.com", "noc")

	// No mapped group: refused, nothing created.
	none := id
	none.Groups = []string{"engineering"}
	if _, _, _, err := f.svc.SignInFederated(f.ctx, none, groups); !errors.Is(err, operators.ErrNoRole) {
		t.Fatalf("no mapped group: %v", err)
	}
	if _, _, err := f.store.OperatorByEmail(f.ctx, "ada@example.com"); !errors.Is(err, operators.ErrNotFound) {
		t.Fatalf("an operator was created for a person without a role: %v", err)
	}
	unverified := id
	unverified.EmailVerified = false
	if _, _, _, err := f.svc.SignInFederated(f.ctx, unverified, groups); !errors.Is(err, operators.ErrFederationRefused) {
		t.Errorf("unverified e-mail: %v", err)
	}

	o, token, _, err := f.svc.SignInFederated(f.ctx, id, groups)
	if err != nil {
		t.Fatal(err)
	}
	if o.Email != "ada@example.com" || o.Role != operators.RoleOperator || !cmp.Equal(o.Tenants, []string{"acme"}) {
		t.Errorf("created %+v", o)
	}
	p, err := f.svc.Authenticate(f.ctx, token)
	if err != nil || p.Operator.ID != o.ID {
		t.Fatalf("session of the SSO sign-in: %+v, %v", p, err)
	}
	// No password works for an operator created by SSO.
	if _, _, _, err := f.svc.Login(f.ctx, "ada@example.com", "!sso", "192.0.2.1"); !errors.Is(err, operators.ErrInvalidCredentials) {
		t.Errorf("password login of an SSO operator: %v", err)
	}

	// Groups changed at the provider: the next sign-in updates the operator.
	id.Groups = []string{"admins"}
	o2, _, _, err := f.svc.SignInFederated(f.ctx, id, groups)
	if err != nil || o2.ID != o.ID || o2.Role != operators.RoleAdmin || o2.Tenants != nil {
		t.Errorf("promoted by groups: %+v, %v", o2, err)
	}
	// Groups gone: refused, and the operator is left as it was.
	if _, _, _, err := f.svc.SignInFederated(f.ctx, none, groups); !errors.Is(err, operators.ErrNoRole) {
		t.Errorf("groups gone: %v", err)
	}
	// A disabled operator stays out.
	yes := true
	if _, err := f.svc.UpdateOperator(f.ctx, root, o.ID, operators.Update{Disabled: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.svc.SignInFederated(f.ctx, id, groups); !errors.Is(err, operators.ErrInvalidCredentials) {
		t.Errorf("disabled operator by SSO: %v", err)
	}
}

func TestSSOOnly(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	f.operator(t, "ops@example.com", operators.RoleOperator, "acme")
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true}); !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("SSO-only without a break-glass account: %v", err)
	}
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true, BreakGlassEmail: "ops@example.com"}); !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("SSO-only with a non-admin break-glass account: %v", err)
	}
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true, BreakGlassEmail: "Root@Example.com"}); err != nil {
		t.Fatal(err)
	}
	// Every refused password sign-in answers alike and costs one hash, the
	// break-glass account's wrong password included: neither the answer nor
	// the time tells which account it is.
	for _, try := range []struct{ name, email, password string }{
		{"another account, its right password", "ops@example.com", password},
		{"another account, a wrong password", "ops@example.com", "wrong password"},
		{"an unknown account", "nobody@example.com", password},
		{"the break-glass account, a wrong password", "root@example.com", "wrong password"},
	} {
		before := f.hasher.Verifies()
		if _, _, _, err := f.svc.Login(f.ctx, try.email, try.password, "192.0.2.1"); !errors.Is(err, operators.ErrPasswordLoginDisabled) {
			t.Errorf("%s in SSO-only mode: %v, want ErrPasswordLoginDisabled", try.name, err)
		}
		if n := f.hasher.Verifies() - before; n != 1 {
			t.Errorf("%s in SSO-only mode: %d password hashes, want 1 like every other refusal", try.name, n)
		}
	}
	if _, _, _, err := f.svc.Login(f.ctx, "root@example.com", password, "192.0.2.2"); err != nil {
		t.Errorf("the break-glass account: %v", err)
	}
}

// Under SSO-only a refused password counts towards the throttle whatever
// the account, so probing until throttled does not single out the
// break-glass one either.
func TestSSOOnlyRefusalsAreThrottledAlike(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	f.operator(t, "ops@example.com", operators.RoleOperator, "acme")
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true, BreakGlassEmail: "root@example.com"}); err != nil {
		t.Fatal(err)
	}
	attemptsUntilThrottled := func(email, address string) int {
		for i := 1; i <= 50; i++ {
			_, _, _, err := f.svc.Login(f.ctx, email, "wrong password", address)
			var throttled *operators.ThrottledError
			if errors.As(err, &throttled) {
				return i
			}
			if !errors.Is(err, operators.ErrPasswordLoginDisabled) {
				t.Fatalf("%s attempt %d: %v", email, i, err)
			}
		}
		return 0
	}
	glass, other := attemptsUntilThrottled("root@example.com", "192.0.2.10"), attemptsUntilThrottled("ops@example.com", "192.0.2.11")
	if glass == 0 || glass != other {
		t.Fatalf("throttled after %d attempts on the break-glass account and %d on another; want the same, non-zero", glass, other)
	}
}

func FuzzParseGroupMap(f *testing.F) {
	f.Add("admins=admin,noc=operator:acme|globex")
	f.Add("=,:|")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := operators.ParseGroupMap(s)
		if err != nil {
			return
		}
		for _, r := range m {
			if r.Group == "" || !r.Role.Valid() {
				t.Errorf("ParseGroupMap(%q) accepted rule %+v", s, r)
			}
		}
	})
}

// Where admins must have a second factor, an admin created by single
// sign-on (no password of theirs) is not held to enrol one: the identity
// provider's factor is theirs. A local admin still is.
func TestRequireAdminSecondFactorSparesSSOAdmins(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	f.operator(t, "local@example.com", operators.RoleAdmin)
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{RequireAdminSecondFactor: true}); err != nil {
		t.Fatal(err)
	}
	groups, _ := operators.ParseGroupMap("admins=admin")
	_, token, _, err := f.svc.SignInFederated(f.ctx, operators.Identity{Email: "sso@example.com", EmailVerified: true, Groups: []string{"admins"}}, groups)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.Authenticate(f.ctx, token)
	if err != nil || p.EnrolmentOnly || !p.Can(operators.PermAdmin, "") {
		t.Errorf("SSO admin: %+v, %v; want a full admin", p, err)
	}
	if local, _ := f.login(t, "local@example.com"); !local.EnrolmentOnly {
		t.Error("a local admin without a factor is not held to enrol (positive control)")
	}
}
