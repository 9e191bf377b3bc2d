package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sharedLogKeys are the attribute keys sdk/logkey names; a slog call must
// use the constant, not a literal (which drifted into "err" beside "error"
// and "tenant" beside "tenant_id").
var sharedLogKeys = map[string]string{
	"err": "logkey.Error", "error": "logkey.Error",
	"tenant": "logkey.Tenant", "tenant_id": "logkey.Tenant",
	"sensor": "logkey.Sensor", "sensor_id": "logkey.Sensor",
	"command_id": "logkey.Command",
}

// logMethods maps slog's logging methods to the index of their first
// key-value argument.
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// attrFuncs are slog's attribute constructors, whose first argument is the key.
var attrFuncs = map[string]bool{
	"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true,
	"Bool": true, "Time": true, "Duration": true, "Any": true, "Group": true,
}

// literalLogKeys reports, for one parsed file, the slog calls that spell a
// shared key as a string literal.
func literalLogKeys(fset *token.FileSet, f *ast.File) []string {
	slogName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "log/slog" {
			slogName = "slog"
			if imp.Name != nil {
				slogName = imp.Name.Name
			}
		}
	}
	var bad []string
	check := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		key, _ := strconv.Unquote(lit.Value)
		if c, ok := sharedLogKeys[key]; ok {
			bad = append(bad, fset.Position(lit.Pos()).String()+": log key "+lit.Value+"; use "+c)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && slogName != "" && x.Name == slogName && attrFuncs[sel.Sel.Name] && len(call.Args) > 0 {
			check(call.Args[0])
			return true
		}
		first, ok := logMethods[sel.Sel.Name]
		if !ok || (sel.Sel.Name == "Error" && len(call.Args) == 0) {
			return true
		}
		// A file that does not import log/slog still logs through a
		// logger it was handed (s.log.Warn): such calls are checked when
		// the receiver is named like one.
		if slogName == "" && !loggerLike(sel.X) {
			return true
		}
		for i := first; i < len(call.Args); i += 2 {
			check(call.Args[i])
		}
		return true
	})
	return bad
}

// loggerLike reports whether e names a logger: log, logger, s.log, a.cfg.Logger.
func loggerLike(e ast.Expr) bool {
	var name string
	switch x := e.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.SelectorExpr:
		name = x.Sel.Name
	case *ast.CallExpr: // s.log.With(...).Warn
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "With" {
			return loggerLike(sel.X)
		}
		return false
	default:
		return false
	}
	n := strings.ToLower(name)
	return n == "log" || n == "logger" || strings.HasSuffix(n, "log") || strings.HasSuffix(n, "logger")
}

// TestLogKeysAreShared holds every slog call in the servers' code to the
// shared key constants.
func TestLogKeysAreShared(t *testing.T) {
	root := repoRoot(t)
	files := 0
	for _, dir := range []string{"core", "adapters", "apps", "sdk"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			for _, b := range literalLogKeys(fset, f) {
				t.Error(b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("parsed %d files; the check would pass vacuously", files)
	}
}

func TestLiteralLogKeysFindsThem(t *testing.T) {
	src := `package p
import "log/slog"
func f(log *slog.Logger, err error) {
	log.Warn("a", "err", err)
	log.Info("b", "tenant", "t", "count", 3)
	log.With("sensor_id", "s").Info("c")
	log.LogAttrs(nil, slog.LevelInfo, "d", slog.String("error", "x"))
	log.Info("fine", "count", 1)
	log.Error("msg is not a key: err")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := literalLogKeys(fset, f); len(got) != 4 {
		t.Errorf("found %d literal keys, want 4: %q", len(got), got)
	}

	// A file that only holds a logger it was given (no log/slog import)
	// is checked through the receiver's name; other methods called Warn or
	// Error are not loggers.
	src = `package p
func (s *server) g(err error) {
	s.log.Warn("a", "err", err)
	s.cfg.Logger.With("tenant_id", "t").Info("b")
	s.alarm.Warn("c", "error", err)
}
`
	f, err = parser.ParseFile(fset, "q.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := literalLogKeys(fset, f); len(got) != 2 {
		t.Errorf("without the slog import: found %d literal keys, want 2: %q", len(got), got)
	}
}
