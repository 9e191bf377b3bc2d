package controlapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// TestAuditSweepIsBounded: the sweep that writes quiet addresses' held
// counts adds at most heldSweepMost rows to one request, at most every
// heldSweepEvery, takes only addresses quiet for heldQuietFor, and
// empties the held map over successive sweeps; a recorded row while
// nothing is quiet adds nothing.
func TestAuditSweepIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	g := newAuditGuard(func() time.Time { return now })
	const addrs = 250
	for i := range addrs {
		src := fmt.Sprintf("192.0.2.%d", i)
		for range int(auditFloodRate.Burst) + 2 {
			g.admit(audit.Entry{Action: "sensor.enroll", Source: src, Outcome: audit.OutcomeDenied, Status: 401})
		}
	}
	if len(g.held) != addrs {
		t.Fatalf("held %d addresses, want %d", len(g.held), addrs)
	}
	ok := audit.Entry{Action: "sensor.enroll", Source: "198.51.100.1", Outcome: audit.OutcomeSuccess, Status: 201}
	if rec, rows := g.admit(ok); !rec || len(rows) != 0 {
		t.Fatalf("a success while nobody is quiet: record %v, %d rows; want recorded alone", rec, len(rows))
	}
	now = now.Add(heldQuietFor)
	total := 0
	for sweep := 0; len(g.held) > 0; sweep++ {
		if sweep > addrs {
			t.Fatal("the held map does not empty")
		}
		_, rows := g.admit(ok)
		if len(rows) > heldSweepMost {
			t.Fatalf("one sweep wrote %d rows, want at most %d", len(rows), heldSweepMost)
		}
		for _, r := range rows {
			if r.Action != "audit.suppressed" || r.TenantID != "" || r.Status != 401 {
				t.Fatalf("row %+v", r)
			}
		}
		total += len(rows)
		if _, again := g.admit(ok); len(again) != 0 {
			t.Fatalf("a second sweep within %s wrote %d rows", heldSweepEvery, len(again))
		}
		now = now.Add(heldSweepEvery)
	}
	if total != addrs {
		t.Errorf("sweeps wrote %d rows, want one for each of the %d addresses", total, addrs)
	}
}
