package operators_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/operators"
)

// API tokens: what a token may grant, what it is worth when presented, and
// every way of presenting one that must fail, each next to the control
// that the same setup succeeds with.

func TestAPITokenGrantAndScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operator(t, "admin@example.com", operators.RoleAdmin)
	bob := f.loggedIn(t, "bob@example.com", operators.RoleOperator, "acme", "beta")

	rec, token := f.apiToken(t, bob, operators.NewAPIToken{Name: " ci ", Role: operators.RoleViewer, Tenants: []string{"beta", "acme", "acme"}})
	want := operators.APIToken{
		ID: rec.ID, OperatorID: bob.Operator.ID, Name: "ci", Role: operators.RoleViewer, Tenants: []string{"acme", "beta"},
		CreatedBy: "bob@example.com", CreatedAt: f.clock.Now(), ExpiresAt: f.clock.Now().Add(operators.DefaultTokenTTL),
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("token record (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(token, operators.TokenPrefix) || len(token) < len(operators.TokenPrefix)+43 {
		t.Errorf("token %q: want the prefix and 256 random bits", token)
	}
	if _, _, err := f.store.APITokenByHash(f.ctx, hashOf(token)); err != nil {
		t.Errorf("token not stored under its SHA-256: %v", err)
	}
	p, err := f.svc.AuthenticateToken(f.ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if p.TokenID != rec.ID || p.Role != operators.RoleViewer || !slices.Equal(p.Tenants, []string{"acme", "beta"}) || p.Operator.ID != bob.Operator.ID {
		t.Errorf("token principal %+v", p)
	}
	if !p.Can(operators.PermView, "acme") || p.Can(operators.PermOperate, "acme") {
		t.Errorf("a viewer token: view %v, operate %v; want view only", p.Can(operators.PermView, "acme"), p.Can(operators.PermOperate, "acme"))
	}

	// A grant beyond the creator's is refused; the same request inside it
	// (the control) succeeds.
	for name, tc := range map[string]struct {
		n    operators.NewAPIToken
		want error
	}{
		"control: operator on one tenant": {operators.NewAPIToken{Name: "x", Role: operators.RoleOperator, Tenants: []string{"acme"}}, nil},
		"a role above the creator's":      {operators.NewAPIToken{Name: "x", Role: operators.RoleAdmin}, operators.ErrForbidden},
		"a tenant the creator lacks":      {operators.NewAPIToken{Name: "x", Role: operators.RoleViewer, Tenants: []string{"acme", "other"}}, operators.ErrForbidden},
		"for another operator":            {operators.NewAPIToken{OperatorID: "op-someone", Name: "x", Role: operators.RoleViewer}, operators.ErrForbidden},
		"empty name":                      {operators.NewAPIToken{Name: "  ", Role: operators.RoleViewer}, operators.ErrInvalidInput},
		"control character in name":       {operators.NewAPIToken{Name: "a\nb", Role: operators.RoleViewer}, operators.ErrInvalidInput},
		"unknown role":                    {operators.NewAPIToken{Name: "x", Role: "root"}, operators.ErrInvalidInput},
		"invalid tenant id":               {operators.NewAPIToken{Name: "x", Role: operators.RoleViewer, Tenants: []string{"acme.*"}}, operators.ErrInvalidInput},
		"lifetime too short":              {operators.NewAPIToken{Name: "x", Role: operators.RoleViewer, TTL: time.Minute}, operators.ErrInvalidInput},
		"lifetime too long":               {operators.NewAPIToken{Name: "x", Role: operators.RoleViewer, TTL: operators.MaxTokenTTL + time.Hour}, operators.ErrInvalidInput},
	} {
		_, _, err := f.svc.CreateAPIToken(f.ctx, bob, tc.n)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateAPIToken error = %v, want %v", name, err, tc.want)
		}
	}

	// A token cannot mint a wider token either: its principal is its own grant.
	if _, _, err := f.svc.CreateAPIToken(f.ctx, p, operators.NewAPIToken{Name: "wider", Role: operators.RoleOperator, Tenants: []string{"acme"}}); !errors.Is(err, operators.ErrForbidden) {
		t.Errorf("viewer token minting an operator token: %v, want ErrForbidden", err)
	}
}

func TestAPITokenForAnotherOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin, _, carol := f.staff(t, operators.RoleViewer)

	rec, token := f.apiToken(t, admin.p, operators.NewAPIToken{OperatorID: carol.op.ID, Name: "for carol", Role: operators.RoleViewer, Tenants: []string{"acme"}})
	if rec.OperatorID != carol.op.ID || rec.CreatedBy != "admin@example.com" {
		t.Errorf("token record %+v", rec)
	}
	if p, err := f.svc.AuthenticateToken(f.ctx, token); err != nil || p.Operator.ID != carol.op.ID {
		t.Errorf("token acts as %+v, %v; want carol", p.Operator, err)
	}
	// Even an admin cannot hand an operator more than the operator holds.
	for name, n := range map[string]operators.NewAPIToken{
		"a role above the owner's":  {OperatorID: carol.op.ID, Name: "x", Role: operators.RoleOperator, Tenants: []string{"acme"}},
		"a tenant the owner lacks":  {OperatorID: carol.op.ID, Name: "x", Role: operators.RoleViewer, Tenants: []string{"beta"}},
		"admin for a non-admin":     {OperatorID: carol.op.ID, Name: "x", Role: operators.RoleAdmin},
		"unknown owner (not found)": {OperatorID: "op-nobody", Name: "x", Role: operators.RoleViewer},
	} {
		_, _, err := f.svc.CreateAPIToken(f.ctx, admin.p, n)
		want := operators.ErrForbidden
		if strings.Contains(name, "not found") {
			want = operators.ErrNotFound
		}
		wantErr(t, name, err, want)
	}
	// A disabled owner gets no new token.
	disabled := true
	if _, err := f.svc.UpdateOperator(f.ctx, admin.p, carol.op.ID, operators.Update{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.svc.CreateAPIToken(f.ctx, admin.p, operators.NewAPIToken{OperatorID: carol.op.ID, Name: "x", Role: operators.RoleViewer, Tenants: []string{"acme"}})
	wantErr(t, "token for a disabled operator", err, operators.ErrInvalidInput)
}

func TestAPITokenPresentedWrongly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, bob, _ := f.staff(t, operators.RoleViewer)
	_, token := f.apiToken(t, bob.p, operators.NewAPIToken{Name: "ci", Role: operators.RoleOperator, Tenants: []string{"acme"}, TTL: 2 * time.Hour})
	if _, err := f.svc.AuthenticateToken(f.ctx, token); err != nil {
		t.Fatalf("control: the token as issued: %v", err)
	}
	for name, presented := range map[string]string{
		"empty":                       "",
		"without the prefix":          strings.TrimPrefix(token, operators.TokenPrefix),
		"one character changed":       flipLast(token),
		"truncated":                   token[:len(token)-4],
		"extended":                    token + "A",
		"the session token":           bob.session,
		"the prefix and a session":    operators.TokenPrefix + bob.session,
		"over-long (bounded hashing)": operators.TokenPrefix + strings.Repeat("A", 1<<16),
	} {
		_, err := f.svc.AuthenticateToken(f.ctx, presented)
		wantErr(t, name, err, operators.ErrUnauthenticated)
	}
	// And an API token is no session.
	_, err := f.svc.Authenticate(f.ctx, token)
	wantErr(t, "API token as a session", err, operators.ErrUnauthenticated)

	// Expiry: valid to the last instant, refused from ExpiresAt on.
	f.clock.Advance(2*time.Hour - time.Microsecond)
	if _, err := f.svc.AuthenticateToken(f.ctx, token); err != nil {
		t.Errorf("token just before expiry: %v", err)
	}
	f.clock.Advance(time.Microsecond)
	_, err = f.svc.AuthenticateToken(f.ctx, token)
	wantErr(t, "expired token", err, operators.ErrUnauthenticated)
}

func TestAPITokenRevocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin, bob, mallory := f.staff(t, operators.RoleOperator) // mallory: another operator of acme
	rec, token := f.apiToken(t, bob.p, operators.NewAPIToken{Name: "ci", Role: operators.RoleViewer, Tenants: []string{"acme"}})

	// Another operator of the same tenant can neither list nor revoke it;
	// to them it does not exist.
	_, err := f.svc.ListAPITokens(f.ctx, mallory.p, bob.op.ID)
	wantErr(t, "list another operator's tokens", err, operators.ErrForbidden)
	_, err = f.svc.ListAPITokens(f.ctx, mallory.p, "")
	wantErr(t, "list everyone's tokens", err, operators.ErrForbidden)
	_, err = f.svc.RevokeAPIToken(f.ctx, mallory.p, rec.ID)
	wantErr(t, "revoke another operator's token", err, operators.ErrNotFound)
	if _, err := f.svc.AuthenticateToken(f.ctx, token); err != nil {
		t.Fatalf("token after a refused revocation: %v", err)
	}
	// The owner lists it; an admin lists everyone's.
	if list, err := f.svc.ListAPITokens(f.ctx, bob.p, bob.op.ID); err != nil || len(list) != 1 || list[0].ID != rec.ID {
		t.Errorf("owner's list = %+v, %v", list, err)
	}
	if list, err := f.svc.ListAPITokens(f.ctx, admin.p, ""); err != nil || len(list) != 1 {
		t.Errorf("admin's list = %+v, %v", list, err)
	}

	// The owner revokes it: refused from then on, replayed or not.
	f.clock.Advance(time.Minute)
	revoked, err := f.svc.RevokeAPIToken(f.ctx, bob.p, rec.ID)
	if err != nil || !revoked.RevokedAt.Equal(f.clock.Now()) {
		t.Fatalf("RevokeAPIToken = %+v, %v", revoked, err)
	}
	for range 2 {
		_, err = f.svc.AuthenticateToken(f.ctx, token)
		wantErr(t, "revoked token", err, operators.ErrUnauthenticated)
	}
	// A second revocation keeps the first time.
	f.clock.Advance(time.Minute)
	again, err := f.svc.RevokeAPIToken(f.ctx, admin.p, rec.ID)
	if err != nil || !again.RevokedAt.Equal(revoked.RevokedAt) {
		t.Errorf("second revocation = %+v, %v; want the first time kept", again, err)
	}
	_, err = f.svc.RevokeAPIToken(f.ctx, admin.p, "tok-unknown")
	wantErr(t, "revoke an unknown token", err, operators.ErrNotFound)
}

// A token's scope is its grant within what its operator holds now:
// narrowing or disabling the operator narrows or stops the token at once.
func TestAPITokenFollowsItsOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operator(t, "admin@example.com", operators.RoleAdmin)
	bob := f.operator(t, "bob@example.com", operators.RoleOperator, "acme", "beta")
	admin, _ := f.login(t, "admin@example.com")
	bobP, _ := f.login(t, "bob@example.com")
	_, token := f.apiToken(t, bobP, operators.NewAPIToken{Name: "ci", Role: operators.RoleOperator, Tenants: []string{"acme", "beta"}})
	scope := func() operators.Principal {
		t.Helper()
		p, err := f.svc.AuthenticateToken(f.ctx, token)
		if err != nil {
			t.Fatalf("AuthenticateToken: %v", err)
		}
		return p
	}
	if p := scope(); !p.Can(operators.PermOperate, "beta") {
		t.Fatalf("control: the token operates beta (%+v)", p)
	}

	viewer, onlyAcme := operators.RoleViewer, []string{"acme"}
	if _, err := f.svc.UpdateOperator(f.ctx, admin, bob.ID, operators.Update{Role: &viewer, Tenants: &onlyAcme}); err != nil {
		t.Fatal(err)
	}
	p := scope()
	if p.Role != operators.RoleViewer || !slices.Equal(p.Tenants, []string{"acme"}) {
		t.Errorf("after narrowing the operator the token is %s on %v; want viewer on [acme]", p.Role, p.Tenants)
	}
	if p.Sees("beta") || p.Can(operators.PermOperate, "acme") {
		t.Errorf("narrowed token still sees beta (%v) or operates acme (%v)", p.Sees("beta"), p.Can(operators.PermOperate, "acme"))
	}

	disabled := true
	if _, err := f.svc.UpdateOperator(f.ctx, admin, bob.ID, operators.Update{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.AuthenticateToken(f.ctx, token)
	wantErr(t, "token of a disabled operator", err, operators.ErrUnauthenticated)
	enabled := false
	if _, err := f.svc.UpdateOperator(f.ctx, admin, bob.ID, operators.Update{Disabled: &enabled}); err != nil {
		t.Fatal(err)
	}
	if p := scope(); p.Role != operators.RoleViewer {
		t.Errorf("token after re-enabling: %+v", p)
	}
}

// flipLast changes the last character of s.
func flipLast(s string) string {
	c := byte('A')
	if s[len(s)-1] == 'A' {
		c = 'B'
	}
	return s[:len(s)-1] + string(c)
}
