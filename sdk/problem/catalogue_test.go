package problem

import (
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
