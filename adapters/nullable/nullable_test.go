package nullable_test

import (
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/nullable"
)

func TestString(t *testing.T) {
	if p := nullable.String(""); p != nil {
		t.Fatalf("String(\"\") = %q, want nil", *p)
	}
	if p := nullable.String("x"); p == nil || *p != "x" {
		t.Fatalf("String(\"x\") = %v, want a pointer to x", p)
	}
}

func TestTime(t *testing.T) {
	if p := nullable.Time(time.Time{}); p != nil {
		t.Fatalf("Time(zero) = %v, want nil", *p)
	}
	// The zero instant in another zone is still the zero time.
	if p := nullable.Time(time.Time{}.In(time.FixedZone("x", 3600))); p != nil {
		t.Fatalf("Time(zero in a zone) = %v, want nil", *p)
	}
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	p := nullable.Time(at)
	if p == nil || !p.Equal(at) || p.Location() != time.UTC {
		t.Fatalf("Time(%v) = %v, want the same instant in UTC", at, p)
	}
}
