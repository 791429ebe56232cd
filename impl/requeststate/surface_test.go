package requeststate

import (
	"go/ast"
	goparser "go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exportedFuncs lists the exported functions and methods (as Type.Method)
// declared in the non-test Go files of dir.
func exportedFuncs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(gotoken.NewFileSet(), filepath.Join(dir, e.Name()), nil, goparser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				recv := fn.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				name = recv.(*ast.Ident).Name + "." + name
			}
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestNoSealingAroundTheChecks: the package exports no function that
// seals or opens a token outside the middleware, so a token can be minted
// only for the call it answers and accepted only after every check. A new
// exported function fails this test until it is added here, deliberately.
func TestNoSealingAroundTheChecks(t *testing.T) {
	want := []string{"AfterCall", "ArgumentsDigest", "BindingFrom", "Boundary.Middleware", "CanonicalArguments", "DuplicateKeyError.Error", "DuplicateKeyError.Unwrap", "New", "Rejection"}
	if got := exportedFuncs(t, "."); !slices.Equal(got, want) {
		t.Fatalf("exported functions = %v, want %v", got, want)
	}
	// Negative control: the same check finds the codec's Seal and Open in
	// the internal package that holds them.
	got := exportedFuncs(t, "../../internal/statetoken")
	if !slices.Contains(got, "Ring.Seal") || !slices.Contains(got, "Ring.Open") {
		t.Fatalf("control: the check does not see statetoken's Ring.Seal and Ring.Open: %v", got)
	}
}
