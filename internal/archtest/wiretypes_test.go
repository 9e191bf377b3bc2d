package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// minWireFields is how many JSON fields a struct needs for its field set to
// count as a wire type's fingerprint; smaller ones ({"error"}, {"id",
// "name"}) recur by chance.
const minWireFields = 3

// jsonStructs returns, for each struct type declared in f with at least
// minWireFields JSON-encoded fields, its name and its fingerprint: the
// sorted JSON names of its fields ("-" left out; an untagged exported
// field counts under its Go name, as encoding/json encodes it).
func jsonStructs(f *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		var names []string
		tagged := false
		for _, fld := range st.Fields.List {
			tag := ""
			if fld.Tag != nil {
				if v, err := strconv.Unquote(fld.Tag.Value); err == nil {
					tag = reflect.StructTag(v).Get("json")
				}
			}
			name, _, _ := strings.Cut(tag, ",")
			if tag != "" {
				tagged = true
			}
			switch {
			case name == "-":
				continue
			case name != "":
				names = append(names, name)
			default:
				for _, id := range fld.Names {
					if id.IsExported() {
						names = append(names, id.Name)
					}
				}
			}
		}
		if tagged && len(names) >= minWireFields {
			slices.Sort(names)
			out[ts.Name.Name] = strings.Join(names, ",")
		}
		return true
	})
	return out
}

// sameShapeNotWire lists JSON shapes declared twice that are not one wire
// format read by two ends, each with why. An entry that no longer matches
// fails the test, so the list only shrinks.
var sameShapeNotWire = map[string]string{
	// The console's snapshot is decoded by the HTTP edge (controlapi's
	// snapshotJSON) and rendered for the model's prompt by core/analytics
	// (Snapshot's tags name the prompt's keys): one reader each, no second
	// end. Dropping core's tags changes the prompt; left for the analytics
	// owner.
	"cves,from,sensorId,text,to,topDestinations,topSignatures,topSources": "analytics snapshot: HTTP request vs model prompt",
}

// TestJSONWireTypesDeclaredOnce: a JSON shape is declared in one package
// and imported by both ends (sdk/sensorwire for sensor commands and
// status, agentwire for the sensor routes, provisionerwire for the
// provisioner's API), never restated in a second package and held equal by
// a test. It fingerprints every struct with JSON tags in the product code
// (core, adapters, apps, sdk; tests left out) by its set of JSON field
// names and fails when two packages declare the same set.
func TestJSONWireTypesDeclaredOnce(t *testing.T) {
	root := repoRoot(t)
	type decl struct{ pkg, name string }
	seen := map[string][]decl{}
	structs := 0
	for _, dir := range []string{"core", "adapters", "apps", "sdk"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			pkg, _ := filepath.Rel(root, filepath.Dir(path))
			for name, fp := range jsonStructs(f) {
				structs++
				seen[fp] = append(seen[fp], decl{pkg, name})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if structs < 50 {
		t.Fatalf("found %d JSON structs; the check would pass vacuously", structs)
	}
	for fp := range sameShapeNotWire {
		if len(seen[fp]) < 2 {
			t.Errorf("sameShapeNotWire lists {%s}, declared %d times now: remove the entry", fp, len(seen[fp]))
		}
	}
	for fp, decls := range seen {
		pkgs := map[string]bool{}
		for _, d := range decls {
			pkgs[d.pkg] = true
		}
		if len(pkgs) > 1 && sameShapeNotWire[fp] == "" {
			t.Errorf("JSON shape {%s} declared in %d packages: %v; declare it once (a *wire package) and import it", fp, len(pkgs), decls)
		}
	}
}

// The fingerprint sees through field order, omitempty and untagged fields,
// and ignores "-" and small structs: the check can fail.
func TestJSONStructsFingerprints(t *testing.T) {
	src := `package p
type A struct {
	ID   string    ` + "`json:\"id\"`" + `
	At   int       ` + "`json:\"at,omitempty\"`" + `
	Name string
	skip string
	X    int ` + "`json:\"-\"`" + `
}
type B struct {
	At   int    ` + "`json:\"at\"`" + `
	Name string ` + "`json:\"Name\"`" + `
	ID   string ` + "`json:\"id,omitempty\"`" + `
}
type Small struct {
	A int ` + "`json:\"a\"`" + `
	B int ` + "`json:\"b\"`" + `
}
type Untagged struct{ A, B, C int }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonStructs(f)
	want := map[string]string{"A": "Name,at,id", "B": "Name,at,id"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jsonStructs = %v, want %v", got, want)
	}
}

// coreJSONTypes lists the exported structs declared under core/ (test
// helper packages, named *test, left out) that carry JSON tags, as
// "package.Type".
func coreJSONTypes(t *testing.T, root string) (found []string, files int) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "core"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasSuffix(d.Name(), "test") && path != filepath.Join(root, "core") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		found = append(found, exportedJSONStructs(f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// exportedJSONStructs names the exported struct types of f with a JSON tag.
func exportedJSONStructs(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, sp := range gd.Specs {
			ts := sp.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !ts.Name.IsExported() {
				continue
			}
			for _, fld := range st.Fields.List {
				if fld.Tag != nil && strings.Contains(fld.Tag.Value, `json:"`) {
					out = append(out, f.Name.Name+"."+ts.Name.Name)
					break
				}
			}
		}
	}
	return out
}

// coreJSONNotWire lists the exported core types with JSON tags that are no
// wire format, each with why; an entry that no longer matches fails.
var coreJSONNotWire = map[string]string{
	"analytics.Snapshot": "rendered into the model's prompt (see sameShapeNotWire)",
}

// TestCoreDeclaresNoJSONWireType: core's ports carry decoded domain values;
// how they look on a wire (NATS, HTTP) is an adapter's or the SDK's
// (sdk/sensorwire, sdk/agentwire) business. It fails on an exported struct
// with JSON tags in a core package (test helper packages aside).
func TestCoreDeclaresNoJSONWireType(t *testing.T) {
	found, files := coreJSONTypes(t, repoRoot(t))
	if files < 20 {
		t.Fatalf("parsed %d core files; the check would pass vacuously", files)
	}
	seen := map[string]bool{}
	for _, name := range found {
		seen[name] = true
		if coreJSONNotWire[name] == "" {
			t.Errorf("core declares %s with JSON tags: declare the wire type in the adapter or the SDK (a *wire package) and give core a tag-free domain type", name)
		}
	}
	for name := range coreJSONNotWire {
		if !seen[name] {
			t.Errorf("coreJSONNotWire lists %s, which no longer has JSON tags: remove the entry", name)
		}
	}
}

func TestExportedJSONStructsFindsThem(t *testing.T) {
	src := "package p\ntype Wire struct{ A int `json:\"a\"` }\ntype plain struct{ A int `json:\"a\"` }\ntype Domain struct{ A int }\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := exportedJSONStructs(f); !reflect.DeepEqual(got, []string{"p.Wire"}) {
		t.Errorf("exportedJSONStructs = %v, want [p.Wire]", got)
	}
}
