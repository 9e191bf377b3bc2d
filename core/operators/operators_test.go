package operators

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "alice@example.com", "alice@example.com"},
		{"case and spaces", "  Alice@Example.COM\n", "alice@example.com"},
		{"plus address", "a+ops@example.com", "a+ops@example.com"},
		{"no at", "alice.example.com", ""},
		{"nothing before at", "@example.com", ""},
		{"nothing after at", "alice@", ""},
		{"two ats", "a@b@example.com", ""},
		{"inner space", "al ice@example.com", ""},
		{"control character", "alice\x01@example.com", ""},
		{"invalid UTF-8", "al\xffice@example.com", ""},
		{"too long", strings.Repeat("a", 250) + "@e.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeEmail(tt.in)
			if tt.want == "" {
				if !errors.Is(err, ErrInvalidInput) {
					t.Errorf("NormalizeEmail(%q) = %q, %v; want ErrInvalidInput", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{"alice@example.com", " A@B ", "@", "a@b@c", "\x00@x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := NormalizeEmail(in)
		if err != nil {
			return
		}
		if got != strings.ToLower(got) || strings.Count(got, "@") != 1 || strings.ContainsAny(got, " \t\r\n\x00") || len(got) > maxEmail {
			t.Fatalf("NormalizeEmail(%q) accepted %q", in, got)
		}
		if again, err := NormalizeEmail(got); err != nil || again != got {
			t.Fatalf("not idempotent: %q → %q, %v", got, again, err)
		}
	})
}
