package controlapi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/sdk/problem"
)

// The audit rows that callers without credentials can cause (refused
// logins, claim-code redemptions, sensor enrolments and renewals) are
// bounded per client address: past a burst, a refusal is counted instead
// of recorded, and the count is written as one "audit.suppressed" row when
// the address is recorded again, or, once it has been quiet for a minute,
// with the next row anyone causes (sweep). Without this an anonymous flood wrote one
// PostgreSQL row and one log line per request, as fast as it could send.
// Successes, everything an authenticated operator does, and refused logins
// whose password was right (rightPassword) are always recorded.
var auditFloodRate = RateLimit{PerMinute: 30, Burst: 30}

// rightPassword are the refusals that tell the password was right: an
// admin must see each of them, and a flood of cheap refusals from the same
// address must not hide them. Only a caller who has the password can cause
// them, and the login throttle counts the wrong second factors.
var rightPassword = map[string]bool{
	string(problem.CodeTOTPRequired):         true,
	string(problem.CodeInvalidSecondFactor):  true,
	string(problem.CodeSecondFactorRequired): true,
	string(problem.CodeSecondFactorUnavail):  true,
}

// auditGuard holds back refused anonymous requests' rows past the rate.
type auditGuard struct {
	limiter    *limiter
	clock      func() time.Time
	mu         sync.Mutex
	held       map[string]heldCount // refusals not recorded, by address, since its last row
	lastSweep  time.Time
	suppressed atomic.Int64 // all refusals not recorded
}

// heldCount is what an address's held-back refusals come to.
type heldCount struct {
	n      int
	status int       // the last one's
	last   time.Time // when the last one came
}

// An address that went quiet is not left to come back: whenever a row is
// recorded, at most every heldSweepEvery, the counts of addresses quiet
// for heldQuietFor are written too, at most heldSweepMost rows a sweep (so
// a sweep adds a bounded write to one request, and the held map empties).
const (
	heldSweepEvery = 10 * time.Second
	heldQuietFor   = time.Minute
	heldSweepMost  = 100
)

func newAuditGuard(clock func() time.Time) *auditGuard {
	return &auditGuard{limiter: newLimiter(auditFloodRate, clock), clock: clock, held: make(map[string]heldCount)}
}

// admit reports whether e is recorded, and the audit.suppressed rows to
// record with it: its address's held-back refusals, and those of addresses
// that went quiet.
func (g *auditGuard) admit(e audit.Entry) (record bool, summaries []audit.Entry) {
	now := g.clock()
	if e.ActorID != "" || e.Outcome == audit.OutcomeSuccess || rightPassword[e.Detail] {
		g.mu.Lock()
		defer g.mu.Unlock()
		return true, g.sweep(now)
	}
	if ok, _ := g.limiter.allow(e.Source); !ok {
		g.suppressed.Add(1)
		g.mu.Lock()
		if h, known := g.held[e.Source]; known || len(g.held) < maxBuckets {
			g.held[e.Source] = heldCount{n: h.n + 1, status: e.Status, last: now}
		}
		g.mu.Unlock()
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.held[e.Source]
	delete(g.held, e.Source)
	summaries = g.sweep(now)
	if ok {
		summaries = append(summaries, suppressedRow(e.Source, h))
	}
	return true, summaries
}

// sweep takes the counts of addresses quiet for heldQuietFor out of held,
// as rows; g.mu held.
func (g *auditGuard) sweep(now time.Time) []audit.Entry {
	if len(g.held) == 0 || now.Sub(g.lastSweep) < heldSweepEvery {
		return nil
	}
	g.lastSweep = now
	var out []audit.Entry
	for src, h := range g.held {
		if now.Sub(h.last) < heldQuietFor {
			continue
		}
		out = append(out, suppressedRow(src, h))
		delete(g.held, src)
		if len(out) == heldSweepMost {
			break
		}
	}
	return out
}

func suppressedRow(src string, h heldCount) audit.Entry {
	return audit.Entry{
		// No tenant: the refusals counted may have named any tenant's
		// sensors, so only admins see the row.
		Action: "audit.suppressed", Source: src,
		Outcome: audit.OutcomeDenied, Status: h.status,
		Detail: fmt.Sprintf("%d refused requests without credentials from this address were not recorded one by one (more than %d a minute)", h.n, auditFloodRate.PerMinute),
	}
}
