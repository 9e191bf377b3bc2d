package fleet

import (
	"errors"
	"strings"
	"testing"
)

func TestNewClaimCodeShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		code, err := NewClaimCode()
		if err != nil {
			t.Fatal(err)
		}
		groups := strings.Split(code, "-")
		if len(groups) != 7 {
			t.Fatalf("code %q has %d groups, want 7", code, len(groups))
		}
		n, err := NormalizeClaimCode(code)
		if err != nil {
			t.Fatalf("NormalizeClaimCode(%q): %v", code, err)
		}
		if n != strings.ReplaceAll(code, "-", "") {
			t.Errorf("NormalizeClaimCode(%q) = %q", code, n)
		}
		if seen[n] {
			t.Fatalf("code %q generated twice", code)
		}
		seen[n] = true
	}
}

func TestNormalizeClaimCode(t *testing.T) {
	t.Parallel()
	const canonical = "0123456789ABCDEFGHJKMNPQRSTV"
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"canonical", canonical, canonical},
		{"display form", "0123-4567-89AB-CDEF-GHJK-MNPQ-RSTV", canonical},
		{"lower case", "0123-4567-89ab-cdef-ghjk-mnpq-rstv", canonical},
		{"spaces and tabs", " 0123 4567\t89AB CDEF GHJK MNPQ RSTV ", canonical},
		{"confusables", "O123-4567-89AB-CDEF-GHJK-MNPQ-RSTV", canonical},
		{"I and L read as one", "0IL3-4567-89AB-CDEF-GHJK-MNPQ-RSTV", "0113456789ABCDEFGHJKMNPQRSTV"},
		{"too short", "0123-4567-89AB-CDEF-GHJK-MNPQ-RST", ""},
		{"too long", "0123-4567-89AB-CDEF-GHJK-MNPQ-RSTVW", ""},
		{"U is not Crockford", "U123-4567-89AB-CDEF-GHJK-MNPQ-RSTV", ""},
		{"punctuation", "0123_4567-89AB-CDEF-GHJK-MNPQ-RSTV", ""},
		{"non-ASCII", "０123-4567-89AB-CDEF-GHJK-MNPQ-RSTV", ""},
		{"empty", "", ""},
		{"huge input", strings.Repeat("-", 200) + canonical, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeClaimCode(tt.input)
			if tt.want == "" {
				if !errors.Is(err, ErrInvalidClaimCode) {
					t.Errorf("NormalizeClaimCode(%q) = %q, %v; want ErrInvalidClaimCode", tt.input, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("NormalizeClaimCode(%q) = %q, %v; want %q", tt.input, got, err, tt.want)
			}
		})
	}
}

func TestHashClaimCodeIgnoresPresentation(t *testing.T) {
	t.Parallel()
	code, err := NewClaimCode()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := HashClaimCode(code)
	b, _ := HashClaimCode(strings.ToLower(strings.ReplaceAll(code, "-", " ")))
	if string(a) != string(b) || len(a) != 32 {
		t.Errorf("hashes differ for two spellings of %q", code)
	}
	other, _ := NewClaimCode()
	c, _ := HashClaimCode(other)
	if string(a) == string(c) {
		t.Errorf("two codes hash alike")
	}
}

func FuzzNormalizeClaimCode(f *testing.F) {
	for _, s := range []string{"0123-4567-89AB-CDEF-GHJK-MNPQ-RSTV", "oooo-iiii-llll-0000-1111-2222-3333", "", "----", "\x00", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := NormalizeClaimCode(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidClaimCode) {
				t.Fatalf("error %v does not wrap ErrInvalidClaimCode", err)
			}
			return
		}
		if len(n) != claimCodeSymbols {
			t.Fatalf("normalised %q to %q of length %d", in, n, len(n))
		}
		for i := 0; i < len(n); i++ {
			if !strings.ContainsRune(crockford, rune(n[i])) {
				t.Fatalf("normalised %q to %q with symbol %q", in, n, n[i])
			}
		}
		again, err := NormalizeClaimCode(n)
		if err != nil || again != n {
			t.Fatalf("normalising %q is not idempotent: %q, %v", n, again, err)
		}
	})
}
