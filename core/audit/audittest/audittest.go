// Package audittest is the contract suite for audit.Store. Every
// implementation (PostgreSQL, in-memory) runs the same Run, so they stay
// interchangeable: entries come back as stored, newest first, with ids
// that grow in append order; every filter narrows, a tenant scope never
// lets another tenant's entries (or those of no tenant) through, and an
// empty scope shows nothing.
package audittest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/contracttest"
)

// Store is what the suite exercises: the store and its retention.
type Store interface {
	audit.Store
	audit.Pruner
}

// Run runs the suite; newStore returns a fresh, empty store per subtest.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	contracttest.Run(t, newStore, contracttest.Cases[Store]{
		{"RoundTrip", func(t *testing.T, s Store) { testRoundTrip(t, s) }},
		{"Filters", func(t *testing.T, s Store) { testFilters(t, s) }},
		{"Paging", func(t *testing.T, s Store) { testPaging(t, s) }},
		{"Retention", testRetention},
	})
}

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func list(t *testing.T, s audit.Store, f audit.Filter) []audit.Entry {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	es, err := s.ListAudit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func actions(es []audit.Entry) []string {
	return contracttest.Keys(es, func(e audit.Entry) string { return e.Action })
}

func testRoundTrip(t *testing.T, s audit.Store) {
	e := audit.Entry{
		At: t0.Add(123456 * time.Microsecond), ActorID: "op-1", Actor: "alice@example.com", ActorRole: "admin", TokenID: "tok-1",
		Source: "192.0.2.1", Action: "sensor.command", TenantID: "acme", Target: "s-1", Outcome: audit.OutcomeSuccess, Status: 202, Detail: "start",
	}
	if err := s.AppendAudit(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got := list(t, s, audit.Filter{})
	if len(got) != 1 || got[0].ID < 1 {
		t.Fatalf("entries %+v", got)
	}
	e.ID = got[0].ID
	if diff := cmp.Diff(e, got[0]); diff != "" {
		t.Errorf("entry read back (-want +got):\n%s", diff)
	}
	in := time.FixedZone("UTC+2", 2*3600)
	if err := s.AppendAudit(context.Background(), audit.Entry{At: t0.In(in), Action: "auth.login", Outcome: audit.OutcomeDenied, Status: 401}); err != nil {
		t.Fatal(err)
	}
	got = list(t, s, audit.Filter{})
	if len(got) != 2 || got[0].ID <= got[1].ID || !got[0].At.Equal(t0) || got[0].At.Location() != time.UTC {
		t.Errorf("newest first with growing ids and UTC times: %+v", got)
	}
}

// seed appends one entry per (tenant, actor, action) in order.
func seed(t *testing.T, s audit.Store) {
	t.Helper()
	for i, e := range []audit.Entry{
		{TenantID: "acme", Actor: "alice@example.com", Action: "a1"},
		{TenantID: "beta", Actor: "bob@example.com", Action: "a2"},
		{TenantID: "", Actor: "mallory@example.com", Action: "a3"}, // a login: no tenant
		{TenantID: "acme", Actor: "bob@example.com", Action: "a4"},
		{TenantID: "acme-eu", Actor: "alice@example.com", Action: "a5"},
		{TenantID: "beta", Actor: "alice@example.com", Action: "a1"},
	} {
		e.At, e.Outcome = t0.Add(time.Duration(i)*time.Second), audit.OutcomeSuccess
		if err := s.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

func testFilters(t *testing.T, s audit.Store) {
	seed(t, s)
	for name, tc := range map[string]struct {
		f    audit.Filter
		want []string
	}{
		"everything":               {audit.Filter{}, []string{"a1", "a5", "a4", "a3", "a2", "a1"}},
		"scope acme":               {audit.Filter{Tenants: []string{"acme"}}, []string{"a4", "a1"}},
		"scope acme and beta":      {audit.Filter{Tenants: []string{"acme", "beta"}}, []string{"a1", "a4", "a2", "a1"}},
		"empty scope":              {audit.Filter{Tenants: []string{}}, nil},
		"one tenant":               {audit.Filter{TenantID: "beta"}, []string{"a1", "a2"}},
		"tenant outside scope":     {audit.Filter{Tenants: []string{"acme"}, TenantID: "beta"}, nil},
		"actor":                    {audit.Filter{Actor: "alice@example.com"}, []string{"a1", "a5", "a1"}},
		"actor, other case":        {audit.Filter{Actor: "ALICE@example.com"}, nil},
		"action":                   {audit.Filter{Action: "a1"}, []string{"a1", "a1"}},
		"actor and action":         {audit.Filter{Actor: "alice@example.com", Action: "a1", Tenants: []string{"acme"}}, []string{"a1"}},
		"no prefix match on scope": {audit.Filter{Tenants: []string{"acm"}}, nil},
	} {
		if diff := cmp.Diff(tc.want, actions(list(t, s, tc.f))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func testPaging(t *testing.T, s audit.Store) {
	for i := range 7 {
		if err := s.AppendAudit(context.Background(), audit.Entry{At: t0, Action: fmt.Sprint("p", i), Outcome: audit.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	before := int64(0)
	for range 10 {
		page := list(t, s, audit.Filter{Limit: 3, Before: before})
		got = append(got, actions(page)...)
		if len(page) < 3 {
			break
		}
		before = page[len(page)-1].ID
	}
	if diff := cmp.Diff([]string{"p6", "p5", "p4", "p3", "p2", "p1", "p0"}, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
}

// testRetention drives the trail past its bound: entries recorded before
// the cut-off go, oldest first and at most the limit per call; later ones
// stay with their ids, and listing, filters and paging answer the same for
// them; a second pass removes nothing; ids keep growing after pruning.
func testRetention(t *testing.T, s Store) {
	ctx := context.Background()
	cut := t0.Add(400 * 24 * time.Hour)
	for i := range 5 {
		if err := s.AppendAudit(ctx, audit.Entry{At: t0.Add(time.Duration(i) * time.Hour), TenantID: "acme", Action: fmt.Sprint("old", i), Outcome: audit.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	for i, tenant := range []string{"acme", "beta", "acme"} {
		if err := s.AppendAudit(ctx, audit.Entry{At: cut.Add(time.Duration(i) * time.Second), TenantID: tenant, Action: fmt.Sprint("new", i), Outcome: audit.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	before := list(t, s, audit.Filter{})
	contracttest.Prune(t, 2, []int{2, 2, 1}, func(limit int) (int, error) { return s.PruneAudit(ctx, cut, limit) })
	got := list(t, s, audit.Filter{})
	if diff := cmp.Diff(before[:3], got); diff != "" {
		t.Errorf("entries after pruning (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"new2", "new0"}, actions(list(t, s, audit.Filter{Tenants: []string{"acme"}}))); diff != "" {
		t.Errorf("acme's entries after pruning (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"new0"}, actions(list(t, s, audit.Filter{Limit: 3, Before: got[1].ID}))); diff != "" {
		t.Errorf("the page after a cursor (-want +got):\n%s", diff)
	}
	if err := s.AppendAudit(ctx, audit.Entry{At: cut.Add(time.Hour), Action: "after", Outcome: audit.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	if last := list(t, s, audit.Filter{Limit: 1}); len(last) != 1 || last[0].ID <= got[0].ID {
		t.Errorf("an entry appended after pruning = %+v; want an id above %d", last, got[0].ID)
	}
}
