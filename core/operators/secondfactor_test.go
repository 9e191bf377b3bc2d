package operators_test

import (
	"bytes"
	"encoding/base32"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

func withSealer(t testing.TB) func(*operators.Config) {
	s, err := operatorstest.NewSealer()
	if err != nil {
		t.Fatal(err)
	}
	return func(c *operators.Config) { c.Sealer = s }
}

// enrol runs BeginTOTP and ConfirmTOTP for p and returns the secret and
// recovery codes.
func (f *fixture) enrol(t *testing.T, p operators.Principal) (string, []string) {
	t.Helper()
	en, err := f.svc.BeginTOTP(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	code, err := operators.TOTPCode(en.Secret, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	codes, err := f.svc.ConfirmTOTP(f.ctx, p, code, "")
	if err != nil {
		t.Fatal(err)
	}
	return en.Secret, codes
}

func (f *fixture) loginWith(c operators.Credentials) error {
	if c.Address == "" {
		c.Address = "192.0.2.1"
	}
	_, _, _, err := f.svc.LoginWith(f.ctx, c)
	return err
}

func TestTOTPEnrolmentAndLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSealer(t))
	p := f.loggedIn(t, "ada@example.com", operators.RoleOperator, "acme")

	en, err := f.svc.BeginTOTP(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(en.OTPAuthURL, "otpauth://totp/RXC:ada@example.com?") || !strings.Contains(en.OTPAuthURL, "secret="+en.Secret) {
		t.Errorf("otpauth URL %q", en.OTPAuthURL)
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(en.Secret)
	if err != nil || len(raw) != 20 {
		t.Fatalf("secret %q: %d bytes, %v; want 20 bytes of base32", en.Secret, len(raw), err)
	}
	// The stored secret is sealed: neither the raw key nor its base32 form
	// is in the store.
	rec, err := f.store.TOTP(f.ctx, p.Operator.ID)
	if err != nil || rec.Pending == nil {
		t.Fatalf("stored record %+v, %v", rec, err)
	}
	if bytes.Contains(rec.Pending, raw) || bytes.Contains(rec.Pending, []byte(en.Secret)) {
		t.Error("the TOTP secret is stored in clear")
	}
	// Until confirmed, the password alone still signs in.
	if err := f.loginWith(operators.Credentials{Email: "ada@example.com", Password: password}); err != nil {
		t.Fatalf("login with a pending enrolment: %v", err)
	}

	wrong, _ := operators.TOTPCode(en.Secret, f.clock.Now().Add(5*time.Minute))
	if _, err := f.svc.ConfirmTOTP(f.ctx, p, wrong, ""); !errors.Is(err, operators.ErrInvalidSecondFactor) {
		t.Fatalf("confirm with a wrong code: %v", err)
	}
	now, _ := operators.TOTPCode(en.Secret, f.clock.Now())
	codes, err := f.svc.ConfirmTOTP(f.ctx, p, now, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(codes) != operators.RecoveryCodes {
		t.Fatalf("%d recovery codes, want %d", len(codes), operators.RecoveryCodes)
	}
	if o, _ := f.store.OperatorByID(f.ctx, p.Operator.ID); !o.SecondFactor {
		t.Error("SecondFactor not set after confirmation")
	}

	ada := operators.Credentials{Email: "ada@example.com", Password: password}
	wantErr(t, "password alone", f.loginWith(ada), operators.ErrSecondFactorRequired)
	withCode := ada
	withCode.TOTP = now
	wantErr(t, "the confirmation's code again (same step)", f.loginWith(withCode), operators.ErrInvalidSecondFactor)

	f.clock.Advance(30 * time.Second)
	withCode.TOTP, _ = operators.TOTPCode(en.Secret, f.clock.Now())
	if err := f.loginWith(withCode); err != nil {
		t.Fatalf("login with the current code: %v", err)
	}
	wantErr(t, "the same code replayed", f.loginWith(withCode), operators.ErrInvalidSecondFactor)
	// A code of the previous step, older than the last used, is a replay too.
	f.clock.Advance(30 * time.Second)
	withCode.TOTP, _ = operators.TOTPCode(en.Secret, f.clock.Now().Add(-30*time.Second))
	wantErr(t, "an earlier step's code", f.loginWith(withCode), operators.ErrInvalidSecondFactor)

	badPassword := withCode
	badPassword.Password, badPassword.TOTP = "not the password", ""
	badPassword.TOTP, _ = operators.TOTPCode(en.Secret, f.clock.Now())
	wantErr(t, "a right code with a wrong password", f.loginWith(badPassword), operators.ErrInvalidCredentials)

	rc := ada
	rc.RecoveryCode = strings.ToUpper(strings.ReplaceAll(codes[3], "-", " "))
	if err := f.loginWith(rc); err != nil {
		t.Fatalf("login with a recovery code (typed in capitals with spaces): %v", err)
	}
	rc.RecoveryCode = codes[3]
	wantErr(t, "the recovery code a second time", f.loginWith(rc), operators.ErrInvalidSecondFactor)
	rc.RecoveryCode = codes[4]
	if err := f.loginWith(rc); err != nil {
		t.Errorf("another recovery code: %v", err)
	}
	rc.RecoveryCode = "aaaa-bbbb-cccc-dddd"
	wantErr(t, "an invented recovery code", f.loginWith(rc), operators.ErrInvalidSecondFactor)
}

// Wrong codes count like wrong passwords: five from one address hold the
// account there back, even with the right code.
func TestTOTPGuessesAreThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSealer(t))
	p := f.loggedIn(t, "ada@example.com", operators.RoleViewer, "acme")
	secret, _ := f.enrol(t, p)
	f.clock.Advance(30 * time.Second)
	for i := range 5 {
		wantErr(t, "a wrong code", f.loginWith(operators.Credentials{Email: "ada@example.com", Password: password, TOTP: []string{"000000", "111111", "222222", "333333", "444444"}[i]}), operators.ErrInvalidSecondFactor)
	}
	right, _ := operators.TOTPCode(secret, f.clock.Now())
	var throttled *operators.ThrottledError
	if err := f.loginWith(operators.Credentials{Email: "ada@example.com", Password: password, TOTP: right}); !errors.As(err, &throttled) {
		t.Fatalf("the right code after 5 wrong ones: %v; want held back", err)
	}
	f.clock.Advance(throttled.RetryAfter)
	right, _ = operators.TOTPCode(secret, f.clock.Now())
	if err := f.loginWith(operators.Credentials{Email: "ada@example.com", Password: password, TOTP: right}); err != nil {
		t.Errorf("the right code once the hold ended: %v", err)
	}
}

func TestTOTPRefusals(t *testing.T) {
	t.Parallel()
	t.Run("no sealing key", func(t *testing.T) {
		f := newFixture(t)
		p := f.loggedIn(t, "ada@example.com", operators.RoleViewer, "acme")
		if _, err := f.svc.BeginTOTP(f.ctx, p); !errors.Is(err, operators.ErrSecondFactorUnavailable) {
			t.Errorf("BeginTOTP without a sealer: %v", err)
		}
	})
	t.Run("an API token cannot enrol", func(t *testing.T) {
		f := newFixture(t, withSealer(t))
		p := f.loggedIn(t, "ada@example.com", operators.RoleViewer, "acme")
		p.TokenID = "tok-1"
		if _, err := f.svc.BeginTOTP(f.ctx, p); !errors.Is(err, operators.ErrForbidden) {
			t.Errorf("BeginTOTP with a token: %v", err)
		}
		if _, err := f.svc.ConfirmTOTP(f.ctx, p, "123456", ""); !errors.Is(err, operators.ErrForbidden) {
			t.Errorf("ConfirmTOTP with a token: %v", err)
		}
	})
	t.Run("confirm without an enrolment", func(t *testing.T) {
		f := newFixture(t, withSealer(t))
		p := f.loggedIn(t, "ada@example.com", operators.RoleViewer, "acme")
		if _, err := f.svc.ConfirmTOTP(f.ctx, p, "123456", ""); !errors.Is(err, operators.ErrInvalidInput) {
			t.Errorf("ConfirmTOTP with nothing pending: %v", err)
		}
	})
	t.Run("a secret sealed for one operator does not open for another", func(t *testing.T) {
		f := newFixture(t, withSealer(t))
		f.operator(t, "ada@example.com", operators.RoleViewer, "acme")
		f.operator(t, "eve@example.com", operators.RoleViewer, "acme")
		ada, _ := f.login(t, "ada@example.com")
		eve, _ := f.login(t, "eve@example.com")
		if _, err := f.svc.BeginTOTP(f.ctx, ada); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.BeginTOTP(f.ctx, eve); err != nil {
			t.Fatal(err)
		}
		// Eve copies ada's sealed pending secret into her own row.
		rec, _ := f.store.TOTP(f.ctx, ada.Operator.ID)
		if err := f.store.SetPendingTOTP(f.ctx, eve.Operator.ID, rec.Pending); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.ConfirmTOTP(f.ctx, eve, "123456", ""); err == nil || errors.Is(err, operators.ErrInvalidSecondFactor) {
			t.Errorf("confirming a secret sealed for another operator: %v; want it not to open", err)
		}
	})
}

// RequireAdminSecondFactor: an admin without a second factor signs in but
// may do nothing except enrol; once enrolled, everything. Other roles and
// admins with a factor are not affected. An admin resets a lost factor.
func TestRequireAdminSecondFactor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSealer(t))
	f.operator(t, "root@example.com", operators.RoleAdmin)
	f.operator(t, "bob@example.com", operators.RoleAdmin)
	f.operator(t, "vic@example.com", operators.RoleViewer, "acme")
	root, _ := f.login(t, "root@example.com")
	f.enrol(t, root)
	viewer, _ := f.login(t, "vic@example.com")
	if err := f.svc.SetAuthSettings(f.ctx, viewer, operators.AuthSettings{RequireAdminSecondFactor: true}); !errors.Is(err, operators.ErrForbidden) {
		t.Errorf("a viewer changes the settings: %v", err)
	}
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{RequireAdminSecondFactor: true}); err != nil {
		t.Fatal(err)
	}
	if set, err := f.svc.AuthSettings(f.ctx, root); err != nil || !set.RequireAdminSecondFactor {
		t.Fatalf("AuthSettings = %+v, %v", set, err)
	}

	bob, bobToken := f.login(t, "bob@example.com")
	if !bob.EnrolmentOnly || bob.Can(operators.PermAdmin, "") || bob.Sees("acme") {
		t.Fatalf("admin without a factor: %+v; want enrolment only, no admin rights", bob)
	}
	if _, err := f.svc.ListOperators(f.ctx, bob); err == nil {
		t.Error("an enrolment-only admin listed operators")
	}
	if v, _ := f.login(t, "vic@example.com"); v.EnrolmentOnly || !v.Sees("acme") {
		t.Errorf("a viewer is limited by the admin rule: %+v", v)
	}
	f.enrol(t, bob)
	bob, err := f.svc.Authenticate(f.ctx, bobToken)
	if err != nil || bob.EnrolmentOnly || !bob.Can(operators.PermAdmin, "") {
		t.Fatalf("the same session after enrolment: %+v, %v; want full admin", bob, err)
	}

	if err := f.svc.ResetSecondFactor(f.ctx, viewer, bob.Operator.ID); !errors.Is(err, operators.ErrForbidden) {
		t.Errorf("a viewer resets a second factor: %v", err)
	}
	if err := f.svc.ResetSecondFactor(f.ctx, root, bob.Operator.ID); err != nil {
		t.Fatal(err)
	}
	if p, err := f.svc.Authenticate(f.ctx, bobToken); err != nil || !p.EnrolmentOnly {
		t.Errorf("bob after the reset: %+v, %v; want enrolment only again", p, err)
	}
	if err := f.svc.SetAuthSettings(f.ctx, root, operators.AuthSettings{}); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.svc.Authenticate(f.ctx, bobToken); p.EnrolmentOnly {
		t.Error("enrolment only with the rule off")
	}
}

// A session left open cannot swap the account's factor for its own: replacing a factor that is
// on takes a current code of it, and a wrong one counts as a failed login.
func TestReplacingTOTPNeedsTheCurrentFactor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSealer(t))
	p := f.loggedIn(t, "ada@example.com", operators.RoleOperator, "acme")
	oldSecret, oldCodes := f.enrol(t, p)

	en, err := f.svc.BeginTOTP(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	newCode, _ := operators.TOTPCode(en.Secret, f.clock.Now())
	if _, err := f.svc.ConfirmTOTP(f.ctx, p, newCode, ""); !errors.Is(err, operators.ErrInvalidInput) {
		t.Fatalf("replace without the current factor: %v, want invalid input", err)
	}
	wrongCurrent, _ := operators.TOTPCode(oldSecret, f.clock.Now().Add(10*time.Minute))
	if _, err := f.svc.ConfirmTOTP(f.ctx, p, newCode, wrongCurrent); !errors.Is(err, operators.ErrInvalidSecondFactor) {
		t.Fatalf("replace with a wrong current code: %v, want invalid second factor", err)
	}
	if _, err := f.svc.ConfirmTOTP(f.ctx, p, newCode, newCode); !errors.Is(err, operators.ErrInvalidSecondFactor) {
		t.Fatalf("replace with the new secret's code as the current one: %v, want invalid second factor", err)
	}
	// Nothing changed: the old factor and its recovery codes still sign in.
	ada := operators.Credentials{Email: "ada@example.com", Password: password, RecoveryCode: oldCodes[0]}
	if err := f.loginWith(ada); err != nil {
		t.Fatalf("old recovery code after refused replacements: %v", err)
	}

	current, _ := operators.TOTPCode(oldSecret, f.clock.Now())
	codes, err := f.svc.ConfirmTOTP(f.ctx, p, newCode, current)
	if err != nil {
		t.Fatalf("replace with the current factor: %v", err)
	}
	if len(codes) != operators.RecoveryCodes {
		t.Fatalf("%d recovery codes after the replacement", len(codes))
	}
	ada.RecoveryCode = oldCodes[1]
	wantErr(t, "an old recovery code after the replacement", f.loginWith(ada), operators.ErrInvalidSecondFactor)
}
