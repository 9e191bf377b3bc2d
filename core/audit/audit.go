// Package audit records who did what to the fleet: every state-changing
// request and every login attempt, with the actor (operator, role, API
// token), the source address, the action, its target and tenant, and the
// outcome. Records are stored and written as one structured log line each;
// they never carry a secret (no password, token or claim code). Reading
// them is scoped like the rest of the API: admins see everything, others
// the records of the tenants granted to them.
package audit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// Outcomes.
const (
	OutcomeSuccess = "success"
	// OutcomeDenied: refused for the actor (unauthenticated, forbidden,
	// wrong password, throttled).
	OutcomeDenied = "denied"
	// OutcomeFailure: the request was allowed but did not complete.
	OutcomeFailure = "failure"
)

// ErrInvalidInput is wrapped for bad filters and cursors.
var ErrInvalidInput = errors.New("invalid input")

// Entry is one audited event.
type Entry struct {
	ID        int64
	At        time.Time
	ActorID   string // operator id; "" when nobody was authenticated
	Actor     string // operator e-mail, or the e-mail tried at a login
	ActorRole string
	TokenID   string // the API token used, if any
	Source    string // client address
	Action    string // e.g. "sensor.command", "auth.login"
	TenantID  string // "" for actions outside any tenant
	Target    string // the object acted on (id), if any
	Outcome   string
	Status    int    // HTTP status answered
	Detail    string // problem code or short note; never a secret
}

// Filter selects entries, newest first.
type Filter struct {
	// Tenants restricts to entries of these tenants; nil means every entry.
	Tenants  []string
	TenantID string
	Actor    string
	Action   string
	Limit    int
	// Before is the id to continue below (from a cursor); 0 for the newest.
	Before int64
}

// Store persists entries.
type Store interface {
	AppendAudit(ctx context.Context, e Entry) error
	ListAudit(ctx context.Context, f Filter) ([]Entry, error)
}

// Limits on listing.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Service records and lists entries.
type Service struct {
	store Store
	log   *slog.Logger
	now   func() time.Time
}

// New returns a Service.
func New(store Store, log *slog.Logger, now func() time.Time) (*Service, error) {
	if store == nil || log == nil {
		return nil, errors.New("audit: store and logger are required")
	}
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, log: log, now: now}, nil
}

// Record stores e (stamped now when it has no time) and logs it. A store
// failure is logged and returned; the action it describes has happened
// regardless, so callers log rather than undo.
func (s *Service) Record(ctx context.Context, e Entry) error {
	if e.At.IsZero() {
		e.At = s.now().UTC().Truncate(time.Microsecond)
	}
	s.log.InfoContext(ctx, "audit",
		"action", e.Action, "outcome", e.Outcome, "status", e.Status, "actor", e.Actor, "actor_id", e.ActorID,
		"actor_role", e.ActorRole, "token_id", e.TokenID, "source", e.Source, logkey.Tenant, e.TenantID,
		"target", e.Target, "detail", e.Detail)
	if err := s.store.AppendAudit(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit record not stored", "action", e.Action, logkey.Error, err)
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// List returns entries matching f and the cursor of the next page ("" at
// the end). visible restricts non-admins to their tenants (nil: all).
func (s *Service) List(ctx context.Context, f Filter, cursor string) ([]Entry, string, error) {
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit < 1 || f.Limit > MaxLimit {
		return nil, "", fmt.Errorf("%w: limit must lie between 1 and %d", ErrInvalidInput, MaxLimit)
	}
	if cursor != "" {
		before, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		f.Before = before
	}
	want := f.Limit
	f.Limit++
	es, err := s.store.ListAudit(ctx, f)
	if err != nil {
		return nil, "", fmt.Errorf("audit: %w", err)
	}
	next := ""
	if len(es) > want {
		es = es[:want]
		next = encodeCursor(es[want-1].ID)
	}
	return es, next, nil
}

func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("a" + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) < 2 || raw[0] != 'a' {
		return 0, fmt.Errorf("%w: cursor", ErrInvalidInput)
	}
	id, err := strconv.ParseInt(string(raw[1:]), 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("%w: cursor", ErrInvalidInput)
	}
	return id, nil
}

// Pruner deletes entries recorded before a cut-off (history retention,
// core/retention): at most limit per call, oldest first, in one short
// statement, returning how many it deleted. Entries at or after before
// stay, and listing (ids, cursors, filters) answers the same for them.
type Pruner interface {
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}
