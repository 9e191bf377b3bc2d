package problem

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// The repository-wide rules (every code the services answer is catalogued
// and named by its constant, docs/problem-codes.md lists the catalogue) are
// internal/archtest's TestCatalogueMatchesTheCode and
// TestDocsListTheCatalogue in the root module; this test holds what the
// catalogue says about itself.
func TestCatalogueIsSortedAndComplete(t *testing.T) {
	t.Parallel()
	if len(Catalogue) < 20 {
		t.Fatalf("catalogue of %d entries; the check would pass vacuously", len(Catalogue))
	}
	var codes []string
	for _, e := range Catalogue {
		codes = append(codes, string(e.Code))
		if e.Status < 400 || e.Status > 599 || http.StatusText(e.Status) == "" || e.Title == "" || e.Meaning == "" {
			t.Errorf("entry %+v incomplete", e)
		}
		if got, ok := Lookup(e.Code); !ok || got != e {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", e.Code, got, ok, e)
		}
	}
	if !slices.IsSorted(codes) {
		t.Error("keep the catalogue sorted by code")
	}
	if len(slices.Compact(codes)) != len(Catalogue) {
		t.Error("a code is catalogued twice")
	}
	if _, ok := Lookup("no_such_code"); ok {
		t.Error("Lookup found a code the catalogue lacks")
	}
}

func TestForTakesStatusAndTitleFromTheCatalogue(t *testing.T) {
	t.Parallel()
	for _, e := range Catalogue {
		p := For(e.Code, "d")
		want := Problem{Type: "urn:rxc:problem:" + string(e.Code), Title: e.Title, Status: e.Status, Detail: "d", Code: e.Code}
		if *p != want {
			t.Errorf("For(%s) = %+v, want %+v", e.Code, *p, want)
		}
		wantSensor := e.Status
		if s, ok := sensorStatus[e.Code]; ok {
			wantSensor = s
		}
		if got := ForSensor(e.Code, "d"); got.Status != wantSensor || got.Title != e.Title {
			t.Errorf("ForSensor(%s) = %d %q, want %d %q", e.Code, got.Status, got.Title, wantSensor, e.Title)
		}
	}
	if p := ForSensor(CodeSensorRevoked, ""); p.Status != http.StatusForbidden {
		t.Errorf("a sensor is answered %d for its own revocation, want 403", p.Status)
	}
	if p := For(CodeSensorRevoked, ""); p.Status != http.StatusConflict {
		t.Errorf("an operator is answered %d for a revoked sensor, want 409", p.Status)
	}
	if p := For("no_such_code", "d"); p.Status != http.StatusInternalServerError {
		t.Errorf("an uncatalogued code answers %d, want 500", p.Status)
	}
	if p := For(CodeRateLimited, "d").WithTitle("Too many questions"); p.Status != http.StatusTooManyRequests || p.Title != "Too many questions" || p.Code != CodeRateLimited {
		t.Errorf("WithTitle: %+v", *p)
	}
}

func TestIs(t *testing.T) {
	errA, errB, errC := errors.New("a"), errors.New("b"), errors.New("c")
	match := Is(errA, errB)
	for err, want := range map[error]bool{errA: true, fmt.Errorf("wrapped: %w", errB): true, errC: false, nil: false} {
		if got := match(err); got != want {
			t.Errorf("Is(a, b)(%v) = %v, want %v", err, got, want)
		}
	}
}
