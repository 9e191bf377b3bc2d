package problem

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// codeUse finds problem.New(status, "code", …) and New(status, "code", …).
var codeUse = regexp.MustCompile(`\bNew\(\s*[^,()]+,\s*"([a-z_]+)"`)

// TestCatalogueMatchesTheCode: every code the services can answer is in the
// catalogue, and every catalogued code is answered somewhere.
func TestCatalogueMatchesTheCode(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	used := map[string]string{}
	for _, dir := range []string{"adapters", "apps", "internal", "core"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "catalogue.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range codeUse.FindAllStringSubmatch(string(src), -1) {
				used[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(used) < 20 {
		t.Fatalf("found %d codes in the source; the scan is broken", len(used))
	}
	for code, where := range used {
		if _, ok := Lookup(code); !ok {
			t.Errorf("%s answers %q, which the catalogue lacks", where, code)
		}
	}
	var codes []string
	for _, e := range Catalogue {
		codes = append(codes, e.Code)
		if _, ok := used[e.Code]; !ok {
			t.Errorf("catalogue lists %q, which nothing answers", e.Code)
		}
		if e.Status < 400 || e.Title == "" || e.Meaning == "" {
			t.Errorf("entry %+v incomplete", e)
		}
	}
	if !slices.IsSorted(codes) {
		t.Error("keep the catalogue sorted by code")
	}
}

// TestREADMEListsTheCatalogue keeps README's table of problem codes equal
// to the catalogue.
func TestREADMEListsTheCatalogue(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\| ")
	_, section, ok := strings.Cut(string(readme), "### Problem codes")
	if !ok {
		t.Fatal("README has no ### Problem codes section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got[m[1]] = m[2]
	}
	for _, e := range Catalogue {
		if got[e.Code] == "" {
			t.Errorf("README's problem codes lack %s", e.Code)
		}
		delete(got, e.Code)
	}
	for code := range got {
		t.Errorf("README lists %s, which the catalogue lacks", code)
	}
}
