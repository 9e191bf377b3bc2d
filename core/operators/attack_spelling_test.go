package operators_test

// Attacks on single sign-on and the SSO-only switch (their positive
// controls are in federated_test.go).

import (
	"errors"
	"testing"

	"github.com/rxc-project/rxc/core/operators"
)

// TestAttackSSOUnicodeSpellingOfLocalAdmin: an identity provider vouches
// for "\u212Aate@example.com" (KELVIN SIGN) or "adm\u0130n@example.com"
// (LATIN CAPITAL I WITH DOT ABOVE): different mailboxes, which Go's
// strings.ToLower folds onto the local accounts kate@ and admin@. Single
// sign-on must not open the local account for them, nor re-role it.
func TestAttackSSOUnicodeSpellingOfLocalAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kate := f.operator(t, "kate@example.com", operators.RoleAdmin)
	admin := f.operator(t, "admin@example.com", operators.RoleAdmin)
	groups, _ := operators.ParseGroupMap("staff=viewer:acme")
	for _, c := range []struct {
		email string
		local operators.Operator
	}{
		{"\u212Aate@example.com", kate},
		{"adm\u0130n@example.com", admin},
	} {
		id := idpIdentity(c.email, c.email, "staff")
		o, _, _, err := f.svc.SignInFederated(f.ctx, id, groups)
		if err == nil && o.ID == c.local.ID {
			t.Errorf("SSO as %q signed in as the local %s (role now %s)", c.email, c.local.Email, o.Role)
		} else if !errors.Is(err, operators.ErrFederationRefused) {
			t.Errorf("SSO as %q: %v, want ErrFederationRefused", c.email, err)
		}
		got, err := f.store.OperatorByID(f.ctx, c.local.ID)
		if err != nil || got.Role != operators.RoleAdmin {
			t.Errorf("local %s after SSO as %q: %+v, %v; want an untouched admin", c.local.Email, c.email, got, err)
		}
	}
	// The same spellings cannot name a new account either.
	if _, err := f.svc.CreateOperator(f.ctx, operators.NewOperator{Email: "\u212Aim@example.com", Password: password, Role: operators.RoleViewer}); !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("create \\u212Aim@example.com: %v, want ErrInvalidInput", err)
	}
}

// TestAttackBreakGlassWithoutAPassword: a careless admin names as the
// break-glass account an admin created by single sign-on, who has no
// password: SSO-only would then leave no way in when the identity
// provider is down. Refused.
func TestAttackBreakGlassWithoutAPassword(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	groups, _ := operators.ParseGroupMap("admins=admin")
	id := idpIdentity("u1", "sso-admin@example.com", "admins")
	if _, _, _, err := f.svc.SignInFederated(f.ctx, id, groups); err != nil {
		t.Fatal(err)
	}
	err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true, BreakGlassEmail: "sso-admin@example.com"})
	if !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("SSO-only with a break-glass account that has no password: %v, want ErrInvalidInput", err)
	}
}

// TestAttackBreakGlassDisabledOrDemotedUnderSSOOnly: while SSO-only is
// on, the break-glass account is the only way in with the identity
// provider down. Neither an admin (disable, demote) nor an SSO sign-in
// whose groups map the same person lower may take that away.
func TestAttackBreakGlassDisabledOrDemotedUnderSSOOnly(t *testing.T) {
	t.Parallel()
	f, root := newRootFixture(t)
	glass := f.operator(t, "glass@example.com", operators.RoleAdmin)
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: true, BreakGlassEmail: "glass@example.com"}); err != nil {
		t.Fatal(err)
	}
	yes, viewer := true, operators.RoleViewer
	if _, err := f.svc.UpdateOperator(f.ctx, root, glass.ID, operators.Update{Disabled: &yes}); !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("disable the break-glass account under SSO-only: %v, want ErrInvalidInput", err)
	}
	if _, err := f.svc.UpdateOperator(f.ctx, root, glass.ID, operators.Update{Role: &viewer}); !errors.Is(err, operators.ErrInvalidInput) {
		t.Errorf("demote the break-glass account under SSO-only: %v, want ErrInvalidInput", err)
	}
	groups, _ := operators.ParseGroupMap("staff=viewer:acme")
	id := idpIdentity("g", "glass@example.com", "staff")
	if _, _, _, err := f.svc.SignInFederated(f.ctx, id, groups); !errors.Is(err, operators.ErrFederationRefused) {
		t.Errorf("SSO sign-in that would demote the break-glass account: %v, want ErrFederationRefused", err)
	}
	if o, err := f.store.OperatorByID(f.ctx, glass.ID); err != nil || o.Role != operators.RoleAdmin || !o.Enabled() {
		t.Errorf("break-glass account afterwards: %+v, %v; want an enabled admin", o, err)
	}
	// Without SSO-only the same changes are ordinary.
	no := false
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{SSOOnly: no}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateOperator(f.ctx, root, glass.ID, operators.Update{Role: &viewer}); err != nil {
		t.Errorf("demote the former break-glass account without SSO-only: %v", err)
	}
}
