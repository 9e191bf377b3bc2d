package audit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/auditmem"
	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/core/audit"
)

// The use-case tests of this package run the Service on the in-memory
// store (adapters/memory/auditmem), which passes the same contract suite
// (audittest.Run) as the PostgreSQL store.

var now = time.Date(2026, 5, 4, 10, 0, 0, 123456789, time.UTC)

func newService(t *testing.T, store audit.Store) (*audit.Service, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	svc, err := audit.New(store, slog.New(slog.NewJSONHandler(&logs, nil)), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return svc, &logs
}

func memStore(t *testing.T) *auditmem.Store {
	t.Helper()
	return memtest.Store(t, auditmem.New, auditmem.Config{})
}

func TestRecordStampsStoresAndLogs(t *testing.T) {
	t.Parallel()
	store := memStore(t)
	svc, logs := newService(t, store)
	e := audit.Entry{ActorID: "op-1", Actor: "alice@example.com", ActorRole: "admin", Source: "192.0.2.1", Action: "sensor.revoke", TenantID: "acme", Target: "s-1", Outcome: audit.OutcomeSuccess, Status: 204}
	if err := svc.Record(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got, _, err := svc.List(context.Background(), audit.Filter{}, "")
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if !got[0].At.Equal(now.Truncate(time.Microsecond)) || got[0].Action != "sensor.revoke" || got[0].Target != "s-1" {
		t.Errorf("stored %+v; want stamped with the clock at microseconds", got[0])
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	for k, want := range map[string]any{"msg": "audit", "action": "sensor.revoke", "actor": "alice@example.com", "tenant_id": "acme", "target": "s-1", "outcome": "success", "status": float64(204)} {
		if line[k] != want {
			t.Errorf("log %s = %v, want %v", k, line[k], want)
		}
	}
	// A time already set is kept.
	at := now.Add(-time.Hour).Truncate(time.Microsecond)
	if err := svc.Record(context.Background(), audit.Entry{At: at, Action: "auth.login", Outcome: audit.OutcomeDenied}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := svc.List(context.Background(), audit.Filter{Action: "auth.login"}, ""); len(got) != 1 || !got[0].At.Equal(at) {
		t.Errorf("entry with its own time %+v", got)
	}
}

type failingStore struct{ audit.Store }

func (failingStore) AppendAudit(context.Context, audit.Entry) error { return errors.New("disk full") }

// A store failure is returned and logged; the log line of the action is
// written regardless.
func TestRecordStoreFailure(t *testing.T) {
	t.Parallel()
	svc, logs := newService(t, failingStore{memStore(t)})
	err := svc.Record(context.Background(), audit.Entry{Action: "sensor.command", Outcome: audit.OutcomeSuccess})
	if err == nil {
		t.Fatal("Record with a failing store: nil error")
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"msg":"audit"`)) || !bytes.Contains(logs.Bytes(), []byte("audit record not stored")) {
		t.Errorf("logs %s; want the audit line and the failure", logs)
	}
}

// Listing is scoped like the API: a principal limited to acme sees acme's
// entries only, never another tenant's or those of no tenant, whatever it
// filters on and however it pages.
func TestListIsScopedAndPaged(t *testing.T) {
	t.Parallel()
	svc, _ := newService(t, memStore(t))
	ctx := context.Background()
	for i := range 12 {
		tenant := []string{"acme", "beta", ""}[i%3]
		if err := svc.Record(ctx, audit.Entry{TenantID: tenant, Actor: "alice@example.com", Action: "a", Outcome: audit.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	// Admin (nil scope): every entry, in pages of 5 by the cursor.
	var all []audit.Entry
	cursor := ""
	for range 10 {
		page, next, err := svc.List(ctx, audit.Filter{Limit: 5}, cursor)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 12 || all[0].ID <= all[11].ID {
		t.Errorf("admin paged through %d entries, want 12 newest first", len(all))
	}
	// Scoped to acme: acme only, also when asking for beta by name.
	acme, next, err := svc.List(ctx, audit.Filter{Tenants: []string{"acme"}}, "")
	if err != nil || next != "" || len(acme) != 4 {
		t.Fatalf("acme's entries: %d, next %q, %v; want 4, no next page", len(acme), next, err)
	}
	for _, e := range acme {
		if e.TenantID != "acme" {
			t.Errorf("a principal of acme sees an entry of %q", e.TenantID)
		}
	}
	if got, _, err := svc.List(ctx, audit.Filter{Tenants: []string{"acme"}, TenantID: "beta"}, ""); err != nil || len(got) != 0 {
		t.Errorf("acme asking for beta's entries got %d, %v", len(got), err)
	}
	// A cursor taken from the admin's listing does not widen the scope.
	if got, _, err := svc.List(ctx, audit.Filter{Tenants: []string{"acme"}, Limit: 100}, cursor); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range got {
			if e.TenantID != "acme" {
				t.Errorf("scoped listing with a foreign cursor sees %q", e.TenantID)
			}
		}
	}
	// Refusals.
	forged := base64.RawURLEncoding.EncodeToString([]byte("a-5"))
	for name, tc := range map[string]struct {
		f      audit.Filter
		cursor string
	}{
		"limit too high":     {audit.Filter{Limit: audit.MaxLimit + 1}, ""},
		"negative limit":     {audit.Filter{Limit: -1}, ""},
		"cursor not base64":  {audit.Filter{}, "%%%"},
		"cursor of nothing":  {audit.Filter{}, base64.RawURLEncoding.EncodeToString([]byte("x12"))},
		"cursor id negative": {audit.Filter{}, forged},
	} {
		if _, _, err := svc.List(ctx, tc.f, tc.cursor); !errors.Is(err, audit.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
}
