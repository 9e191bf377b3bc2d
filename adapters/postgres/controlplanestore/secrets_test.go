package controlplanestore_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// What PostgreSQL holds of the claim codes and tokens the fleet use cases
// hand out: their hashes, never the clear value, in any column. (That the
// use cases hand the store only hashes is tested in core/fleet.)
func TestClaimCodesAreStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.provisionedTenant(t, "acme")
	issued, code, err := f.svc.IssueClaimCode(f.ctx, "acme", 0, "edge-1", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	normal, _ := fleet.NormalizeClaimCode(code)
	var rows []string
	r, err := f.pool.Query(f.ctx, `SELECT c::text FROM claim_codes c`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
	}
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
	f := newFixture(t)
	f.provisionedTenant(t, "acme")
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
