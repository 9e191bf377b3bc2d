package controlapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// TestAuditFloodCannotHideARightPassword (attack, issue 21 round): an
// attacker who floods refusals without credentials from its address (here
// refused sensor enrolments) used to have its later login refusals held
// back too, including the ones that say the password was right
// (totp_required, invalid_second_factor): the one row that tells an admin
// a password is known was hidden behind cheap noise. Such refusals are
// always recorded; a plain wrong password is still held back (control).
func TestAuditFloodCannotHideARightPassword(t *testing.T) {
	t.Parallel()
	e := withSecondFactors(t, newEnv(t, options{}), false)
	e.enrolTOTP(t, e.session)
	e.createTenant("acme")
	sensor, _ := e.enroll("acme")
	rows := func(detail string) int {
		t.Helper()
		return len(e.auditRows(t, "auth.login", func(r audit.Entry) bool { return r.Detail == detail }))
	}
	for range 40 {
		e.refuseEnrol(t, sensor)
	}
	login := func(body string) response {
		return e.do(request{method: "POST", path: "/api/auth/login", body: body})
	}
	login(loginBody(operatorEmail, "not the password")).expect(t, "wrong password", http.StatusUnauthorized, "invalid_credentials")
	if n := rows("invalid_credentials"); n != 0 {
		t.Fatalf("control: a wrong password after the flood recorded %d times, want held back", n)
	}
	login(loginBody(operatorEmail, operatorPassword)).expect(t, "right password, no code", http.StatusUnauthorized, "totp_required")
	login(totpLogin(operatorEmail, operatorPassword, "totp", "000000")).expect(t, "right password, wrong code", http.StatusUnauthorized, "invalid_second_factor")
	if n := rows("totp_required"); n != 1 {
		t.Errorf("right password without a code after the flood: %d audit rows, want 1", n)
	}
	if n := rows("invalid_second_factor"); n != 1 {
		t.Errorf("right password with a wrong code after the flood: %d audit rows, want 1", n)
	}
}

// TestAuditFloodCountReachesTheTrail (attack, fixed): the refusals the
// guard holds back are written as an audit.suppressed row only when their
// address is recorded again. An address that floods and never comes back
// leaves only its first 30 rows and the process-wide metric: the size of
// the flood never reaches the audit trail, and the held counts stay in
// memory (up to 65,536 addresses; once that many never came back, the
// counts of every new flooding address are dropped). Now the counts of an
// address quiet for a minute are written with the next row anyone causes
// (at most 100 a sweep, a sweep at most every 10 s).
func TestAuditFloodCountReachesTheTrail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.createTenant("acme")
	sensor, _ := e.enroll("acme")
	for range 100 {
		e.refuseEnrol(t, sensor)
	}
	// The flooding address goes quiet; an operator acts later (recorded).
	e.clock.Advance(2 * time.Minute)
	e.do(request{method: "GET", path: "/api/sensors", operator: true}).expect(t, "list", http.StatusOK, "")
	e.do(request{method: "PATCH", path: "/api/sensors/" + sensor, operator: true, body: `{"name":"renamed"}`}).expect(t, "rename", http.StatusOK, "")
	all := e.auditRows(t, "audit.suppressed", anyEntry)
	recorded := len(e.auditRows(t, "sensor.enroll", func(r audit.Entry) bool { return r.Outcome == audit.OutcomeDenied }))
	if len(all) != 1 || all[0].Source == "" || all[0].TenantID != "" ||
		!strings.HasPrefix(all[0].Detail, strconv.Itoa(100-recorded)+" refused requests") {
		t.Fatalf("suppressed-count rows %+v, want one counting the %d refusals held back two minutes ago", all, 100-recorded)
	}
	// Written once: the address's next recorded refusal brings no second row.
	e.clock.Advance(time.Minute)
	e.refuseEnrol(t, sensor)
	if again := e.auditRows(t, "audit.suppressed", anyEntry); len(again) != 1 {
		t.Errorf("suppressed-count rows after the address came back: %d, want still 1", len(again))
	}
}
