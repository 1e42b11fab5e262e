package execapi

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLeafPackage: execapi imports no other art package (STYLE.md: leaf
// packages), so the sandbox side can depend on it and not the reverse;
// internal/errclass, the error classes every package shares, and
// internal/envkey, the environment names the sandbox also checks, import
// none.
func TestLeafPackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/artrt/art/") && p != "github.com/artrt/art/internal/errclass" && p != "github.com/artrt/art/internal/envkey" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
