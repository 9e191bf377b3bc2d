package controlplanestore_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/passwords"
	"github.com/rxc-project/rxc/adapters/postgres/pgstoretest"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
)

// What PostgreSQL holds of the claim codes and tokens the fleet use cases
// hand out: their hashes, never the clear value, in any column. (That the
// use cases hand the store only hashes is tested in core/fleet.)
func TestClaimCodesAreStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	issued, code, err := f.svc.IssueClaimCode(f.ctx, "acme", 0, "edge-1", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	normal, _ := fleet.NormalizeClaimCode(code)
	rows := pgstoretest.Column[string](f.ctx, t, f.pool, `SELECT c::text FROM claim_codes c`)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	for _, form := range []string{code, normal, strings.ToLower(normal)} {
		if strings.Contains(rows[0], form) {
			t.Errorf("claim_codes row contains the clear code %q: %s", form, rows[0])
		}
	}
	sum := sha256.Sum256([]byte(normal))
	if got := f.count(t, `SELECT count(*) FROM claim_codes WHERE code_hash = $1`, sum[:]); got != 1 {
		t.Errorf("no row with the SHA-256 of the normalised code")
	}
	list, err := f.svc.ListClaimCodes(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]fleet.ClaimCode{issued}, list); diff != "" {
		t.Errorf("ListClaimCodes (-want +got):\n%s", diff)
	}
}

func TestEnrolmentAndSensorTokensAreStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	r := f.redeemed(t, "acme")
	e, err := f.svc.Enroll(f.ctx, r.SensorID, r.EnrollmentToken, []byte("csr"))
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{"enrolment": r.EnrollmentToken, "sensor": e.SensorToken} {
		sum := sha256.Sum256([]byte(token))
		if n := f.count(t, `SELECT count(*) FROM sensor_tokens WHERE token_hash = $1`, sum[:]); n != 1 {
			t.Errorf("%s token hash stored %d times, want 1", name, n)
		}
		if n := f.count(t, `SELECT count(*) FROM sensor_tokens t WHERE position($1 IN t::text) > 0`, token); n != 0 {
			t.Errorf("clear %s token stored", name)
		}
	}
}

// argon2id is the real password hasher with cheap parameters.
func argon2id(t *testing.T) *passwords.Hasher {
	t.Helper()
	h, err := passwords.New(passwords.Config{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestOperatorSecretsAreStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, err := operators.New(operators.Config{Store: f.store, Hasher: argon2id(t), Clock: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const password = "correct horse battery"
	op, err := svc.CreateOperator(f.ctx, operators.NewOperator{Email: "alice@example.com", Password: password, Role: operators.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	stored := pgstoretest.Value[string](f.ctx, t, f.pool, `SELECT password_hash FROM operators WHERE id = $1`, op.ID)
	if !strings.HasPrefix(stored, "$argon2id$v=19$") || strings.Contains(stored, password) {
		t.Errorf("stored password hash %q", stored)
	}
	_, session, _, err := svc.Login(f.ctx, "alice@example.com", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(f.ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	_, apiToken, err := svc.CreateAPIToken(f.ctx, p, operators.NewAPIToken{Name: "ci", Role: operators.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	for what, q := range map[string]string{
		"session":   `SELECT count(*) FROM operator_sessions s WHERE position($1 IN s::text) > 0 OR position(convert_to($1, 'UTF8') IN token_hash) > 0`,
		"API token": `SELECT count(*) FROM api_tokens k WHERE position($1 IN k::text) > 0 OR position(convert_to($1, 'UTF8') IN token_hash) > 0`,
	} {
		for _, token := range []string{session, apiToken} {
			if n := f.count(t, q, token); n != 0 {
				t.Errorf("%s table holds a clear token", what)
			}
		}
	}
	for what, token := range map[string]string{"session": session, "API token": apiToken} {
		sum := sha256.Sum256([]byte(token))
		if n := f.count(t, `SELECT (SELECT count(*) FROM operator_sessions WHERE token_hash = $1) + (SELECT count(*) FROM api_tokens WHERE token_hash = $1)`, sum[:]); n != 1 {
			t.Errorf("%s: %d rows under its SHA-256, want 1", what, n)
		}
	}
}
