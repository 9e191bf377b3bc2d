// Package auditmem is an in-memory implementation of audit.Store, for
// tests and local experiments. It passes the same contract suite
// (core/audit/audittest) as the PostgreSQL store: ids count up from 1 in
// the order entries are appended, and listing is newest first.
package auditmem

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rxc-project/rxc/core/audit"
)

// Config is empty; it exists for the usual New(Config) shape.
type Config struct{}

// Store keeps entries in a slice guarded by one mutex.
type Store struct {
	mu      sync.Mutex
	entries []audit.Entry // ids growing
	last    int64         // the last id given
}

// New returns an empty Store.
func New(Config) (*Store, error) { return &Store{}, nil }

var (
	_ audit.Store  = (*Store)(nil)
	_ audit.Pruner = (*Store)(nil)
)

// AppendAudit implements audit.Store; the entry's ID is assigned.
func (s *Store) AppendAudit(_ context.Context, e audit.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	e.ID = s.last
	e.At = e.At.UTC().Truncate(time.Microsecond)
	s.entries = append(s.entries, e)
	return nil
}

// ListAudit implements audit.Store: newest first, below f.Before when set.
func (s *Store) ListAudit(_ context.Context, f audit.Filter) ([]audit.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []audit.Entry
	for i := len(s.entries) - 1; i >= 0 && len(out) < f.Limit; i-- {
		e := s.entries[i]
		switch {
		case f.Tenants != nil && !slices.Contains(f.Tenants, e.TenantID),
			f.TenantID != "" && e.TenantID != f.TenantID,
			f.Actor != "" && e.Actor != f.Actor,
			f.Action != "" && e.Action != f.Action,
			f.Before != 0 && e.ID >= f.Before:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// PruneAudit implements audit.Pruner: the oldest entries recorded before
// before, up to limit.
func (s *Store) PruneAudit(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.entries = slices.DeleteFunc(s.entries, func(e audit.Entry) bool {
		if n < limit && e.At.Before(before) {
			n++
			return true
		}
		return false
	})
	return n, nil
}
