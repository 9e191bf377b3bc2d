package controlapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// TestAnonymousRefusalsCannotFloodTheAuditTrail: refused requests without
// credentials from one address are recorded up to a burst, then counted;
// the count comes back as one audit.suppressed row when the address is
// recorded again. Successes are always recorded. (That the bound is per
// address is the limiter's own test.)
func TestAnonymousRefusalsCannotFloodTheAuditTrail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.createTenant("acme")
	sensor, _ := e.enroll("acme")
	rows := func(action, outcome string) []audit.Entry {
		t.Helper()
		return e.auditRows(t, action, func(r audit.Entry) bool { return outcome == "" || r.Outcome == outcome })
	}
	const sent = 100
	for range sent {
		e.refuseEnrol(t, sensor)
	}
	recorded := len(rows("sensor.enroll", audit.OutcomeDenied))
	if recorded < 25 || recorded > 35 {
		t.Fatalf("%d of %d refused enrolments from one address recorded, want about the burst of 30", recorded, sent)
	}
	if got := rows("audit.suppressed", ""); len(got) != 0 {
		t.Fatalf("a suppressed-count row before the address was recorded again: %+v", got)
	}
	// A success from the flooding address is recorded at once.
	before := len(rows("sensor.enroll", audit.OutcomeSuccess))
	e.enroll("acme")
	if got := len(rows("sensor.enroll", audit.OutcomeSuccess)); got != before+1 {
		t.Fatalf("successful enrolments recorded %d, want %d", got, before+1)
	}
	// Once the address's rate allows a row again, the held-back refusals
	// are counted in one row next to it.
	e.clock.Advance(time.Minute)
	e.refuseEnrol(t, sensor)
	sup := rows("audit.suppressed", "")
	if len(sup) != 1 || sup[0].Outcome != audit.OutcomeDenied || sup[0].Source == "" || sup[0].TenantID != "" ||
		!strings.HasPrefix(sup[0].Detail, strconv.Itoa(sent-recorded)+" refused requests") {
		t.Fatalf("suppressed-count rows %+v, want one counting %d", sup, sent-recorded)
	}
	if got := len(rows("sensor.enroll", audit.OutcomeDenied)); got != recorded+1 {
		t.Fatalf("refused enrolments recorded %d after the minute, want %d", got, recorded+1)
	}
	res := e.metrics()
	if want := "rxc_controlplane_audit_suppressed_total " + strconv.Itoa(sent-recorded); !strings.Contains(string(res.body), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// auditRows is the audit trail's rows of action (up to audit.MaxLimit)
// that keep accepts.
func (e *env) auditRows(t testing.TB, action string, keep func(audit.Entry) bool) []audit.Entry {
	t.Helper()
	all, err := e.store.ListAudit(context.Background(), audit.Filter{Action: action, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for _, r := range all {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func anyEntry(audit.Entry) bool { return true }

// refuseEnrol sends sensor's enrolment with a wrong bearer token: a
// refusal without credentials, which the audit guard holds back past its
// burst.
func (e *env) refuseEnrol(t testing.TB, sensor string) {
	t.Helper()
	e.do(enrolRequest(sensor, "not-the-token", jsonString(t, map[string]string{"csr": newCSR(t)}))).
		expect(t, "enrol with a wrong token", http.StatusUnauthorized, "invalid_token")
}
