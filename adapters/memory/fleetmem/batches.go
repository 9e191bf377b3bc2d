package fleetmem

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/fleet"
)

// ListSensors implements fleet.SensorLister.
func (s *Store) ListSensors(_ context.Context, q fleet.SensorQuery) ([]fleet.Sensor, error) {
	if !q.Sort.Valid() {
		return nil, fleet.ErrInvalidSort
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cmp := func(a, b fleet.Sensor) int {
		c := fleet.KeyOf(q.Sort, a).Compare(fleet.KeyOf(q.Sort, b))
		if q.Sort.Desc() {
			c = -c
		}
		return c
	}
	var out []fleet.Sensor
	for _, sn := range s.sensors {
		v := s.view(sn)
		if !q.Matches(v) {
			continue
		}
		if q.After != nil {
			c := fleet.KeyOf(q.Sort, v).Compare(*q.After)
			if q.Sort.Desc() {
				c = -c
			}
			if c <= 0 {
				continue
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, cmp)
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// CountSensors implements fleet.SensorLister.
func (s *Store) CountSensors(_ context.Context, tenants []string) (map[fleet.State]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[fleet.State]int{}
	m := fleet.SensorMatch{Tenants: tenants}
	for _, sn := range s.sensors {
		if m.Matches(sn.Sensor) {
			out[sn.State]++
		}
	}
	return out, nil
}

// SensorTargets implements fleet.BatchStore.
func (s *Store) SensorTargets(_ context.Context, ids []string) ([]fleet.SensorTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fleet.SensorTarget
	for _, id := range ids {
		if sn, ok := s.sensors[id]; ok {
			out = append(out, fleet.SensorTarget{ID: sn.ID, TenantID: sn.TenantID, State: sn.State})
		}
	}
	return out, nil
}

// MatchSensors implements fleet.BatchStore.
func (s *Store) MatchSensors(_ context.Context, m fleet.SensorMatch, limit int) ([]fleet.SensorTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fleet.SensorTarget
	for _, sn := range s.sensors {
		if len(out) == limit {
			break
		}
		if m.Matches(sn.Sensor) {
			out = append(out, fleet.SensorTarget{ID: sn.ID, TenantID: sn.TenantID, State: sn.State})
		}
	}
	return out, nil
}

// CreateBatch implements fleet.BatchStore.
func (s *Store) CreateBatch(_ context.Context, b fleet.Batch, cmds []fleet.Command) (fleet.Batch, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.IdempotencyKey != "" {
		if old, ok := s.batchByKey(b.OperatorID, b.IdempotencyKey); ok {
			if !bytes.Equal(old.RequestHash, b.RequestHash) {
				return fleet.Batch{}, false, fleet.ErrConflict
			}
			return old, false, nil
		}
	}
	if _, ok := s.batches[b.ID]; ok {
		return fleet.Batch{}, false, fleet.ErrConflict
	}
	for _, c := range cmds {
		sn, ok := s.sensors[c.SensorID]
		if !ok || sn.TenantID != c.TenantID || sn.State == fleet.StateRevoked || sn.State == fleet.StatePending {
			b.Total--
			b.SkippedRevoked++
			continue
		}
		c.Status, c.BatchID, c.FirstSentAt = fleet.CommandPending, b.ID, time.Time{}
		s.commands[c.ID] = &c
		sn.lastCommandID = c.ID
	}
	b.TenantIDs = slices.Clone(b.TenantIDs)
	stored := b
	s.batches[b.ID] = &stored
	return b, true, nil
}

func (s *Store) batchByKey(operatorID, key string) (fleet.Batch, bool) {
	for _, b := range s.batches {
		if b.OperatorID == operatorID && b.IdempotencyKey == key {
			return *b, true
		}
	}
	return fleet.Batch{}, false
}

// BatchByKey implements fleet.BatchStore.
func (s *Store) BatchByKey(_ context.Context, operatorID, key string) (fleet.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.batchByKey(operatorID, key); ok {
		return b, nil
	}
	return fleet.Batch{}, fleet.ErrNotFound
}

// Batch implements fleet.BatchStore.
func (s *Store) Batch(_ context.Context, id string) (fleet.Batch, error) {
	return locked.Get(&s.mu, s.batches, id, fleet.ErrNotFound, func(b *fleet.Batch) fleet.Batch { return s.counted(*b) })
}

// counted returns b with its counts (s.mu held).
func (s *Store) counted(b fleet.Batch) fleet.Batch {
	out := b
	out.TenantIDs = slices.Clone(b.TenantIDs)
	for _, c := range s.commands {
		if c.BatchID != b.ID {
			continue
		}
		switch c.Status {
		case fleet.CommandPending:
			out.Counts.Pending++
		case fleet.CommandAccepted:
			out.Counts.Accepted++
		case fleet.CommandFailed:
			out.Counts.Failed++
		case fleet.CommandExpired:
			out.Counts.Expired++
		}
		switch c.Outcome {
		case fleet.OutcomeApplied:
			out.Counts.Acknowledged++
		case fleet.OutcomeRefused:
			out.Counts.Refused++
		}
	}
	return out
}

// ListBatches implements fleet.BatchLister.
func (s *Store) ListBatches(_ context.Context, q fleet.BatchQuery) ([]fleet.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fleet.Batch
	for _, b := range s.batches {
		if !fleet.BatchVisible(*b, q.Tenants, q.OperatorID) || (q.After != nil && !fleet.BatchAfter(*b, *q.After)) {
			continue
		}
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b fleet.Batch) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	for i := range out {
		out[i] = s.counted(out[i])
	}
	return out, nil
}

// ClaimUnsentCommands implements fleet.BatchStore.
func (s *Store) ClaimUnsentCommands(_ context.Context, at time.Time, limit int) ([]fleet.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var queued []*fleet.Command
	for _, c := range s.commands {
		if c.FirstSentAt.IsZero() && c.Status == fleet.CommandPending && c.ExpiresAt.After(at) {
			queued = append(queued, c)
		}
	}
	sort.Slice(queued, func(i, j int) bool {
		if !queued[i].IssuedAt.Equal(queued[j].IssuedAt) {
			return queued[i].IssuedAt.Before(queued[j].IssuedAt)
		}
		return queued[i].ID < queued[j].ID
	})
	if len(queued) > limit {
		queued = queued[:limit]
	}
	out := make([]fleet.Command, len(queued))
	for i, c := range queued {
		c.FirstSentAt = at
		out[i] = *c
	}
	return out, nil
}

// AcceptCommands implements fleet.BatchStore.
func (s *Store) AcceptCommands(_ context.Context, acks []fleet.CommandAck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range acks {
		c, ok := s.commands[a.ID]
		if !ok || (c.Status != fleet.CommandPending && c.Status != fleet.CommandAccepted) {
			continue
		}
		if c.AcceptedAt.IsZero() {
			c.AcceptedAt = a.At
		}
		if c.StreamSeq == 0 {
			c.StreamSeq = a.Seq
		}
		c.Status = fleet.CommandAccepted
	}
	return nil
}

// FailCommands implements fleet.BatchStore.
func (s *Store) FailCommands(_ context.Context, ids []string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if c, ok := s.commands[id]; ok {
			failCommand(c, at)
		}
	}
	return nil
}
