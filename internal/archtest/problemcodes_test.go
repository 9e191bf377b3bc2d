package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/sdk/problem"
)

// constDecl finds the catalogue's constants, codeRef their uses, and
// literalCode a problem built or compared with a string literal code.
var (
	constDecl   = regexp.MustCompile(`(?m)^\t(Code\w+)\s+Code = "([a-z_]+)"`)
	codeRef     = regexp.MustCompile(`\b(?:problem\.|catalogue\.)?(Code[A-Z]\w*)\b`)
	literalCode = regexp.MustCompile(`(?:\bproblem\.|(?:^|[^.\w]))New\(\s*[^,()]+,\s*"|\bCode\s*[!=]=\s*"[a-z]+_|\bCode\(\s*"`)
)

// codeConstants maps the catalogue's constant names to their codes.
func codeConstants(t *testing.T, root string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "sdk", "problem", "catalogue.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, m := range constDecl.FindAllStringSubmatch(string(src), -1) {
		consts[m[1]] = m[2]
	}
	if len(consts) != len(problem.Catalogue) {
		t.Fatalf("catalogue.go declares %d code constants for %d entries", len(consts), len(problem.Catalogue))
	}
	return consts
}

// TestCatalogueMatchesTheCode: every code the services can answer is in the
// catalogue, named by its constant, and every catalogued code is answered
// somewhere.
func TestCatalogueMatchesTheCode(t *testing.T) {
	root := repoRoot(t)
	consts := codeConstants(t, root)
	used := map[string]string{}
	for _, dir := range []string{"adapters", "apps", "internal", "core", "sdk"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "catalogue.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(src), "\n") {
				if literalCode.MatchString(line) {
					t.Errorf("%s: %q names a problem code by a string literal; use the catalogue's constant", path, strings.TrimSpace(line))
				}
			}
			for _, m := range codeRef.FindAllStringSubmatch(string(src), -1) {
				if code, ok := consts[m[1]]; ok {
					used[code] = path
				}
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
		if _, ok := problem.Lookup(problem.Code(code)); !ok {
			t.Errorf("%s answers %q, which the catalogue lacks", where, code)
		}
	}
	var codes []string
	for _, e := range problem.Catalogue {
		codes = append(codes, string(e.Code))
		if _, ok := used[string(e.Code)]; !ok {
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

// TestDocsListTheCatalogue keeps docs/problem-codes.md's table equal to the catalogue.
func TestDocsListTheCatalogue(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "problem-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\| ")
	_, section, ok := strings.Cut(string(readme), "# Problem codes")
	if !ok {
		t.Fatal("docs/problem-codes.md has no # Problem codes heading")
	}
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got[m[1]] = m[2]
	}
	for _, e := range problem.Catalogue {
		if got[string(e.Code)] == "" {
			t.Errorf("docs/problem-codes.md lacks %s", e.Code)
		}
		delete(got, string(e.Code))
	}
	for code := range got {
		t.Errorf("docs/problem-codes.md lists %s, which the catalogue lacks", code)
	}
}

func TestLiteralCodeIsFound(t *testing.T) {
	for _, line := range []string{
		`p := problem.New(http.StatusNotFound, "not_found", "Not found", d)`,
		`if e.Code == "invalid_claim_code" {`,
		`return unavailable(problem.Code("nats_unavailable"), msg)`,
	} {
		if !literalCode.MatchString(line) {
			t.Errorf("%q not recognised as a literal code", line)
		}
	}
	for _, line := range []string{
		`p := problem.New(http.StatusNotFound, problem.CodeNotFound, "Not found", d)`,
		`if p.Code != "" {`,
		`return status.New(codes.Internal, "internal error")`,
	} {
		if literalCode.MatchString(line) {
			t.Errorf("%q recognised as a literal code", line)
		}
	}
}

// literalStatusNews reports, for one parsed file, the calls of the
// catalogue's problem.New whose status is a literal (a number or an
// http.Status… constant): outside the catalogue package a problem comes
// from problem.For(code, detail), which takes status and title from the
// one catalogue.
func literalStatusNews(fset *token.FileSet, f *ast.File) []string {
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/rxc-project/rxc/sdk/problem" {
			name = "problem"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "New" {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != name {
			return true
		}
		literal := false
		switch arg := call.Args[0].(type) {
		case *ast.BasicLit:
			literal = true
		case *ast.SelectorExpr:
			literal = strings.HasPrefix(arg.Sel.Name, "Status")
		}
		if literal {
			bad = append(bad, fset.Position(call.Pos()).String()+": problem.New with a literal status; use problem.For(code, detail)")
		}
		return true
	})
	return bad
}

// TestProblemsComeFromTheCatalogue: no Go file outside the catalogue
// package (sdk/problem) builds a problem with a literal status.
func TestProblemsComeFromTheCatalogue(t *testing.T) {
	root := repoRoot(t)
	catalogue := filepath.Join(root, "sdk", "problem")
	files, importers := 0, 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path == catalogue || (path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "vendor")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			if imp.Path.Value == `"github.com/rxc-project/rxc/sdk/problem"` {
				importers++
			}
		}
		for _, b := range literalStatusNews(fset, f) {
			t.Error(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || importers < 10 {
		t.Fatalf("parsed %d files, %d importing the catalogue; the check would pass vacuously", files, importers)
	}
}

func TestLiteralStatusNewsFindsThem(t *testing.T) {
	src := `package p
import (
	"net/http"
	pr "github.com/rxc-project/rxc/sdk/problem"
)
func f(status int) {
	_ = pr.New(http.StatusNotFound, pr.CodeNotFound, "Not found", "d")
	_ = pr.New(409, pr.CodeConflict, "Conflict", "d")
	_ = pr.New(status, pr.CodeConflict, "Conflict", "d")
	_ = pr.For(pr.CodeNotFound, "d")
	_ = errors.New("x")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := literalStatusNews(fset, f); len(got) != 2 {
		t.Errorf("found %d, want 2 (the http.Status constant and the number): %q", len(got), got)
	}
}
