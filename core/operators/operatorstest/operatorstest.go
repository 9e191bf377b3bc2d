// Package operatorstest is the contract suite for operators.Store and the
// fake password hasher the operators use-case tests run with. Every store
// (PostgreSQL, in-memory) runs the same Run, so they stay interchangeable:
// unique e-mails, tenants read back sorted, the last enabled admin kept
// under concurrent changes, sessions that end on expiry, disabling and
// password change, API tokens found only by their hash, and the login
// failure counts every replica shares.
package operatorstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/operators"
)

// Run runs the suite; newStore returns a fresh, empty store per subtest.
func Run(t *testing.T, newStore func(t *testing.T) operators.Store) {
	contracttest.Run(t, newStore, contracttest.Cases[operators.Store]{
		{"Operators", testOperators},
		{"UpdateOperator", testUpdateOperator},
		{"LastAdminUnderConcurrentChanges", testLastAdminConcurrent},
		{"Sessions", testSessions},
		{"SetPasswordEndsSessions", testSetPassword},
		{"APITokens", testAPITokens},
		{"PruneAPITokens", testPruneAPITokens},
		{"LoginFailures", testLoginFailures},
		{"SecondFactor", testSecondFactor},
	})
}

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

// tokenIDs answers the ids of the tokens a list returned, in its order,
// stopping the test at the list's error.
func tokenIDs(t *testing.T) func([]operators.APIToken, error) []string {
	return func(list []operators.APIToken, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return contracttest.Keys(list, func(k operators.APIToken) string { return k.ID })
	}
}

func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

func create(t *testing.T, s operators.Store, id, email string, role operators.Role, tenants ...string) operators.Operator {
	t.Helper()
	o := operators.Operator{ID: id, Email: email, Role: role, Tenants: tenants, CreatedAt: t0}
	if err := s.CreateOperator(context.Background(), o, "hash of "+id); err != nil {
		t.Fatal(err)
	}
	got, err := s.OperatorByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func testOperators(t *testing.T, s operators.Store) {
	ctx := context.Background()
	bob := create(t, s, "op-b", "bob@example.com", operators.RoleOperator, "zeta", "acme")
	want := operators.Operator{ID: "op-b", Email: "bob@example.com", Role: operators.RoleOperator, Tenants: []string{"acme", "zeta"}, CreatedAt: t0}
	if diff := cmp.Diff(want, bob); diff != "" {
		t.Errorf("OperatorByID (-want +got):\n%s", diff)
	}
	alice := create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	if alice.Tenants != nil {
		t.Errorf("admin tenants %v, want nil", alice.Tenants)
	}
	is(t, "same e-mail", s.CreateOperator(ctx, operators.Operator{ID: "op-c", Email: "bob@example.com", Role: operators.RoleViewer, CreatedAt: t0}, "h"), operators.ErrConflict)
	is(t, "same id", s.CreateOperator(ctx, operators.Operator{ID: "op-b", Email: "carol@example.com", Role: operators.RoleViewer, CreatedAt: t0}, "h"), operators.ErrConflict)

	got, h, err := s.OperatorByEmail(ctx, "bob@example.com")
	if err != nil || h != "hash of op-b" || !cmp.Equal(got, want) {
		t.Errorf("OperatorByEmail = %+v, %q, %v", got, h, err)
	}
	_, _, err = s.OperatorByEmail(ctx, "mallory@example.com")
	is(t, "unknown e-mail", err, operators.ErrNotFound)
	_, err = s.OperatorByID(ctx, "op-x")
	is(t, "unknown id", err, operators.ErrNotFound)

	list, err := s.ListOperators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var emails []string
	for _, o := range list {
		emails = append(emails, o.Email)
	}
	if diff := cmp.Diff([]string{"alice@example.com", "bob@example.com"}, emails); diff != "" {
		t.Errorf("ListOperators by e-mail (-want +got):\n%s", diff)
	}
}

func testUpdateOperator(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	create(t, s, "op-b", "bob@example.com", operators.RoleViewer, "acme")

	got, err := s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error {
		o.Role, o.Tenants = operators.RoleOperator, []string{"acme", "beta"} // sorted, as the service passes them
		return nil
	})
	want := operators.Operator{ID: "op-b", Email: "bob@example.com", Role: operators.RoleOperator, Tenants: []string{"acme", "beta"}, CreatedAt: t0}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("UpdateOperator = %+v, %v; want %+v", got, err, want)
	}
	if stored, _ := s.OperatorByID(ctx, "op-b"); !cmp.Equal(want, stored) {
		t.Errorf("stored after update %+v", stored)
	}

	refused := errors.New("refused by the change")
	_, err = s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error {
		o.Role = operators.RoleViewer
		return refused
	})
	is(t, "change refuses", err, refused)
	if stored, _ := s.OperatorByID(ctx, "op-b"); stored.Role != operators.RoleOperator {
		t.Errorf("a refused change was stored: %+v", stored)
	}

	_, err = s.UpdateOperator(ctx, "op-a", func(o *operators.Operator) error { o.Role = operators.RoleViewer; return nil })
	is(t, "demote the only admin", err, operators.ErrLastAdmin)
	_, err = s.UpdateOperator(ctx, "op-a", func(o *operators.Operator) error { o.DisabledAt = t0; return nil })
	is(t, "disable the only admin", err, operators.ErrLastAdmin)
	if stored, _ := s.OperatorByID(ctx, "op-a"); stored.Role != operators.RoleAdmin || !stored.Enabled() {
		t.Errorf("last admin changed: %+v", stored)
	}

	// With a second admin, one may go.
	if _, err := s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error { o.Role, o.Tenants = operators.RoleAdmin, nil; return nil }); err != nil {
		t.Fatal(err)
	}
	disabled, err := s.UpdateOperator(ctx, "op-a", func(o *operators.Operator) error { o.DisabledAt = t0.Add(time.Hour); return nil })
	if err != nil || disabled.Enabled() || !disabled.DisabledAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("disable one of two admins = %+v, %v", disabled, err)
	}
	_, err = s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error { o.Role = operators.RoleViewer; return nil })
	is(t, "demote the last enabled admin", err, operators.ErrLastAdmin)

	_, err = s.UpdateOperator(ctx, "op-x", func(*operators.Operator) error { return nil })
	is(t, "unknown operator", err, operators.ErrNotFound)
}

// testLastAdminConcurrent: two admins demoting each other at once must not
// both succeed.
func testLastAdminConcurrent(t *testing.T, s operators.Store) {
	ctx := context.Background()
	for round := range 10 {
		a, b := fmt.Sprintf("op-a%d", round), fmt.Sprintf("op-b%d", round)
		create(t, s, a, a+"@example.com", operators.RoleAdmin)
		create(t, s, b, b+"@example.com", operators.RoleAdmin)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, id := range []string{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.UpdateOperator(ctx, id, func(o *operators.Operator) error { o.Role = operators.RoleViewer; return nil })
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, operators.ErrLastAdmin):
				t.Errorf("round %d: %v", round, err)
			}
		}
		// Earlier rounds' survivors are admins too, so both may succeed
		// from the second round on; what must hold is that an enabled
		// admin remains.
		list, err := s.ListOperators(ctx)
		if err != nil {
			t.Fatal(err)
		}
		admins := 0
		for _, o := range list {
			if o.Role == operators.RoleAdmin && o.Enabled() {
				admins++
			}
		}
		if admins == 0 || round == 0 && ok != 1 {
			t.Fatalf("round %d: %d demotions succeeded, %d enabled admins left", round, ok, admins)
		}
	}
}

func testSessions(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	bob := create(t, s, "op-b", "bob@example.com", operators.RoleViewer, "acme")
	for i, exp := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		if err := s.CreateSession(ctx, operators.Session{TokenHash: hash(fmt.Sprint("s", i)), OperatorID: "op-b", CreatedAt: t0, ExpiresAt: t0.Add(exp)}); err != nil {
			t.Fatal(err)
		}
	}
	is(t, "same token hash", s.CreateSession(ctx, operators.Session{TokenHash: hash("s0"), OperatorID: "op-a", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}), operators.ErrConflict)

	got, err := s.SessionOperator(ctx, hash("s0"), t0.Add(time.Hour-time.Microsecond))
	if err != nil || !cmp.Equal(bob, got) {
		t.Errorf("SessionOperator before expiry = %+v, %v", got, err)
	}
	_, err = s.SessionOperator(ctx, hash("s0"), t0.Add(time.Hour))
	is(t, "at expiry", err, operators.ErrNotFound)
	_, err = s.SessionOperator(ctx, hash("unknown"), t0)
	is(t, "unknown hash", err, operators.ErrNotFound)

	if err := s.DeleteSession(ctx, hash("s1")); err != nil {
		t.Fatal(err)
	}
	_, err = s.SessionOperator(ctx, hash("s1"), t0)
	is(t, "deleted session", err, operators.ErrNotFound)
	is(t, "delete unknown session", s.DeleteSession(ctx, hash("unknown")), nil)

	// A disabled operator's sessions stop working at once.
	if _, err := s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error { o.DisabledAt = t0; return nil }); err != nil {
		t.Fatal(err)
	}
	_, err = s.SessionOperator(ctx, hash("s2"), t0)
	is(t, "disabled operator", err, operators.ErrNotFound)
	if _, err := s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error { o.DisabledAt = time.Time{}; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionOperator(ctx, hash("s2"), t0); err != nil {
		t.Errorf("re-enabled operator's session: %v", err)
	}

	if n, err := s.DeleteExpiredSessions(ctx, t0.Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v; want 1 (s0, expired at that instant)", n, err)
	}
	if n, err := s.DeleteOperatorSessions(ctx, "op-b"); err != nil || n != 1 {
		t.Errorf("DeleteOperatorSessions = %d, %v; want 1 (s2)", n, err)
	}
	if n, err := s.DeleteOperatorSessions(ctx, "op-b"); err != nil || n != 0 {
		t.Errorf("second DeleteOperatorSessions = %d, %v; want 0", n, err)
	}
}

func testSetPassword(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	create(t, s, "op-b", "bob@example.com", operators.RoleAdmin)
	for _, id := range []string{"op-a", "op-b"} {
		if err := s.CreateSession(ctx, operators.Session{TokenHash: hash(id), OperatorID: id, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetPassword(ctx, "op-a", "new hash"); err != nil {
		t.Fatal(err)
	}
	if _, h, err := s.OperatorByEmail(ctx, "alice@example.com"); err != nil || h != "new hash" {
		t.Errorf("hash after SetPassword = %q, %v", h, err)
	}
	_, err := s.SessionOperator(ctx, hash("op-a"), t0)
	is(t, "session after password change", err, operators.ErrNotFound)
	if _, err := s.SessionOperator(ctx, hash("op-b"), t0); err != nil {
		t.Errorf("another operator's session ended too: %v", err)
	}
	is(t, "unknown operator", s.SetPassword(ctx, "op-x", "h"), operators.ErrNotFound)
}

func testAPITokens(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	bob := create(t, s, "op-b", "bob@example.com", operators.RoleOperator, "acme", "beta")
	tok := func(id, op string, at time.Duration, tenants ...string) operators.APIToken {
		return operators.APIToken{ID: id, OperatorID: op, Name: "ci " + id, Role: operators.RoleViewer, Tenants: tenants, CreatedBy: "alice@example.com", CreatedAt: t0.Add(at), ExpiresAt: t0.Add(at + time.Hour)}
	}
	t1, t2, t3, t4 := tok("tok-1", "op-b", 0, "acme"), tok("tok-2", "op-b", time.Minute), tok("tok-3", "op-a", time.Minute), tok("tok-0", "op-b", time.Minute)
	for _, k := range []operators.APIToken{t1, t2, t3, t4} {
		if err := s.CreateAPIToken(ctx, k, hash(k.ID)); err != nil {
			t.Fatal(err)
		}
	}
	is(t, "same hash", s.CreateAPIToken(ctx, tok("tok-5", "op-b", 0), hash("tok-1")), operators.ErrConflict)
	is(t, "unknown operator", s.CreateAPIToken(ctx, tok("tok-6", "op-x", 0), hash("tok-6")), operators.ErrNotFound)

	got, owner, err := s.APITokenByHash(ctx, hash("tok-1"))
	if err != nil || !cmp.Equal(t1, got) || !cmp.Equal(bob, owner) {
		t.Errorf("APITokenByHash = %+v, %+v, %v", got, owner, err)
	}
	if got.Tenants == nil || t2.Tenants != nil {
		t.Fatalf("test setup: tenants %v / %v", got.Tenants, t2.Tenants)
	}
	if got, _, _ := s.APITokenByHash(ctx, hash("tok-2")); got.Tenants != nil {
		t.Errorf("token without tenants reads back %v, want nil", got.Tenants)
	}
	_, _, err = s.APITokenByHash(ctx, hash("tok-9"))
	is(t, "unknown hash", err, operators.ErrNotFound)
	_, _, err = s.APITokenByHash(ctx, []byte("tok-1"))
	is(t, "the clear id is not the hash", err, operators.ErrNotFound)
	if got, err := s.APITokenByID(ctx, "tok-3"); err != nil || !cmp.Equal(t3, got) {
		t.Errorf("APITokenByID = %+v, %v", got, err)
	}
	_, err = s.APITokenByID(ctx, "tok-9")
	is(t, "unknown id", err, operators.ErrNotFound)

	ids := tokenIDs(t)
	if diff := cmp.Diff([]string{"tok-0", "tok-2", "tok-1"}, ids(s.ListAPITokens(ctx, "op-b"))); diff != "" {
		t.Errorf("ListAPITokens(op-b), newest first then by id (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tok-0", "tok-2", "tok-3", "tok-1"}, ids(s.ListAPITokens(ctx, ""))); diff != "" {
		t.Errorf("ListAPITokens(all) (-want +got):\n%s", diff)
	}
	if got := ids(s.ListAPITokens(ctx, "op-x")); len(got) != 0 {
		t.Errorf("tokens of an unknown operator: %v", got)
	}

	revoked, err := s.RevokeAPIToken(ctx, "tok-1", t0.Add(time.Minute))
	if err != nil || !revoked.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("RevokeAPIToken = %+v, %v", revoked, err)
	}
	again, err := s.RevokeAPIToken(ctx, "tok-1", t0.Add(time.Hour))
	if err != nil || !again.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("second RevokeAPIToken = %+v, %v; want the first revocation kept", again, err)
	}
	if got, _, _ := s.APITokenByHash(ctx, hash("tok-1")); !got.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("stored revocation %v", got.RevokedAt)
	}
	_, err = s.RevokeAPIToken(ctx, "tok-9", t0)
	is(t, "revoke unknown", err, operators.ErrNotFound)

	// The owner read with a token is the operator as stored now.
	if _, err := s.UpdateOperator(ctx, "op-b", func(o *operators.Operator) error { o.Tenants = []string{"beta"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, owner, _ := s.APITokenByHash(ctx, hash("tok-2")); !cmp.Equal([]string{"beta"}, owner.Tenants) {
		t.Errorf("owner tenants %v, want the current grant", owner.Tenants)
	}
}

func testLoginFailures(t *testing.T, s operators.Store) {
	ctx := context.Background()
	const window = time.Hour
	hold := func(n int) time.Duration {
		if n < 3 {
			return 0
		}
		return time.Duration(n) * time.Minute
	}
	until, err := s.LoginLockedUntil(ctx, []string{"account:a", "address:x"})
	if err != nil || !until.IsZero() {
		t.Errorf("LoginLockedUntil with no failures = %v, %v; want zero", until, err)
	}
	for i := 1; i <= 4; i++ {
		n, err := s.RecordLoginFailure(ctx, "account:a", t0.Add(time.Duration(i)*time.Second), window, hold)
		if err != nil || n != i {
			t.Fatalf("failure %d: count %d, %v", i, n, err)
		}
	}
	// The hold of the fourth failure: 4 minutes from it.
	want := t0.Add(4*time.Second + 4*time.Minute)
	if until, err := s.LoginLockedUntil(ctx, []string{"account:a", "address:x"}); err != nil || !until.Equal(want) {
		t.Errorf("LoginLockedUntil = %v, %v; want %v", until, err, want)
	}
	// Another key's longer hold is the answer when asked together.
	for i := range 9 {
		if _, err := s.RecordLoginFailure(ctx, "address:x", t0, window, hold); err != nil {
			t.Fatal(i, err)
		}
	}
	if until, _ := s.LoginLockedUntil(ctx, []string{"account:a", "address:x"}); !until.Equal(t0.Add(9 * time.Minute)) {
		t.Errorf("LoginLockedUntil over two keys = %v, want the later hold", until)
	}
	// A hold never shortens: a count restarted by the window keeps it.
	if n, err := s.RecordLoginFailure(ctx, "address:x", t0.Add(window+time.Second), window, hold); err != nil || n != 1 {
		t.Errorf("failure after the window: count %d, %v; want a new count of 1", n, err)
	}
	if until, _ := s.LoginLockedUntil(ctx, []string{"address:x"}); !until.Equal(t0.Add(9 * time.Minute)) {
		t.Errorf("hold after a restarted count = %v, want it kept", until)
	}

	if err := s.ResetLoginFailures(ctx, "account:a"); err != nil {
		t.Fatal(err)
	}
	if until, _ := s.LoginLockedUntil(ctx, []string{"account:a"}); !until.IsZero() {
		t.Errorf("hold after reset %v", until)
	}
	if n, _ := s.RecordLoginFailure(ctx, "account:a", t0.Add(time.Minute), window, hold); n != 1 {
		t.Errorf("count after reset %d, want 1", n)
	}

	// Purge forgets counts whose last failure and hold both lie before.
	if _, err := s.RecordLoginFailure(ctx, "account:b", t0, window, hold); err != nil {
		t.Fatal(err)
	}
	n, err := s.PurgeLoginFailures(ctx, t0.Add(30*time.Second))
	if err != nil || n != 1 {
		t.Errorf("PurgeLoginFailures = %d, %v; want 1 (account:b)", n, err)
	}
	if n, _ := s.RecordLoginFailure(ctx, "account:b", t0.Add(time.Minute), window, hold); n != 1 {
		t.Errorf("count of a purged key %d, want 1", n)
	}
	if n, _ := s.RecordLoginFailure(ctx, "account:a", t0.Add(2*time.Minute), window, hold); n != 2 {
		t.Errorf("count of a kept key %d, want 2", n)
	}
}

// Hasher is a fast operators.PasswordHasher for tests: a salted SHA-256,
// never the password itself. It counts Verify calls, so tests can check
// that every failed login costs the same work.
type Hasher struct {
	verifies atomic.Int64
	// Err, when set, fails every call.
	Err error
}

const hasherPrefix = "fake-sha256$"

// Hash implements operators.PasswordHasher.
func (h *Hasher) Hash(password string) (string, error) {
	if h.Err != nil {
		return "", h.Err
	}
	sum := sha256.Sum256([]byte("rxc-test-salt|" + password))
	return hasherPrefix + hex.EncodeToString(sum[:]), nil
}

// Verify implements operators.PasswordHasher.
func (h *Hasher) Verify(hash, password string) (bool, error) {
	h.verifies.Add(1)
	if h.Err != nil {
		return false, h.Err
	}
	if !strings.HasPrefix(hash, hasherPrefix) {
		return false, errors.New("not a hash of this hasher")
	}
	want, _ := h.Hash(password)
	return hash == want, nil
}

// Verifies is how many Verify calls were made.
func (h *Hasher) Verifies() int64 { return h.verifies.Load() }

func testSecondFactor(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "a@example.com", operators.RoleAdmin)
	create(t, s, "op-b", "b@example.com", operators.RoleViewer)
	is(t, "SetPendingTOTP of an unknown operator", s.SetPendingTOTP(ctx, "op-x", []byte("sealed")), operators.ErrNotFound)
	if _, err := s.TOTP(ctx, "op-x"); !errors.Is(err, operators.ErrNotFound) {
		t.Errorf("TOTP of an unknown operator: %v", err)
	}
	if r, err := s.TOTP(ctx, "op-a"); err != nil || r.Pending != nil || r.Active != nil {
		t.Errorf("TOTP before enrolment = %+v, %v; want empty", r, err)
	}
	is(t, "SetPendingTOTP", s.SetPendingTOTP(ctx, "op-a", []byte("first")), nil)
	is(t, "SetPendingTOTP again", s.SetPendingTOTP(ctx, "op-a", []byte("second")), nil)
	// Enabling a secret other than the pending one (a confirmation racing a
	// new enrolment) is refused.
	codes := [][]byte{hash("code1"), hash("code2")}
	is(t, "EnableTOTP of a stale pending secret", s.EnableTOTP(ctx, "op-a", []byte("first"), 100, codes), operators.ErrConflict)
	if o, _ := s.OperatorByID(ctx, "op-a"); o.SecondFactor {
		t.Error("SecondFactor set by a refused EnableTOTP")
	}
	is(t, "EnableTOTP", s.EnableTOTP(ctx, "op-a", []byte("second"), 100, codes), nil)
	r, err := s.TOTP(ctx, "op-a")
	if err != nil || string(r.Active) != "second" || r.Pending != nil || r.LastStep != 100 {
		t.Errorf("TOTP after enabling = %+v, %v; want active \"second\", no pending, last step 100", r, err)
	}
	o, _ := s.OperatorByID(ctx, "op-a")
	if !o.SecondFactor {
		t.Error("OperatorByID: SecondFactor false after EnableTOTP")
	}
	if o, _, _ := s.OperatorByEmail(ctx, "a@example.com"); !o.SecondFactor {
		t.Error("OperatorByEmail: SecondFactor false after EnableTOTP")
	}
	if o, _ := s.OperatorByID(ctx, "op-b"); o.SecondFactor {
		t.Error("another operator got SecondFactor")
	}
	// An update of role or tenants leaves the second factor alone.
	if _, err := s.UpdateOperator(ctx, "op-a", func(o *operators.Operator) error { o.SecondFactor = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.OperatorByID(ctx, "op-a"); !got.SecondFactor {
		t.Error("UpdateOperator cleared the second factor")
	}

	// Steps: only later ones are accepted.
	is(t, "UseTOTPStep of the enrolment's step", s.UseTOTPStep(ctx, "op-a", 100), operators.ErrReplayed)
	is(t, "UseTOTPStep earlier", s.UseTOTPStep(ctx, "op-a", 99), operators.ErrReplayed)
	is(t, "UseTOTPStep later", s.UseTOTPStep(ctx, "op-a", 101), nil)
	is(t, "UseTOTPStep replayed", s.UseTOTPStep(ctx, "op-a", 101), operators.ErrReplayed)

	// Recovery codes: each works once, only for its operator.
	is(t, "recovery code of another operator", s.UseRecoveryCode(ctx, "op-b", hash("code1"), t0), operators.ErrNotFound)
	is(t, "unknown recovery code", s.UseRecoveryCode(ctx, "op-a", hash("code9"), t0), operators.ErrNotFound)
	is(t, "recovery code", s.UseRecoveryCode(ctx, "op-a", hash("code1"), t0), nil)
	is(t, "recovery code again", s.UseRecoveryCode(ctx, "op-a", hash("code1"), t0), operators.ErrNotFound)
	is(t, "another recovery code", s.UseRecoveryCode(ctx, "op-a", hash("code2"), t0), nil)

	// A new enrolment replaces the codes.
	is(t, "SetPendingTOTP while enabled", s.SetPendingTOTP(ctx, "op-a", []byte("third")), nil)
	if r, _ := s.TOTP(ctx, "op-a"); string(r.Active) != "second" || string(r.Pending) != "third" {
		t.Errorf("a pending enrolment replaced the active secret: %+v", r)
	}
	is(t, "EnableTOTP again", s.EnableTOTP(ctx, "op-a", []byte("third"), 200, [][]byte{hash("code3")}), nil)
	is(t, "an old code after re-enrolment", s.UseRecoveryCode(ctx, "op-a", hash("code2"), t0), operators.ErrNotFound)
	is(t, "a new code", s.UseRecoveryCode(ctx, "op-a", hash("code3"), t0), nil)

	is(t, "DisableTOTP", s.DisableTOTP(ctx, "op-a"), nil)
	is(t, "DisableTOTP of an unknown operator", s.DisableTOTP(ctx, "op-x"), operators.ErrNotFound)
	if r, _ := s.TOTP(ctx, "op-a"); r.Active != nil || r.Pending != nil {
		t.Errorf("TOTP after DisableTOTP = %+v", r)
	}
	if o, _ := s.OperatorByID(ctx, "op-a"); o.SecondFactor {
		t.Error("SecondFactor after DisableTOTP")
	}

	// An operator created with the single sign-on marker is External until
	// a password is set.
	ext := operators.Operator{ID: "op-ext", Email: "ext@example.com", Role: operators.RoleViewer, CreatedAt: t0}
	is(t, "CreateOperator (SSO)", s.CreateOperator(ctx, ext, operators.ExternalPasswordHash), nil)
	if o, _ := s.OperatorByID(ctx, "op-ext"); !o.External {
		t.Error("an operator created by SSO is not External")
	}
	if o, _ := s.OperatorByID(ctx, "op-a"); o.External {
		t.Error("a local operator is External")
	}
	is(t, "SetPassword of the SSO operator", s.SetPassword(ctx, "op-ext", "a real hash"), nil)
	if o, _, _ := s.OperatorByEmail(ctx, "ext@example.com"); o.External {
		t.Error("External after a password was set")
	}

	// Settings.
	if set, err := s.AuthSettings(ctx); err != nil || set.RequireAdminSecondFactor {
		t.Errorf("AuthSettings never set = %+v, %v; want zero", set, err)
	}
	want := operators.AuthSettings{RequireAdminSecondFactor: true, SSOOnly: true, BreakGlassEmail: "a@example.com"}
	is(t, "SetAuthSettings", s.SetAuthSettings(ctx, want), nil)
	if set, _ := s.AuthSettings(ctx); set != want {
		t.Errorf("AuthSettings = %+v, want %+v", set, want)
	}
	is(t, "SetAuthSettings off", s.SetAuthSettings(ctx, operators.AuthSettings{}), nil)
	if set, _ := s.AuthSettings(ctx); set != (operators.AuthSettings{}) {
		t.Errorf("AuthSettings after turning everything off = %+v", set)
	}
}

// testPruneAPITokens: tokens revoked or expired before the cut-off go, at
// most the limit per call; usable ones and those that ended later stay and
// still authenticate or list; a second pass removes nothing.
func testPruneAPITokens(t *testing.T, s operators.Store) {
	ctx := context.Background()
	create(t, s, "op-a", "alice@example.com", operators.RoleAdmin)
	cut := t0.Add(90 * 24 * time.Hour)
	for _, k := range []struct {
		id      string
		expires time.Time
		revoke  time.Time
	}{
		{"expired-old", t0.Add(time.Hour), time.Time{}},
		{"revoked-old", cut.Add(time.Hour), t0.Add(time.Minute)},
		{"expired-old-2", t0.Add(2 * time.Hour), time.Time{}},
		{"live", cut.Add(time.Hour), time.Time{}},
		{"revoked-recent", cut.Add(time.Hour), cut.Add(time.Minute)},
	} {
		if err := s.CreateAPIToken(ctx, operators.APIToken{ID: k.id, OperatorID: "op-a", Name: k.id, Role: operators.RoleViewer,
			CreatedBy: "alice@example.com", CreatedAt: t0, ExpiresAt: k.expires}, hash(k.id)); err != nil {
			t.Fatal(err)
		}
		if !k.revoke.IsZero() {
			if _, err := s.RevokeAPIToken(ctx, k.id, k.revoke); err != nil {
				t.Fatal(err)
			}
		}
	}
	contracttest.Prune(t, 2, []int{2, 1}, func(limit int) (int, error) { return s.PruneAPITokens(ctx, cut, limit) })
	ids := tokenIDs(t)
	if diff := cmp.Diff([]string{"live", "revoked-recent"}, ids(s.ListAPITokens(ctx, ""))); diff != "" {
		t.Errorf("tokens after pruning (-want +got):\n%s", diff)
	}
	if _, _, err := s.APITokenByHash(ctx, hash("live")); err != nil {
		t.Errorf("the live token after pruning: %v", err)
	}
}
