package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the top of the checkout (the folder holding go.work).
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == "off" {
		t.Skipf("no go.work: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// undocumented returns the Go packages under root (one per folder and
// package name, external _test packages left out) none of whose files carries
// a package comment.
func undocumented(t *testing.T, root string) (missing []string, packages int) {
	t.Helper()
	documented := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		key := rel + " (package " + f.Name.Name + ")"
		documented[key] = documented[key] || f.Doc != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, ok := range documented {
		if !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	return missing, len(documented)
}

// TestPackageDocs requires a package comment on every package, tests-only
// ones included: the comment is where a reader learns what the folder is for
// and what it must not hold.
func TestPackageDocs(t *testing.T) {
	missing, n := undocumented(t, repoRoot(t))
	if n < 50 {
		t.Fatalf("found %d packages; the check would pass vacuously", n)
	}
	for _, m := range missing {
		t.Errorf("%s has no package comment (a `// Package name …` paragraph above `package` in one file)", m)
	}
}

func TestPackageDocsFindsUndocumented(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", "// Package a is documented.\npackage a\n")
	write("a/b.go", "package a\n")
	write("b/b.go", "package b\n")
	write("b/b_test.go", "// Package b_test is external.\npackage b_test\n")
	write("c/c_test.go", "// Package c holds only tests.\npackage c\n")
	missing, n := undocumented(t, root)
	if n != 3 {
		t.Errorf("counted %d packages, want 3 (a, b, c)", n)
	}
	if want := []string{"b (package b)"}; strings.Join(missing, ",") != strings.Join(want, ",") {
		t.Errorf("undocumented = %q, want %q", missing, want)
	}
}
