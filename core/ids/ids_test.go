package ids

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

var grammar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"simple", "acme", true},
		{"digits first", "1sensor", true},
		{"dash and underscore", "a-b_c", true},
		{"max length", strings.Repeat("a", 64), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", 65), false},
		{"leading dash", "-a", false},
		{"leading underscore", "_a", false},
		{"dot breaks subjects", "a.b", false},
		{"wildcard star", "a*", false},
		{"wildcard gt", "a>", false},
		{"space", "a b", false},
		{"unicode", "café", false},
		{"nul", "a\x00", false},
		{"slash", "a/b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tt.id)
			if got := err == nil; got != tt.ok {
				t.Fatalf("Validate(%q) = %v, want ok=%v", tt.id, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidID) {
				t.Fatalf("Validate(%q) error %v does not wrap ErrInvalidID", tt.id, err)
			}
		})
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"acme", "", "a.b", "-x", strings.Repeat("z", 70), "a_b-c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		got := Validate(id) == nil
		if want := grammar.MatchString(id); got != want {
			t.Fatalf("Validate(%q) ok=%v, grammar says %v", id, got, want)
		}
	})
}

func TestValidateSensor(t *testing.T) {
	for _, tc := range []struct{ tenant, sensor, want string }{
		{"acme", "s1", ""},
		{"ac.me", "s1", "tenant id: invalid id"},
		{"acme", "s*", "sensor id: invalid id"},
		{"", "", "tenant id: invalid id"},
	} {
		err := ValidateSensor(tc.tenant, tc.sensor)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, ErrInvalidID)) {
			t.Errorf("ValidateSensor(%q, %q) = %v, want %q…", tc.tenant, tc.sensor, err, tc.want)
		}
	}
}
