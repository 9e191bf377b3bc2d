package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// Errors of paged listings, each its own problem code at the edges.
var (
	// ErrInvalidCursor: the cursor was not issued by this API, was
	// altered, or belongs to another sort, filter or scope.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrInvalidLimit: the page size lies outside 1…MaxSensorPage.
	ErrInvalidLimit = errors.New("invalid limit")
	// ErrInvalidSort: the sort is not one of SensorSorts.
	ErrInvalidSort = errors.New("invalid sort")
)

// SensorSort is an order of the sensor listing. Each sorts by one field,
// ascending, or descending with a leading "-"; ties are broken by the
// sensor id in the same direction, so the order is total and stable.
type SensorSort string

// Sensor sorts. Names, states and ids compare by their bytes (UTF-8),
// case-sensitively. lastSeen puts never-seen sensors first (last with
// -lastSeen).
const (
	SortName          SensorSort = "name"
	SortNameDesc      SensorSort = "-name"
	SortCreatedAt     SensorSort = "createdAt"
	SortCreatedAtDesc SensorSort = "-createdAt"
	SortLastSeen      SensorSort = "lastSeen"
	SortLastSeenDesc  SensorSort = "-lastSeen"
	SortState         SensorSort = "state"
	SortStateDesc     SensorSort = "-state"
)

// SensorSorts lists every sort, the default first.
var SensorSorts = []SensorSort{SortName, SortNameDesc, SortCreatedAt, SortCreatedAtDesc, SortLastSeen, SortLastSeenDesc, SortState, SortStateDesc}

// Field is the sort's field without its direction.
func (s SensorSort) Field() string { return strings.TrimPrefix(string(s), "-") }

// Desc reports a descending sort.
func (s SensorSort) Desc() bool { return strings.HasPrefix(string(s), "-") }

// Valid reports whether s is one of SensorSorts.
func (s SensorSort) Valid() bool { return slices.Contains(SensorSorts, s) }

// ByTime reports a sort on a time field (createdAt, lastSeen).
func (s SensorSort) ByTime() bool { f := s.Field(); return f == "createdAt" || f == "lastSeen" }

// Bounds of the sensor listing.
const (
	DefaultSensorPage = 50
	MaxSensorPage     = 500
	// MaxSensorQuery bounds the search text q, in characters.
	MaxSensorQuery = 128
)

// SensorKey is a sensor's position in a sort: the sort field's value
// (Text for name and state, Time for createdAt and lastSeen, zero for a
// never-seen sensor) and its id.
type SensorKey struct {
	Text string
	Time time.Time
	ID   string
}

// KeyOf returns sensor's position in sort.
func KeyOf(sort SensorSort, s Sensor) SensorKey {
	k := SensorKey{ID: s.ID}
	switch sort.Field() {
	case "name":
		k.Text = s.Name
	case "state":
		k.Text = string(s.State)
	case "createdAt":
		k.Time = s.CreatedAt
	case "lastSeen":
		k.Time = s.LastSeenAt
	}
	return k
}

// Compare orders a before (-1) or after (1) b in sort (ascending part
// only: callers flip it for descending sorts).
func (k SensorKey) Compare(b SensorKey) int {
	if c := strings.Compare(k.Text, b.Text); c != 0 {
		return c
	}
	if c := k.Time.Compare(b.Time); c != 0 {
		return c
	}
	return strings.Compare(k.ID, b.ID)
}

// SensorMatch selects sensors: of the tenants in scope, optionally in one
// state and matching a search text.
type SensorMatch struct {
	// Tenants is the scope: nil means every tenant (an admin); an empty,
	// non-nil slice matches nothing.
	Tenants []string
	State   State
	// Q is a case-insensitive substring of the name, hostname or id; ""
	// matches everything. It is plain text: % and _ have no meaning.
	Q string
	// Labels the sensor must all carry with these values (nil: any).
	Labels map[string]string
	// IncludeDecommissioned selects decommissioned sensors too; they are
	// left out otherwise.
	IncludeDecommissioned bool
}

// Matches reports whether s is selected by m (the in-memory reference of
// what stores do).
func (m SensorMatch) Matches(s Sensor) bool {
	if m.Tenants != nil && !slices.Contains(m.Tenants, s.TenantID) {
		return false
	}
	if m.State != "" && s.State != m.State {
		return false
	}
	if !m.IncludeDecommissioned && !s.DecommissionedAt.IsZero() {
		return false
	}
	if !labelsMatch(s.Labels, m.Labels) {
		return false
	}
	if m.Q == "" {
		return true
	}
	q := strings.ToLower(m.Q)
	return strings.Contains(strings.ToLower(s.Name), q) || strings.Contains(strings.ToLower(s.Hostname), q) ||
		strings.Contains(strings.ToLower(s.ID), q)
}

// SensorQuery is one page of a listing as stores see it.
type SensorQuery struct {
	SensorMatch
	Sort SensorSort
	// After is the position the page starts after; nil for the first page.
	After *SensorKey
	Limit int
}

// SensorLister pages and counts sensors.
type SensorLister interface {
	// ListSensors returns at most q.Limit sensors matching q, in q.Sort
	// order, strictly after q.After.
	ListSensors(ctx context.Context, q SensorQuery) ([]Sensor, error)
	// CountSensors counts the sensors of the tenants in scope (nil: every
	// tenant) by state.
	CountSensors(ctx context.Context, tenants []string) (map[State]int, error)
}

// SensorListing is a request for one page of sensors.
type SensorListing struct {
	SensorMatch
	// Sort defaults to SortName.
	Sort SensorSort
	// Limit defaults to DefaultSensorPage; at most MaxSensorPage.
	Limit int
	// Cursor is the previous page's NextCursor; "" for the first page.
	Cursor string
}

// SensorPage is one page; NextCursor is "" on the last page.
type SensorPage struct {
	Items      []Sensor
	NextCursor string
}

// ListSensors returns one page of the sensors l selects. The cursor it
// returns is bound to l's sort, filter and scope: used with any other it is
// refused with ErrInvalidCursor, as is a cursor that was altered.
func (s *Service) ListSensors(ctx context.Context, l SensorListing) (SensorPage, error) {
	if l.Sort == "" {
		l.Sort = SortName
	}
	if !l.Sort.Valid() {
		return SensorPage{}, fmt.Errorf("%w: %q (use one of %s)", ErrInvalidSort, l.Sort, sortNames())
	}
	limit, err := pageLimit(l.Limit, DefaultSensorPage, MaxSensorPage)
	if err != nil {
		return SensorPage{}, err
	}
	m, err := checkMatch(l.SensorMatch)
	if err != nil {
		return SensorPage{}, err
	}
	items, next, err := keysetPage(l.Cursor, l.Sort, bindingOf(l.Sort, m), limit, func(after *SensorKey, n int) ([]Sensor, error) {
		if m.Tenants != nil && len(m.Tenants) == 0 {
			return []Sensor{}, nil // an empty scope sees nothing; no store read
		}
		items, err := s.store.ListSensors(ctx, SensorQuery{SensorMatch: m, Sort: l.Sort, After: after, Limit: n})
		if err != nil {
			return nil, fmt.Errorf("list sensors: %w", err)
		}
		return items, nil
	}, func(sn Sensor) SensorKey { return KeyOf(l.Sort, sn) })
	if err != nil {
		return SensorPage{}, err
	}
	return SensorPage{Items: items, NextCursor: next}, nil
}

// pageLimit is a listing's page size: def for 0, else limit, which must
// lie between 1 and most.
func pageLimit(limit, def, most int) (int, error) {
	if limit == 0 {
		limit = def
	}
	if limit < 1 || limit > most {
		return 0, fmt.Errorf("%w: limit must lie between 1 and %d", ErrInvalidLimit, most)
	}
	return limit, nil
}

// keysetPage reads one page of a listing in sort order: it decodes cursor
// (refused unless issued for sort and binding), lists one more than limit
// strictly after its position, and returns the first limit items with the
// cursor of the item that ends them ("" on the last page).
func keysetPage[T any](cursor string, sort SensorSort, binding string, limit int,
	list func(after *SensorKey, n int) ([]T, error), key func(T) SensorKey,
) (items []T, next string, err error) {
	var after *SensorKey
	if cursor != "" {
		k, err := decodeSensorCursor(cursor, sort, binding)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	items, err = list(after, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(items) > limit {
		items = items[:limit]
		next = encodeSensorCursor(sort, binding, key(items[limit-1]))
	}
	return items, next, nil
}

// SensorSummary counts the sensors of the tenants in scope (nil: every
// tenant) by state; every state is present, zeros included.
func (s *Service) SensorSummary(ctx context.Context, tenants []string) (total int, byState map[State]int, err error) {
	byState = make(map[State]int, 7)
	for _, st := range []State{StatePending, StateOnline, StateRunning, StateStopped, StateError, StateOffline, StateRevoked} {
		byState[st] = 0
	}
	if tenants != nil && len(tenants) == 0 {
		return 0, byState, nil
	}
	for _, t := range tenants {
		if err := validateID("tenant id", t); err != nil {
			return 0, nil, err
		}
	}
	counts, err := s.store.CountSensors(ctx, tenants)
	if err != nil {
		return 0, nil, fmt.Errorf("count sensors: %w", err)
	}
	for st, n := range counts {
		byState[st] += n
		total += n
	}
	return total, byState, nil
}

// checkMatch validates m and returns it with the scope sorted and
// deduplicated.
func checkMatch(m SensorMatch) (SensorMatch, error) {
	if m.Tenants != nil {
		ts := slices.Clone(m.Tenants)
		for _, t := range ts {
			if err := validateID("tenant id", t); err != nil {
				return m, err
			}
		}
		slices.Sort(ts)
		m.Tenants = slices.Compact(ts)
	}
	if m.State != "" && !m.State.Valid() {
		return m, fmt.Errorf("%w: state %q", ErrInvalidInput, m.State)
	}
	if err := validateLabel("q", m.Q, MaxSensorQuery); err != nil {
		return m, err
	}
	if err := ValidateLabels(m.Labels); err != nil {
		return m, err
	}
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	return m, nil
}

func sortNames() string {
	names := make([]string, len(SensorSorts))
	for i, s := range SensorSorts {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// bindingOf digests what a cursor is valid for: the sort, the filter and
// the scope.
func bindingOf(sort SensorSort, m SensorMatch) string {
	h := sha256.New()
	fmt.Fprintf(h, "sort=%s\x00state=%s\x00q=%s\x00labels=%s\x00all=%t\x00", sort, m.State, m.Q, labelsString(m.Labels), m.IncludeDecommissioned)
	if m.Tenants == nil {
		h.Write([]byte("scope=*"))
	} else {
		fmt.Fprintf(h, "scope=%s", strings.Join(m.Tenants, ","))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// sensorCursor is a cursor's content. It is checksummed, not signed:
// cursors carry no authority (the scope is the caller's, checked on every
// request), so a crafted one can only move a page's start within what the
// caller may list anyway; the checksum and the binding catch altered,
// truncated and misused ones.
type sensorCursor struct {
	V int    `json:"v"`
	B string `json:"b"`
	T string `json:"t,omitempty"` // text key
	N int64  `json:"n,omitempty"` // time key, Unix microseconds
	Z bool   `json:"z,omitempty"` // time key is "never" (zero)
	I string `json:"i"`
}

const cursorVersion = 1

func cursorSum(payload []byte) []byte {
	sum := sha256.Sum256(append([]byte("rxc sensor cursor\x00"), payload...))
	return sum[:12]
}

func encodeSensorCursor(sort SensorSort, binding string, k SensorKey) string {
	c := sensorCursor{V: cursorVersion, B: binding, I: k.ID}
	if sort.ByTime() {
		if k.Time.IsZero() {
			c.Z = true
		} else {
			c.N = k.Time.UnixMicro()
		}
	} else {
		c.T = k.Text
	}
	payload, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(cursorSum(payload))
}

// maxCursor bounds a cursor's length before it is decoded.
const maxCursor = 1024

func decodeSensorCursor(v string, sort SensorSort, binding string) (SensorKey, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s; start again without a cursor", ErrInvalidCursor, why)
	}
	if len(v) > maxCursor {
		return SensorKey{}, bad("too long")
	}
	p, s, ok := strings.Cut(v, ".")
	if !ok {
		return SensorKey{}, bad("not a cursor this API issued")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sum, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || !bytes.Equal(sum, cursorSum(payload)) {
		return SensorKey{}, bad("not a cursor this API issued, or altered")
	}
	var c sensorCursor
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.V != cursorVersion || ids.Validate(c.I) != nil {
		return SensorKey{}, bad("not a cursor this API issued")
	}
	if c.B != binding {
		return SensorKey{}, bad("it was issued for another sort, filter or tenant scope")
	}
	k := SensorKey{ID: c.I, Text: c.T}
	if sort.ByTime() && !c.Z {
		k.Time = time.UnixMicro(c.N).UTC()
	}
	return k, nil
}
