package fleetmem

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/fleet"
)

var _ fleet.HistoryStore = (*Store)(nil)

// prunable is fleet.CommandPrunable plus the store's part: c is not its
// sensor's last command (s.mu held).
func (s *Store) prunable(c *fleet.Command, before time.Time) bool {
	if !fleet.CommandPrunable(*c, before) {
		return false
	}
	sn, ok := s.sensors[c.SensorID]
	return !ok || sn.lastCommandID != c.ID && sn.namedCommandID != c.ID
}

// PruneCommands implements fleet.HistoryStore.
func (s *Store) PruneCommands(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*fleet.Command
	for _, c := range s.commands {
		if c.BatchID == "" && s.prunable(c, before) {
			old = append(old, c)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].IssuedAt.Before(old[j].IssuedAt) })
	n := min(len(old), limit)
	for _, c := range old[:n] {
		delete(s.commands, c.ID)
	}
	return n, nil
}

// PruneBatches implements fleet.HistoryStore.
func (s *Store) PruneBatches(_ context.Context, before time.Time, limit int) (int, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	members := map[string][]string{}
	for _, c := range s.commands {
		if c.BatchID != "" {
			members[c.BatchID] = append(members[c.BatchID], c.ID)
		}
	}
	var old []*fleet.Batch
	for _, b := range s.batches {
		if !b.CreatedAt.Before(before) {
			continue
		}
		if !slices.ContainsFunc(members[b.ID], func(id string) bool { return !s.prunable(s.commands[id], before) }) {
			old = append(old, b)
		}
	}
	sort.Slice(old, func(i, j int) bool {
		return old[i].CreatedAt.Before(old[j].CreatedAt) || old[i].CreatedAt.Equal(old[j].CreatedAt) && old[i].ID < old[j].ID
	})
	batches, commands := 0, 0
	for _, b := range old[:min(len(old), limit)] {
		for _, id := range members[b.ID] {
			delete(s.commands, id)
			commands++
		}
		delete(s.batches, b.ID)
		batches++
	}
	return batches, commands, nil
}

// PruneTokens implements fleet.HistoryStore.
func (s *Store) PruneTokens(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.tokens = slices.DeleteFunc(s.tokens, func(t *token) bool {
		end := fleet.TokenEnded(t.usedAt, t.revokedAt, t.ExpiresAt)
		if n < limit && !end.IsZero() && end.Before(before) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

// PruneClaimCodes implements fleet.HistoryStore.
func (s *Store) PruneClaimCodes(_ context.Context, before time.Time, limit int) (int, error) {
	return locked.Prune(&s.mu, s.claims, limit, func(c *claim) bool { return fleet.ClaimCodeEnded(c.ClaimCode).Before(before) }), nil
}
