// Package eventmem is an in-memory event table: it stores events as
// events.Store (what the event writer writes) and answers the analytics
// queries as analytics.EventStore, for tests and local experiments. It
// passes the same contract suites (core/events/eventstest,
// core/analytics/analyticstest) as the PostgreSQL stores; one mutex makes
// every method atomic.
package eventmem

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/events"
)

// Config wires a Store.
type Config struct {
	// RevokedAt says when a sensor was revoked (ok false while it is not);
	// nil: no sensor is revoked. The PostgreSQL store reads the sensors
	// table for the same answer.
	RevokedAt func(tenantID, sensorID string) (at time.Time, ok bool)
}

type key struct {
	tenant, sensor, id string
	at                 int64 // microseconds, PostgreSQL's precision
}

// Store keeps events in a map guarded by one mutex.
type Store struct {
	mu        sync.Mutex
	revokedAt func(tenantID, sensorID string) (time.Time, bool)
	rows      map[key]events.Event
}

// New returns an empty Store.
func New(cfg Config) (*Store, error) {
	r := cfg.RevokedAt
	if r == nil {
		r = func(string, string) (time.Time, bool) { return time.Time{}, false }
	}
	return &Store{revokedAt: r, rows: map[key]events.Event{}}, nil
}

var (
	_ events.Store         = (*Store)(nil)
	_ analytics.EventStore = (*Store)(nil)
)

// Write implements events.Store: all of evs or nothing.
func (s *Store) Write(_ context.Context, evs []events.Event) (events.WriteResult, error) {
	for i := range evs {
		if err := holdable(&evs[i]); err != nil {
			return events.WriteResult{}, fmt.Errorf("eventmem: event %d: %w: %w", i, events.ErrInvalidEvent, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res events.WriteResult
	for _, ev := range evs {
		ev.Time, ev.ReceivedAt = ev.Time.UTC().Truncate(time.Microsecond), ev.ReceivedAt.UTC().Truncate(time.Microsecond)
		if at, ok := s.revokedAt(ev.TenantID, ev.SensorID); ok && !ev.ReceivedAt.Before(at) {
			res.Revoked++
			continue
		}
		k := key{ev.TenantID, ev.SensorID, ev.ID, ev.Time.UnixMicro()}
		if _, ok := s.rows[k]; ok {
			continue
		}
		ev.CVEs, ev.RawJSON = slices.Clone(ev.CVEs), bytes.Clone(ev.RawJSON)
		if ev.Alert != nil {
			a := *ev.Alert
			ev.Alert = &a
		}
		s.rows[k] = ev
		res.Inserted++
	}
	return res, nil
}

// Events returns every stored event, ordered by tenant, sensor, time and id.
func (s *Store) Events() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.Event, 0, len(s.rows))
	for _, ev := range s.rows {
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.TenantID != b.TenantID:
			return a.TenantID < b.TenantID
		case a.SensorID != b.SensorID:
			return a.SensorID < b.SensorID
		case !a.Time.Equal(b.Time):
			return a.Time.Before(b.Time)
		}
		return a.ID < b.ID
	})
	return out
}

// holdable refuses what the PostgreSQL table cannot hold: text with NUL
// bytes or invalid UTF-8, a raw record that is not JSON or holds a NUL.
func holdable(ev *events.Event) error {
	texts := append([]string{ev.TenantID, ev.SensorID, ev.ID, ev.Kind, ev.Protocol}, ev.CVEs...)
	if ev.Alert != nil {
		texts = append(texts, ev.Alert.Signature, ev.Alert.Category)
	}
	for _, t := range texts {
		if strings.ContainsRune(t, 0) || !utf8.ValidString(t) {
			return fmt.Errorf("text %q", t)
		}
	}
	if ev.RawJSON != nil {
		var v any
		if err := json.Unmarshal(ev.RawJSON, &v); err != nil {
			return fmt.Errorf("raw record: %w", err)
		}
		if hasNUL(v) {
			return fmt.Errorf("raw record holds a NUL character")
		}
	}
	return nil
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		return slices.ContainsFunc(x, hasNUL)
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// EventsStored implements analytics.EventStore: the table always exists.
func (s *Store) EventsStored(context.Context) (bool, error) { return true, nil }

// binOrigin is the origin the PostgreSQL store bins series from.
var binOrigin = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Overview implements analytics.EventStore.
func (s *Store) Overview(_ context.Context, q analytics.Query, bucket time.Duration) (analytics.Overview, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		ov      analytics.Overview
		sensors = map[string]bool{}
		series  = map[time.Time]*analytics.Point{}
		src     = map[netip.Addr]int64{}
		dst     = map[netip.Addr]int64{}
		sigs    = map[sigKey]*analytics.SignatureCount{}
		cves    = map[string]*analytics.CVECount{}
	)
	for _, ev := range s.rows {
		if ev.TenantID != q.TenantID || ev.Time.Before(q.From) || !ev.Time.Before(q.To) || q.SensorID != "" && ev.SensorID != q.SensorID {
			continue
		}
		alert := ev.Kind == "alert"
		ov.Totals.Events++
		sensors[ev.SensorID] = true
		t := binOrigin.Add(ev.Time.Sub(binOrigin) / bucket * bucket)
		if ev.Time.Before(binOrigin) && ev.Time.Sub(binOrigin)%bucket != 0 {
			t = t.Add(-bucket)
		}
		p := series[t]
		if p == nil {
			p = &analytics.Point{T: t}
			series[t] = p
		}
		p.Events++
		if alert {
			ov.Totals.Alerts++
			p.Alerts++
		}
		if ev.SrcIP.IsValid() {
			src[ev.SrcIP]++
		}
		if ev.DestIP.IsValid() {
			dst[ev.DestIP]++
		}
		if alert && ev.Alert != nil && (ev.Alert.SignatureID != 0 || ev.Alert.Signature != "") {
			k := sigKey{ev.Alert.SignatureID, ev.Alert.Signature}
			c := sigs[k]
			if c == nil {
				c = &analytics.SignatureCount{SignatureID: k.id, Signature: k.name}
				sigs[k] = c
			}
			c.Count++
			c.Category = max(c.Category, ev.Alert.Category)
			c.Severity = max(c.Severity, int(ev.Alert.Severity))
		}
		for _, id := range ev.CVEs {
			id = strings.ToUpper(id)
			c := cves[id]
			if c == nil {
				c = &analytics.CVECount{ID: id}
				cves[id] = c
			}
			c.Count++
			if ev.Time.After(c.LastSeen) {
				c.LastSeen = ev.Time
			}
		}
	}
	ov.Totals.Sensors = int64(len(sensors))
	for _, p := range series {
		ov.Series = append(ov.Series, *p)
	}
	sort.Slice(ov.Series, func(i, j int) bool { return ov.Series[i].T.Before(ov.Series[j].T) })
	ov.TopSources, ov.TopDestinations = topAddrs(src, q.Limit), topAddrs(dst, q.Limit)
	ov.TopSignatures = top(sigs, q.Limit, func(a, b analytics.SignatureCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Signature, b.Signature))
	})
	ov.CVEs = top(cves, q.Limit, func(a, b analytics.CVECount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.ID, b.ID))
	})
	return ov, nil
}

type sigKey struct {
	id   int64
	name string
}

// topAddrs orders addresses by count, then as PostgreSQL orders inet
// (IPv4 before IPv6, then by address).
// top is at most limit of counted's values, the first in order.
func top[K comparable, T any](counted map[K]*T, limit int, order func(a, b T) int) []T {
	var out []T
	for _, c := range counted {
		out = append(out, *c)
	}
	slices.SortFunc(out, order)
	return out[:min(len(out), limit)]
}

func topAddrs(counts map[netip.Addr]int64, limit int) []analytics.AddressCount {
	addrs := make([]netip.Addr, 0, len(counts))
	for a := range counts {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool {
		if counts[addrs[i]] != counts[addrs[j]] {
			return counts[addrs[i]] > counts[addrs[j]]
		}
		return addrs[i].Less(addrs[j])
	})
	var out []analytics.AddressCount
	for _, a := range addrs[:min(len(addrs), limit)] {
		out = append(out, analytics.AddressCount{IP: a.String(), Count: counts[a]})
	}
	return out
}

// History implements analytics.EventStore over the tenant's whole store.
func (s *Store) History(_ context.Context, tenantID string, addrs []netip.Addr, cves []string) ([]analytics.Sighting, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []analytics.Sighting
	see := func(indicator string, match func(events.Event) bool) {
		x := analytics.Sighting{Indicator: indicator}
		for _, ev := range s.rows {
			if ev.TenantID != tenantID || !match(ev) {
				continue
			}
			x.Count++
			if x.FirstSeen.IsZero() || ev.Time.Before(x.FirstSeen) {
				x.FirstSeen = ev.Time
			}
			if ev.Time.After(x.LastSeen) {
				x.LastSeen = ev.Time
			}
		}
		if x.Count > 0 {
			out = append(out, x)
		}
	}
	addrs = slices.Clone(addrs)
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range slices.Compact(addrs) {
		see(a.String(), func(ev events.Event) bool { return ev.SrcIP == a || ev.DestIP == a })
	}
	for _, c := range slices.Compact(slices.Sorted(slices.Values(cves))) {
		see(c, func(ev events.Event) bool { return slices.Contains(ev.CVEs, c) })
	}
	return out, nil
}

var _ events.Pruner = (*Store)(nil)

// DropDaysBefore implements events.Pruner: every event of a UTC day that
// ended at or before before goes, and the days are counted.
func (s *Store) DropDaysBefore(_ context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	days := map[time.Time]bool{}
	for k, ev := range s.rows {
		if d := events.Day(ev.Time); events.DayEnded(d, before) {
			days[d] = true
			delete(s.rows, k)
		}
	}
	return len(days), nil
}
