package controlapi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// The audit rows that callers without credentials can cause (refused
// logins, claim-code redemptions, sensor enrolments and renewals) are
// bounded per client address: past a burst, a refusal is counted instead
// of recorded, and the count is written as one "audit.suppressed" row when
// the address is recorded again. Without this an anonymous flood wrote one
// PostgreSQL row and one log line per request, as fast as it could send.
// Successes, and everything an authenticated operator does, are always
// recorded.
var auditFloodRate = RateLimit{PerMinute: 30, Burst: 30}

// auditGuard holds back refused anonymous requests' rows past the rate.
type auditGuard struct {
	limiter    *limiter
	mu         sync.Mutex
	held       map[string]int // refusals not recorded, by address, since its last row
	suppressed atomic.Int64   // all refusals not recorded
}

func newAuditGuard(clock func() time.Time) *auditGuard {
	return &auditGuard{limiter: newLimiter(auditFloodRate, clock), held: make(map[string]int)}
}

// admit reports whether e is recorded. When it is, and earlier refusals of
// its address were held back, it also returns the row that counts them.
func (g *auditGuard) admit(e audit.Entry) (record bool, summary *audit.Entry) {
	if e.ActorID != "" || e.Outcome == audit.OutcomeSuccess {
		return true, nil
	}
	if ok, _ := g.limiter.allow(e.Source); !ok {
		g.suppressed.Add(1)
		g.mu.Lock()
		if _, known := g.held[e.Source]; known || len(g.held) < maxBuckets {
			g.held[e.Source]++
		}
		g.mu.Unlock()
		return false, nil
	}
	g.mu.Lock()
	n := g.held[e.Source]
	delete(g.held, e.Source)
	g.mu.Unlock()
	if n == 0 {
		return true, nil
	}
	return true, &audit.Entry{
		// No tenant: the refusals counted may have named any tenant's
		// sensors, so only admins see the row.
		Action: "audit.suppressed", Source: e.Source,
		Outcome: audit.OutcomeDenied, Status: e.Status,
		Detail: fmt.Sprintf("%d refused requests without credentials from this address were not recorded one by one (more than %d a minute)", n, auditFloodRate.PerMinute),
	}
}
