package operators_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/operators"
)

func TestLoginSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, hasher, clk := f.svc, f.hasher, f.clock
	ctx := t.Context()

	op, err := svc.CreateOperator(ctx, operators.NewOperator{Email: "  Alice@Example.COM ", Password: password, Role: operators.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if op.Email != "alice@example.com" {
		t.Errorf("email stored as %q, want normalised", op.Email)
	}
	if _, stored, err := f.store.OperatorByEmail(ctx, "alice@example.com"); err != nil || stored != f.hashOf(password) {
		t.Errorf("stored password hash %q, %v; want the hasher's hash", stored, err)
	}

	t.Run("create refusals", func(t *testing.T) {
		for name, tc := range map[string]struct {
			email, password string
			want            error
		}{
			"duplicate, other case": {"ALICE@example.com", password, operators.ErrConflict},
			"short password":        {"bob@example.com", "elevenchars", operators.ErrInvalidInput},
			"no at sign":            {"bob.example.com", password, operators.ErrInvalidInput},
			"two at signs":          {"bob@x@example.com", password, operators.ErrInvalidInput},
			"control character":     {"bob\x00@example.com", password, operators.ErrInvalidInput},
		} {
			if _, err := svc.CreateOperator(ctx, operators.NewOperator{Email: tc.email, Password: tc.password, Role: operators.RoleViewer}); !errors.Is(err, tc.want) {
				t.Errorf("%s: CreateOperator error = %v, want %v", name, err, tc.want)
			}
		}
	})

	t.Run("wrong credentials are indistinguishable", func(t *testing.T) {
		for name, tc := range map[string]struct{ email, password string }{
			"wrong password":  {"alice@example.com", password + "!"},
			"unknown email":   {"mallory@example.com", password},
			"malformed email": {"mallory", password},
			"empty password":  {"alice@example.com", ""},
		} {
			before := hasher.Verifies()
			_, token, _, err := svc.Login(ctx, tc.email, tc.password, "192.0.2.1")
			if err != operators.ErrInvalidCredentials || token != "" {
				t.Errorf("%s: Login = %q, %v; want exactly ErrInvalidCredentials", name, token, err)
			}
			if n := hasher.Verifies() - before; n != 1 {
				t.Errorf("%s: %d password verifications, want 1 (same work for every failure)", name, n)
			}
		}
	})

	got, token, expires, err := svc.Login(ctx, "ALICE@example.com", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != op.ID || !expires.Equal(clk.Now().Add(12*time.Hour)) || len(token) < 43 {
		t.Errorf("Login = %+v, %q, %s", got, token, expires)
	}
	if _, err := f.store.SessionOperator(ctx, hashOf(token), clk.Now()); err != nil {
		t.Errorf("no session stored under the SHA-256 of the token: %v", err)
	}
	if _, err := f.store.SessionOperator(ctx, []byte(token), clk.Now()); err == nil {
		t.Errorf("session stored under the clear token")
	}
	if who, err := svc.Authenticate(ctx, token); err != nil || who.Operator.ID != op.ID {
		t.Errorf("Authenticate = %+v, %v", who, err)
	}
	if _, err := svc.Authenticate(ctx, flipLast(token)); !errors.Is(err, operators.ErrUnauthenticated) {
		t.Errorf("Authenticate(wrong token) error = %v", err)
	}

	if err := svc.Logout(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Authenticate(ctx, token); !errors.Is(err, operators.ErrUnauthenticated) {
		t.Errorf("Authenticate after logout error = %v, want ErrUnauthenticated", err)
	}
	if err := svc.Logout(ctx, token); err != nil {
		t.Errorf("second Logout: %v", err)
	}

	t.Run("session expires", func(t *testing.T) {
		_, short, _, err := svc.Login(ctx, "alice@example.com", password, "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(12 * time.Hour)
		defer clk.Advance(-12 * time.Hour)
		if _, err := svc.Authenticate(ctx, short); !errors.Is(err, operators.ErrUnauthenticated) {
			t.Errorf("Authenticate after 12h error = %v, want ErrUnauthenticated", err)
		}
		// The logged-out session is gone already; the purge removes the expired one.
		if n, err := svc.PurgeExpiredSessions(ctx); err != nil || n != 1 {
			t.Errorf("PurgeExpiredSessions = %d, %v; want 1", n, err)
		}
	})
}
