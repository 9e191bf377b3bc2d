package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// lateBound returns the late-bound forwarders declared in f: a type with a
// method that stores one of its parameters in a field of the receiver
// (the binding, after construction) and a method M that calls M on what
// that field holds (the forwarding). That is how a construction cycle is
// papered over (the control plane's lateTerminator was one): a value is
// handed out before the one it forwards to exists, and calls before the
// binding are lost. Constructors (functions, not methods) that fill
// fields are not bindings.
func lateBound(fset *token.FileSet, f *ast.File) []string {
	bound := map[string]map[string]bool{}       // type → fields a method binds
	forwarded := map[string]map[string]string{} // type → field → forwarding method
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || len(fn.Recv.List[0].Names) != 1 || fn.Body == nil {
			continue
		}
		recv := fn.Recv.List[0].Names[0].Name
		typ := typeName(fn.Recv.List[0].Type)
		params := map[string]bool{}
		for _, p := range fn.Type.Params.List {
			for _, n := range p.Names {
				params[n.Name] = true
			}
		}
		// locals holds names assigned from a receiver field (t := l.t).
		locals := map[string]string{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for i, lhs := range x.Lhs {
					if i >= len(x.Rhs) {
						break
					}
					if field := receiverField(lhs, recv); field != "" {
						if id, ok := x.Rhs[i].(*ast.Ident); ok && params[id.Name] {
							if bound[typ] == nil {
								bound[typ] = map[string]bool{}
							}
							bound[typ][field] = true
						}
					}
					if id, ok := lhs.(*ast.Ident); ok {
						if field := receiverField(x.Rhs[i], recv); field != "" {
							locals[id.Name] = field
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != fn.Name.Name {
					return true
				}
				field := receiverField(sel.X, recv)
				if id, ok := sel.X.(*ast.Ident); ok && field == "" {
					field = locals[id.Name]
				}
				if field != "" {
					if forwarded[typ] == nil {
						forwarded[typ] = map[string]string{}
					}
					forwarded[typ][field] = fn.Name.Name
				}
			}
			return true
		})
	}
	var out []string
	for typ, fields := range forwarded {
		for field, method := range fields {
			if bound[typ][field] {
				out = append(out, fmt.Sprintf("%s: %s.%s forwards to field %s, which a method binds after construction",
					fset.Position(f.Package), typ, method, field))
			}
		}
	}
	return out
}

// typeName is the name of a receiver's type (T, *T, T[P]).
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// receiverField is F when e is recv.F, else "".
func receiverField(e ast.Expr, recv string) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv {
		return sel.Sel.Name
	}
	return ""
}

// TestNoLateBinding: services are built in dependency order (the gRPC edge
// on the fleet's status side, then the fleet with the edge as its session
// terminator), so no product code hands out a forwarder bound later.
func TestNoLateBinding(t *testing.T) {
	root := repoRoot(t)
	files := 0
	for _, dir := range []string{"core", "adapters", "apps", "sdk"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, b := range lateBound(fset, f) {
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

// The removed lateTerminator is found, through a local or directly; a
// type whose constructor fills the field, or whose setter's field is not
// forwarded to, is not.
func TestLateBoundFindsIt(t *testing.T) {
	src := `package p
type lateTerminator struct {
	mu sync.RWMutex
	t  fleet.SessionTerminator
}
func (l *lateTerminator) set(t fleet.SessionTerminator) { l.mu.Lock(); l.t = t; l.mu.Unlock() }
func (l *lateTerminator) Terminate(tenantID, sensorID string) {
	l.mu.RLock()
	t := l.t
	l.mu.RUnlock()
	if t != nil {
		t.Terminate(tenantID, sensorID)
	}
}
type direct struct{ next Handler }
func (d *direct) Bind(h Handler) { d.next = h }
func (d *direct) Handle(x int)   { d.next.Handle(x) }

type wrapped struct{ next Handler }
func newWrapped(h Handler) *wrapped { return &wrapped{next: h} }
func (w *wrapped) Handle(x int)     { w.next.Handle(x) }

type config struct{ level int; log Logger }
func (c *config) SetLevel(level int) { c.level = level }
func (c *config) Info(msg string)    { c.log.Info(msg) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := lateBound(fset, f)
	if len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), "lateTerminator.Terminate") || !strings.Contains(strings.Join(got, "\n"), "direct.Handle") {
		t.Errorf("lateBound = %q; want lateTerminator.Terminate and direct.Handle only", got)
	}
}
