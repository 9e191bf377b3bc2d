package retention_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/auditmem"
	"github.com/rxc-project/rxc/adapters/memory/eventmem"
	"github.com/rxc-project/rxc/adapters/memory/fleetmem"
	"github.com/rxc-project/rxc/adapters/memory/operatormem"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/retention"
)

var now = time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)

type world struct {
	fleet     *fleetmem.Store
	audit     *auditmem.Store
	events    *eventmem.Store
	operators *operatormem.Store
}

func newWorld(t *testing.T) world {
	t.Helper()
	f, _ := fleetmem.New(fleetmem.Config{})
	a, _ := auditmem.New(auditmem.Config{})
	e, _ := eventmem.New(eventmem.Config{})
	o, _ := operatormem.New(operatormem.Config{})
	return world{f, a, e, o}
}

func (w world) service(t *testing.T, p retention.Policy, batch int) *retention.Service {
	t.Helper()
	s, err := retention.New(retention.Config{Policy: p, Fleet: w.fleet, Audit: w.audit, Events: w.events, APITokens: w.operators, Locker: w.fleet,
		Batch: batch, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seed records n audit entries and n events each day over the last days
// days, and n expired, unused claim codes a day (one tenant).
func (w world) seed(t *testing.T, days, n int) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := w.fleet.CreateTenant(ctx, fleet.Tenant{ID: "acme", Name: "acme", NATSStatus: fleet.NATSPending, CreatedAt: now.AddDate(-2, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	for d := range days {
		at := now.Add(-time.Duration(d) * retention.Day)
		for i := range n {
			if err := w.audit.AppendAudit(ctx, audit.Entry{At: at, Action: "x", Outcome: audit.OutcomeSuccess}); err != nil {
				t.Fatal(err)
			}
			ev := events.Event{TenantID: "acme", SensorID: "s1", ID: fmt.Sprint(d, "-", i), Time: at, ReceivedAt: at, Kind: "alert"}
			if _, err := w.events.Write(ctx, []events.Event{ev}); err != nil {
				t.Fatal(err)
			}
			c := fleet.ClaimCode{ID: fmt.Sprint("cc-", d, "-", i), TenantID: "acme", CreatedAt: at.Add(-time.Hour), ExpiresAt: at, CreatedBy: "ops"}
			if err := w.fleet.CreateClaimCode(ctx, c, []byte(fmt.Sprintf("%032d", d*1000+i))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A pass removes what is older than each retention, in statements of at
// most the batch size, and a second pass removes nothing; 0 keeps a history
// forever.
func TestRunBoundsHistory(t *testing.T) {
	w := newWorld(t)
	w.seed(t, 500, 3) // 500 days, 3 a day
	p := retention.Policy{Events: 30 * retention.Day, Audit: 400 * retention.Day, Commands: 90 * retention.Day, Credentials: 0}
	s := w.service(t, p, 7)
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Days 0…29 are kept whole; day 30 began 30 days before noon today and
	// ends at midnight after that: kept too. Audit: entries of days
	// 0…399 are at most 399 days old (400 days exactly is not before).
	want := retention.Report{EventDays: 500 - 31, Audit: 3 * (500 - 401)}
	if rep != want {
		t.Errorf("first pass %+v, want %+v", rep, want)
	}
	codes, _ := w.fleet.ClaimCodes(context.Background(), "acme")
	if len(codes) != 1500 {
		t.Errorf("claim codes kept forever (CREDENTIAL_HISTORY_RETENTION_DAYS=0): %d of 1500 left", len(codes))
	}
	if rep, err := s.Run(context.Background()); err != nil || rep != (retention.Report{}) {
		t.Errorf("second pass %+v, %v; want nothing", rep, err)
	}
	if st := s.Stats(); st.Passes != 2 || st.Removed != want || st.Skipped != 0 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	// Credentials with a retention: the codes that expired more than 90
	// days ago go.
	p.Credentials = 90 * retention.Day
	if rep, err := w.service(t, p, 7).Run(context.Background()); err != nil || rep.ClaimCodes != 3*(500-91) {
		t.Errorf("credentials pass %+v, %v; want %d codes", rep, err, 3*(500-91))
	}
}

// One replica at a time: while the lock is held elsewhere a pass removes
// nothing and says it was skipped.
func TestRunSkipsWhileAnotherReplicaPrunes(t *testing.T) {
	w := newWorld(t)
	w.seed(t, 40, 1)
	unlock, ok, err := w.fleet.TryLock(context.Background(), retention.Lock)
	if err != nil || !ok {
		t.Fatal("lock", ok, err)
	}
	s := w.service(t, retention.DefaultPolicy(), 0)
	if rep, err := s.Run(context.Background()); err != nil || !rep.Skipped || rep.Total() != 0 {
		t.Errorf("pass while locked: %+v, %v; want skipped", rep, err)
	}
	unlock()
	if rep, err := s.Run(context.Background()); err != nil || rep.Skipped || rep.EventDays != 40-31 {
		t.Errorf("pass after unlock: %+v, %v; want %d event days", rep, err, 40-31)
	}
	if st := s.Stats(); st.Skipped != 1 || st.Passes != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A pass interrupted stops between statements; what it removed stays
// removed and the next pass finishes the job.
func TestRunInterrupted(t *testing.T) {
	w := newWorld(t)
	w.seed(t, 500, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := w.service(t, retention.DefaultPolicy(), 5)
	if _, err := s.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pass: %v", err)
	}
	rep, err := s.Run(context.Background())
	if err != nil || rep.Audit != 2*(500-401) || rep.EventDays != 500-31 {
		t.Errorf("pass after the interrupted one: %+v, %v", rep, err)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		p  retention.Policy
		ok bool
	}{
		{retention.DefaultPolicy(), true},
		{retention.Policy{}, true}, // everything forever
		{retention.Policy{Audit: retention.Day}, true},
		{retention.Policy{Audit: retention.MaxRetention}, true},
		{retention.Policy{Events: -retention.Day}, false},
		{retention.Policy{Commands: time.Hour}, false},
		{retention.Policy{Credentials: retention.Day + time.Hour}, false},
		{retention.Policy{Audit: retention.MaxRetention + retention.Day}, false},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, retention.ErrInvalidPolicy) {
			t.Errorf("%+v: %v, want ok %v", tc.p, err, tc.ok)
		}
	}
	if _, err := retention.New(retention.Config{Policy: retention.Policy{Events: time.Hour}}); err == nil {
		t.Error("New took an invalid policy and no stores")
	}
}
