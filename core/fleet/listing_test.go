package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A cursor round-trips its position for every sort, and any other sort,
// filter or scope refuses it.
func TestSensorCursorRoundTripAndBinding(t *testing.T) {
	m := SensorMatch{Tenants: []string{"acme"}, State: StateRunning, Q: "edge"}
	for _, sort := range SensorSorts {
		k := KeyOf(sort, Sensor{ID: "s-1", Name: "edge 1", State: StateRunning, CreatedAt: time.Unix(1700000000, 123456000).UTC()})
		c := encodeSensorCursor(sort, bindingOf(sort, m), k)
		got, err := decodeSensorCursor(c, sort, bindingOf(sort, m))
		if err != nil || got != k {
			t.Errorf("%s: %+v, %v; want %+v", sort, got, err, k)
		}
		for name, other := range map[string]SensorMatch{
			"scope": {Tenants: []string{"other"}, State: StateRunning, Q: "edge"},
			"all":   {State: StateRunning, Q: "edge"},
			"state": {Tenants: []string{"acme"}, Q: "edge"},
			"q":     {Tenants: []string{"acme"}, State: StateRunning, Q: "edg"},
		} {
			if _, err := decodeSensorCursor(c, sort, bindingOf(sort, other)); !errors.Is(err, ErrInvalidCursor) {
				t.Errorf("%s cursor with another %s: %v", sort, name, err)
			}
		}
	}
	// An empty scope and "every tenant" are different scopes.
	if bindingOf(SortName, SensorMatch{}) == bindingOf(SortName, SensorMatch{Tenants: []string{}}) {
		t.Error("no scope and an empty scope bind alike")
	}
}

func FuzzDecodeSensorCursor(f *testing.F) {
	b := bindingOf(SortName, SensorMatch{})
	f.Add(encodeSensorCursor(SortName, b, SensorKey{Text: "x", ID: "s1"}))
	f.Add(encodeSensorCursor(SortLastSeen, b, SensorKey{ID: "s1"}))
	f.Add("")
	f.Add("a.b")
	f.Add(strings.Repeat("A", 2000))
	f.Fuzz(func(t *testing.T, v string) {
		for _, sort := range []SensorSort{SortName, SortLastSeen} {
			k, err := decodeSensorCursor(v, sort, b)
			if err != nil {
				if !errors.Is(err, ErrInvalidCursor) {
					t.Fatalf("error %v is not ErrInvalidCursor", err)
				}
				continue
			}
			if k.ID == "" {
				t.Fatalf("accepted %q without an id", v)
			}
		}
	})
}
